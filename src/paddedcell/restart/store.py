"""Atomic persistence of the restart coordinator under ``PADDEDCELL_HOME/restart/``.

Layout:

- ``global.json``: the global record, the restart job and the queue of
  unacknowledged notifications, so that a restart's outcome and the messages it
  queues are written together. Replaced whole with the usual dance (write a
  temp file, fsync it, ``os.replace``, fsync the directory), so a reader, or a
  daemon restarted after SIGKILL, sees the old or the new version, never half.
- ``agents.json``: a snapshot of every agent record, written the same way, with
  the sequence number of the last change it contains.
- ``agents.jsonl``: the changes since, one JSON line per changed agent
  (``{"seq": N, "agent": {...}}``), appended with one ``write`` per step.

Options weighed for the agents. Rewriting one snapshot per message costs
milliseconds of JSON with 1,000 agents. One file per agent (temp file +
rename) costs about 0.1 ms on an idle disk, but a rename waits for the file
system journal, and on a busy disk that took 2–10 ms; worse, freezing 1,000
agents meant 1,000 renames, about a second with the daemon blocked. An
appended line waits for nothing. So agents go to a journal, compacted into the
snapshot when it has grown past 1,000 lines and twice the number of agents
(old lines carry lower sequence numbers than the snapshot and are skipped, so
a crash between the two steps of a compaction loses nothing). A torn last line (the daemon
killed inside ``write``) is skipped. An append costs the same with 10 or 10,000
agents: deciding to compact counts, it does not serialise; the compaction
itself (every agent) runs in the coordinator's background task, its
serialisation and snapshot write in a worker thread, while appends go on.

Which writes are fsynced, and why: ``global.json`` and the snapshot always.
Journal lines are not: an appended line survives any crash of the daemon (the
page cache is the kernel's), and after a crash of the machine itself the
gateway restarted too, so every turn those records describe is gone; the
coordinator sees a new boot id and resets them. ``restart.fsync_agents =
true`` fsyncs every line as well, for those who prefer.

The global record and the agents are not written together. The order (global
first, then agents) and the coordinator's resume pass make any mix safe: a
frozen agent with no pending restart is released on load.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

log = logging.getLogger("paddedcell.restart")

#: The journal is compacted when it has more lines than this and twice the agents.
COMPACT_MIN_LINES = 1000


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see old or new, never half.

    ``durable`` adds the two fsyncs (file, then directory) that make the new
    version survive a power loss, not only a crash of this process.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def boot_id() -> str | None:
    """This boot of the machine (Linux); None where the kernel does not say."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _dump(value: Any) -> bytes:
    # ASCII JSON: encoding cannot fail on any str (a surrogateescape path from
    # a non-UTF-8 directory name is written as \\udcXX and read back as such).
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class Store:
    """Reads and writes the coordinator's files; knows nothing of their meaning."""

    def __init__(self, home: Path, *, fsync_agents: bool = False):
        self.fsync_agents = fsync_agents
        self.root = Path(home) / "restart"
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        self.snapshot_path = self.root / "agents.json"
        self.journal_path = self.root / "agents.jsonl"
        self.seq = 0
        self.journal_lines = 0
        self._journal_fd: int | None = None
        #: Lines appended since a compaction began (None: no compaction running).
        self._since: list[bytes] | None = None

    # -- agents ----------------------------------------------------------------

    def load_agents(self) -> dict[str, dict[str, Any]]:
        """The latest record of every agent: the snapshot, then newer journal lines."""
        snapshot = self._read(self.snapshot_path) or {}
        agents: dict[str, dict[str, Any]] = {}
        for record in snapshot.get("agents") or []:
            if isinstance(record, dict) and isinstance(record.get("agentId"), str):
                agents[record["agentId"]] = record
        self.seq = int(snapshot.get("seq") or 0)
        self.journal_lines = 0
        try:
            raw = self.journal_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        for number, line in enumerate(raw.splitlines(), 1):
            try:
                entry = json.loads(line)
                seq, record = int(entry["seq"]), entry["agent"]
                agent_id = record["agentId"]
            except (ValueError, KeyError, TypeError):
                log.warning("skipping unreadable line %d of %s (a write cut short)",
                            number, self.journal_path)
                continue
            self.journal_lines += 1
            if seq > self.seq:
                agents[agent_id] = record
                self.seq = seq
        return agents

    def save_agents(self, records: Iterable[dict[str, Any]], *, agent_count: int = 0) -> bool:
        """Append changed ``records`` in one write: O(changes), whatever the number
        of agents. True when the journal is due for compaction (over
        ``COMPACT_MIN_LINES`` lines and twice ``agent_count``); the caller runs
        :meth:`compact` (the coordinator does it in the background)."""
        lines = []
        for record in records:
            self.seq += 1
            lines.append(_dump({"seq": self.seq, "agent": record}) + b"\n")
        if not lines:
            return False
        data = b"".join(lines)
        fd = self._journal()
        _write_all(fd, data)
        if self.fsync_agents:
            os.fsync(fd)
        self.journal_lines += len(lines)
        if self._since is not None:
            self._since.append(data)
        return self.compaction_due(agent_count)

    def compaction_due(self, agent_count: int) -> bool:
        return self.journal_lines > max(COMPACT_MIN_LINES, 2 * agent_count)

    def compact(self, all_agents: list[dict[str, Any]]) -> None:
        """Snapshot every agent (durably), then start an empty journal."""
        self.begin_compaction()
        self.write_snapshot(self.seq, all_agents)
        self.end_compaction()

    # A compaction in three steps, so the middle one (serialising every agent and
    # writing the snapshot) can run in a worker thread while appends go on:
    # lines appended meanwhile are kept and become the new journal.

    @property
    def compacting(self) -> bool:
        return self._since is not None

    def begin_compaction(self) -> int:
        """Start keeping appended lines; the snapshot to write holds up to the returned seq."""
        self._since = []
        return self.seq

    def write_snapshot(self, seq: int, all_agents: Iterable[Any]) -> None:
        """Write the snapshot at ``seq`` (records or objects with ``to_json()``).
        Touches no state of this store but the snapshot file: thread-safe."""
        records = [a if isinstance(a, dict) else a.to_json() for a in all_agents]
        write_atomic(self.snapshot_path, _dump({"seq": seq, "agents": records}))

    def end_compaction(self, *, failed: bool = False) -> None:
        """Replace the journal with the lines appended since ``begin_compaction``
        (older ones are in the snapshot). A crash between the steps loses nothing:
        lines at or below the snapshot's seq are skipped on load."""
        since, self._since = self._since, None
        if failed or since is None:
            return
        self.close()
        data = b"".join(since)
        write_atomic(self.journal_path, data, durable=self.fsync_agents)
        self.journal_lines = data.count(b"\n")

    def _journal(self) -> int:
        if self._journal_fd is None:
            self._journal_fd = os.open(self.journal_path,
                                       os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return self._journal_fd

    def close(self) -> None:
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None

    # -- global record, job and notifications ---------------------------------------

    def save_global(self, value: dict[str, Any]) -> None:
        write_atomic(self.root / "global.json", _dump(value))

    def load_global(self) -> dict[str, Any]:
        value = self._read(self.root / "global.json")
        return value if isinstance(value, dict) else {}

    @staticmethod
    def _read(path: Path) -> Any:
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            # Written atomically, so this is outside damage; keep the daemon up.
            log.error("ignoring unreadable restart state file %s: %s", path, exc)
            return None
