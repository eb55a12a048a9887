"""What exec and process results share: :class:`ToolResult`, OpenClaw's constants and texts,
and its JavaScript helpers redone exactly (``trim``, ``Math.round``, durations, tails).

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
import signal as _signal
from collections.abc import Mapping as _MappingABC
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Mapping, Sequence, get_args

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


def _tail_of(text: str) -> str:
    return tail(text, TAIL_CHARS)
