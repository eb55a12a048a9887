"""OpenClaw's ``process`` tool as one pure function: (session view, action) -> step.

The daemon's :class:`~paddedcell.supervisor.service.ExecService` and the test
that replays OpenClaw's own answers (``tests/test_execspec_openclaw.py``) both
call :func:`process_step`; in the style of h11's ``_connection.py`` over
``_state.py``, the function decides and the caller only performs what the
returned :class:`ProcessStep` asks for (send bytes, close stdin, kill, forget,
mark the pending output delivered, keep the poll count) — no I/O, no clock.

The decisions follow ``createProcessTool`` in OpenClaw 2026.9.6
(``dist/bash-tools-*.mjs``, ``src/agents/bash-tools.process.ts``):

- a session of another agent or another conversation is out of scope and
  answered like one that does not exist (``scopeKey`` = the session key);
- a finished session that was never backgrounded is not kept, so it is not
  found either; a running one answers ``Session ID is not backgrounded.``;
- which "not found" each action says (``No session`` / ``No active session``
  / ``No finished session``), and the order of the checks, are OpenClaw's.
"""

from __future__ import annotations

from dataclasses import dataclass
from . import keys as keymap
from . import results
from .request import ProcessAction
from .results import SessionView, ToolResult

__all__ = ["ProcessStep", "in_scope", "process_step"]

_ACTIVE_ONLY = ("write", "send-keys", "submit", "paste", "kill")


@dataclass(frozen=True, slots=True)
class ProcessStep:
    """What one process action answers and what the caller must do for it."""

    result: ToolResult
    #: Bytes for the session's terminal or stdin (write, send-keys, submit, paste).
    send: bytes = b""
    #: ``write`` with ``eof``: close stdin after ``send`` (a PTY gets EOF, ^D).
    close_input: bool = False
    #: End the session's process tree (``manual-cancel``).
    kill: bool = False
    #: Drop the session's record (``clear``, ``remove``; a running one once it ends).
    forget: bool = False
    #: The view's ``pending_output`` was delivered: advance the poll cursor.
    take_output: bool = False
    #: The session's poll count from now on (None: reset).
    poll_count: int | None = None


def in_scope(view_agent: str | None, view_session_key: str | None, action: ProcessAction) -> bool:
    """OpenClaw's ``isInScope``: same agent, and same conversation when the caller names one."""
    if view_agent != action.agent_id:
        return False
    return action.session_key is None or view_session_key == action.session_key


def _not_found(action: str, session_id: str) -> ToolResult:
    if action in _ACTIVE_ONLY:
        return results.process_not_found(session_id, "active")
    if action == "clear":
        return results.process_not_found(session_id, "finished")
    return results.process_not_found(session_id)


def process_step(action: ProcessAction, view: SessionView | None) -> ProcessStep:
    """Answer ``action`` (not ``list``) about ``view`` (None: not found or out of scope)."""
    sid = action.session_id or ""
    name = action.action
    if view is not None and not view.running and not view.backgrounded:
        view = None  # OpenClaw keeps only backgrounded sessions once they end
    count = view.poll_count if view is not None else None
    if view is None:
        return ProcessStep(_not_found(name, sid))
    if view.running and not view.backgrounded and name != "clear":
        return ProcessStep(results.process_not_backgrounded(sid), poll_count=count)

    if name == "poll":
        if not view.running:
            return ProcessStep(
                results.process_poll(view, view.pending_output,
                                     output_dropped=view.pending_dropped),
                take_output=True, poll_count=None)
        new_output = results.js_trim(view.pending_output)
        count, retry = results.poll_retry(count, bool(new_output))
        return ProcessStep(
            results.process_poll(view, view.pending_output, output_dropped=view.pending_dropped,
                                 retry_in_ms=retry),
            take_output=True, poll_count=count)
    if name == "log":
        return ProcessStep(results.process_log(view, view.aggregated, action.offset, action.limit),
                           poll_count=count)
    if name in ("write", "send-keys", "submit", "paste"):
        if not view.running:
            return ProcessStep(_not_found(name, sid))
        if not view.stdin_writable:
            return ProcessStep(results.process_stdin_not_writable(sid), poll_count=count)
        return _input_step(action, view)
    if name == "kill":
        if not view.running:
            return ProcessStep(_not_found(name, sid))
        return ProcessStep(results.process_kill(view), kill=True, poll_count=None)
    if name == "clear":
        if view.running:
            return ProcessStep(_not_found(name, sid), poll_count=count)
        return ProcessStep(results.process_clear(sid), forget=True, poll_count=None)
    if name == "remove":
        return ProcessStep(results.process_remove(view), kill=view.running, forget=True,
                           poll_count=None)
    raise ValueError(f"process_step cannot answer action {name!r}")


def _input_step(action: ProcessAction, view: SessionView) -> ProcessStep:
    count = view.poll_count
    if action.action == "write":
        data = action.data or ""
        return ProcessStep(results.process_write(view, data, action.eof), send=data.encode("utf-8"),
                           close_input=action.eof, poll_count=count)
    if action.action == "submit":
        return ProcessStep(results.process_submit(view), send=keymap.SUBMIT, poll_count=count)
    if action.action == "paste":
        payload = keymap.encode_paste(action.text or "", action.bracketed)
        if not payload:
            return ProcessStep(results.process_paste_empty(), poll_count=count)
        return ProcessStep(results.process_paste(view, action.text or ""), send=payload,
                           poll_count=count)
    if view.cursor_mode == "unknown" and keymap.has_cursor_mode_sensitive_keys(action.keys):
        return ProcessStep(results.process_cursor_mode_unknown(view.session_id), poll_count=count)
    encoded = keymap.encode_key_request(keys=action.keys, hex=action.hex, literal=action.literal,
                                        cursor_mode=view.cursor_mode)
    if not encoded.data:
        return ProcessStep(results.process_send_keys_no_data(), poll_count=count)
    return ProcessStep(results.process_send_keys(view, len(encoded.data), encoded.warnings),
                       send=encoded.data, poll_count=count)
