"""The namespace sandbox every agent command runs in where the host allows it (docs/design.md §1).

Deny by default: the command's root is an empty ``tmpfs`` (named
``paddedcell-sandbox``, which ``agent_session`` looks for) into which the plan
binds only what it was given — the system read-only, the agent's workspace
read-write (its ``.paddedcell`` covered), a per-agent home, private ``/tmp``,
``/var/tmp``, ``/dev/shm`` and ``/run/user/UID``, PaddedCell's own installation
read-only, the session's channel socket — then ``pivot_root``s into it. What
nobody gave is not there: the human's home, other agents' workspaces,
``PADDEDCELL_HOME``, a second mount of the same filesystem, sockets under ``/run``
and ``/tmp``. ``supervisor/sandbox_plan.py`` decides what a plan holds; this module
builds it in the forked child, before ``exec``, with no helper binary (exec'ing
one such as ``unshare(1)`` costs ~3 ms, a Python helper ~17 ms).

Namespaces: mount, PID and (unless ``supervisor.sandbox_network = "host"``)
network. An ordinary user also gets a user namespace that maps its uid to root
inside only long enough to mount; a root daemon needs none and instead switches
the command to the agent's own unprivileged uid (``Plan.switch_user``), so a
session is never host root (``/proc/sys`` stays read-only for it).

A PID namespace's first process is its init, which the kernel protects from
every signal it has no handler for, so the command must not be it. The child
forks once, and init spawns the command:

- the **leader** (the pid the supervisor knows, outside the namespace) waits
  for the command's wait status from init and dies the same way (same exit
  code, or re-raises the same signal): exit statuses stay exact;
- **init** (pid 1 inside) builds the root (binds, ``/proc`` of its PID
  namespace, a fresh ``devpts``), brings loopback up and, in proxy mode,
  listens on ``127.0.0.1:PROXY_PORT`` and hands that socket to the supervisor
  over ``Plan.proxy_fd`` (a socket keeps its namespace: the supervisor accepts on
  it from outside). Then it gives up every privilege — one more user namespace
  mapping root back to the caller's uid, or ``setresuid`` to the agent's uid — sets
  ``no_new_privs``, applies ``RLIMIT_NPROC`` (counted per user namespace, so per
  session, or per agent uid), ``chdir``s *by path*, closes every fd of the
  supervisor's and ``posix_spawn``s the command. It reports the command's status
  the moment it exits and reaps whatever the command left running until nothing is.

Leader and init are copies of the supervisor's memory: they are not dumpable, so
the command (same uid) cannot read them through ``/proc``. Init turns dumpable on
only while it writes its own id maps (a non-dumpable process's ``/proc/self`` files
belong to root, so an ordinary user could not write them), before the command
exists. All three are in the leader's session and process group: ``killpg``, the
PTY's ``C-c`` and the kill scope reach the command; leader and init ignore the
job-control and termination signals.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import platform
import resource
import signal
import socket
import stat
import struct
import termios
import threading
from dataclasses import dataclass, field, replace

log = logging.getLogger("paddedcell.supervisor")

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MNT_DETACH = 2
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 (generic syscall table)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), 155)
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40

#: The tmpfs source name; ``agent_session.SANDBOX_MOUNT_SOURCE``.
MOUNT_SOURCE = "paddedcell-sandbox"
#: Where the session proxy listens inside the session's own network namespace.
PROXY_PORT = 3128
#: Where init builds the new root in its private mount namespace (every bind
#: source is opened first, so covering this path hides nothing the plan needs).
_SCRATCH = "/tmp"
#: Signals the leader and init ignore (they reach the command through the group).
_SHIELDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP,
             signal.SIGTTIN, signal.SIGTTOU, signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE,
             signal.SIGALRM, signal.SIGCONT, signal.SIGWINCH)


#: Reset to the default in the command (``posix_spawn`` ``setsigdef``).
_DEFAULTED = tuple(sorted(set(_SHIELDED) | {getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ")
                                            if hasattr(signal, n)}))


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


class SandboxSetupError(Exception):
    pass


@dataclass(frozen=True)
class Mount:
    """One entry of the new root, at ``target`` (the same path as on the host).

    ``kind``: ``ro`` / ``rw`` bind ``source`` (a directory or a file); ``dev`` binds a
    device node; ``tmpfs`` mounts an empty one (``source``: its mount options);
    ``symlink`` makes a link whose text is ``source``; ``devpts`` a fresh instance.
    """

    target: str
    kind: str
    source: str = ""


@dataclass(frozen=True)
class Plan:
    """Everything one command's sandbox holds (computed in the supervisor)."""

    mounts: tuple[Mount, ...] = ()
    workdir: str = "/"
    #: ``"proxy"`` (own network namespace + the listener handed back), ``"none"``
    #: (own network namespace, loopback only), ``"host"`` (the host's network).
    network: str = "proxy"
    #: The child's end of a socketpair: init sends the proxy listener over it.
    proxy_fd: int | None = None
    #: Outside ids of the command. With ``switch_user`` (a root daemon) init switches
    #: to them; otherwise a user namespace maps the caller's own ids.
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    switch_user: bool = False
    #: RLIMIT_NPROC for the command (set after the namespaces; 0 = leave as is).
    max_processes: int = 0
    #: The command: init starts it with ``posix_spawn`` (no third fork of the supervisor).
    argv: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    #: The entries every session of this supervisor shares (the system, ``/dev``, the
    #: installation): a zygote spare builds them before its session arrives.
    shared: tuple[Mount, ...] = ()


