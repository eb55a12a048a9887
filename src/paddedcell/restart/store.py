"""Atomic persistence of the restart coordinator under ``PADDEDCELL_HOME/restart/``.

Layout: ``global.json`` (the global record, the restart job and the queue of
unacknowledged notifications, so that a restart's outcome and the messages it
queues are written together), and one file per agent in ``agents/`` (named by a
hash of the agent id, so any id is a safe file name).

Why one file per agent and not one snapshot: a message-start changes one agent,
and rewriting 1,000 agents per message costs milliseconds of JSON alone, while
one small file costs a fraction of one. Every file is replaced whole with the
usual dance (write a temp file, fsync it, ``os.replace``, fsync the directory),
so a reader, or a daemon restarted after SIGKILL, sees the old or the new
version and never half of one.

Which writes are fsynced, and why: ``global.json`` always (it holds the
restart job's phase and the undelivered notifications, which must survive a
power loss). Agent files are replaced atomically but not fsynced: the rename
alone survives any crash of the daemon (the page cache is the kernel's), and
after a crash of the machine itself the gateway restarted too, so every turn
those files describe is gone; the coordinator sees the new boot id and resets
them. Two fsyncs per message cost 1–10 ms on a busy disk; the rename costs
about 0.1 ms, which is what keeps message-start inside its 2 ms budget.
``restart.fsync_agents = true`` fsyncs them as well, for those who prefer.

Files written in one coordinator step are not replaced together. The order
(global first, then agents) and the coordinator's resume pass make any mix
safe: a frozen agent with no pending restart is released on load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

log = logging.getLogger("paddedcell.restart")


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see old or new, never half.

    ``durable`` adds the two fsyncs (file, then directory) that make the new
    version survive a power loss, not only a crash of this process.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
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


def boot_id() -> str | None:
    """This boot of the machine (Linux); None where the kernel does not say."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class Store:
    """Reads and writes the coordinator's files; knows nothing of their meaning."""

    def __init__(self, home: Path, *, fsync_agents: bool = False):
        self.fsync_agents = fsync_agents
        self.root = Path(home) / "restart"
        self.agents_dir = self.root / "agents"
        self.agents_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    def _agent_path(self, agent_id: str) -> Path:
        digest = hashlib.sha256(agent_id.encode("utf-8")).hexdigest()[:32]
        return self.agents_dir / f"{digest}.json"

    # -- agents ----------------------------------------------------------------

    def save_agent(self, record: dict[str, Any]) -> None:
        write_atomic(self._agent_path(record["agentId"]), _dump(record),
                     durable=self.fsync_agents)

    def delete_agent(self, agent_id: str) -> None:
        try:
            os.unlink(self._agent_path(agent_id))
        except FileNotFoundError:
            pass

    def load_agents(self) -> list[dict[str, Any]]:
        records = []
        for path in sorted(self.agents_dir.glob("*.json")):
            value = self._read(path)
            if isinstance(value, dict) and "agentId" in value:
                records.append(value)
        return records

    # -- global record and job ---------------------------------------------------

    def save_global(self, value: dict[str, Any]) -> None:
        write_atomic(self.root / "global.json", _dump(value))

    def load_global(self) -> dict[str, Any]:
        value = self._read(self.root / "global.json")
        return value if isinstance(value, dict) else {}

    def save_many(self, agents: Iterable[dict[str, Any]]) -> None:
        for record in agents:
            self.save_agent(record)

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
