"""Exec requests and process actions in, OpenClaw-shaped results out.

The one place where the supervisor meets the exec contract
(:mod:`paddedcell.execspec`): the daemon's routes and the foreground
``pcexec`` both call :class:`ExecService`, so they answer identically.

Errors split in two, as OpenClaw's exec does: a request that must not run at
all (refused command, limits) raises :class:`ExecRefused` — a tool error, HTTP
4xx, CLI exit 2 — while a run that could not happen or ended badly is a
``failed`` result (``secret-resolution``, ``runtime-error``, timeouts, signals).
"""

from __future__ import annotations

import os
import time
from typing import Any, Awaitable, Callable

import trio

from ..execspec import results
from ..execspec.process import ProcessStep, in_scope, process_step
from ..execspec.request import (HOST_SANDBOX_UNAVAILABLE, MAX_ARG_STRLEN, ExecRequest, ProcessAction,
                                RequestError)
from ..execspec.results import ToolResult
from . import secretflow
from ..redactor.filters import filter_options
from .session import OutputCallback, Session
from .settings import SupervisorSettings
from .spawn import SpawnError
from .supervisor import LaunchSpec, LimitReached, Supervisor

UpdateCallback = Callable[[ToolResult], Awaitable[None]]
#: How long a waiting ``poll`` that saw output gives the command to exit as well.
#: OpenClaw only looks every 250 ms, so output and an exit within one of its steps
#: come back together there; 200 ms keeps that true on a loaded host too.
EXIT_SETTLE = 0.2
#: Finished sessions' exit events kept for the OpenClaw plugin, at most.
MAX_EXIT_EVENTS = 200