def with_console(plan: Plan, slave: str) -> Plan:
    """``plan`` with the session's own PTY slave (``slave``, a host ``/dev/pts`` path) at
    ``/dev/console``: the command's terminal comes from the host's devpts, the sandbox
    shows a fresh one, so without it ``ttyname`` (``tty``, ``ssh -t``) finds no name.
    Only that one node: the host's other PTYs stay out of sight."""
    entries = [m for m in plan.mounts if m.target != "/dev/console"]
    entries.append(Mount("/dev/console", "dev", slave))
    entries.sort(key=lambda m: 0 if m.target == "/" else m.target.rstrip("/").count("/"))
    return replace(plan, mounts=tuple(entries))


def base_mounts(runtime_uid: int, tmp_options: str) -> tuple[Mount, ...]:
    """What every sandbox holds (the plan builder adds the session's own): the system
    read-only (merged-/usr links as links), a minimal /dev, private scratch tmpfs."""
    entries = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            entries.append(Mount(path, "symlink", os.readlink(path)))
        elif os.path.exists(path):
            entries.append(Mount(path, "ro", path))
    entries.append(Mount("/dev", "tmpfs", "mode=0755,size=64k"))
    entries += [Mount(f"/dev/{name}", "dev", f"/dev/{name}") for name in DEVICES
                if os.path.exists(f"/dev/{name}")]
    entries += [Mount("/dev/pts", "devpts"), Mount("/dev/ptmx", "symlink", "pts/ptmx"),
                Mount("/dev/fd", "symlink", "/proc/self/fd"),
                Mount("/dev/stdin", "symlink", "/proc/self/fd/0"),
                Mount("/dev/stdout", "symlink", "/proc/self/fd/1"),
                Mount("/dev/stderr", "symlink", "/proc/self/fd/2"),
                Mount("/dev/shm", "tmpfs", f"mode=1777,{tmp_options}"),
                Mount("/tmp", "tmpfs", f"mode=1777,{tmp_options}"),
                Mount("/var/tmp", "tmpfs", f"mode=1777,{tmp_options}"),
                Mount(f"/run/user/{runtime_uid}", "tmpfs", f"mode=0700,{tmp_options}")]
    return tuple(entries)


_LIBC = None


