"""Exec results (OpenClaw's ``exec`` tool): completed, failed, running (yielded), the
streamed update, and the exit event a background session leaves.

Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from .shared import (_append_timeout_guidance, cap_aggregated, _CONTINUATION_HINT,
                     DEFAULT_MAX_AGGREGATED_CHARS, EXEC_RETENTION_CAP_NOTE, _exit_label,
                     _failed_exit_code, FAILURE_KINDS, FOLLOW_UP, _JS_SPACE, js_trim,
                     _render_output, tail, _tail_of, _text_result, _TIMEOUT_REASONS,
                     ToolResult, _warning_text)


def exec_completed(
    *,
    exit_code: int,
    exit_signal: str | int | None = None,
    exit_reason: str | None = "exit",
    duration_ms: int,
    aggregated: str,
    truncated: bool = False,
    cwd: str | None,
    warnings: Sequence[str] = (),
    max_chars: int = DEFAULT_MAX_AGGREGATED_CHARS,
) -> ToolResult:
    """A foreground run that exited normally, whatever its code.

    As in OpenClaw a non-zero code is still ``completed``; ``details.aggregated``
    and the text end with ``(Command exited with code N)``. The output is capped
    (the tail is kept) and then trimmed of surrounding whitespace, as there.
    """
    aggregated, cut = cap_aggregated(aggregated, max_chars)
    aggregated = js_trim(aggregated)
    truncated = truncated or cut
    exit_msg = f"\n\n(Command exited with code {exit_code})" if exit_code != 0 else ""
    shown = (_render_output(aggregated) if exit_msg else aggregated) + exit_msg
    text = (
        (EXEC_RETENTION_CAP_NOTE if truncated else "")
        + _warning_text(warnings)
        + _render_output(shown)
    )
    return _text_result(
        text,
        {
            "status": "completed",
            "exitCode": exit_code,
            "exitSignal": exit_signal,
            "exitReason": exit_reason,
            "durationMs": duration_ms,
            "aggregated": shown,
            "noOutputTimedOut": False,
            "cwd": cwd,
            "truncated": truncated,
        },
        exit_code,
    )


def failure_reason(
    failure_kind: str,
    *,
    exit_signal: str | int | None = None,
    timeout_seconds: float | None = None,
    error: str | None = None,
    continuation_available: bool = True,
) -> str:
    """``formatExecFailureReason`` (plus ours: ``secret-resolution`` uses ``error``)."""
    if failure_kind == "shell-command-not-found":
        return "Command not found"
    if failure_kind == "shell-not-executable":
        return "Command not executable (permission denied)"
    if failure_kind == "overall-timeout":
        if timeout_seconds is not None and timeout_seconds > 0:
            shown = int(timeout_seconds) if float(timeout_seconds).is_integer() else timeout_seconds
            head = f"Command timed out after {shown} seconds."
        else:
            head = "Command timed out."
        guided = _append_timeout_guidance(head, failure_kind)
        return f"{guided}\n\n{_CONTINUATION_HINT}" if continuation_available else guided
    if failure_kind == "no-output-timeout":
        return _append_timeout_guidance("Command timed out waiting for output.", failure_kind)
    if failure_kind == "signal":
        return f"Command aborted by signal {exit_signal}"
    if failure_kind == "aborted":
        return "Command aborted before exit code was captured"
    if failure_kind in ("runtime-error", "secret-resolution"):
        if not error:
            raise ValueError(f"failure kind {failure_kind!r} needs the error text")
        return error
    raise ValueError(f"unknown failure kind {failure_kind!r}; expected one of {FAILURE_KINDS}")


def exec_failed(
    *,
    failure_kind: str,
    reason: str,
    exit_code: int | None = None,
    exit_signal: str | int | None = None,
    exit_reason: str | None = None,
    duration_ms: int = 0,
    aggregated: str = "",
    truncated: bool = False,
    timed_out: bool = False,
    cwd: str | None = None,
    warnings: Sequence[str] = (),
    max_chars: int = DEFAULT_MAX_AGGREGATED_CHARS,
    no_output_timed_out: bool | None = None,
) -> ToolResult:
    """A run that failed; ``reason`` is a :func:`failure_reason` text.

    Text: ``<aggregated>\\n\\n<reason>`` (just the reason without output), after
    the retention-cap note and warnings. ``exitReason`` is left out when None,
    as OpenClaw's runtime-error outcome leaves it undefined, and so is
    ``noOutputTimedOut`` (:func:`exec_from_exit` sets it, as OpenClaw's exit
    outcomes do).
    """
    if failure_kind not in FAILURE_KINDS:
        raise ValueError(f"unknown failure kind {failure_kind!r}; expected one of {FAILURE_KINDS}")
    aggregated, cut = cap_aggregated(aggregated, max_chars)
    aggregated = js_trim(aggregated)
    truncated = truncated or cut
    joined = f"{aggregated}\n\n{reason}" if aggregated else reason
    text = (EXEC_RETENTION_CAP_NOTE if truncated else "") + _warning_text(warnings) + joined
    details: dict[str, Any] = {
        "status": "failed",
        "exitCode": exit_code,
        "exitSignal": exit_signal,
        "failureKind": failure_kind,
    }
    if exit_reason is not None:
        details["exitReason"] = exit_reason
    details.update(
        {
            "durationMs": duration_ms,
            "aggregated": aggregated,
            "timedOut": timed_out,
        }
    )
    if no_output_timed_out is not None:
        details["noOutputTimedOut"] = no_output_timed_out
    details["cwd"] = cwd
    details["truncated"] = truncated
    return _text_result(text, details, _failed_exit_code(failure_kind, exit_code, exit_signal))


def exec_workdir_unavailable(workdir: str, *, duration_ms: int = 0) -> ToolResult:
    """The failed result when ``workdir`` is missing or not a directory (nothing ran)."""
    reason = (
        f'workdir "{workdir}" is unavailable or not a directory: command was not executed. '
        'workdir is treated as a literal path; shell expansions such as "~" are not applied. '
        "Use an existing directory, omit an explicit workdir to use the default cwd, or "
        "update the configured default cwd."
    )
    return exec_failed(
        failure_kind="runtime-error", reason=reason, duration_ms=duration_ms, cwd=workdir
    )


def exec_from_exit(
    *,
    exit_code: int | None,
    exit_signal: str | int | None,
    exit_reason: str,
    duration_ms: int,
    aggregated: str,
    truncated: bool = False,
    cwd: str | None,
    timeout_seconds: float | None = None,
    warnings: Sequence[str] = (),
    continuation_available: bool = True,
    max_chars: int = DEFAULT_MAX_AGGREGATED_CHARS,
) -> ToolResult:
    """Classify a finished process the way ``buildExecExitOutcome`` does.

    ``exit_reason`` is the supervisor's: ``exit`` (normal exit), ``signal``,
    ``overall-timeout``, ``no-output-timeout`` or ``manual-cancel``. A normal
    exit with code 126/127 is a shell failure (``failed``); any other normal
    exit is ``completed``.
    """
    code = exit_code if exit_code is not None else 0
    shell_failure = code in (126, 127)
    if exit_reason == "exit" and not shell_failure:
        return exec_completed(
            exit_code=code,
            exit_signal=exit_signal,
            exit_reason=exit_reason,
            duration_ms=duration_ms,
            aggregated=aggregated,
            truncated=truncated,
            cwd=cwd,
            warnings=warnings,
            max_chars=max_chars,
        )
    if shell_failure and exit_reason == "exit":
        kind = "shell-command-not-found" if code == 127 else "shell-not-executable"
    elif exit_reason in _TIMEOUT_REASONS:
        kind = exit_reason
    elif exit_signal is not None:
        kind = "signal"
    else:
        kind = "aborted"
    reason = failure_reason(
        kind,
        exit_signal=exit_signal,
        timeout_seconds=timeout_seconds,
        continuation_available=continuation_available,
    )
    return exec_failed(
        failure_kind=kind,
        reason=reason,
        exit_code=exit_code,
        exit_signal=exit_signal,
        exit_reason=exit_reason,
        duration_ms=duration_ms,
        aggregated=aggregated,
        truncated=truncated,
        timed_out=exit_reason in _TIMEOUT_REASONS,
        cwd=cwd,
        warnings=warnings,
        max_chars=max_chars,
        no_output_timed_out=exit_reason == "no-output-timeout",
    )


#: ``DEFAULT_NOTIFY_TAIL_CHARS`` / ``DEFAULT_NOTIFY_SNIPPET_CHARS`` in ``bash-tools.exec-runtime.ts``.
NOTIFY_TAIL_CHARS = 400
NOTIFY_SNIPPET_CHARS = 180
_JS_SPACES = re.compile(f"[{_JS_SPACE}]+")


def exec_status(exit_code: int | None, exit_reason: str | None) -> str:
    """``buildExecExitOutcome``'s status: ``completed`` for a normal exit but 126/127."""
    code = exit_code if exit_code is not None else 0
    return "completed" if exit_reason == "exit" and code not in (126, 127) else "failed"


