"""``POST /exec`` and ``POST /process``: the supervisor behind the daemon socket.

Every request names its ``agentId``; sessions are visible only to the agent
that started them (another agent's session id is "not found", never
"forbidden", so ids cannot be probed). ``/exec`` with ``"stream": true``
answers NDJSON, chunked: ``{"update": {"tail": ...}}`` lines while the command
runs within its yield, then one ``{"result": ...}`` line (the OpenClaw plugin
relays the updates as ``onUpdate`` partials). Requests that must not run at all
are refused before any byte of the stream: HTTP 4xx with ``{"error": ...}``.

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
from ..execspec.request import RequestError, parse_exec_request, parse_process_action
from ..orphans import OrphanReaper
from ..supervisor import Supervisor, become_subreaper
from ..supervisor.procs import pin_malloc_thresholds
from ..supervisor.service import ExecRefused, ExecService
from .http import HTTPError, Request, Router, Streaming, Write
from .routes_session import bind_identity, refuse_input_when_locked

log = logging.getLogger("paddedcell.daemon")


def _line(payload: dict[str, Any]) -> bytes:
    # ASCII JSON: a non-UTF-8 cwd (surrogateescape) cannot fail the encoding.
    return json.dumps(payload, ensure_ascii=True).encode("ascii") + b"\n"


async def _sweep_orphans(interval: float) -> None:
    """Reap reparented zombies nobody waits for (see ``paddedcell.orphans``)."""
    reaper = OrphanReaper()
    while True:
        await trio.sleep(interval)
        for pid in reaper.sweep():
            log.info("reaped orphaned process %d", pid)


def register(router: Router, ctx: Any) -> None:
    settings = ctx.settings
    pin_malloc_thresholds()
    if not become_subreaper():
        log.warning("cannot become a child subreaper; processes that setsid away from a "
                    "session are found only while their parent lives")
    supervisor = Supervisor(settings, ctx.nursery,
                            audit=AuditLog.for_settings(settings))
    service = ExecService(supervisor)
    ctx.services["supervisor"] = supervisor
    ctx.services["exec"] = service
    ctx.nursery.start_soon(supervisor.maintain)
    ctx.nursery.start_soon(_sweep_orphans, float(settings["supervisor.orphan_sweep_seconds"]))

    @router.route("POST", "/exec")
    async def exec_route(request: Request) -> dict[str, Any] | Streaming:
        try:
            # Inside a session the caller's agent comes from the peer (DESIGN §4.4).
            body = bind_identity(supervisor, request, request.body, "exec")
            exec_request = parse_exec_request(body, settings)
        except RequestError as exc:
            raise HTTPError(400, str(exc)) from None
        if not exec_request.agent_id:
            raise HTTPError(400, "field 'agentId' is required: sessions belong to an agent")
        try:
            early, session = await service.launch(exec_request)
        except ExecRefused as exc:
            raise HTTPError(exc.status, exc.message) from None
        # awaitResults: "result required to finish the task": no yield, only the timeout.
        wait_ms = None if exec_request.await_results else exec_request.yield_ms
        if not exec_request.stream:
            if early is not None:
                return early
            return await service.follow(session, wait_ms)

        async def produce(write: Write, peer_gone: trio.Event) -> None:
            if early is not None:
                await write(_line({"result": early}))
                return
            peer = {"alive": True}

            async def update(payload: dict[str, Any]) -> None:
                if not peer["alive"]:
                    return
                try:
                    await write(_line({"update": payload}))
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
                await write(_line({"result": result}))

        return Streaming(produce)

    @router.route("POST", "/process")
    async def process_route(request: Request) -> dict[str, Any]:
        try:
            action = parse_process_action(bind_identity(supervisor, request, request.body,
                                                        "process"))
        except RequestError as exc:
            raise HTTPError(400, str(exc)) from None
        if not action.agent_id:
            raise HTTPError(400, "field 'agentId' is required: sessions belong to an agent")
        await refuse_input_when_locked(action.action, settings)
        return await service.process(action)