def _libc():
    """libc through ctypes (``dlopen(NULL)``: no search; this module also runs alone, in
    the zygote, outside the package)."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def apply_rlimits(pairs) -> None:
    """Soft and hard limits to ``value`` each (capped at a hard limit an ordinary user
    cannot raise)."""
    for which, value in pairs:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


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


def _setattr(path: str, set_flags: int, recursive: bool = True) -> None:
    attr = struct.pack("QQQQ", set_flags, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr)
    _check(_libc().syscall(SYS_MOUNT_SETATTR, -100, path.encode(),
                           AT_RECURSIVE if recursive else 0, buf, len(attr)),
           f"mount_setattr {path}")


def _makedirs(path: str) -> None:
    try:
        os.makedirs(path, mode=0o755, exist_ok=True)
    except FileExistsError:  # a file or link there: the mount fails with its own error
        pass


def _touch(path: str) -> None:
    if os.path.lexists(path):  # a file of a read-only bind (/etc/passwd): mount over it
        return
    _makedirs(os.path.dirname(path))
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    except IsADirectoryError:
        pass


def _open_sources(entries) -> dict[int, int]:
    """``O_PATH`` fds of every bind source, opened before the scratch tmpfs covers
    anything (a source that vanished since the plan was made is left out)."""
    fds = {}
    for index, entry in enumerate(entries):
        if entry.kind in ("ro", "rw", "dev"):
            try:
                fds[index] = os.open(entry.source, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
    return fds


def _build_root(plan: Plan, root: str) -> None:
    """The new root in ``root``: only the plan's entries, then ``/proc``."""
    fds = _open_sources(plan.mounts)
    _mount(MOUNT_SOURCE, root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    _add_entries(plan.mounts, fds, root)
    _makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _add_entries(entries, fds: dict[int, int], root: str) -> None:
    for index, entry in enumerate(entries):
        target = root + entry.target
        if entry.kind == "symlink":
            _makedirs(os.path.dirname(target))
            os.symlink(entry.source, target)
        elif entry.kind == "tmpfs":
            _makedirs(target)
            _mount(MOUNT_SOURCE, target, "tmpfs", MS_NOSUID | MS_NODEV, entry.source)
        elif entry.kind == "devpts":
            _makedirs(target)
            _mount("devpts", target, "devpts", MS_NOSUID | MS_NOEXEC,
                   "newinstance,ptmxmode=0666,mode=0620")
        elif index in fds:
            fd = fds[index]
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                _makedirs(target)
            else:
                _touch(target)
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
            flags = MOUNT_ATTR_NOSUID
            if entry.kind != "dev":
                flags |= MOUNT_ATTR_NODEV
            if entry.kind == "ro":
                flags |= MOUNT_ATTR_RDONLY
            _setattr(target, flags)
            os.close(fd)


def _pivot(root: str) -> None:
    """Into the new root; the old one detached (``pivot_root(".", ".")``)."""
    os.chdir(root)
    libc = _libc()
    _check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _setattr("/", MOUNT_ATTR_RDONLY, recursive=False)  # the root tmpfs itself


def _loopback_up() -> None:
    """``ip link set lo up`` without ``ip``: one ``SIOCSIFFLAGS``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH22x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING)
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, ifreq)


def _listen() -> socket.socket:
    """The proxy listener on ``127.0.0.1:PROXY_PORT`` of this network namespace."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PROXY_PORT))
    listener.listen(128)
    return listener


def _hand_over_listener(channel_fd: int, listener: socket.socket | None = None) -> None:
    """Send the proxy listener (made now unless given) out over ``channel_fd``."""
    listener = listener or _listen()
    channel = socket.socket(fileno=channel_fd)
    try:
        socket.send_fds(channel, [b"L"], [listener.fileno()])
    finally:
        channel.detach()
        listener.close()


def _drop_privileges(plan: Plan) -> None:
    libc = _libc()
    if plan.switch_user:
        os.setgroups([])
        os.setresgid(plan.gid, plan.gid, plan.gid)
        os.setresuid(plan.uid, plan.uid, plan.uid)
    else:
        # No capability from here on: one more user namespace mapping root back to us.
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # our /proc/self files are ours again
        _check(libc.unshare(CLONE_NEWUSER), "unshare (drop privileges)")
        _map_ids(plan.uid, 0, plan.gid, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if plan.max_processes > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (plan.max_processes, plan.max_processes))


def _close_all_but(keep: int) -> None:
    """Close every fd but ``keep`` (two ``close_range`` calls; ``closerange(0, 0)`` would
    close them all)."""
    if keep > 0:
        os.closerange(0, keep)
    os.closerange(keep + 1, 1 << 20)


def _fork() -> int:
    """``fork(2)`` straight from libc: this single-threaded pre-exec child needs none of
    Python's at-fork work (thread state, locks, reseeding), which costs milliseconds.
    Only ever from a single-threaded process (see :func:`available`)."""
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
    running (a daemonised server outlives its shell, as outside) until none is left.

    Init then waits for the leader to be gone (``report``'s reader closed) before it
    exits: the last process of the namespaces tears them down (unmounts the whole
    root) in its exit, and that must not be the leader, whose exit is what the
    supervisor waits for."""
    reported = False
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            if reported:
                _outlive_reader(report)
            os._exit(0)
        except InterruptedError:
            continue
        if pid == command_pid:
            try:
                os.write(report, struct.pack("i", status))
                reported = True
            except OSError:
                pass


#: How long init waits for the leader to exit before it exits anyway.
OUTLIVE_SECONDS = 5.0


def _outlive_reader(pipe_w: int) -> None:
    """Return once the reader of ``pipe_w`` is gone (POLLERR) or after OUTLIVE_SECONDS."""
    import select

    poller = select.poll()
    poller.register(pipe_w, 0)  # POLLERR and POLLHUP are always reported
    try:
        poller.poll(OUTLIVE_SECONDS * 1000)
    except InterruptedError:
        pass


def _split(network: str, switch_user: bool, uid: int, gid: int) -> tuple[int, int, int]:
    """Unshare the namespaces and fork init: ``(init's pid or 0 in init, report_r,
    report_w)``. The caller and init ignore the job-control and termination signals and
    are not dumpable (copies of the supervisor's or zygote's memory: no process of the
    command, same uid, may read /proc/1/mem, maps or environ)."""
    flags = CLONE_NEWNS | CLONE_NEWPID
    if network != "host":
        flags |= CLONE_NEWNET
    if not switch_user:
        flags |= CLONE_NEWUSER
    try:
        _check(_libc().unshare(flags), "unshare")
        if not switch_user:
            _map_ids(0, uid, 0, gid)
        report_r, report_w = os.pipe()
    except Exception as exc:  # noqa: BLE001 - nothing may return to exec half set up
        _fail(str(exc))
    _shield()  # leader and init; the command gets the defaults (posix_spawn setsigdef)
    _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    return _fork(), report_r, report_w


def _lead(report_r: int) -> None:
    """The leader: wait for the command's status (init reports it), die like it."""
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


def _launch(plan: Plan, report_w: int, umask: int) -> int:
    """In init, root built: give up every privilege, start the command; its pid."""
    _drop_privileges(plan)
    os.umask(umask)
    if not plan.argv:
        os.write(report_w, struct.pack("i", 0))
        os._exit(0)
    try:
        os.chdir(plan.workdir)
    except OSError:
        raise SandboxSetupError(f"the work directory {plan.workdir} is not in the "
                                "sandbox; run the command in the agent workspace") from None
    os.closerange(3, report_w)  # nothing of the supervisor's reaches the command
    os.closerange(report_w + 1, 1 << 20)
    spawn = os.posix_spawn if os.path.isabs(plan.argv[0]) else os.posix_spawnp
    return spawn(plan.argv[0], list(plan.argv), plan.env, setsigdef=_DEFAULTED, setsigmask=())


def enter(plan: Plan) -> None:
    """Run in the forked child (after setsid, the controlling TTY and rlimits), last.

    Returns only in the command's process; the leader and init never return. With
    an empty ``plan.argv`` init reports success once everything is built (the probe).
    """
    init_pid, report_r, report_w = _split(plan.network, plan.switch_user, plan.uid, plan.gid)
    if init_pid:
        _lead(report_r)
    # init (pid 1 in the new namespace)
    try:
        os.close(report_r)
        umask = os.umask(0o022)  # the mount points, whatever the supervisor's umask
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _build_root(plan, _SCRATCH)
        _pivot(_SCRATCH)
        if plan.network != "host":
            _loopback_up()
            if plan.network == "proxy" and plan.proxy_fd is not None:
                _hand_over_listener(plan.proxy_fd)
        command_pid = _launch(plan, report_w, umask)
    except Exception as exc:  # noqa: BLE001
        _fail(str(exc))
    _close_all_but(report_w)
    _init(command_pid, report_w)


# --- a sandbox built ahead of its session (a zygote spare's) ---------------------------

#: Where a spare's init builds the root ahead of time: a path no plan binds from (the
#: session's own sources are opened by path later, so ``/tmp`` would hide them).
PREBUILT_ROOT = "/sys"


def _plain(target: str, kind: str, source: str) -> tuple[str, str, str]:
    """An entry as a tuple, a tmpfs without its owner options (``uid=``/``gid=``: chown'd
    per session). Tuples, not Mounts: :func:`rest_of` runs on each session's start."""
    if kind == "tmpfs" and "id=" in source:
        source = ",".join(o for o in source.split(",") if not o.startswith(("uid=", "gid=")))
    return target, kind, source


def _plain_tmpfs(entry: Mount) -> Mount:
    """A tmpfs entry without its owner options (see :func:`_plain`)."""
    if entry.kind != "tmpfs":
        return entry
    return Mount(*_plain(entry.target, entry.kind, entry.source))


def shareable(entries) -> tuple[Mount, ...]:
    """What of ``entries`` (the mounts every session of a supervisor has) a spare may
    build before it knows its session: all but the per-uid runtime directory."""
    return tuple(_plain_tmpfs(e) for e in entries if not e.target.startswith("/run/user/"))


def profile_of(plan: Plan) -> dict:
    """What a spare builds ahead for sessions like ``plan`` (JSON-ready)."""
    return {"network": plan.network, "switch_user": plan.switch_user, "uid": plan.uid,
            "gid": plan.gid, "shared": [[m.target, m.kind, m.source] for m in plan.shared]}


def sources_of(shared) -> list:
    """What each bind source of ``shared`` (``profile_of``'s entries) is now: its device
    and inode, or None. A spare's root holds the sources as they were when it was built;
    one replaced since (a virtualenv rebuilt in place) shows up here as a change."""
    found = []
    for _target, kind, source in shared:
        if kind in ("ro", "rw", "dev"):
            try:
                st = os.stat(source)
                found.append((st.st_dev, st.st_ino))
            except OSError:
                found.append(None)
    return found


def within(path: str, parent: str) -> bool:
    """``path`` is ``parent`` or below it."""
    parent = parent.rstrip("/") or "/"
    return path == parent or path.startswith(parent + "/") or parent == "/"


def rest_of(profile: dict, plan: Plan) -> list[Mount] | None:
    """The entries of ``plan`` a spare built for ``profile`` still has to add, or None
    where that spare cannot serve the plan (other namespaces or ids, a shared entry the
    plan does not have, or one of its own entries that would cover a shared one)."""
    if (profile["network"], profile["switch_user"]) != (plan.network, plan.switch_user):
        return None
    if not plan.switch_user and (profile["uid"], profile["gid"]) != (plan.uid, plan.gid):
        return None
    shared = {tuple(m) for m in profile["shared"]}
    plain = [_plain(m.target, m.kind, m.source) for m in plan.mounts]
    if not shared.issubset(plain):
        return None
    rest = [m for m, key in zip(plan.mounts, plain) if key not in shared]
    targets = [target for target, _, _ in shared]
    if any(_covers(m.target, targets) for m in rest):
        return None
    return rest


def _covers(parent: str, paths: list[str]) -> bool:
    """One of ``paths`` is ``parent`` or below it (:func:`within`, for many paths)."""
    parent = parent.rstrip("/") or "/"
    if parent == "/":
        return bool(paths)
    below = parent + "/"
    return any(path == parent or path.startswith(below) for path in paths)


@dataclass
class Prebuilt:
    """A spare's side of its prepared init."""

    init_pid: int
    #: To init: the leader hands it to the supervisor, which sends init the request.
    channel: socket.socket
    report_r: int
    #: Init starts the command once the leader writes ``b"g"`` here (it has taken the
    #: terminal and the cgroup), or fails with what the leader wrote instead.
    go_w: int


def prebuild(profile: dict) -> Prebuilt:
    """In a zygote spare (after ``setsid``), before its session: the namespaces, init,
    and in init the shared part of the root, ``/proc``, loopback and the proxy listener.
    Init then waits for its session's request (the supervisor sends it); the host's
    mounts keep arriving (a slave mount namespace) until then."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    go_r, go_w = os.pipe()
    init_pid, report_r, report_w = _split(profile["network"], profile["switch_user"],
                                          os.getuid(), os.getgid())
    if init_pid:
        os.close(report_w)
        os.close(go_r)
        theirs.close()
        return Prebuilt(init_pid, ours, report_r, go_w)
    listener = None
    try:
        ours.close()
        os.close(report_r)
        os.close(go_w)
        os.umask(0o022)
        _mount(None, "/", None, MS_REC | MS_SLAVE)
        shared = [Mount(*m) for m in profile["shared"]]
        fds = _open_sources(shared)
        _mount(MOUNT_SOURCE, PREBUILT_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
        _add_entries(shared, fds, PREBUILT_ROOT)
        _makedirs(PREBUILT_ROOT + "/proc")
        _mount("proc", PREBUILT_ROOT + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        if profile["network"] != "host":
            _loopback_up()
            if profile["network"] == "proxy":
                listener = _listen()
        if os.environ.get("PADDEDCELL_TEST_FAIL_PREBUILD"):  # test-only: see prebuilt_ready
            raise OSError("PADDEDCELL_TEST_FAIL_PREBUILD is set")
    except Exception as exc:  # noqa: BLE001
        _fail(str(exc))
    theirs.send(b"R")  # built: see prebuilt_ready
    _serve_session(profile, theirs, report_w, listener, go_r)


def prebuilt_ready(pre: Prebuilt) -> bool:
    """The leader: wait until init has built the shared part; False (init reaped) where
    it failed, so that the session is built whole instead of failing."""
    try:
        ready = pre.channel.recv(1) == b"R"
    except OSError:
        ready = False
    if not ready:
        os.waitpid(pre.init_pid, 0)
    return ready


def lead_prebuilt(pre: Prebuilt, terminal: int | None, cgroup_procs: str | None) -> None:
    """The leader of a prebuilt sandbox at its session (init has the request from the
    supervisor): take ``terminal`` as the session's controlling terminal and the cgroup
    (this process and init), let init start the command, then lead (never returns)."""
    try:
        if terminal is not None:
            fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)
            os.close(terminal)
        if cgroup_procs:
            with open(cgroup_procs, "w") as f:
                f.write("0")
                f.flush()
                f.write(str(pre.init_pid))
        said = b"g"
    except Exception as exc:  # noqa: BLE001 - init says it on the session's stderr
        said = str(exc).encode()[:512] or b"the session's leader failed"
    try:
        os.write(pre.go_w, said)
    except OSError:
        pass
    if said != b"g":
        os._exit(126)
    _lead(pre.report_r)


def plan_from_request(req: dict, proxy_fd: int | None) -> Plan:
    """The plan a zygote request (``zygote.request``) carries."""
    return Plan(mounts=tuple(Mount(*entry) for entry in req["mounts"]), workdir=req["workdir"],
                network=req["network"], proxy_fd=proxy_fd, uid=req["uid"], gid=req["gid"],
                switch_user=req["switch_user"], max_processes=req["max_processes"],
                argv=tuple(req["argv"]), env=req["env"])


def _serve_session(profile: dict, sock: socket.socket, report_w: int, listener,
                   go_r: int) -> None:
    """Init of a prebuilt sandbox: wait for the session, add its own entries, start it."""
    import json

    try:
        body, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
    except OSError:
        os._exit(0)
    if not body:
        os._exit(0)  # the spare was never used
    try:
        req = json.loads(body)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target, inheritable=True)
        proxy_fd = fds[3] if req["proxy"] and len(fds) > 3 else None
        plan = plan_from_request(req, proxy_fd)
        apply_rlimits(req["rlimits"])
        rest = rest_of(profile, plan)
        if rest is None:
            raise SandboxSetupError("this spare was prepared for other sessions")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # from here on, the host's stay out
        _add_entries(rest, _open_sources(rest), PREBUILT_ROOT)
        if plan.switch_user:  # the shared scratch directories belong to the agent
            for entry in plan.mounts:
                if entry.kind == "tmpfs" and "uid=" in entry.source and entry not in rest:
                    os.chown(PREBUILT_ROOT + entry.target, plan.uid, plan.gid)
        _pivot(PREBUILT_ROOT)
        if listener is not None and proxy_fd is not None:
            _hand_over_listener(proxy_fd, listener)
        go = os.read(go_r, 1024)  # the leader has the terminal and the cgroup
        if go != b"g":
            raise SandboxSetupError(go.decode(errors="replace") or "the session's leader is gone")
        os.close(go_r)
        command_pid = _launch(plan, report_w, req["umask"])
    except Exception as exc:  # noqa: BLE001
        _fail(str(exc))
    _close_all_but(report_w)
    _init(command_pid, report_w)


def receive_listener(sock: socket.socket) -> socket.socket | None:
    """The proxy listener init sent over ``sock`` (blocking), or None if it sent none."""
    try:
        _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    except OSError:
        return None
    if not fds:
        return None
    return socket.socket(fileno=fds[0])


def _bind_identity(binds) -> None:
    """Bind each ``(target, source)`` read-only over the host's file in a mount namespace
    of the command's own (its passwd/group line). Where the host allows no mount
    namespace, nothing: the command keeps the host's files."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        return
    _mount(None, "/", None, MS_REC | MS_SLAVE)  # the host's later mounts still arrive
    for target, source in binds:
        _mount(source, target, None, MS_BIND)
        _setattr(target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, False)


def enter_as_user(uid: int, gid: int, max_processes: int, binds=()) -> None:
    """The pre-exec step where there are no namespaces but the daemon is root:
    the command runs as the agent's own unprivileged uid (``supervisor.sandbox =
    "user"``), which cannot read ``PADDEDCELL_HOME``, the stores or other agents'
    processes. ``binds``: its passwd/group files (:func:`_bind_identity`)."""
    try:
        if binds:
            _bind_identity(binds)
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if max_processes > 0:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
    except Exception as exc:  # noqa: BLE001
        _fail(str(exc))


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


def host_root(uid_map: str = "/proc/self/uid_map") -> bool:
    """Running as the host's root: uid 0 in the initial user namespace (whose map is the
    whole range). Uid 0 of a container's or ``unshare -r``'s user namespace is not: it has
    no agent uids to switch to, so it builds the sandbox as an ordinary user does."""
    if os.geteuid() != 0:
        return False
    if uid_map not in _HOST_ROOT:  # a process's own id map never changes: read it once
        try:
            with open(uid_map) as f:
                _HOST_ROOT[uid_map] = f.read().split() == ["0", "0", "4294967295"]
        except OSError:
            return False
    return _HOST_ROOT[uid_map]


_HOST_ROOT: dict[str, bool] = {}


_AVAILABLE: dict[bool, tuple[bool, str]] = {}
#: How long the availability probe may take (it builds a small sandbox: ~50 ms).
PROBE_SECONDS = 10.0


def _read_until_eof(fd: int, seconds: float) -> tuple[bytes, bool]:
    """Everything until EOF on ``fd`` and True, or what came within ``seconds`` and False."""
    import select
    import time

    deadline = time.monotonic() + seconds
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data, False
        chunk = os.read(fd, 256)
        if not chunk:
            return data, True
        data += chunk


def available() -> tuple[bool, str]:
    """``(True, "")`` when this host lets us build the sandbox, else ``(False, why)``.

    Probed once per process: a forked child builds a real, small sandbox the way
    :func:`enter` does (namespaces, binds, ``/proc``, ``devpts``, loopback, the
    privilege drop), without a command. A probe :func:`start_probe` began is
    collected here.
    """
    switch_user = host_root()
    with _PROBE_LOCK:  # threads asking at once wait for one answer
        if switch_user not in _AVAILABLE:
            start_probe()
            finish_probe()
        return _AVAILABLE[switch_user]


#: A started probe not yet collected, by ``switch_user``: ``(pid, read end of its pipe)``.
_PROBES: dict[bool, tuple[int, int]] = {}
_PROBE_LOCK = threading.RLock()


def start_probe() -> None:
    """Fork the availability probe and return at once; :func:`available` (or
    :func:`finish_probe`) collects it. A foreground ``pcexec`` starts it first thing,
    so that the probe (~15-40 ms, mostly in the kernel) runs while it imports."""
    switch_user = host_root()
    with _PROBE_LOCK:
        if switch_user not in _AVAILABLE and switch_user not in _PROBES:
            _start_probe(switch_user)


def _start_probe(switch_user: bool) -> None:
    try:
        _libc()  # loaded here: the pre-exec child must not search for libc
    except OSError as exc:
        _AVAILABLE[switch_user] = (False, f"no libc: {exc}")
        return
    uid = 65534 if switch_user else os.getuid()  # nobody: a uid to switch to, as root
    plan = Plan(mounts=base_mounts(uid, "size=1m"), network="none", uid=uid,
                gid=65534 if switch_user else os.getgid(), switch_user=switch_user)
    r, w = os.pipe()
    # os.fork, not _fork: the caller may have threads (trio's worker threads, the
    # output filters). A raw fork(2) through ctypes runs with the GIL released, so
    # another thread can take it in that instant and the child, which has no such
    # thread, waits for it forever (pcexec hung about 1 run in 8). Python's fork
    # hands the child a GIL it holds. Inside enter() the raw fork is safe: the
    # pre-exec child is single-threaded and Popen re-initialised its GIL.
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the probe child
        # Nothing of the caller's but the report pipe: a probe child that ever got
        # stuck must not hold the caller's stdout open (its reader would wait forever).
        os.dup2(w, 2)
        _close_all_but(2)
        os.setpgid(0, 0)  # its own group: the caller can end it and init together
        enter(plan)
        os._exit(0)
    os.close(w)
    try:
        os.setpgid(pid, pid)  # the same as the child's own call, whichever runs first
    except OSError:
        pass
    _PROBES[switch_user] = (pid, r)


def finish_probe() -> None:
    """Wait for a started probe (if any) and record its answer; also what a process
    that started one and then needs no sandbox calls, so that the child is reaped."""
    switch_user = host_root()
    with _PROBE_LOCK:
        if switch_user in _PROBES:
            _finish_probe(switch_user, *_PROBES.pop(switch_user))


def _finish_probe(switch_user: bool, pid: int, r: int) -> None:
    why, finished = _read_until_eof(r, PROBE_SECONDS)
    os.close(r)
    if not finished:
        try:
            os.killpg(pid, signal.SIGKILL)  # the leader and init
        except OSError:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # reaped by a waitpid(-1) elsewhere: its report decides
        status = 0 if finished and not why.strip() else 1 << 8
    if not finished:
        _AVAILABLE[switch_user] = (False, f"the namespace probe did not finish within "
                                          f"{PROBE_SECONDS:g} s")
        return
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    text = why.decode(errors="replace").strip().removeprefix("paddedcell: sandbox: ")
    _AVAILABLE[switch_user] = (ok, "" if ok else (text or "namespace set-up failed"))
