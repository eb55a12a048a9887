"""The namespace sandbox every agent command runs in where the host allows it (docs/design.md §1).

What the command sees: the host as it is (same paths, read-write, network
on), except

- ``PADDEDCELL_HOME`` (host key, admin key, registry, main socket, audit and
  security logs) and every registered agent store directory are empty
  ``tmpfs`` mounts named ``paddedcell-sandbox`` (``agent_session`` looks for
  that name);
- its own PID namespace with its own ``/proc``: the daemon and every other
  session's processes are not there, so ``/proc/PID/environ``, ``ptrace``
  and ``ps`` reach only the session's own processes;
- the session's channel socket bound at its usual path inside the hidden
  home, so ``pass_mgr`` still reaches its supervisor.

Opt-in, stricter: ``supervisor.sandbox_network = false`` (own network
namespace: no network at all) and ``supervisor.sandbox_read_only = true``
(every mount read-only but the work directory and ``/tmp``).

How, without bubblewrap or any helper binary (measured: exec'ing a helper
such as ``unshare(1)`` costs ~3 ms, a Python helper ~17 ms): in the forked
child, before ``exec``, ``unshare(2)`` a user, mount and PID namespace
(unprivileged user namespaces), mapping our uid to root *inside* only long
enough to mount. A PID namespace's first process is its init, which the
kernel protects from every signal it has no handler for, so the command
must not be it. The child therefore forks once, and init spawns the command:

- the **leader** (the pid the supervisor knows, outside the namespace) waits
  for the command's wait status from init and dies the same way (same exit
  code, or re-raises the same signal): exit statuses stay exact;
- **init** (pid 1 inside) mounts ``/proc``, enters one more user namespace
  that maps root back to our uid (so the command holds no capability after
  ``exec``: it cannot unmount what hides the keys, and mounts it inherits
  into any namespace it makes are locked together by the kernel), ``chdir``s
  to the work directory *by path*, closes every fd of the supervisor's and
  ``posix_spawn``s the command (vfork-like: no third copy of the supervisor;
  default signal dispositions). It reports the command's status the moment
  it exits and reaps whatever the command left running until nothing is (a
  daemonised server outlives its shell, as outside; the session's kill scope
  still tracks it by pid).

Leader and init are copies of the supervisor's memory: they are made not
dumpable, so the command (same uid) cannot read them through ``/proc``. All
three are in the leader's session and process group: ``killpg``, the PTY's
``C-c`` and the kill scope reach the command as before; leader and init
ignore the job-control and termination signals.

Cost: Popen can no longer ``vfork`` (this runs as its pre-exec step), and the
leader forks init: two copies of the supervisor's page tables per command
(benchmarks/supervisor.py, "sandbox start-up").
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import struct
from dataclasses import dataclass, field

log = logging.getLogger("paddedcell.supervisor")

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_DUMPABLE = 4
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 (generic syscall table)

#: The tmpfs source name; ``agent_session.SANDBOX_MOUNT_SOURCE``.
MOUNT_SOURCE = "paddedcell-sandbox"
#: Signals the leader and init ignore (they reach the command through the group).
_SHIELDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP,
             signal.SIGTTIN, signal.SIGTTOU, signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE,
             signal.SIGALRM, signal.SIGCONT, signal.SIGWINCH)


#: Reset to the default in the command (``posix_spawn`` ``setsigdef``).
_DEFAULTED = tuple(sorted(set(_SHIELDED) | {getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ")
                                            if hasattr(signal, n)}))


class SandboxSetupError(Exception):
    pass


@dataclass(frozen=True)
class Plan:
    """What one command's sandbox hides and binds (computed in the supervisor)."""

    home: str
    hidden: tuple[str, ...] = ()
    #: (path, O_PATH fd opened before hiding) of files bound back in (the channel).
    channel: str | None = None
    network: bool = True
    read_only: bool = False
    workdir: str | None = None
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    #: The command: init starts it with ``posix_spawn`` (no third fork of the supervisor).
    argv: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)


