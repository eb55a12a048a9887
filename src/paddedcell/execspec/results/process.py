"""Process results (OpenClaw's ``process`` tool): one function per action, over a
:class:`SessionView` the supervisor fills in (already redacted).

Pure: no I/O, no clock except where a ``now_ms`` default is documented.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Literal, NamedTuple, Sequence

from .shared import (_append_timeout_guidance, DEFAULT_LOG_TAIL_LINES,
                     derive_session_name, EXEC_RETENTION_CAP_NOTE, _exit_label,
                     format_duration_compact, js_trim, PROCESS_TOOL, tail, _tail_of,
                     _text_result, _TIMEOUT_REASONS, ToolResult, _truncate_middle,
                     _utf16_len)


SessionStatus = Literal["running", "completed", "failed", "killed"]
#: ``DEFAULT_INPUT_WAIT_IDLE_MS`` in ``bash-tools.process.ts``.
INPUT_WAIT_IDLE_MS = 15_000


@dataclass(frozen=True, slots=True)
class SessionView:
    """What a process result needs to know about one session (already redacted).

    ``status`` ``killed`` means the agent asked for termination (OpenClaw's
    ``manual-cancel``); ``completed``/``failed`` follow :func:`exec_from_exit`.
    Times are epoch milliseconds. ``total_output_chars`` counts every character
    ever produced, so the retention-cap note appears once output was dropped;
    when None, ``truncated`` decides.
    """

    session_id: str
    status: SessionStatus
    pid: int | None
    command: str
    cwd: str | None
    started_at: int
    ended_at: int | None = None
    exit_code: int | None = None
    exit_signal: str | int | None = None
    tail: str = ""
    aggregated: str = ""
    truncated: bool = False
    name: str | None = None
    exit_reason: str | None = None
    stdin_writable: bool = True
    idle_ms: int = 0
    last_output_at: int | None = None
    total_output_chars: int | None = None
    backgrounded: bool = True
    #: ``send-keys``: ``normal``/``application``; ``unknown`` until a PTY program says.
    cursor_mode: str = "normal"
    #: Polls without new output in a row (OpenClaw's ``recordCommandPoll``); None: none yet.
    poll_count: int | None = None
    #: Output not yet delivered by a poll, and whether part of it was dropped.
    pending_output: str = ""
    pending_dropped: bool = False

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def waiting_for_input(self) -> bool:
        """OpenClaw's rule: a writable stdin and no output for 15 s."""
        return self.running and self.stdin_writable and self.idle_ms >= INPUT_WAIT_IDLE_MS

    @property
    def display_name(self) -> str | None:
        return self.name if self.name is not None else derive_session_name(self.command)

    @property
    def requested_stop(self) -> bool:
        return self.status == "killed"

    @property
    def output_dropped(self) -> bool:
        if self.total_output_chars is not None:
            return self.total_output_chars > len(self.aggregated)
        return self.truncated


def _retention_note(view: SessionView) -> str:
    return EXEC_RETENTION_CAP_NOTE if view.output_dropped else ""


def _input_details(view: SessionView) -> dict[str, Any]:
    return {
        "stdinWritable": view.stdin_writable,
        "waitingForInput": view.waiting_for_input,
        "idleMs": view.idle_ms,
        "lastOutputAt": view.last_output_at if view.last_output_at is not None else view.started_at,
    }


def _input_wait_hint(view: SessionView) -> str:
    if not view.waiting_for_input:
        return ""
    idle = format_duration_compact(view.idle_ms) or f"{view.idle_ms}ms"
    return (
        f"\n\nNo new output for {idle}; this session may be waiting for input. "
        f"Use {PROCESS_TOOL} write, send-keys, submit, or paste to provide input."
    )


def _finished_details(view: SessionView) -> dict[str, Any]:
    """``finishedSessionDetails``: status, sessionId, exit*, timedOut, noOutputTimedOut, name."""
    details: dict[str, Any] = {
        "status": "completed" if view.status in ("completed", "killed") else "failed",
        "sessionId": view.session_id,
    }
    if view.exit_code is not None:
        details["exitCode"] = view.exit_code
    if view.exit_signal is not None:
        details["exitSignal"] = view.exit_signal
    reason = view.exit_reason or ("manual-cancel" if view.requested_stop else None)
    if reason:
        details["exitReason"] = reason
        details["timedOut"] = reason in _TIMEOUT_REASONS
    # OpenClaw's markExited records it for every session that ends (false: we have no
    # no-output timeout), so every finished poll, log and list entry carries it.
    details["noOutputTimedOut"] = False
    name = view.display_name
    if name is not None:
        details["name"] = name
    return details


def _stop_or_exit_line(view: SessionView) -> str:
    label = _exit_label(view.exit_code, view.exit_signal)
    if view.requested_stop:
        return f"\n\nProcess stopped by request ({label})."
    return f"\n\nProcess exited with {label}."


