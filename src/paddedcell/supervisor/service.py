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

import time
from typing import Any, Awaitable, Callable

import trio

from ..execspec import keys as keymap
from ..execspec import results
from ..execspec.request import ExecRequest, ProcessAction
from . import secretflow
from .session import OutputCallback, Session
from .spawn import SpawnError
from .supervisor import LaunchSpec, LimitReached, Supervisor

UpdateCallback = Callable[[dict[str, Any]], Awaitable[None]]


class ExecRefused(Exception):
    """Nothing was started; ``status`` is the HTTP status, ``str()`` one line."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


class ExecService:
    def __init__(self, supervisor: Supervisor):
        self.supervisor = supervisor
        self.settings = supervisor.settings

    # --- exec ------------------------------------------------------------------

    async def exec(self, request: ExecRequest, *, wait_ms: int | None = None,
                   on_update: UpdateCallback | None = None,
                   on_output: OutputCallback | None = None, stdin_fd: int | None = None,
                   cwd: str | None = None) -> tuple[dict[str, Any], Session | None]:
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
                     ) -> tuple[dict[str, Any] | None, Session | None]:
        """Resolve, admit and start. Raises ExecRefused; a result means "answer now"."""
        workdir = request.workdir or cwd or request.agent_workspace
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
            session.backgrounded = True
            return self.running_result(session), session
        return None, session

    async def follow(self, session: Session, wait_ms: int | None,
                     on_update: UpdateCallback | None = None) -> dict[str, Any]:
        """Wait up to ``wait_ms`` (None: to the end); the final or the running result."""
        await self._wait(session, wait_ms, on_update)
        if session.running:
            session.backgrounded = True
            return self.running_result(session)
        result = self.final_result(session)
        if not session.backgrounded:
            self.supervisor.forget(session)
        return result

    async def _wait(self, session: Session, wait_ms: int | None,
                    on_update: UpdateCallback | None) -> None:
        deadline = trio.current_time() + (wait_ms / 1000 if wait_ms is not None else float("inf"))
        interval = int(self.settings["supervisor.stream_update_ms"]) / 1000
        sent = None
        while session.running and trio.current_time() < deadline:
            step = min(deadline - trio.current_time(), interval if on_update else 3600.0)
            with trio.move_on_after(step):
                await session.done.wait()
            if on_update is not None and session.running:
                tail = session.tail()
                if tail != sent:
                    sent = tail
                    await on_update({"tail": tail})

    def running_result(self, session: Session) -> dict[str, Any]:
        return results.exec_running(session_id=session.id, pid=session.pid,
                                    started_at=_ms(session.started_at), cwd=session.cwd,
                                    tail=session.tail(), warnings=session.warnings)

    def final_result(self, session: Session) -> dict[str, Any]:
        outcome = session.outcome
        assert outcome is not None
        aggregated, truncated = session.text()
        return results.exec_from_exit(
            exit_code=outcome.exit_code, exit_signal=outcome.exit_signal,
            exit_reason=outcome.exit_reason, duration_ms=outcome.duration_ms,
            aggregated=aggregated, truncated=truncated, cwd=session.cwd,
            timeout_seconds=session.timeout_seconds, warnings=session.warnings,
            max_chars=int(self.settings["supervisor.max_aggregated_chars"]))

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
        options = secretflow.redactor_options(self.settings)

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

    # --- process ---------------------------------------------------------------

    def view(self, session: Session, *, full: bool = True) -> results.SessionView:
        """The session for a result builder. ``full=False`` skips decoding the
        output ring and probing ``/proc`` for an input wait: the answers to
        write, send-keys, submit, paste, kill and remove show only id and name."""
        aggregated, truncated = session.text() if full else ("", False)
        outcome = session.outcome
        now = time.time()
        return results.SessionView(
            session_id=session.id, status=session.status, pid=session.pid,
            command=session.command, cwd=session.cwd, started_at=_ms(session.started_at),
            ended_at=_ms(session.ended_at), exit_code=outcome.exit_code if outcome else None,
            exit_signal=outcome.exit_signal if outcome else None,
            tail=session.tail() if full else "",
            aggregated=aggregated, truncated=truncated,
            waiting_for_input=full and session.waiting_for_input(),
            name=session.name if session.name != session.command else None,
            exit_reason=outcome.exit_reason if outcome else None,
            stdin_writable=session.stdin_writable,
            idle_ms=int((now - (session.last_output_at or session.started_at)) * 1000),
            last_output_at=_ms(session.last_output_at), backgrounded=session.backgrounded)

    async def process(self, action: ProcessAction) -> dict[str, Any]:
        sup = self.supervisor
        if action.action == "list":
            return results.process_list([self.view(s) for s in sup.listed(action.agent_id)
                                         if not s.removed])
        session = sup.get(action.agent_id, action.session_id or "")
        if session is None or session.removed:
            return results.process_not_found(action.session_id or "")
        if not session.backgrounded:
            return results.process_not_backgrounded(session.id)
        handler = getattr(self, "_" + action.action.replace("-", "_"))
        return await handler(session, action)

    async def _poll(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        if action.timeout_ms and session.running and session.poll_cursor >= session.buffer.end:
            await session.wait_changed(action.timeout_ms / 1000)
        text, dropped = session.take_new_output()
        return results.process_poll(self.view(session), text, output_dropped=dropped)

    async def _log(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        text, evicted_lines = session.log_text()
        offset = action.offset
        if offset is not None:
            # Line offsets are absolute: lines evicted from the ring still count.
            offset = max(0, offset - evicted_lines)
        return results.process_log(self.view(session), text, offset, action.limit)

    async def _send(self, session: Session, data: bytes, eof: bool = False) -> dict[str, Any] | None:
        if not session.running:
            return results.process_not_found(session.id, "active")
        if not session.stdin_writable:
            return results.process_stdin_not_writable(session.id)
        try:
            await session.write(data, eof)
        except OSError:
            return results.process_stdin_not_writable(session.id)
        return None

    async def _write(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        data = action.data or ""
        error = await self._send(session, data.encode("utf-8"), action.eof)
        return error or results.process_write(self.view(session, full=False), data, action.eof)

    async def _send_keys(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        if keymap.has_cursor_mode_sensitive_keys(action.keys) and session.cursor.mode == "unknown":
            return results.process_cursor_mode_unknown(session.id)
        encoded = keymap.encode_key_request(keys=action.keys, hex=action.hex,
                                            literal=action.literal,
                                            cursor_mode=session.cursor.mode)
        if not encoded.data:
            return results.process_send_keys_no_data()
        error = await self._send(session, encoded.data)
        return error or results.process_send_keys(self.view(session, full=False), len(encoded.data),
                                                  encoded.warnings)

    async def _submit(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        error = await self._send(session, keymap.SUBMIT)
        return error or results.process_submit(self.view(session, full=False))

    async def _paste(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        if not action.text:
            return results.process_paste_empty()
        error = await self._send(session, keymap.encode_paste(action.text, action.bracketed))
        return error or results.process_paste(self.view(session, full=False), action.text)

    async def _kill(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        if not session.running:
            return results.process_not_found(session.id, "active")
        self.supervisor.nursery.start_soon(session.kill, "manual-cancel")
        return results.process_kill(self.view(session, full=False))

    async def _clear(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        if session.running:
            return results.process_not_found(session.id, "finished")
        self.supervisor.forget(session)
        return results.process_clear(session.id)

    async def _remove(self, session: Session, action: ProcessAction) -> dict[str, Any]:
        view = self.view(session, full=False)
        if session.running:
            session.removed = True
            self.supervisor.nursery.start_soon(session.kill, "manual-cancel")
        else:
            self.supervisor.forget(session)
        return results.process_remove(view)
