"""Exec and process results in OpenClaw's exact shapes and texts.

An agent trained on OpenClaw's ``exec``/``process`` tools should not be able to
tell ``pcexec``/``pcprocess`` apart except by name, so every text and every
``details`` key below is copied from OpenClaw 2026.9.6 (``dist/`` of the npm
package; the original TypeScript file of each piece is named beside it):

- ``bash-tools.exec-output.ts`` — ``(no output)``, the retention-cap note, the
  timeout retry guidance, ``renderExecExitLabel``;
- ``bash-tools.exec-runtime.ts`` — ``buildExecExitOutcome``,
  ``formatExecFailureReason``, ``joinExecFailureOutput``;
- ``bash-tools.exec-support.ts`` — ``buildExecForegroundResult``;
- ``bash-tools.exec-run.ts`` — the running (yielded) result;
- ``bash-tools.process.ts`` / ``bash-tools.process-send-keys.ts`` — one result
  per process action, ``failText``;
- ``bash-tools.shared.ts`` — ``sliceLogLines``, ``deriveSessionName``,
  ``truncateMiddle``, ``padProcessStatus``; ``bash-process-registry.ts`` —
  ``tail`` (2,000 chars) and ``trimWithCap``;
- ``infra/format-time/format-duration.ts`` — ``formatDurationCompact``.

Where PaddedCell differs on purpose (each is also in the module's tests; the
complete list, beyond these result shapes, is in docs/openclaw.md "Deliberate
differences from native exec/process"):

- the follow-up texts name ``pcprocess``/``pcexec`` instead of
  ``process``/``exec`` (they are the tools the agent has to call), and the
  timeout hint says "PaddedCell" where OpenClaw says "OpenClaw";
- ``details.truncated`` is present on completed and failed exec results
  (docs/design.md §4.1); OpenClaw only signals truncation through the text note;
- ``details.noOutputTimedOut`` is always false (PaddedCell has no
  no-output timeout), where OpenClaw reports its own;
- ``failureKind`` may be ``secret-resolution`` (a ``pass_mgr get`` could not be
  resolved; nothing ran);
- lengths are counted in code points where OpenClaw counts UTF-16 units, except
  the ``paste`` character count, which is the agent-visible number and is
  computed in UTF-16 units as in OpenClaw.

Pure: no I/O, no clock except where a ``now_ms`` default is documented.
"""

from __future__ import annotations

import math
import re
import signal as _signal
import time
from collections.abc import Mapping as _MappingABC
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Literal, Mapping, NamedTuple, Sequence, get_args

__all__ = [
    "EXEC_NO_OUTPUT_PLACEHOLDER",
    "EXEC_RETENTION_CAP_NOTE",
    "EXEC_TIMEOUT_RETRY_GUIDANCE",
    "FAILURE_KINDS",
    "FOLLOW_UP",
    "LogSlice",
    "SessionView",
    "ToolResult",
    "cap_aggregated",
    "derive_session_name",
    "exec_completed",
    "exec_failed",
    "exec_from_exit",
    "exec_running",
    "exec_exit_event",
    "exec_status",
    "exec_update",
    "exec_workdir_unavailable",
    "js_trim",
    "failure_reason",
    "poll_retry",
    "format_duration_compact",
    "process_clear",
    "process_failed",
    "process_kill",
    "process_list",
    "process_log",
    "process_not_backgrounded",
    "process_not_found",
    "process_paste",
    "process_poll",
    "process_remove",
    "process_send_keys",
    "process_stdin_not_writable",
    "process_submit",
    "process_write",
    "slice_lines",
    "tail",
]

PROCESS_TOOL = "pcprocess"
EXEC_TOOL = "pcexec"