class ExecRefused(Exception):
    """Nothing was started; ``status`` is the HTTP status (the daemon's one
    error table in ``daemon/validate.py`` answers it), ``str()`` one line."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


def sandbox_runs(settings) -> bool:
    """Whether commands really run sandboxed (``host=sandbox`` is honoured only then):
    ``supervisor.sandbox`` is set, and with ``auto`` this host can build the sandbox."""
    profile = SupervisorSettings.of(settings).sandbox
    if profile == "none":
        return False
    if profile == "auto":  # the namespace sandbox, or a root daemon's per-agent uids
        from .sandbox import available, host_root
        return available()[0] or host_root()
    return True


def resolve_workdir(requested: str | None, default: str | None) -> tuple[str | None, str]:
    """OpenClaw's ``resolveExecWorkdir`` on the gateway host: ``(directory, shown)``.

    ``directory`` is the real path to run in, or None when it is unavailable
    (the result then names ``shown``). A relative ``workdir`` is taken in the
    default directory (the agent's workspace); blank is unavailable as given.
    """
    if requested is not None and requested != "" and not requested.strip():
        return None, requested
    explicit = requested.strip() if requested else None
    candidate = explicit or default or os.getcwd()
    if explicit and default and not os.path.isabs(explicit):
        if not os.path.isdir(default):
            return None, default
        candidate = os.path.join(os.path.realpath(default), explicit)
    if not os.path.isdir(candidate):
        return None, explicit or candidate
    return os.path.realpath(candidate), candidate


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


class ExecService:
    def __init__(self, supervisor: Supervisor):
        self.supervisor = supervisor
        self.settings = supervisor.settings
        self.limits = supervisor.limits
        #: Exit events of backgrounded sessions, for the OpenClaw plugin to deliver
        #: as OpenClaw's notify-on-exit system events (``GET /exec/events``).
        self.events: list[dict[str, Any]] = []
        self._next_event = 1
        self._events_changed = trio.Event()

    # --- exec ------------------------------------------------------------------

    async def exec(self, request: ExecRequest, *, wait_ms: int | None = None,
                   on_update: UpdateCallback | None = None,
                   on_output: OutputCallback | None = None, stdin_fd: int | None = None,
                   cwd: str | None = None) -> tuple[ToolResult, Session | None]:
        """Run ``request``; return its result and the session (None if nothing ran).

        ``wait_ms``: how long to wait before answering ``running`` (the
        request's yield); None waits for the end (the plain CLI).
        """
        early, session = await self.launch(request, on_output=on_output, stdin_fd=stdin_fd,
                                           cwd=cwd)
        if early is not None:
            return early, session
        assert session is not None
        return await self.follow(session, wait_ms, on_update), session

    async def launch(self, request: ExecRequest, *, on_output: OutputCallback | None = None,
                     stdin_fd: int | None = None, cwd: str | None = None,
                     ) -> tuple[ToolResult | None, Session | None]:
        """Resolve, admit and start. Raises ExecRefused; a result means "answer now"."""
        if request.sandboxed and not sandbox_runs(self.settings):
            raise RequestError(HOST_SANDBOX_UNAVAILABLE, multiline=True)
        workdir, shown = resolve_workdir(request.workdir, cwd or request.agent_workspace)
        if workdir is None:
            return results.exec_workdir_unavailable(shown), None
        size = len(request.command)  # characters; bytes only where it could matter
        if size < MAX_ARG_STRLEN and size * 4 >= MAX_ARG_STRLEN:
            size = len(request.command.encode("utf-8", "surrogateescape"))
        if size >= MAX_ARG_STRLEN:
            # `$SHELL -c COMMAND` could only fail with E2BIG, after resolving, redacting
            # and forking for a command this big: answer so now (no slow request, issue 20).
            return results.exec_failed(
                failure_kind="runtime-error",
                reason=results.failure_reason("runtime-error", error=(
                    f"cannot start the shell: the command is over {size} bytes and Linux passes "
                    f"at most {MAX_ARG_STRLEN - 1} bytes as one argument (MAX_ARG_STRLEN); "
                    "write it to a file in the workspace and run that file")),
                cwd=workdir), None
        try:
            prepared = await trio.to_thread.run_sync(
                secretflow.prepare, request.command, request.agent_id,
                request.agent_workspace, self.settings)
        except secretflow.CommandRefused as exc:
            await trio.to_thread.run_sync(self._denied, request, str(exc))
            raise ExecRefused(str(exc), 400) from None
        except secretflow.SecretResolutionError as exc:
            await trio.to_thread.run_sync(self._denied, request, str(exc))
            return results.exec_failed(
                failure_kind="secret-resolution",
                reason=results.failure_reason("secret-resolution", error=str(exc)),
                cwd=workdir), None
        spec = LaunchSpec(command=request.command, cwd=workdir, env=request.env,
                          pty=request.pty, timeout_seconds=request.timeout_seconds,
                          agent_id=request.agent_id, agent_workspace=request.agent_workspace,
                          session_key=request.session_key, name=request.title,
                          secrets=prepared.secrets, redactor=prepared.redactor,
                          egress=prepared.egress,
                          on_output=on_output, stdin_fd=stdin_fd)
        del prepared
        try:
            session = self.supervisor.start(spec)
        except LimitReached as exc:
            self._denied(request, str(exc), secrets=spec.secrets)
            raise ExecRefused(str(exc), 429) from None
        except SpawnError as exc:
            return results.exec_failed(
                failure_kind="runtime-error",
                reason=results.failure_reason("runtime-error", error=str(exc)),
                cwd=workdir), None
        finally:
            spec.secrets, spec.redactor = [], None
        if request.background:
            self._background(session)
            return self.running_result(session), session
        return None, session

    async def follow(self, session: Session, wait_ms: int | None,
                     on_update: UpdateCallback | None = None) -> ToolResult:
        """Wait up to ``wait_ms`` (None: to the end); the final or the running result."""
        await self._wait(session, wait_ms, on_update)
        if session.running:
            self._background(session)
            return self.running_result(session)
        result = self.final_result(session)
        if not session.backgrounded:
            self.supervisor.forget(session)
        return result

    async def _wait(self, session: Session, wait_ms: int | None,
                    on_update: UpdateCallback | None) -> None:
        deadline = trio.current_time() + (wait_ms / 1000 if wait_ms is not None else float("inf"))
        interval = self.limits.stream_update_ms / 1000
        sent = None
        while session.running and trio.current_time() < deadline:
            step = min(deadline - trio.current_time(), interval if on_update else 3600.0)
            with trio.move_on_after(step):
                await session.done.wait()
            if on_update is not None and session.running:
                tail = session.tail()
                if tail != sent:
                    sent = tail
                    await on_update(results.exec_update(
                        session_id=session.id, pid=session.pid,
                        started_at=_ms(session.started_at), cwd=session.cwd, tail=tail,
                        warnings=session.warnings))

    def running_result(self, session: Session) -> ToolResult:
        return results.exec_running(session_id=session.id, pid=session.pid,
                                    started_at=_ms(session.started_at), cwd=session.cwd,
                                    tail=session.tail(), warnings=session.warnings)

    def final_result(self, session: Session) -> ToolResult:
        outcome = session.outcome
        assert outcome is not None
        aggregated, truncated = session.text()
        return results.exec_from_exit(
            exit_code=outcome.exit_code, exit_signal=outcome.exit_signal,
            exit_reason=outcome.exit_reason, duration_ms=outcome.duration_ms,
            aggregated=aggregated, truncated=truncated, cwd=session.cwd,
            timeout_seconds=session.timeout_seconds, warnings=session.warnings,
            max_chars=self.limits.max_aggregated_chars)

    def _denied(self, request: ExecRequest, reason: str, secrets: list[str] | None = None) -> None:
        """Audit a refusal, the command masked with the agent's whole secret set.

        Without ``secrets`` it reads the agent's store (file lock, decryption):
        call it in a worker thread then, as :func:`secretflow.prepare` is.
        """
        audit = self.supervisor.audit
        if audit is None:
            return
        from .. import vault
        from ..redactor import redact
        if secrets is None and request.agent_id and request.agent_workspace:
            try:
                secrets = vault.agent_secret_values(request.agent_id, request.agent_workspace,
                                                    settings=self.settings)
            except vault.NotInitialized:
                secrets = []
            except vault.VaultError:
                secrets = None  # cannot mask: do not write the command at all
        options = filter_options(self.settings)

        def masked(text: str) -> str:
            return redact(text.encode(), secrets, **options).decode("utf-8", "replace") \
                if secrets else text

        command = ("(withheld: the agent's secrets could not be loaded to mask it)"
                   if secrets is None and request.agent_id and request.agent_workspace
                   else masked(request.command))
        try:
            audit.record("exec.denied", agent=request.agent_id, sessionKey=request.session_key,
                         command=command, reason=masked(reason))
        except OSError:
            pass

    # --- notify on exit -------------------------------------------------------

    def _background(self, session: Session) -> None:
        """The session outlives its exec call: watch it to notify on exit."""
        if session.backgrounded:
            return
        session.backgrounded = True
        self.supervisor.nursery.start_soon(self._notify_on_exit, session)

    async def _notify_on_exit(self, session: Session) -> None:
        await session.done.wait()
        outcome = session.outcome
        if outcome is None or session.removed or session.exit_polled:
            return
        text = results.exec_exit_event(
            session_id=session.id, exit_code=outcome.exit_code, exit_signal=outcome.exit_signal,
            exit_reason=outcome.exit_reason, output=session.tail())
        if text is None or not session.session_key:
            return
        self.events.append({"id": self._next_event, "agentId": session.agent_id,
                            "sessionKey": session.session_key, "sessionId": session.id,
                            "contextKey": f"exec:{session.id}", "text": text})
        self._next_event += 1
        del self.events[:-MAX_EXIT_EVENTS]
        self._events_changed.set()
        self._events_changed = trio.Event()

    async def exit_events(self, wait: float) -> list[dict[str, Any]]:
        """Undelivered exit events; waits up to ``wait`` seconds for the first."""
        if not self.events and wait > 0:
            with trio.move_on_after(wait):
                await self._events_changed.wait()
        return list(self.events)

    def ack_events(self, ids: list[int]) -> None:
        done = set(ids)
        self.events = [e for e in self.events if e["id"] not in done]

    def _exit_polled(self, session: Session) -> None:
        """OpenClaw's ``acknowledgeNotifyOnExit``: the model saw the end in a poll."""
        session.exit_polled = True
        self.events = [e for e in self.events if e["sessionId"] != session.id]

    # --- process ---------------------------------------------------------------

    def view(self, session: Session, now: float, *, full: bool = True,
             pending: bool = False, aggregate: bool = True) -> tuple[results.SessionView, int]:
        """The session for :func:`process_step` (and the poll cursor of its
        pending output). ``full=False`` skips decoding the output ring: only
        poll, log and list show output. ``aggregate=False`` (list) keeps the tail
        and the truncated flag but not the aggregated text: decoding 64 rings of
        800 KB at once was the daemon's memory peak after a flood."""
        if full and aggregate:
            aggregated, truncated = session.text()
        else:
            aggregated, truncated = "", full and session.truncated()
        text, dropped, cursor = session.peek_new_output() if pending else ("", False, 0)
        outcome = session.outcome
        return results.SessionView(
            session_id=session.id, status=session.status, pid=session.pid,
            command=session.command, cwd=session.cwd, started_at=_ms(session.started_at),
            ended_at=_ms(session.ended_at), exit_code=outcome.exit_code if outcome else None,
            exit_signal=outcome.exit_signal if outcome else None,
            tail=session.tail() if full else "",
            aggregated=aggregated, truncated=truncated,
            name=None,  # OpenClaw names a session after its command, whatever its title
            exit_reason=outcome.exit_reason if outcome else None,
            stdin_writable=session.stdin_writable,
            idle_ms=max(0, int((now - (session.last_output_at or session.started_at)) * 1000)),
            last_output_at=_ms(session.last_output_at) or _ms(session.started_at),
            backgrounded=session.backgrounded, cursor_mode=session.cursor.mode,
            poll_count=session.poll_count, pending_output=text, pending_dropped=dropped,
        ), cursor

    def _visible(self, session: Session | None, action: ProcessAction) -> Session | None:
        if session is None or session.removed:
            return None
        return session if in_scope(session.agent_id, session.session_key, action) else None

    async def process(self, action: ProcessAction) -> ToolResult:
        """One process action: wait (a poll's ``timeout``), decide (pure), apply."""
        sup = self.supervisor
        if action.action == "list":
            now = time.time()
            views = [self.view(s, now, aggregate=False)[0] for s in sup.listed(action.agent_id)
                     if self._visible(s, action) is not None]
            return results.process_list(views, now_ms=_ms(now))
        session = self._visible(sup.sessions.get(action.session_id or ""), action)
        if (session is not None and action.action == "poll" and action.timeout_ms
                and session.running and session.backgrounded):
            # OpenClaw checks every 250 ms until the command exits or has output; the
            # session tells us at once (an output or the exit sets its news event).
            await session.wait_for_news(action.timeout_ms / 1000)
            # Output that is a command's last words comes a moment before its exit,
            # which OpenClaw's exit event reports at once and our reaping a little
            # later (the sandbox's init in between): allow that moment.
            settle = trio.current_time() + EXIT_SETTLE
            while session.running and not session.exited and trio.current_time() < settle:
                await trio.sleep(0.01)
        if session is not None and action.action == "poll" and session.exited and session.running:
            # The command has exited (OpenClaw's "exited"); only its output drain and
            # our bookkeeping lag: answer with the end, as OpenClaw does.
            with trio.move_on_after(self.limits.drain_seconds + 1):
                await session.done.wait()
        if session is None:
            return process_step(action, None).result
        view, cursor = self.view(session, time.time(), full=action.action in ("poll", "log"),
                                 pending=action.action == "poll")
        step = process_step(action, view)
        return await self._apply(session, step, cursor)

    async def _apply(self, session: Session, step: ProcessStep, cursor: int) -> ToolResult:
        session.poll_count = step.poll_count
        if step.take_output:
            session.take_output(cursor)
            if not session.running:
                self._exit_polled(session)
        if step.send or step.close_input:
            try:
                await session.write(step.send, step.close_input)
            except OSError:
                return results.process_stdin_not_writable(session.id)
        if step.kill and session.running:
            if step.forget:
                session.removed = True  # dropped as soon as it ends
            self.supervisor.nursery.start_soon(session.kill, "manual-cancel")
        elif step.forget:
            self.supervisor.forget(session)
        return step.result
