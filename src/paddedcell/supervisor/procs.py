"""Which processes belong to a session, and how to end all of them.

Options weighed. A process group (``killpg``) is cheap and race-free but a
child that calls ``setsid`` or double-forks leaves it. psutil-style tree walks
miss a process whose parent already exited. cgroup v2 ``cgroup.kill`` is exact
but needs a writable delegated cgroup, which an unprivileged daemon rarely has
(this machine runs cgroup v1). So we combine three cheap facts:

1. every session leader starts its own session and process group;
2. the supervisor is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so an
   orphan from a session is reparented to us, not to init, and we can reap it;
3. each session's environment carries a random ``PADDEDCELL_TREE`` marker,
   inherited by every descendant, read from ``/proc/PID/environ`` for orphans.

A session's members are its leader, every process seen below a member (by
``ppid``), and every child of ours carrying its marker. Members are remembered
by ``(pid, starttime)``, so a recycled pid is never signalled: we only signal a
process the session created. When a delegated cgroup v2 exists we also put the
session in its own cgroup and kill with ``cgroup.kill``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
TREE_MARKER = "PADDEDCELL_TREE"


def become_subreaper(enable: bool = True) -> bool:
    """Make orphans of our descendants reparent to us (Linux ≥ 3.4)."""
    try:
        return _libc().prctl(PR_SET_CHILD_SUBREAPER, int(enable), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


#: The mmap threshold a supervisor's process pins: above every block a masking pump allocates
#: per batch (the redactor's scan buffer, its line-break view and its output, each about
#: ``session.REDACTED_BATCH`` = 512 KiB). At 128 KiB each of them was a fresh mapping,
#: faulted in page by page and unmapped again: 128 MiB through a pipe with 10 secrets took
#: 131,000 page faults, 0.72 CPU s and 0.065 GB/s, against 5,000, 0.27 s and 0.21 GB/s at
#: 1 MiB (session 13, in process, same load).
PINNED_MMAP_THRESHOLD = 1024 * 1024
#: ... and the trim threshold: free bytes at the top of a heap that ``free`` leaves there.
#: A pump's worker frees a batch's blocks (a few 512 KiB ones) while the loop frees its
#: older outputs; at 2 MiB the heap top crossed the threshold every few batches, was
#: given back and faulted in again: 128 MiB through a pipe with 10 secrets, 7,500-11,800
#: page faults a run at 2 MiB against 2,800-4,000 at 4 MiB (session 15, in process,
#: alternated rounds; unpinned, as the in-process benchmark ran before, 12,500-16,000).
#: What stays above the threshold is trimmed at the supervisor's tick (:func:`trim_heap`).
PINNED_TRIM_THRESHOLD = 4 * 1024 * 1024
#: ... and the number of malloc arenas: glibc gives each new thread an arena of its own,
#: up to 8 a core, each keeping its freed batches; with a reader thread per masking pipe
#: (``readahead.read_pipe``) 64 masking floods took +118 MiB, +68 with two arenas
#: (session 17, MALLOC_ARENA_MAX=2), as many as before the reader threads.
PINNED_ARENA_MAX = 4


def pin_malloc_thresholds(mmap_threshold: int = PINNED_MMAP_THRESHOLD,
                          trim_threshold: int = PINNED_TRIM_THRESHOLD,
                          arena_max: int = PINNED_ARENA_MAX) -> bool:
    """Keep glibc from hoarding freed output buffers (a long-lived daemon's RSS), and
    from giving back and faulting in again a pump's per-batch blocks; threads share
    ``arena_max`` arenas (it holds for threads made after the call).

    glibc raises its mmap threshold every time a large mmapped block is freed,
    after which larger and larger blocks come from the heap and fragment it; RSS
    then stays at the high-water mark of a flood. Pinning the threshold (which also
    disables the dynamic adjustment) makes every block above it its own mapping,
    returned to the kernel when freed; the blocks below it (a pump's batches among
    them) are reused from the heap, which ``trim_heap`` gives back (the supervisor
    trims at a tick when 4 MiB of output came or went with a session). Every
    :class:`.Supervisor` pins them (the daemon, a foreground ``pcexec``); the same
    values every time.
    """
    try:
        libc = _libc()
        ok = libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1
        ok = libc.mallopt(M_ARENA_MAX, arena_max) == 1 and ok
        return libc.mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1 and ok
    except (OSError, AttributeError):
        return False


def trim_heap() -> None:
    """Return freed heap pages to the kernel (``malloc_trim``).

    Read chunks come and go at gigabytes per second; glibc keeps the freed
    pages inside its arenas (a worker thread's arena can hold tens of MiB after
    a flood). Trimming once per supervisor tick costs about a millisecond.
    """
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        # dlopen(NULL): libc is already loaded; find_library would run `ldconfig -p`
        # (a fork and exec at every pcexec start).
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


@dataclass(frozen=True, slots=True)
class ProcInfo:
    pid: int
    ppid: int
    pgrp: int
    sid: int
    state: str
    starttime: int


def read_stat(pid: int, proc: str = "/proc") -> ProcInfo | None:
    # os.open/os.read, not open(): 3 system calls instead of 9 and no file object, for
    # every process at every supervisor tick (the line is far shorter than 4 KiB).
    try:
        fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return ProcInfo(pid, int(fields[1]), int(fields[2]), int(fields[3]),
                        fields[0].decode(), int(fields[19]))
    except (IndexError, ValueError):
        return None


def scan(proc: str = "/proc") -> dict[int, ProcInfo]:
    """A snapshot of every visible process."""
    table: dict[int, ProcInfo] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            info = read_stat(int(name), proc)
            if info is not None:
                table[info.pid] = info
    return table


def has_marker(pid: int, marker: bytes, proc: str = "/proc") -> bool:
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def is_daemon(pid: int, proc: str = "/proc") -> bool:
    """A PaddedCell daemon started on demand (``PADDEDCELL_DAEMON`` in its start
    environment): started from inside a session, it serves every agent and must
    not be ended with that session's tree."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return b"\0PADDEDCELL_DAEMON=" in raw or raw.startswith(b"PADDEDCELL_DAEMON=")


class ProcessTree:
    """The processes one session created, tracked by ``(pid, starttime)``."""

    def __init__(self, leader: int, token: str, starttime: int | None = None):
        self.leader = leader
        self.marker = f"{TREE_MARKER}={token}".encode()
        self.members: dict[int, int] = {}
        if starttime is None:
            info = read_stat(leader)
            starttime = info.starttime if info else -1
        self.members[leader] = starttime
        #: The leader has been reaped; its pid may be reused from now on.
        self.leader_reaped = False

    def refresh(self, table: dict[int, ProcInfo], me: int) -> None:
        """Add what appeared below known members or was reparented to us."""
        alive = {pid: st for pid, st in self.members.items()
                 if pid in table and table[pid].starttime == st}
        if not self.leader_reaped and self.leader not in alive and self.leader in self.members:
            alive[self.leader] = self.members[self.leader]
        children: dict[int, list[ProcInfo]] = {}
        for info in table.values():
            children.setdefault(info.ppid, []).append(info)
        stack = list(alive)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child.pid not in alive and not is_daemon(child.pid):
                    alive[child.pid] = child.starttime
                    stack.append(child.pid)
        for child in children.get(me, ()):
            if child.pid not in alive and child.state != "Z" and has_marker(child.pid, self.marker):
                alive[child.pid] = child.starttime
                stack.append(child.pid)
        while stack:  # descendants of newly found orphans
            for child in children.get(stack.pop(), ()):
                if child.pid not in alive and not is_daemon(child.pid):
                    alive[child.pid] = child.starttime
                    stack.append(child.pid)
        self.members = alive

    def adopt_children(self, pid: int | None = None, proc: str = "/proc") -> int:
        """Record ``pid``'s (default: the leader's) current children as members now.

        The sandbox's init is a child of the leader that carries no marker (it is a
        fork, not an exec); the leader exits with the command, and init, orphaned to
        us with whatever the command left running, must still be the session's.
        """
        pid = self.leader if pid is None else pid
        try:
            with open(f"{proc}/{pid}/task/{pid}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except (OSError, ValueError):
            kids = [info.pid for info in scan(proc).values() if info.ppid == pid]
        added = 0
        for kid in kids:
            info = read_stat(kid, proc)
            if info is not None and info.ppid == pid:
                self.members[kid] = info.starttime
                added += 1
        return added

    def owns(self, info: ProcInfo) -> bool:
        return self.members.get(info.pid) == info.starttime

    def live(self, table: dict[int, ProcInfo]) -> list[int]:
        """Members still running (zombies excluded), leader included while unreaped."""
        return [pid for pid, st in self.members.items()
                if pid in table and table[pid].starttime == st and table[pid].state != "Z"]

    def signal(self, sig: int, table: dict[int, ProcInfo] | None = None) -> int:
        """Send ``sig`` to the group and every live member; return how many were hit."""
        table = scan() if table is None else table
        self.refresh(table, os.getpid())
        hit = 0
        # The group id is safe to use while the unreaped leader or a member holds it.
        group_alive = (not self.leader_reaped) or any(
            table[pid].pgrp == self.leader for pid in self.live(table))
        if group_alive:
            try:
                os.killpg(self.leader, sig)
                hit += 1
            except OSError:
                pass
        for pid in self.live(table):
            if pid == self.leader and self.leader_reaped:
                continue
            try:
                os.kill(pid, sig)
                hit += 1
            except OSError:
                pass
        return hit


def reap_orphans(trees: list[ProcessTree], table: dict[int, ProcInfo], me: int) -> int:
    """Reap zombie children of ours that a session created; leave foreign ones alone.

    Other code in the daemon may wait for its own children: reaping with
    ``waitpid(-1)`` would steal their exit status, so we only reap pids we know.
    """
    reaped = 0
    for info in table.values():
        if info.ppid != me or info.state != "Z":
            continue
        if any(tree.owns(info) and info.pid != tree.leader for tree in trees):
            try:
                if os.waitpid(info.pid, os.WNOHANG)[0]:
                    reaped += 1
            except ChildProcessError:
                pass
    return reaped


# --- cgroup v2 ---------------------------------------------------------------


def delegated_cgroup(proc_self_cgroup: str = "/proc/self/cgroup",
                     cgroup_root: str = "/sys/fs/cgroup") -> Path | None:
    """Our cgroup v2 directory when it is writable (delegated), else None.

    cgroup v1 or hybrid hierarchies (several lines in /proc/self/cgroup), the
    root cgroup, or no write access all mean: fall back to process tracking.
    """
    try:
        lines = Path(proc_self_cgroup).read_text().splitlines()
    except OSError:
        return None
    if len(lines) != 1 or not lines[0].startswith("0::"):
        return None
    relative = lines[0][3:].strip().lstrip("/")
    root = Path(cgroup_root)
    if not relative or not (root / "cgroup.controllers").exists():
        return None
    path = root / relative
    if not (os.access(path, os.W_OK) and os.access(path / "cgroup.procs", os.W_OK)):
        return None
    return path


#: The cgroup v2 controllers a session's limits use.
LIMIT_CONTROLLERS = ("pids", "memory", "cpu")
#: The leaf the supervisor moves itself into, so its cgroup may hand controllers down
#: (cgroup v2: a cgroup with processes of its own enables none for its children).
SUPERVISOR_LEAF = "paddedcell-supervisor"
CPU_PERIOD_US = 100_000


def enable_limit_controllers(parent: Path | None) -> tuple[str, ...]:
    """Which of LIMIT_CONTROLLERS session cgroups under ``parent`` get, turning them on.

    Where ``parent`` offers one that its children do not have yet, this process moves
    into ``parent/SUPERVISOR_LEAF`` and enables it in ``parent``'s ``subtree_control``;
    that fails (and the answer is what was already on) where other processes share
    ``parent`` — run the daemon in a scope of its own (``systemd-run --scope -p
    Delegate=yes``)."""
    if parent is None:
        return ()
    try:
        offered = (parent / "cgroup.controllers").read_text().split()
        enabled = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return ()
    wanted = [c for c in LIMIT_CONTROLLERS if c in offered]
    missing = [c for c in wanted if c not in enabled]
    if missing:
        try:
            leaf = parent / SUPERVISOR_LEAF
            leaf.mkdir(mode=0o755, exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            (parent / "cgroup.subtree_control").write_text(
                " ".join(f"+{c}" for c in missing))
        except OSError:
            return tuple(c for c in wanted if c in enabled)
    return tuple(wanted)


def limit_files(controllers: tuple[str, ...], *, processes: int, memory_bytes: int,
                cpu_percent: int) -> dict[str, str]:
    """The cgroup files (name → text) that put the limit settings on one session (pure;
    0 = no limit, as for the rlimits)."""
    files = {}
    if "pids" in controllers and processes > 0:
        files["pids.max"] = str(processes)
    if "memory" in controllers and memory_bytes > 0:
        files["memory.max"] = str(memory_bytes)
        files["memory.swap.max"] = "0"
    if "cpu" in controllers and cpu_percent > 0:
        files["cpu.max"] = f"{CPU_PERIOD_US * cpu_percent // 100} {CPU_PERIOD_US}"
    return files


class CgroupScope:
    """One session's own cgroup; ``kill()`` ends every process in it at once."""

    def __init__(self, parent: Path, name: str):
        self.path = parent / name
        self.path.mkdir(mode=0o755)
        if not (self.path / "cgroup.kill").exists():  # kernel < 5.14
            self.path.rmdir()
            raise OSError(errno.ENOTSUP, "cgroup.kill is not supported by this kernel")
        self.procs = str(self.path / "cgroup.procs")

    def limit(self, files: dict[str, str]) -> list[str]:
        """Write ``limit_files``; the names that could not be written (logged by the caller)."""
        failed = []
        for name, text in files.items():
            try:
                with open(self.path / name, "w") as f:
                    f.write(text)
            except OSError:
                failed.append(name)
        return failed

    def enter(self) -> None:
        """Move the calling process in (run in the child before exec)."""
        with open(self.procs, "w") as f:
            f.write("0")

    def kill(self) -> None:
        try:
            with open(self.path / "cgroup.kill", "w") as f:
                f.write("1")
        except OSError:
            pass

    def remove(self) -> bool:
        try:
            self.path.rmdir()
            return True
        except OSError:
            return False


def open_cgroup_scope(parent: Path | None, name: str) -> CgroupScope | None:
    if parent is None:
        return None
    try:
        return CgroupScope(parent, name)
    except OSError:
        return None


def exit_status(status: int) -> tuple[int | None, int | None]:
    """``(exit_code, signal_number)`` from a ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


# --- which session does a peer belong to -------------------------------------


def ancestry(pid: int, me: int, proc: str = "/proc",
             max_depth: int = 4096) -> tuple[list[ProcInfo], bool]:
    """``pid`` and its ancestors up to (not including) ``me`` or init; and whether the
    chain reached ``me``. One walk, shared by every tree it is checked against."""
    chain: list[ProcInfo] = []
    for _ in range(max_depth):
        if pid <= 0 or pid == me:
            return chain, pid == me
        info = read_stat(pid, proc)
        if info is None:
            return chain, False
        chain.append(info)
        if info.ppid == pid:
            return chain, False
        pid = info.ppid
    return chain, False


def chain_in_tree(tree: ProcessTree, chain: list[ProcInfo], reached_me: bool,
                  proc: str = "/proc") -> bool:
    """:func:`in_tree` on an :func:`ancestry` already walked."""
    for info in chain:
        if tree.members.get(info.pid) == info.starttime or (
                info.pid == tree.leader and not tree.leader_reaped):
            return True
    return bool(reached_me and chain and has_marker(chain[-1].pid, tree.marker, proc))


def in_tree(tree: ProcessTree, pid: int, me: int | None = None, proc: str = "/proc",
            max_depth: int = 4096) -> bool:
    """Does ``pid`` belong to ``tree``: itself or an ancestor a known member?

    Walks the ``ppid`` chain from ``pid`` (the peer of a channel connection,
    from ``SO_PEERCRED``): a process the tree does not know yet (a
    ``pass_mgr`` started a millisecond ago) is found through its parent. A
    chain that reaches ``me`` (the supervisor, a child subreaper) through a
    process the tree does not know counts only when that orphan carries the
    tree's marker. The leader is matched by pid while unreaped, members by
    ``(pid, starttime)``: a recycled pid is not a member.
    """
    me = os.getpid() if me is None else me
    child = None
    for _ in range(max_depth):
        if pid <= 0:
            return False
        info = read_stat(pid, proc)
        if info is None:
            return False
        if tree.members.get(pid) == info.starttime or (
                pid == tree.leader and not tree.leader_reaped):
            return True
        if pid == me:
            return child is not None and has_marker(child, tree.marker, proc)
        if info.ppid == pid:
            return False
        child, pid = pid, info.ppid
    return False
