"""The audit log: one JSON object per line in ``PADDEDCELL_HOME/audit.jsonl``.

Guarantees, in order of importance:

1. **No plaintext secrets.** This module cannot know them: callers pass text
   that already went through the redactor (commands with ``$(pass_mgr get K)``
   are safe as written, since the key name is not the secret).
2. **One line, one write.** Each record is serialised first and written with a
   single ``os.write`` on a descriptor opened with ``O_APPEND``. On a local
   file system the kernel appends each such write whole, so several
   processes (daemon, ``pcexec`` runs without a daemon) can share the file and
   lines never interleave. Long fields are cut (``max_field_chars``) so a line
   stays small.
3. **Private.** The file is created ``0600`` (and put back to ``0600`` if
   someone widened it), in a ``0700`` directory.

The file is opened per record rather than kept open, so a log rotated or
removed by an operator is recreated, and a forked child holds no descriptor.
"""

from __future__ import annotations

import json
import os
import stat
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["AUDIT_FILE_NAME", "AuditLog"]

AUDIT_FILE_NAME = "audit.jsonl"
_TRUNCATED_MARK = "…[truncated]"


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + _TRUNCATED_MARK
    if isinstance(value, dict):
        return {str(k): _cut(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cut(v, limit) for v in value]
    return value


class AuditLog:
    """Append-only JSON-lines log; ``record(event, **fields)`` writes one line."""

    def __init__(self, path: str | os.PathLike[str], *, max_field_chars: int = 4096):
        self.path = Path(path)
        self.max_field_chars = max_field_chars

    @classmethod
    def for_settings(cls, settings: Any) -> "AuditLog":
        """The log at ``settings.home / audit.jsonl`` (``audit.max_field_chars``)."""
        try:
            limit = int(settings["audit.max_field_chars"])
        except KeyError:
            limit = 4096
        return cls(Path(settings.home) / AUDIT_FILE_NAME, max_field_chars=limit)

    def format(self, event: str, fields: dict[str, Any], now: float | None = None) -> bytes:
        """The bytes of one line: ``{"time", "event", **fields}`` and a newline."""
        stamp = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
        record = {"time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"), "event": event}
        for key, value in fields.items():
            if key in record:
                raise ValueError(f"audit field {key!r} is reserved; rename it")
            record[key] = _cut(value, self.max_field_chars)
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        # json.dumps escapes newlines inside strings, so the record is one line.
        return (line + "\n").encode("utf-8", errors="replace")

    def record(self, event: str, **fields: Any) -> None:
        """Append one record; raises ``OSError`` if the log cannot be written."""
        data = self.format(event, fields)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(
            self.path,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
            0o600,
        )
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:
                os.fchmod(fd, 0o600)
            written = os.write(fd, data)
            if written != len(data):
                # Only on a full disk or a signal; finish the line rather than
                # leave a fragment that breaks every later line's parse.
                os.write(fd, data[written:])
        finally:
            os.close(fd)
