"""Reaping the zombies that are reparented to the daemon and that nobody waits for.

The daemon is a child subreaper, so a session's ``setsid``'d descendants come
back to it and the supervisor reaps them. Processes that a restart job's
commands leave behind (a gateway that daemonises itself, say) come back too,
and without this module each would stay a zombie for the daemon's lifetime.

``waitpid(-1)`` would steal exit statuses from code that waits for its own
children (a session's shell, a restart step), and a stolen status reads as
exit 0. So whoever spawns a child it will wait for ``claim()``s the pid at
once, and the sweep reaps only an unclaimed zombie child that was already an
unclaimed zombie on the previous sweep, a whole interval earlier: a pid is
claimed microseconds after its spawn returns, so only orphans qualify.
"""

from __future__ import annotations

import os
from pathlib import Path

_claimed: set[int] = set()


def claim(pid: int) -> None:
    """``pid`` is our child and its spawner will wait for it: never reap it here."""
    _claimed.add(pid)


def release(pid: int) -> None:
    """The spawner has reaped ``pid`` (or given up on it)."""
    _claimed.discard(pid)


def _children(proc: Path = Path("/proc")) -> set[int]:
    """Our direct children, from ``/proc/self/task/*/children`` (or a full scan)."""
    pids: set[int] = set()
    try:
        for task in (proc / "self" / "task").iterdir():
            pids.update(int(p) for p in (task / "children").read_text().split())
        return pids
    except (OSError, ValueError):
        pass
    me = os.getpid()
    for entry in proc.iterdir():
        if entry.name.isdigit():
            stat = _stat(proc, int(entry.name))
            if stat is not None and stat[1] == me:
                pids.add(int(entry.name))
    return pids


def _stat(proc: Path, pid: int) -> tuple[str, int] | None:
    """``(state, ppid)`` of ``pid``, or None when it is gone."""
    try:
        fields = (proc / str(pid) / "stat").read_bytes().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


class OrphanReaper:
    """Call :meth:`sweep` every few seconds from one task."""

    def __init__(self, proc: Path = Path("/proc")):
        self._proc = proc
        self._suspects: set[int] = set()

    def unclaimed_zombies(self) -> set[int]:
        zombies = set()
        for pid in _children(self._proc) - _claimed:
            stat = _stat(self._proc, pid)
            if stat is not None and stat[0] == "Z":
                zombies.add(pid)
        return zombies

    def sweep(self) -> list[int]:
        """Reap orphans seen unclaimed on two sweeps in a row; return their pids."""
        zombies = self.unclaimed_zombies()
        reaped = []
        for pid in sorted(zombies & self._suspects):
            if pid in _claimed:
                continue
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped.append(pid)
            except ChildProcessError:
                pass
        self._suspects = zombies - set(reaped)
        return reaped
