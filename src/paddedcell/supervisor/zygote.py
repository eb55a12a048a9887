"""Sandboxed sessions started from a small process instead of the supervisor's large one.

Why: a sandboxed command needs code to run between fork and exec (namespaces, the
new root), so ``Popen`` must ``fork`` the supervisor instead of ``vfork``-ing it, and
forking a process costs in proportion to its memory: on the reference VM 5-7 ms for a
fresh 11 MB interpreter, 17 ms at 35 MB, 36-43 ms at 95 MB (a daemon), against 1.4-4 ms
for the ``vfork`` + ``exec`` of an unsandboxed command.

How: the daemon starts (:func:`prestart`, at start-up) the **zygote**, a fresh interpreter
(``python -I -S`` running this file, which loads only ``sandbox.py``, the standard
library and nothing of the supervisor). The zygote makes **spares** ahead of time: it
forks, the child forks the spare and exits, so the spare is re-parented to the
supervisor (a child subreaper, as the daemon and ``pcexec`` are) and is the
supervisor's own child, waited for exactly like a ``Popen`` child. A spare waits on a
socket; a session hands it the plan (JSON) and its terminal or pipe fds and the proxy
socket (``SCM_RIGHTS``), and the spare becomes the session's leader (``setsid``, the
controlling terminal, cgroup, rlimits, ``sandbox.enter``). From the second session on,
spares are **built ahead** (``sandbox.prebuild``): the namespaces, init and, in init, the
part of the root every session shares (``Plan.shared``: the system, ``/dev``, the
installation, ``/proc``, loopback, the proxy listener). Such a spare says it is ready
before its session comes and hands over init's channel: the session sends init its
request directly (init adds only the session's own entries: workspace, home, channel,
identity, terminal, and ``pivot_root``s) and the leader only the terminal and cgroup
(``sandbox.lead_prebuilt``); nothing waits for a reply. SPARES are kept; the next ones
are asked for once a session has ended (or has run ``supervisor.REFILL_AFTER_SECONDS``), so that
building them never competes with a session's start on a small host. A spare built for
other settings, or before a shared source was replaced (``sandbox.sources_of``), is
ended and another asked for. Where anything of this is unavailable
(not a subreaper, the zygote gone, a plan too large) the session starts through
``Popen`` as before: slower, the same sandbox. A one-session ``pcexec`` does that too
(starting a zygote would cost it more than the fork it saves).
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import socket
import struct
import subprocess
import sys
import termios
import threading

#: The largest request a spare accepts (a plan with its environment), one datagram.
MAX_REQUEST = 1 << 20
#: How long the supervisor waits for a spare before starting the session through Popen.
SPARE_WAIT_SECONDS = 5.0
#: Spares kept ready: two, so that back-to-back sessions find one built while the one
#: asked for after the last session is still building.
SPARES = 2
PR_GET_CHILD_SUBREAPER = 37


def request(plan, *, use_pty: bool, rlimits, cgroup_procs: str | None, umask: int) -> bytes:
    """The JSON a spare reads: the plan (``proxy_fd`` is replaced by the 4th fd sent)."""
    return json.dumps({
        "mounts": [[m.target, m.kind, m.source] for m in plan.mounts],
        "workdir": plan.workdir, "network": plan.network, "proxy": plan.proxy_fd is not None,
        "uid": plan.uid, "gid": plan.gid, "switch_user": plan.switch_user,
        "max_processes": plan.max_processes, "argv": list(plan.argv), "env": plan.env,
        "pty": use_pty, "rlimits": [list(pair) for pair in rlimits],
        "cgroup_procs": cgroup_procs, "umask": umask}).encode()


class SpareProcess:
    """What ``Session`` needs of a ``Popen``: the pid (our child) and its return code."""

    def __init__(self, pid: int, args: list[str]):
        self.pid = pid
        self.args = args
        self.returncode: int | None = None


class _Zygote:
    """The supervisor's side: one zygote per process, up to SPARES spares kept ready."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.control: socket.socket | None = None
        self.proc: subprocess.Popen | None = None
        self.broken = False
        #: Set by :func:`prestart` (the daemon): a one-session process has no use for one.
        self.wanted = False
        #: The spares on their way, oldest first: what each was asked to build ahead
        #: (``sandbox.profile_of``: the last session's shared part; None: nothing, it
        #: builds all at its session) and what its shared sources were then
        #: (``sandbox.sources_of``).
        self.asked: list[tuple[dict | None, list]] = []
        #: What the next spares build ahead (set by each session).
        self.next_profile: dict | None = None
        #: A spare's prebuild failed: build every later spare whole (at its session).
        self.ahead_failed = False

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        from .. import orphans

        orphans.claim(self.proc.pid)
        ours.settimeout(SPARE_WAIT_SECONDS)
        self.control = ours
        self._ask(None)  # the first spare

    def _ask(self, profile: dict | None) -> None:
        from .sandbox import sources_of

        sources = sources_of(profile["shared"]) if profile else []
        self.control.send(b"s" + (json.dumps(profile).encode() if profile else b""))
        self.asked.append((profile, sources))

    def refill(self) -> None:
        """Ask for spares up to SPARES, built ahead like the last session (called once a
        session no longer competes with their building: it ended, or ran a while)."""
        with self.lock:
            if self.broken or self.control is None or not self.wanted:
                return
            try:
                while len(self.asked) < SPARES:
                    self._ask(self.next_profile)
            except OSError:
                self.broken = True

    def _receive(self) -> tuple[int, socket.socket]:
        _, fds, _, _ = socket.recv_fds(self.control, 16, 1)
        if not fds:
            raise OSError("the zygote ended")
        sock = socket.socket(fileno=fds[0])
        try:
            sock.settimeout(SPARE_WAIT_SECONDS)
            pid = struct.unpack("i", sock.recv(4))[0]
            if _parent_of(pid) != os.getpid():
                os.kill(pid, 9)
                raise OSError(f"spare {pid} is not our child")
        except BaseException:
            sock.close()
            raise
        return pid, sock

    def take(self, plan) -> tuple[int, socket.socket, socket.socket | None] | None:
        """A ready spare that can serve ``plan`` (its pid, now claimed, its socket and,
        built ahead, its init's channel), or None: use Popen. Spares built for other
        sessions (the settings changed) or from sources replaced since
        (``sandbox.sources_of``: a virtualenv rebuilt in place) are ended. The next
        ones are asked for at :meth:`refill`, built ahead like ``plan``."""
        with self.lock:
            if self.broken or not self.wanted:
                return None
            try:
                if self.control is None:
                    if not _subreaper():
                        self.broken = True
                        return None
                    self._start()
                from .. import orphans
                from .sandbox import PREBUILT_ROOT, profile_of, rest_of, sources_of

                ahead = plan.shared and os.path.isdir(PREBUILT_ROOT) and not self.ahead_failed
                self.next_profile = profile_of(plan) if ahead else None
                for _ in range(SPARES + 1):
                    if not self.asked:
                        self._ask(self.next_profile)
                    made_for, sources = self.asked.pop(0)
                    pid, sock = self._receive()
                    orphans.claim(pid)
                    if made_for is not None and (rest_of(made_for, plan) is None or
                                                 sources_of(made_for["shared"]) != sources):
                        sock.close()
                        _discard(pid)
                        continue
                    try:
                        said, fds, _, _ = socket.recv_fds(sock, 16, 1)
                    except OSError:
                        said, fds = b"", []
                    init = socket.socket(fileno=fds[0]) if fds else None
                    if said != b"R" or (made_for is not None) != (init is not None):
                        # its prebuild failed: this session is built whole (Popen), and
                        # no more ahead
                        self.ahead_failed = True
                        self.next_profile = None
                        sock.close()
                        if init is not None:
                            init.close()
                        _discard(pid)
                        return None
                    return pid, sock, init
                return None
            except (OSError, ValueError, struct.error):
                self.broken = True
                if self.control is not None:
                    self.control.close()
                return None