EXEC_NO_OUTPUT_PLACEHOLDER = "(no output)"
EXEC_TIMEOUT_RETRY_GUIDANCE = (
    "The command was terminated, but external side effects may already have completed. "
    "Verify the resulting state before retrying. Do not automatically rerun "
    "non-idempotent commands. Use a higher timeout only when the command is known to be "
    "safe to retry."
)
EXEC_RETENTION_CAP_NOTE = (
    "[earlier output was discarded at the retention cap and cannot be recovered]\n\n"
)
#: OpenClaw's ``BACKGROUND_EXEC_FOLLOW_UP`` with our tool name.
FOLLOW_UP = (
    f"Use {PROCESS_TOOL} (list/poll/log/write/send-keys/submit/paste/kill/clear/remove) "
    "for follow-up."
)
_CONTINUATION_HINT = (
    f"If it should keep running, start it with {EXEC_TOOL} background=true or yieldMs so "
    "PaddedCell can register a pollable process session. Do not rely on shell "
    "backgrounding with a trailing &."
)

FailureKind = Literal[
    "shell-command-not-found",
    "shell-not-executable",
    "overall-timeout",
    "no-output-timeout",
    "signal",
    "aborted",
    "runtime-error",
    "secret-resolution",
]
FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)

#: OpenClaw's ``DEFAULT_MAX_OUTPUT`` (``OPENCLAW_BASH_MAX_OUTPUT_CHARS``).
DEFAULT_MAX_AGGREGATED_CHARS = 200_000
#: ``session.tail`` in ``bash-process-registry.ts``.
TAIL_CHARS = 2_000
#: ``DEFAULT_LOG_TAIL_LINES`` in ``bash-tools.process.ts``.
DEFAULT_LOG_TAIL_LINES = 200

_TIMEOUT_REASONS = ("overall-timeout", "no-output-timeout")


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True, slots=True, eq=False)
class ToolResult(_MappingABC):
    """One tool result: the text the model reads and the ``details`` OpenClaw keeps.

    ``to_json()`` is the wire shape (``{"content": [{"type": "text", "text"}],
    "details"}``); ``exit_code`` is what a CLI that printed it exits with
    (docs/design.md §4.1: the command's code, 128+N after signal N, 124 after a
    timeout, 3 when a secret could not be resolved; 1 for a failed process
    action). Read-only mapping access (``result["details"]``) gives the same
    shape, so a result compares equal to its JSON.
    """

    text: str
    details: Mapping[str, Any]
    exit_code: int = 0

    @property
    def status(self) -> str:
        return str(self.details.get("status", ""))

    def to_json(self) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": self.text}], "details": dict(self.details)}

    def __getitem__(self, key: str) -> Any:
        if key == "content":
            return [{"type": "text", "text": self.text}]
        if key == "details":
            return self.details
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("content", "details"))

    def __len__(self) -> int:
        return 2

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], tool: Literal["exec", "process"]) -> "ToolResult":
        """A result as the daemon sent it (``to_json()``), with its ``exit_code`` back."""
        content = payload.get("content") or ()
        text = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
        details = payload.get("details")
        details = dict(details) if isinstance(details, Mapping) else {}
        status = details.get("status")
        if tool == "process" or status != "failed" or "failureKind" not in details:
            code = 1 if status == "failed" else 0
            if tool == "exec" and status == "completed" and isinstance(details.get("exitCode"), int):
                code = details["exitCode"]
        else:
            code = _failed_exit_code(str(details["failureKind"]), details.get("exitCode"),
                                     details.get("exitSignal"))
        return cls(text, details, code)


def _text_result(text: str, details: dict[str, Any], exit_code: int | None = None) -> ToolResult:
    if exit_code is None:
        exit_code = 1 if details.get("status") == "failed" else 0
    return ToolResult(text, details, exit_code)


#: Exit codes of a CLI that ran the command (docs/design.md §4.1).
EXIT_SECRET = 3
EXIT_TIMEOUT = 124


def signal_number(exit_signal: str | int | None) -> int | None:
    """``SIGTERM`` -> 15, ``SIG34`` -> 34, 9 -> 9; None when unknown."""
    if exit_signal is None:
        return None
    if isinstance(exit_signal, int):
        return exit_signal
    name = str(exit_signal)
    if name.removeprefix("SIG").isdigit():
        return int(name.removeprefix("SIG"))
    try:
        return _signal.Signals[name].value
    except KeyError:
        return None


def _failed_exit_code(failure_kind: str, exit_code: int | None,
                      exit_signal: str | int | None) -> int:
    if failure_kind == "secret-resolution":
        return EXIT_SECRET
    if failure_kind in _TIMEOUT_REASONS:
        return EXIT_TIMEOUT
    number = signal_number(exit_signal)
    if number is not None:
        return 128 + number
    if isinstance(exit_code, int) and exit_code != 0:
        return exit_code
    return 1


