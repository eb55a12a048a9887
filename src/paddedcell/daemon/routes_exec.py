"""``POST /exec`` and ``POST /process``: the supervisor behind the daemon socket.

Every request names its ``agentId``; sessions are visible only to the agent
that started them (another agent's session id is "not found", never
"forbidden", so ids cannot be probed), and with a ``sessionKey`` only to that
conversation, as OpenClaw scopes its process tool. ``/exec`` with
``"stream": true`` answers NDJSON, chunked: ``{"update": <exec_update>}``
lines (OpenClaw's running partial result, which the OpenClaw plugin passes to
``onUpdate`` as is) while the command runs within its yield, then one
``{"result": ...}`` line. Requests that must not run at all are refused before
any byte of the stream: the domain error (``RequestError``, ``ExecRefused``)
becomes its HTTP status in the daemon's one table (``daemon/validate.py``).

``GET /exec/events?wait=S`` long-polls the exit events of backgrounded
sessions (OpenClaw's notify-on-exit text, for the session that started them);
``POST /exec/events/ack {"ids": [...]}`` removes the delivered ones.

At registration the daemon becomes a child subreaper, so processes that leave
a session by ``setsid`` or double-forking are reparented to it and can be
found, killed and reaped (see :mod:`paddedcell.supervisor.procs`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import trio

from ..audit import AuditLog
from ..execspec.request import parse_exec_request, parse_process_action
from ..execspec.results import ToolResult
from ..orphans import OrphanReaper
from ..supervisor import Supervisor, become_subreaper, zygote
from ..supervisor.procs import pin_malloc_thresholds
from ..supervisor.service import ExecService
from .http import (PARSE_IN_THREAD_BYTES, HTTPError, Request, Router, Streaming, Write,
                   cpu_limiter)
from .routes_session import local_forwarder, refuse_input_when_locked

log = logging.getLogger("paddedcell.daemon")


def _line(payload: dict[str, Any]) -> bytes:
    # ASCII JSON: a non-UTF-8 cwd (surrogateescape) cannot fail the encoding.
    return json.dumps(payload, ensure_ascii=True).encode("ascii") + b"\n"


async def _sweep_orphans(interval: float) -> None:
    """Reap reparented zombies nobody waits for (see ``paddedcell.orphans``)."""
    reaper = OrphanReaper()
    while True:
        await trio.sleep(interval)
        try:
            reaped = reaper.sweep()
        except OSError as exc:  # out of descriptors for a moment (a flood): next sweep
            log.warning("orphan sweep skipped: %s", exc)
            continue
        for pid in reaped:
            log.info("reaped orphaned process %d", pid)


def register(router: Router, ctx: Any) -> None:
    settings = ctx.settings
    pin_malloc_thresholds()
    if not become_subreaper():
        log.warning("cannot become a child subreaper; processes that setsid away from a "
                    "session are found only while their parent lives")
    else:
        # Sandboxed sessions start from a small zygote, started now, off the request path
        # (supervisor/zygote.py); a one-session pcexec forks itself instead.
        zygote.prestart()
    # A session's channel reaches this daemon's routes in-process (routes_session).
    supervisor = Supervisor(settings, ctx.nursery, audit=AuditLog.for_settings(settings),
                            forward=local_forwarder(router))
    service = ExecService(supervisor)
    ctx.services["supervisor"] = supervisor
    ctx.services["exec"] = service
    ctx.nursery.start_soon(supervisor.maintain)
    ctx.nursery.start_soon(_sweep_orphans, supervisor.limits.orphan_sweep_seconds)

    @router.route("POST", "/exec")
    async def exec_route(request: Request) -> dict[str, Any] | Streaming:
        # Inside a session the body is already bound to the caller's agent (the guard in
        # routes_session, docs/design.md §4.4). RequestError and ExecRefused are answered
        # by the edge's error table.
        body = request.body
        command = body.get("command") if isinstance(body, dict) else None
        if isinstance(command, str) and len(command) > PARSE_IN_THREAD_BYTES:
            # A 10 MB command is checked in a worker, one at a time (http.cpu_limiter):
            # /healthz and every other route go on meanwhile (issue 20).
            exec_request = await trio.to_thread.run_sync(parse_exec_request, body, settings,
                                                         limiter=cpu_limiter)
        else:
            exec_request = parse_exec_request(body, settings)
        if not exec_request.agent_id:
            raise HTTPError(400, "field 'agentId' is required: sessions belong to an agent")
        early, session = await service.launch(exec_request)
        # awaitResults: "result required to finish the task": no yield, only the timeout.
        wait_ms = None if exec_request.await_results else exec_request.yield_ms
        if not exec_request.stream:
            if early is not None:
                return early.to_json()
            return (await service.follow(session, wait_ms)).to_json()

        async def produce(write: Write, peer_gone: trio.Event) -> None:
            if early is not None:
                await write(_line({"result": early.to_json()}))
                return
            peer = {"alive": True}

            async def update(partial: ToolResult) -> None:
                if not peer["alive"]:
                    return
                try:
                    await write(_line({"update": partial.to_json()}))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    peer["alive"] = False  # the command keeps its yield regardless

            async def abort_when_the_caller_leaves() -> None:
                # OpenClaw ends a foreground run whose tool call was aborted (a
                # Stop); only background=true runs outlive their caller.
                await peer_gone.wait()
                peer["alive"] = False
                if session.running and not session.backgrounded:
                    await session.kill("manual-cancel")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_when_the_caller_leaves)
                result = await service.follow(session, wait_ms, update)
                nursery.cancel_scope.cancel()
            if peer["alive"]:
                await write(_line({"result": result.to_json()}))

        return Streaming(produce)

    @router.route("POST", "/process")
    async def process_route(request: Request) -> dict[str, Any]:
        action = parse_process_action(request.body)
        if not action.agent_id:
            raise HTTPError(400, "field 'agentId' is required: sessions belong to an agent")
        await refuse_input_when_locked(action.action, settings)
        return (await service.process(action)).to_json()

    @router.route("GET", "/exec/events")
    async def exit_events(request: Request) -> dict[str, Any]:
        try:
            wait = float(request.query.get("wait", "0"))
        except ValueError:
            wait = -1.0
        if not 0 <= wait <= 60:  # also NaN
            raise HTTPError(400, "query 'wait' must be a number of seconds from 0 to 60")
        return {"events": await service.exit_events(wait)}

    @router.route("POST", "/exec/events/ack")
    async def ack_exit_events(request: Request) -> dict[str, Any]:
        ids = request.body.get("ids")
        if not isinstance(ids, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise HTTPError(400, "field 'ids' must be a list of event ids (integers)")
        service.ack_events(ids)
        return {"ok": True}