def refill() -> None:
    """Top the spares up (see ``_Zygote.refill``); nothing where no zygote is used."""
    _ZYGOTE.refill()


def prestart() -> None:
    """Use a zygote in this process and start it now (a long-lived supervisor, before it
    grows: the daemon). Needs this process to be a child subreaper."""
    with _ZYGOTE.lock:
        _ZYGOTE.wanted = True
        if _ZYGOTE.control is None and not _ZYGOTE.broken:
            try:
                if _subreaper():
                    _ZYGOTE._start()
                else:
                    _ZYGOTE.broken = True
            except OSError:
                _ZYGOTE.broken = True


def _discard(pid: int) -> None:
    """End a spare (and the init it prepared, in its process group) and reap it."""
    from .. import orphans

    try:
        os.killpg(pid, 9)
    except OSError:
        pass
    os.waitpid(pid, 0)
    orphans.release(pid)


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def _subreaper() -> bool:
    import ctypes

    value = ctypes.c_int(0)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0 and value.value == 1


_ZYGOTE = _Zygote()


def start(plan, argv: list[str], *, fds: list[int], use_pty: bool, rlimits,
          cgroup_procs: str | None) -> SpareProcess | None:
    """Start the sandboxed command from a spare; None where none can be had (use Popen).

    ``fds``: the command's stdin, stdout and stderr."""
    body = request(plan, use_pty=use_pty, rlimits=rlimits, cgroup_procs=cgroup_procs,
                   umask=_umask())
    if len(body) > MAX_REQUEST - 1024:
        return None
    spare = _ZYGOTE.take(plan)
    if spare is None:
        return None
    pid, sock, init = spare
    sent = list(fds) + ([plan.proxy_fd] if plan.proxy_fd is not None else [])
    try:
        if init is None:  # the spare builds it all
            socket.send_fds(sock, [body], sent)
        else:  # the leader: its part (sandbox.lead_prebuilt); init: the request
            lead = (b"p" if use_pty else b"n") + (cgroup_procs or "").encode()
            socket.send_fds(sock, [lead], sent[:1] if use_pty else [])
            socket.send_fds(init, [body], sent)
    except OSError:
        _discard(pid)
        return None
    finally:
        sock.close()
        if init is not None:
            init.close()
    return SpareProcess(pid, argv)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --- the zygote and its spares (this file run by path, without the package) -----------