def _libc():
    from .procs import _libc as libc

    return libc()


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SandboxSetupError(f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    libc = _libc()
    _check(libc.mount(source.encode() if source else None, target.encode(),
                      fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                      data.encode() if data else None), f"mount {target}")


def _map_ids(inside_uid: int, outside_uid: int, inside_gid: int, outside_gid: int) -> None:
    try:
        _write("/proc/self/setgroups", "deny")
    except FileNotFoundError:
        pass
    _write("/proc/self/uid_map", f"{inside_uid} {outside_uid} 1\n")
    _write("/proc/self/gid_map", f"{inside_gid} {outside_gid} 1\n")


def _hide(path: str) -> None:
    if os.path.isdir(path):
        _mount(MOUNT_SOURCE, path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k")


def _setattr(path: str, set_flags: int, clear_flags: int) -> None:
    attr = struct.pack("QQQQ", set_flags, clear_flags, 0, 0)
    buf = ctypes.create_string_buffer(attr)
    _check(_libc().syscall(SYS_MOUNT_SETATTR, -100, path.encode(), AT_RECURSIVE, buf,
                           len(attr)), f"mount_setattr {path}")


def _read_only_root(plan: Plan) -> None:
    """Every mount read-only, then the work directory and /tmp bound onto themselves
    read-write again (the hidden home's tmpfs comes along in those binds)."""
    _setattr("/", MOUNT_ATTR_RDONLY, 0)
    writable = []
    for path in (plan.workdir, "/tmp"):
        if path and os.path.isdir(path) and not any(
                path == w or path.startswith(w.rstrip("/") + "/") for w in writable):
            writable.append(path)
    for path in writable:
        _mount(path, path, None, MS_BIND | MS_REC)
        _setattr(path, 0, MOUNT_ATTR_RDONLY)


def _setup_mounts(plan: Plan) -> None:
    channel_fd = None
    if plan.channel:
        channel_fd = os.open(plan.channel, os.O_PATH | os.O_CLOEXEC)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path in plan.hidden:
        _hide(path)
    _hide(plan.home)
    if channel_fd is not None:
        # Back in at its usual path, inside the now empty home.
        os.makedirs(os.path.dirname(plan.channel), mode=0o700, exist_ok=True)
        os.close(os.open(plan.channel, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        _mount(f"/proc/self/fd/{channel_fd}", plan.channel, None, MS_BIND)
        os.close(channel_fd)
    if plan.read_only:
        _read_only_root(plan)


def _undumpable() -> None:
    """Leader and init are copies of the supervisor's memory: not dumpable, so no
    process of the command (same uid) may read their ``/proc/PID/mem``, maps or environ.
    Set only after the process's last write to its own ``/proc/self`` (see ``enter``)."""
    _check(_libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def _close_all_but(keep: int) -> None:
    """Close every fd but ``keep`` (two ``close_range`` calls)."""
    os.closerange(0, keep)
    os.closerange(keep + 1, 1 << 20)


def _fork() -> int:
    """``fork(2)`` straight from libc: this single-threaded pre-exec child needs none of
    Python's at-fork work (thread state, locks, reseeding), which costs milliseconds."""
    pid = _libc().fork()
    if pid < 0:
        raise SandboxSetupError(f"fork: {os.strerror(ctypes.get_errno())}")
    return pid


def _die_like(status: int) -> None:
    """Exit the way a waitpid ``status`` says the command did."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _shield() -> None:
    for sig in _SHIELDED:
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass


def _fail(message: str) -> None:
    try:
        os.write(2, f"paddedcell: sandbox: {message}\n".encode())
    except OSError:
        pass
    os._exit(126)


def _init(command_pid: int, report: int) -> None:
    """PID 1 inside: report the command's status at once, then reap whatever it left
    running (a daemonised server outlives its shell, as outside) until none is left."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == command_pid:
            try:
                os.write(report, struct.pack("i", status))
                os.close(report)
            except OSError:
                pass


def enter(plan: Plan) -> None:
    """Run in the forked child (after setsid, the controlling TTY and rlimits), last.

    Returns only in the command's process; the leader and init never return.
    """
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID
    if not plan.network:
        flags |= CLONE_NEWNET
    try:
        libc = _libc()
        _check(libc.unshare(flags), "unshare")
        _map_ids(0, plan.uid, 0, plan.gid)
        _setup_mounts(plan)
        report_r, report_w = os.pipe()
    except Exception as exc:  # noqa: BLE001 - nothing may return to exec half set up
        _fail(str(exc))
    _shield()  # leader and init; the command gets the defaults (posix_spawn setsigdef)
    init_pid = _fork()
    if init_pid:
        # The leader: wait for the command's status (init reports it), die like it.
        _undumpable()
        _close_all_but(report_r)
        status = None
        try:
            raw = b""
            while len(raw) < 4:
                chunk = os.read(report_r, 4 - len(raw))
                if not chunk:
                    break
                raw += chunk
            if len(raw) == 4:
                status = struct.unpack("i", raw)[0]
        except OSError:
            pass
        _die_like(status if status is not None else 1 << 8)
    # init (pid 1 in the new namespace)
    try:
        os.close(report_r)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        # No capability from here on: one more user namespace mapping root back to us.
        _check(_libc().unshare(CLONE_NEWUSER), "unshare (drop privileges)")
        # Still dumpable here: a non-dumpable process's /proc/self files belong to root,
        # so an ordinary user could not write its own id maps (issue 17). The command
        # does not exist yet, so nothing of the session can read init in between.
        _map_ids(plan.uid, 0, plan.gid, 0)
        _undumpable()
        try:
            # By path, after the mounts: an inherited working directory could lead into
            # a hidden one (and /proc/1/cwd with it).
            os.chdir(plan.workdir or "/")
        except OSError:
            raise SandboxSetupError(f"the work directory {plan.workdir} is hidden by the "
                                    "sandbox (inside PADDEDCELL_HOME or an agent store); "
                                    "run the command somewhere else") from None
        os.closerange(3, report_w)  # nothing of the supervisor's reaches the command
        os.closerange(report_w + 1, 1 << 20)
        spawn = os.posix_spawn if os.path.isabs(plan.argv[0]) else os.posix_spawnp
        command_pid = spawn(plan.argv[0], list(plan.argv), plan.env,
                            setsigdef=_DEFAULTED, setsigmask=())
    except Exception as exc:  # noqa: BLE001
        _fail(str(exc))
    _close_all_but(report_w)
    _init(command_pid, report_w)


def hidden_directories(home: str) -> tuple[str, ...]:
    """Every registered agent store directory (``vault/stores/*`` under the home holds
    one path each; read directly: importing the vault costs ~60 ms)."""
    registry = os.path.join(home, "vault", "stores")
    try:
        names = sorted(os.listdir(registry))
    except OSError:
        return ()
    found = []
    for name in names:
        if name.startswith("."):
            continue
        try:
            with open(os.path.join(registry, name), "rb") as f:
                path = f.read(4096).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if path.startswith("/") and "\0" not in path:
            found.append(os.path.normpath(path))
    return tuple(found)


_WARNED = False


def say_unsandboxed(why: str) -> None:
    """The one start-up line when the host has no namespaces for us."""
    global _WARNED
    if _WARNED:
        return
    _WARNED = True
    log.warning("sandbox: unavailable on this host (%s); agent commands run unsandboxed, so a "
                "command that goes around PaddedCell can read PADDEDCELL_HOME (the host key) "
                "and see other sessions' processes. Enable unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces) or set "
                "supervisor.sandbox = \"none\" to accept this.", why)


_AVAILABLE: tuple[bool, str] | None = None


def available() -> tuple[bool, str]:
    """``(True, "")`` when this host lets us build the sandbox, else ``(False, why)``.

    Probed once per process by building a real sandbox with :func:`enter` itself
    around ``true``: a probe that only imitates ``enter`` passed as root while every
    command failed for ordinary users (issue 17), so "auto" never fell back.
    """
    global _AVAILABLE
    if _AVAILABLE is not None:
        return _AVAILABLE
    try:
        _libc()  # loaded here: the pre-exec child must not search for libc
    except OSError as exc:
        _AVAILABLE = (False, f"no libc: {exc}")
        return _AVAILABLE
    true = next((p for p in ("/bin/true", "/usr/bin/true") if os.access(p, os.X_OK)), None)
    if true is None:
        _AVAILABLE = (False, "no /bin/true to probe the sandbox with")
        return _AVAILABLE
    r, w = os.pipe()
    pid = _fork()
    if pid == 0:  # pragma: no cover - runs in the probe child
        try:
            os.close(r)
            os.dup2(w, 2)  # _fail's one line is the reason
            os.close(w)
            enter(Plan(home="/nonexistent/paddedcell-probe", workdir="/", argv=(true,)))
        finally:
            os._exit(126)
    os.close(w)
    why = b""
    while True:
        chunk = os.read(r, 256)
        if not chunk:
            break
        why += chunk[: max(0, 512 - len(why))]
    os.close(r)
    _, status = os.waitpid(pid, 0)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    reason = why.decode(errors="replace").strip().removeprefix("paddedcell: sandbox: ")
    _AVAILABLE = (ok, "" if ok else (reason or f"namespace set-up failed (status {status})"))
    return _AVAILABLE