def exec_exit_event(*, session_id: str, exit_code: int | None, exit_signal: str | int | None,
                    exit_reason: str | None, output: str) -> str | None:
    """The system event a finished background exec sends its session (``maybeNotifyOnExit``).

    None when OpenClaw stays silent: the agent killed it, or it succeeded
    without output. ``output`` is the session's tail (last 2,000 characters).
    """
    if exit_reason == "manual-cancel":
        return None
    status = exec_status(exit_code, exit_reason)
    label = _exit_label(exit_code, exit_signal)
    snippet = _JS_SPACES.sub(" ", tail(output, NOTIFY_TAIL_CHARS)).strip(_JS_SPACE)
    if len(snippet) > NOTIFY_SNIPPET_CHARS:
        snippet = snippet[:NOTIFY_SNIPPET_CHARS - 1] + "\u2026"
    if status == "completed" and exit_code == 0 and not snippet:
        return None
    head = f"Exec {status} ({session_id[:8]}, {label})"
    return _append_timeout_guidance(f"{head} :: {snippet}" if snippet else head, exit_reason)


def exec_running(
    *,
    session_id: str,
    pid: int | None,
    started_at: int,
    cwd: str | None,
    tail: str,  # noqa: A002 - OpenClaw's field name
    warnings: Sequence[str] = (),
) -> ToolResult:
    """A run that yielded or was backgrounded (``startedAt`` in epoch ms)."""
    pid_text = pid if pid is not None else "n/a"
    text = (
        f"{_warning_text(warnings)}Command still running (session {session_id}, pid {pid_text}). "
        f"{FOLLOW_UP}"
    )
    details: dict[str, Any] = {"status": "running", "sessionId": session_id}
    if pid is not None:
        details["pid"] = pid
    details.update(
        {"startedAt": started_at, "cwd": cwd, "tail": _tail_of(tail), "followUp": FOLLOW_UP}
    )
    return _text_result(text, details)


def exec_update(
    *,
    session_id: str,
    pid: int | None,
    started_at: int,
    cwd: str | None,
    tail: str,  # noqa: A002
    warnings: Sequence[str] = (),
) -> ToolResult:
    """A streaming progress update (``onUpdate`` partial): warnings, then the tail."""
    shown = _tail_of(tail)
    details: dict[str, Any] = {"status": "running", "sessionId": session_id}
    if pid is not None:
        details["pid"] = pid
    details.update({"startedAt": started_at, "cwd": cwd, "tail": shown})
    return _text_result(_warning_text(warnings) + _render_output(shown), details)
