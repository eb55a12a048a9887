"""Is this process part of an agent session the daemon started? (docs/design.md §4.3)

Human-only commands (``pass_mgr set``, ``admin init``, ``admin recover``) must
refuse inside an agent session whatever the environment says: an agent can
unset ``AGENT_ID`` and every other variable in its own process, but it cannot
rewrite the environment its ancestors were started with, nor leave the
sandbox. So the answer comes from facts the agent's command does not control:

1. **Ancestry.** Every session leader is started by the daemon with a random
   ``PADDEDCELL_TREE`` marker (``procs.TREE_MARKER``). ``/proc/PID/environ``
   is the environment a process was *started* with; a descendant that unsets
   the variable and re-executes itself changes its own, not its parents'.
   We walk the ``ppid`` chain and look for the marker in each ancestor's
   start environment (our own included).
2. **A supervisor as an ancestor.** An orphan whose parents exited is
   reparented to the daemon, or to a foreground ``pcexec`` (both are child
   subreapers); a process whose chain passes through either is a session's,
   marker or not.
3. **The sandbox.** A sandboxed session runs in its own PID namespace whose
   init carries the marker too, and the sandbox mounts a ``tmpfs`` named
   ``paddedcell-sandbox`` (``SANDBOX_MOUNT_SOURCE``) that an unprivileged
   process inside cannot unmount; it shows in ``/proc/self/mountinfo``.

Deliberately not consulted: ``AGENT_ID``, ``PADDEDCELL_AGENT`` and friends.
Those remain the *informational* agent context (``AGENT_CONTEXT_VARIABLES``).
"""

from __future__ import annotations

import os

#: ``procs.TREE_MARKER`` (not imported: this module must stay import-light).
TREE_MARKER_PREFIX = b"PADDEDCELL_TREE="
#: Set in the environment of a daemon started on demand (``client.ensure_daemon``).
DAEMON_MARKER_PREFIX = b"PADDEDCELL_DAEMON="
#: The source name of the sandbox's tmpfs mounts, visible in mountinfo.
SANDBOX_MOUNT_SOURCE = "paddedcell-sandbox"
#: ``argv`` words that make a process the daemon (``paddedcell serve``).
_DAEMON_MODULES = (b"paddedcell.cli.main", b"paddedcell")
#: The environment variable that locates a session's channel (a locator, not a
#: credential); here, not in ``session.protocol``, so that ``in_session`` loads nothing more.
CHANNEL_VARIABLE = "PADDEDCELL_CHANNEL"


def _read(path: str) -> bytes | None:
    """The whole file, or None. ``os.read`` on a descriptor, not ``open``: no buffered
    file object for each of the few small /proc files every ``pass_mgr get`` reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _ppid(pid: int, proc: str) -> int | None:
    raw = _read(f"{proc}/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _has_tree_marker(pid: int, proc: str) -> bool:
    raw = _read(f"{proc}/{pid}/environ")
    if not raw:
        return False
    return any(entry.startswith((TREE_MARKER_PREFIX, DAEMON_MARKER_PREFIX))
               for entry in raw.split(b"\0"))


def is_daemon_cmdline(cmdline: bytes) -> bool:
    """``argv`` (NUL-separated) of ``paddedcell serve`` / ``python -m paddedcell.cli.main serve``."""
    words = [w for w in cmdline.split(b"\0") if w]
    if b"serve" not in words:
        return False
    at = words.index(b"serve")
    return any(os.path.basename(w) in _DAEMON_MODULES for w in words[:at])


def is_pcexec_cmdline(cmdline: bytes) -> bool:
    """``argv`` of ``pcexec`` (console script or ``python -m paddedcell.cli.pcexec``)."""
    words = [w for w in cmdline.split(b"\0") if w][:3]
    return any(os.path.basename(w) == b"pcexec" for w in words[:2]) or \
        words[1:3] == [b"-m", b"paddedcell.cli.pcexec"]


def session_ancestor(pid: int | None = None, proc: str = "/proc") -> int | None:
    """The first process from ``pid`` (default: us) upward that marks a session, or None.

    That is a process started with the tree marker, or a supervisor: the daemon, or a
    foreground ``pcexec``, which adopts its command's orphans as the daemon does.
    """
    pid = os.getpid() if pid is None else pid
    start, seen = pid, 0
    while pid and pid > 0 and seen < 4096:
        seen += 1
        if _has_tree_marker(pid, proc):
            return pid
        cmdline = _read(f"{proc}/{pid}/cmdline")
        if cmdline and (is_daemon_cmdline(cmdline)
                        or (pid != start and is_pcexec_cmdline(cmdline))):  # not pcexec itself
            return pid
        parent = _ppid(pid, proc)
        if parent is None or parent == pid:
            return None
        pid = parent
    return None


def in_sandbox(mountinfo: str = "/proc/self/mountinfo") -> bool:
    """A PaddedCell sandbox's tmpfs is mounted in our mount namespace."""
    raw = _read(mountinfo)
    if not raw:
        return False
    needle = f" - tmpfs {SANDBOX_MOUNT_SOURCE} ".encode()
    return needle in raw


def in_session() -> bool:
    """Inside an agent session: the channel variable, or ancestry / sandbox facts. The
    one decision that sends ``pass_mgr``, ``pcexec`` and ``paddedcell process`` over the
    channel (``session.client`` re-exports it); here so that a direct ``pass_mgr get``
    makes it without importing the channel's client."""
    return bool(os.environ.get(CHANNEL_VARIABLE)) or inside_agent_session()


def inside_agent_session(proc: str = "/proc") -> bool:
    """True when this process descends from a daemon-started agent session.

    Environment variables are not consulted (see the module docstring).
    """
    return in_sandbox(f"{proc}/self/mountinfo") or session_ancestor(None, proc) is not None