def _with_name(details: dict[str, Any], view: SessionView) -> dict[str, Any]:
    name = view.display_name
    if name is not None:
        details["name"] = name
    return details


def process_failed(message: str) -> ToolResult:
    """``failText``: any process error, ``{"status": "failed", "error": message}``."""
    return _text_result(message, {"status": "failed", "error": message})


def process_not_found(
    session_id: str, kind: Literal["any", "active", "finished"] = "any"
) -> ToolResult:
    """Unknown (or another agent's) session: ``No [active|finished] session found for ID``."""
    qualifier = {"any": "", "active": "active ", "finished": "finished "}[kind]
    return process_failed(f"No {qualifier}session found for {session_id}")


def process_not_backgrounded(session_id: str) -> ToolResult:
    return process_failed(f"Session {session_id} is not backgrounded.")


def process_stdin_not_writable(session_id: str) -> ToolResult:
    return process_failed(f"Session {session_id} stdin is not writable.")


def process_list(views: Iterable[SessionView], *, now_ms: int | None = None) -> ToolResult:
    """``list``: newest first, one line per session, OpenClaw's per-session keys."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    ordered = sorted(views, key=lambda v: v.started_at, reverse=True)
    sessions: list[dict[str, Any]] = []
    lines: list[str] = []
    for v in ordered:
        entry: dict[str, Any] = {
            "sessionId": v.session_id,
            "status": v.status,
            "startedAt": v.started_at,
            "runtimeMs": (v.ended_at if v.ended_at is not None else now) - v.started_at,
            "cwd": v.cwd,
            "command": v.command,
        }
        name = v.display_name
        if name is not None:
            entry["name"] = name
        entry.update({"tail": _tail_of(v.tail), "truncated": v.truncated})
        if v.ended_at is not None:
            finished = _finished_details(v)
            finished["status"] = v.status
            entry.update(finished)
            entry["endedAt"] = v.ended_at
        else:
            if v.pid is not None:
                entry["pid"] = v.pid
            entry.update(_input_details(v))
        sessions.append(entry)
        label = _truncate_middle(name, 80) if name else _truncate_middle(v.command, 120)
        reason = entry.get("exitReason")
        timeout_marker = f" [{reason}]" if reason in _TIMEOUT_REASONS else ""
        wait_marker = " [input-wait]" if entry.get("waitingForInput") else ""
        runtime = format_duration_compact(entry["runtimeMs"]) or "n/a"
        lines.append(
            f"{v.session_id} {v.status.ljust(9)} {runtime}{timeout_marker}{wait_marker} :: {label}"
        )
    return _text_result(
        "\n".join(lines) or "No running or recent sessions.",
        {"status": "completed", "sessions": sessions},
    )


_POLL_DROPPED_NOTE = (
    "[earlier output is omitted from this poll; use action=log with offset and limit to "
    "inspect retained output]\n\n"
)


def process_poll(
    view: SessionView,
    new_output: str,
    *,
    output_dropped: bool = False,
    retry_in_ms: int | None = None,
) -> ToolResult:
    """``poll``: the output since the last poll, then the state line.

    ``output_dropped``: unread output overflowed the poll buffer, so the first
    part is missing (OpenClaw's ``pendingOutputDropped``).
    """
    output = js_trim(new_output)
    body = output or "(no new output)"
    dropped_note = _POLL_DROPPED_NOTE if output_dropped else ""
    if view.running:
        text = (
            _retention_note(view)
            + dropped_note
            + body
            + (_input_wait_hint(view) or "\n\nProcess still running.")
        )
        details: dict[str, Any] = {
            "status": "running",
            "sessionId": view.session_id,
            "aggregated": view.aggregated,
        }
        _with_name(details, view)
        details.update(_input_details(view))
        if retry_in_ms is not None:
            details["retryInMs"] = retry_in_ms
        return _text_result(text, details)
    text = _append_timeout_guidance(
        _retention_note(view) + dropped_note + body + _stop_or_exit_line(view),
        view.exit_reason,
    )
    details = _finished_details(view)
    details["aggregated"] = view.aggregated
    return _text_result(text, details)


#: ``BACKOFF_SCHEDULE_MS`` in ``command-poll-backoff.ts``.
POLL_BACKOFF_SCHEDULE_MS = (5_000, 10_000, 30_000, 60_000)


def poll_retry(count: int | None, has_new_output: bool) -> tuple[int, int]:
    """``recordCommandPoll``: ``(new count, retryInMs)`` of a running poll.

    5 s after a poll with output, then 10 s, 30 s, 60 s for each poll in a row
    without; the count is reset (None) when the session ends or is killed.
    """
    if has_new_output:
        return 0, POLL_BACKOFF_SCHEDULE_MS[0]
    count = (count if count is not None else -1) + 1
    return count, POLL_BACKOFF_SCHEDULE_MS[min(count, len(POLL_BACKOFF_SCHEDULE_MS) - 1)]


class LogSlice(NamedTuple):
    text: str
    total_lines: int
    total_chars: int
    default_tail: bool


def slice_lines(text: str, offset: int | None = None, limit: int | None = None) -> LogSlice:
    """OpenClaw's ``log`` window (``resolveLogSliceWindow`` + ``sliceLogLines``).

    No ``offset`` and no ``limit``: the last 200 lines. ``limit`` alone: the
    last ``limit`` lines. ``offset`` alone: from line ``offset`` (0-based) to the
    end. Both: ``limit`` lines from ``offset``. CRLF counts as one line break,
    and a final newline does not start an empty line.
    """
    default_tail = offset is None and limit is None
    if default_tail:
        limit = DEFAULT_LOG_TAIL_LINES
    if not text:
        return LogSlice("", 0, 0, default_tail)
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    start = max(0, math.floor(offset)) if offset is not None else 0
    if limit is not None and offset is None:
        start = max(total - max(0, math.floor(limit)), 0)
    end = start + max(0, math.floor(limit)) if limit is not None else None
    return LogSlice("\n".join(lines[start:end]), total, len(text), default_tail)


def process_log(
    view: SessionView, text: str, offset: int | None = None, limit: int | None = None
) -> ToolResult:
    """``log``: a line window of ``text`` (the session's retained output)."""
    sliced = slice_lines(text, offset, limit)
    note = (
        f"\n\n[showing last {DEFAULT_LOG_TAIL_LINES} of {sliced.total_lines} lines; "
        "pass offset/limit to page]"
        if sliced.default_tail and sliced.total_lines > DEFAULT_LOG_TAIL_LINES
        else ""
    )
    empty = "(no output yet)" if view.running else "(no output recorded)"
    stop = (
        f"\n\nProcess stopped by request ({_exit_label(view.exit_code, view.exit_signal)})."
        if view.requested_stop
        else ""
    )
    body = _retention_note(view) + (sliced.text or empty) + note + stop
    if view.running:
        output = body + _input_wait_hint(view)
        details: dict[str, Any] = {"status": "running", "sessionId": view.session_id}
        _with_name(details, view)
        details.update(_input_details(view))
    else:
        output = _append_timeout_guidance(body, view.exit_reason)
        details = _finished_details(view)
    details.update(
        {
            "output": output,
            "total": sliced.total_lines,
            "totalLines": sliced.total_lines,
            "totalChars": sliced.total_chars,
            "truncated": view.truncated,
        }
    )
    return _text_result(output, details)


def _running_result(view: SessionView, text: str) -> ToolResult:
    return _text_result(
        text, _with_name({"status": "running", "sessionId": view.session_id}, view)
    )


def process_write(view: SessionView, data: str, eof: bool = False) -> ToolResult:
    """``write``: ``Wrote N bytes to session ID[ (stdin closed)].`` (N in UTF-8 bytes)."""
    closed = " (stdin closed)" if eof else ""
    n = len(data.encode("utf-8"))
    return _running_result(view, f"Wrote {n} bytes to session {view.session_id}{closed}.")


def process_send_keys(
    view: SessionView, sent_bytes: int, warnings: Sequence[str] = ()
) -> ToolResult:
    """``send-keys``: ``Sent N bytes to session ID.`` plus encoder warnings."""
    text = f"Sent {sent_bytes} bytes to session {view.session_id}."
    if warnings:
        text += "\nWarnings:\n- " + "\n- ".join(warnings)
    return _running_result(view, text)


def process_send_keys_no_data() -> ToolResult:
    return process_failed("No key data provided.")


def process_cursor_mode_unknown(session_id: str) -> ToolResult:
    return process_failed(
        f"Session {session_id} cursor key mode is not known yet. Poll or log until startup "
        "output appears, then retry send-keys."
    )


def process_submit(view: SessionView) -> ToolResult:
    return _running_result(view, f"Submitted session {view.session_id} (sent CR).")


def process_paste(view: SessionView, text: str) -> ToolResult:
    """``paste``: ``Pasted N chars to session ID.`` (N in UTF-16 units, as JS)."""
    return _running_result(view, f"Pasted {_utf16_len(text)} chars to session {view.session_id}.")


def process_paste_empty() -> ToolResult:
    return process_failed("No paste text provided.")


def process_kill(view: SessionView) -> ToolResult:
    details: dict[str, Any] = {"status": "completed"}
    return _text_result(
        f"Termination requested for session {view.session_id}.", _with_name(details, view)
    )


def process_clear(session_id: str) -> ToolResult:
    return _text_result(f"Cleared session {session_id}.", {"status": "completed"})


def process_remove(view: SessionView) -> ToolResult:
    """``remove``: a running session is terminated too; a finished one is forgotten."""
    if view.running:
        return _text_result(
            f"Removed session {view.session_id} (termination requested).",
            _with_name({"status": "completed"}, view),
        )
    return _text_result(f"Removed session {view.session_id}.", {"status": "completed"})
