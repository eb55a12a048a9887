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

Its homes: :mod:`.shared` (``ToolResult``, constants, JavaScript helpers),
:mod:`.exec` and :mod:`.process`; this package
names every public one of theirs (``__all__``: the ones callers use).
"""

from __future__ import annotations

from .shared import (DEFAULT_LOG_TAIL_LINES, DEFAULT_MAX_AGGREGATED_CHARS,
                     EXEC_NO_OUTPUT_PLACEHOLDER, EXEC_RETENTION_CAP_NOTE,
                     EXEC_TIMEOUT_RETRY_GUIDANCE, EXEC_TOOL, EXIT_SECRET, EXIT_TIMEOUT,
                     FAILURE_KINDS, FOLLOW_UP, FailureKind, PROCESS_TOOL, TAIL_CHARS,
                     ToolResult, cap_aggregated, derive_session_name,
                     format_duration_compact, js_trim, signal_number, tail)
from .exec import (NOTIFY_SNIPPET_CHARS, NOTIFY_TAIL_CHARS, exec_completed, exec_exit_event,
                   exec_failed, exec_from_exit, exec_running, exec_status, exec_update,
                   exec_workdir_unavailable, failure_reason)
from .process import (INPUT_WAIT_IDLE_MS, LogSlice, POLL_BACKOFF_SCHEDULE_MS, SessionStatus,
                      SessionView, poll_retry, process_clear, process_cursor_mode_unknown,
                      process_failed, process_kill, process_list, process_log,
                      process_not_backgrounded, process_not_found, process_paste,
                      process_paste_empty, process_poll, process_remove, process_send_keys,
                      process_send_keys_no_data, process_stdin_not_writable, process_submit,
                      process_write, slice_lines)

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