def tail(text: str, max_chars: int = TAIL_CHARS) -> str:
    """The last ``max_chars`` characters (``tail`` in ``bash-process-registry.ts``)."""
    if max_chars <= 0:
        return ""
    return text if len(text) <= max_chars else text[-max_chars:]


def cap_aggregated(
    text: str, max_chars: int = DEFAULT_MAX_AGGREGATED_CHARS
) -> tuple[str, bool]:
    """Keep the tail of ``text`` within ``max_chars``; True when something was cut."""
    if len(text) <= max_chars:
        return text, False
    return tail(text, max_chars), True


def _render_output(value: str) -> str:
    return value or EXEC_NO_OUTPUT_PLACEHOLDER


# JavaScript's ``String.prototype.trim`` set (WhiteSpace + LineTerminator);
# Python's ``str.strip`` differs (it also strips \x1c-\x1f, not \ufeff).
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_trim(text: str) -> str:
    """``text.trim()`` as OpenClaw applies it to exec output and poll output."""
    return text.strip(_JS_SPACE)


def _exit_label(exit_code: int | None, exit_signal: str | int | None) -> str:
    """``renderExecExitLabel``: ``signal SIGTERM`` / ``code 1`` / ``unknown exit code``."""
    if exit_signal is not None:
        return f"signal {exit_signal}"
    return f"code {exit_code}" if isinstance(exit_code, int) else "unknown exit code"


def _append_timeout_guidance(text: str, exit_reason: str | None) -> str:
    if exit_reason not in _TIMEOUT_REASONS:
        return text
    return f"{text}\n\n{EXEC_TIMEOUT_RETRY_GUIDANCE}"


def _warning_text(warnings: Sequence[str]) -> str:
    return "\n".join(warnings) + "\n\n" if warnings else ""


def _js_round(x: float) -> int:
    return math.floor(x + 0.5)


_UNITS_MS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


def format_duration_compact(ms: float | None) -> str | None:
    """``formatDurationCompact``: ``500ms``, ``45s``, ``2m5s``, ``1h30m``; None if ≤ 0."""
    if ms is None or not math.isfinite(ms) or ms <= 0:
        return None
    rounded = _js_round(ms)
    value = rounded if rounded < 1000 else _js_round(ms / 1000) * 1000
    parts: list[str] = []
    remaining = value
    for suffix, unit in _UNITS_MS:
        count, remaining = divmod(remaining, unit)
        if count:
            parts.append(f"{count}{suffix}")
    if value < 1000 and value:
        parts.append(f"{value}ms")
    return "".join(parts[:2]) or "0ms"


def _truncate_middle(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    half = (max_chars - 3) // 2
    return f"{text[:half]}...{text[-half:] if half else ''}"


_TOKEN_RE = re.compile(r"""(?:[^\s"']+|"(?:\\.|[^"\\])*"|'[^']*')+""")


def _strip_quotes(value: str) -> str:
    trimmed = value.strip()
    if len(trimmed) >= 1 and (
        (trimmed.startswith('"') and trimmed.endswith('"'))
        or (trimmed.startswith("'") and trimmed.endswith("'"))
    ):
        return trimmed[1:-1]
    return trimmed


def derive_session_name(command: str) -> str | None:
    """``deriveSessionName``: the verb and its first non-option argument."""
    tokens = [t for t in (_strip_quotes(m) for m in _TOKEN_RE.findall(command)) if t]
    if not tokens:
        return None
    verb = tokens[0]
    target = next((t for t in tokens[1:] if not t.startswith("-")), None)
    if not target:
        target = tokens[1] if len(tokens) > 1 else None
    if not target:
        return verb
    return f"{_strip_quotes(verb)} {_truncate_middle(_strip_quotes(target), 48)}"


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# --------------------------------------------------------------------------- exec


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


def _tail_of(text: str) -> str:
    return tail(text, TAIL_CHARS)


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


# --------------------------------------------------------------------------- process

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
    """``finishedSessionDetails``: status, sessionId, exit*, timedOut, name."""
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