def _become_leader(sandbox, sock: socket.socket, profile: dict | None) -> None:
    """A spare: announce our pid, build what ``profile`` says ahead (``sandbox.prebuild``),
    wait for the session, become its leader (never returns)."""
    try:
        sock.send(struct.pack("i", os.getpid()))
    except OSError:
        os._exit(0)
    os.setsid()  # before init exists: leader, init and command share the session
    prebuilt = sandbox.prebuild(profile) if profile else None
    # Ready or not (x: the supervisor builds that session whole), said before any session
    # arrives, so that a session waits for no reply. Built ahead, the supervisor gets
    # init's pid and channel too: it sends init the request itself, and the leader only
    # what it does (the terminal, the cgroup).
    ready = prebuilt is None or sandbox.prebuilt_ready(prebuilt)
    try:
        if prebuilt is None:
            sock.send(b"R")
        elif ready:
            socket.send_fds(sock, [b"R"], [prebuilt.channel.fileno()])
            prebuilt.channel.close()
        else:
            sock.send(b"x")
    except OSError:
        os._exit(0)
    if not ready:
        os._exit(0)
    try:
        body, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 8)
    except OSError:
        os._exit(0)
    if not body:
        os._exit(0)  # the supervisor is gone (init sees EOF and goes too)
    sock.close()
    if prebuilt is not None:  # b"p" (a terminal: the fd sent) or b"n", and the cgroup
        terminal = fds[0] if body[:1] == b"p" and fds else None
        sandbox.lead_prebuilt(prebuilt, terminal, body[1:].decode() or None)
    req = json.loads(body)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target, inheritable=True)
    proxy_fd = fds[3] if req["proxy"] and len(fds) > 3 else None
    for fd in fds[:3]:
        if fd > 2:
            os.close(fd)
    try:
        if req["pty"]:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if req["cgroup_procs"]:
            with open(req["cgroup_procs"], "w") as f:
                f.write("0")
        sandbox.apply_rlimits(req["rlimits"])
        os.umask(req["umask"])
    except Exception as exc:  # noqa: BLE001
        sandbox._fail(str(exc))
    sandbox.enter(sandbox.plan_from_request(req, proxy_fd))
    os._exit(127)  # enter() never returns


def _serve(control_fd: int) -> None:
    """The zygote: one spare per byte the supervisor sends; exit when it is gone."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("paddedcell_zygote_sandbox",
                                                  os.path.join(here, "sandbox.py"))
    sandbox = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sandbox  # dataclasses look their module up there
    spec.loader.exec_module(sandbox)
    # Dumpable, as the supervisor is: an ordinary user's spare must write its own id maps
    # (sandbox.enter makes leader and init non-dumpable once that is done).
    sandbox._libc()
    # No cyclic collection here nor in the spares: a collection writes to every object,
    # so each spare would copy (and, as the session's leader, free at its exit, which
    # the supervisor waits for) the whole heap it shares with the zygote.
    gc.freeze()
    gc.disable()
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            asked = control.recv(MAX_REQUEST)
        except OSError:
            os._exit(0)
        if not asked:
            os._exit(0)
        profile = json.loads(asked[1:]) if len(asked) > 1 else None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        middle = os.fork()
        if middle == 0:
            if os.fork() == 0:  # the spare: re-parented to the supervisor below
                keep = theirs.fileno()
                os.closerange(3, keep)
                os.closerange(keep + 1, 1 << 20)
                _become_leader(sandbox, theirs, profile)
            os._exit(0)
        os.waitpid(middle, 0)  # the spare is the supervisor's child from here on
        theirs.close()
        try:
            socket.send_fds(control, [b"S"], [ours.fileno()])
        except OSError:
            os._exit(0)
        ours.close()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
