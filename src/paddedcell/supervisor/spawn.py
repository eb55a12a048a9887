"""Starting one command: shell, environment, PTY or pipes, sandbox profile.

Why ``subprocess.Popen`` and not ptyprocess: ptyprocess's reads, waits and
``terminate()`` block (sleeps of 0.1 s), which a Trio loop cannot afford, and
its fork runs Python in the child anyway. Popen gives us ``start_new_session``
(the command leads its own session and process group), exec-failure reporting,
fd hygiene and ``pass_fds``. For a PTY we open the pair with ``os.openpty``,
hand the slave to the child as fds 0–2 and, in the child after ``setsid``, make
it the controlling terminal (``TIOCSCTTY``) so ``C-c`` from ``send-keys``
reaches the foreground job. We then close our copy of the slave: the master
sees EIO only once every holder of the slave is gone (EIO is EOF).
"""

from __future__ import annotations

import fcntl
import os
import resource
import shutil
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from .. import orphans
from ..config import NETWORK_MODES, SANDBOX_PROFILES  # declared with their settings
from .settings import SupervisorSettings
from . import zygote
from .sandbox import apply_rlimits, enter, with_console

# The sandbox profiles (docs/design.md §1), SANDBOX_PROFILES, live in config with the
# supervisor.sandbox setting. "auto" (the default): the namespace sandbox
# (supervisor/sandbox.py) where the host allows it, else, under a root daemon, each
# agent's own unprivileged uid ("user"), else refuse agent commands with the fix;
# "namespaces" / "user": that one or refuse; "none": the explicit opt-out (no
# sandbox, no limits); "rlimits", "bwrap": as before.


class SpawnError(Exception):
    """The command could not be started; ``str()`` is one line."""


class SandboxUnavailable(SpawnError):
    pass


class PtyUnavailable(SpawnError):
    """No pseudo-terminal could be opened (the caller falls back to pipes, as OpenClaw)."""


def pick_shell(environ: Mapping[str, str]) -> str:
    """``$SHELL``, or bash when it is unset or fish (fish's ``-c`` is not POSIX)."""
    shell = environ.get("SHELL", "")
    if shell and os.path.basename(shell) != "fish" and os.access(shell, os.X_OK):
        return shell
    return shutil.which("bash") or "/bin/sh"


def pass_mgr_dir(path: str) -> str | None:
    """The directory to prepend so ``pass_mgr`` resolves in the child, or None.

    The agent's shell really runs ``pass_mgr get KEY``; when its PATH does not
    find our ``pass_mgr`` we add the one installed beside this interpreter.
    """
    if shutil.which("pass_mgr", path=path):
        return None
    beside = Path(sys.executable).parent / "pass_mgr"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.parent)
    return None


def child_environment(base: Mapping[str, str], *, agent_id: str | None,
                      agent_workspace: str | None, extra: Mapping[str, str],
                      tree_token: str) -> dict[str, str]:
    """Inherited env + the request's env + agent identity, identity last.

    ``parse_exec_request`` already refuses identity names in the request's
    env; applying them last keeps that true for any other caller too (an
    ``AGENT_ID`` override would point ``pass_mgr get`` at another agent).
    """
    env = dict(base)
    env.update(extra)
    for name in ("AGENT_ID", "AGENT_WORKSPACE", "AGENT"):
        env.pop(name, None)
    if agent_id:
        env["AGENT_ID"] = agent_id
    if agent_workspace:
        env["AGENT_WORKSPACE"] = agent_workspace
    env["PADDEDCELL_AGENT"] = "1"
    path = env.get("PATH") or os.defpath
    extra_dir = pass_mgr_dir(path)
    if extra_dir:
        env["PATH"] = f"{extra_dir}{os.pathsep}{path}"
    from .procs import TREE_MARKER
    env[TREE_MARKER] = tree_token
    return env


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Containment applied to one command. ``profile`` is one of SANDBOX_PROFILES."""

    profile: str = "none"
    cpu_seconds: int = 0
    address_space_bytes: int = 0
    file_size_bytes: int = 0
    open_files: int = 0
    #: RLIMIT_DATA: private writable memory per process (unlike RLIMIT_AS it leaves
    #: the address-space reservations of V8, the JVM and Go alone).
    memory_bytes: int = 0
    #: RLIMIT_NPROC inside the sandbox (per session in a user namespace, per agent uid
    #: under a root daemon).
    processes: int = 0
    #: Namespace sandbox: "proxy" | "none" | "host" (supervisor.sandbox_network).
    network: str = "proxy"

    @classmethod
    def from_settings(cls, settings) -> "Sandbox":
        limits = SupervisorSettings.of(settings)
        profile = limits.sandbox
        if profile not in SANDBOX_PROFILES:
            raise SandboxUnavailable(
                f"unknown sandbox profile {profile!r} (supervisor.sandbox); use one of "
                + ", ".join(SANDBOX_PROFILES))
        network = limits.sandbox_network
        if network not in NETWORK_MODES:
            raise SandboxUnavailable(
                f"unknown network mode {network!r} (supervisor.sandbox_network); use one of "
                + ", ".join(NETWORK_MODES))
        return cls(profile,
                   limits.sandbox_cpu_seconds,
                   limits.sandbox_address_space_bytes,
                   limits.sandbox_file_size_bytes,
                   limits.sandbox_open_files,
                   limits.sandbox_memory_bytes,
                   limits.sandbox_processes,
                   network)

    def mode(self) -> str:
        """What really runs: "namespaces", "user", or the profile itself ("none",
        "rlimits", "bwrap"). Raises SandboxUnavailable, one line with the fix, where
        the profile asks for what this host cannot give."""
        if self.profile not in ("auto", "namespaces", "user"):
            return self.profile
        from .sandbox import available, host_root

        root = host_root()
        if self.profile in ("auto", "namespaces"):
            ok, why = available()
            if ok:
                return "namespaces"
            if self.profile == "namespaces" or not root:
                raise SandboxUnavailable(
                    f"agent commands refused: this host gives PaddedCell no namespaces ({why}); "
                    "run `paddedcell doctor` for the fix (enable unprivileged user namespaces), "
                    "run the daemon as root (each agent then runs as its own uid), or set "
                    'supervisor.sandbox = "none" to run them unprotected')
        if not root:
            raise SandboxUnavailable(
                'supervisor.sandbox = "user" runs each agent as its own uid, which needs the '
                'daemon to run as root; use "auto" or "namespaces"')
        return "user"

    @property
    def namespaces(self) -> bool:
        """Run in the namespace sandbox? (raises SandboxUnavailable as :meth:`mode`)."""
        return self.mode() == "namespaces"

    def rlimits(self) -> list[tuple[int, int]]:
        """Applied in the child before the sandbox (RLIMIT_NPROC comes later, inside)."""
        if self.profile == "none":
            return []
        pairs = [(resource.RLIMIT_CPU, self.cpu_seconds),
                 (resource.RLIMIT_AS, self.address_space_bytes),
                 (resource.RLIMIT_DATA, self.memory_bytes),
                 (resource.RLIMIT_FSIZE, self.file_size_bytes),
                 (resource.RLIMIT_NOFILE, self.open_files)]
        limits = [(which, value) for which, value in pairs if value > 0]
        return limits + [(resource.RLIMIT_CORE, 0)]

    def wrap(self, argv: list[str], workdir: str, use_pty: bool) -> list[str]:
        """bubblewrap: read-only root, writable workdir and /tmp, no network."""
        if self.profile != "bwrap":
            return argv
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable(
                "sandbox profile 'bwrap' needs bubblewrap, which is not installed; "
                "install it (apt install bubblewrap) or set supervisor.sandbox to 'rlimits' or 'none'")
        wrapped = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                   "--tmpfs", "/tmp", "--bind", workdir, workdir, "--chdir", workdir,
                   "--unshare-net", "--unshare-pid", "--die-with-parent"]
        if not use_pty:
            # --new-session blocks TIOCSTI injection but would drop the PTY's
            # controlling terminal, so only pipe sessions get it.
            wrapped.append("--new-session")
        return wrapped + ["--"] + argv


@dataclass
class Spawned:
    """A started command: its Popen and the fds we read from / write to."""

    proc: subprocess.Popen | zygote.SpareProcess
    pty_master: int | None = None
    stdout: int | None = None
    stderr: int | None = None
    stdin: int | None = None
    slave_name: str | None = None
    fds: list[int] = field(default_factory=list)


def _child_setup(use_pty: bool, rlimits: list[tuple[int, int]],
                 enter_cgroup: Callable[[], None] | None,
                 enter_sandbox: Callable[[], None] | None = None) -> Callable[[], None] | None:
    if not use_pty and not rlimits and enter_cgroup is None and enter_sandbox is None:
        return None  # lets Popen use vfork: the fastest spawn

    def setup() -> None:  # runs in the child, after setsid, before exec
        if enter_cgroup is not None:
            enter_cgroup()
        if use_pty:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        apply_rlimits(rlimits)
        if enter_sandbox is not None:  # last: it forks (supervisor/sandbox.py)
            enter_sandbox()

    return setup


def spawn(argv: list[str], *, cwd: str, env: Mapping[str, str], use_pty: bool,
          rows: int = 40, columns: int = 120, stdin_fd: int | None = None,
          rlimits: list[tuple[int, int]] | None = None,
          enter_cgroup: Callable[[], None] | None = None,
          separate_stderr: bool = False,
          enter_sandbox: Callable[[], None] | None = None,
          cgroup_procs: str | None = None, sandbox_plan=None,
          terminal_owner: int | None = None) -> Spawned:
    """Start ``argv`` as the leader of a new session under a PTY or pipes.

    Pipes, as OpenClaw's exec without a PTY: stdin is empty and closed
    (``/dev/null``: ``cat`` and ``read`` see EOF at once, and ``process
    write`` answers "stdin is not writable"); stdout and stderr share ONE
    pipe, so their order is the order the command wrote them in and the
    output is one stream. ``stdin_fd`` gives the child that fd as stdin
    instead (the plain CLI passes its own); ``separate_stderr`` keeps a second
    pipe for fd 2 (the plain CLI, whose human reads stderr apart).

    ``sandbox_plan`` (with ``enter_sandbox``, its pre-exec form, and ``cgroup_procs``,
    ``enter_cgroup``'s file): start the command from a zygote spare instead of forking
    this process (supervisor/zygote.py); Popen where none is to be had.

    ``terminal_owner``: the uid the command runs as (the agent's, under a root daemon);
    the PTY slave becomes its, as a login's terminal is the user's, so reopening it by
    name (``/dev/tty``'s siblings ``/dev/console`` and ``$(tty)``: pinentry, ssh's
    password prompt) works instead of meeting root's 0620 (EACCES).
    """
    setup = _child_setup(use_pty, rlimits or [], enter_cgroup, enter_sandbox)

    def start(stdin, stdout, stderr) -> subprocess.Popen | zygote.SpareProcess:
        if sandbox_plan is not None:
            if not os.path.isdir(cwd):
                raise SpawnError(f"workdir {cwd} does not exist or is not a directory; pass "
                                 "an existing directory")
            fds = [os.open(os.devnull, os.O_RDONLY) if stdin == subprocess.DEVNULL else stdin,
                   stdout, stderr]
            try:
                proc = zygote.start(sandbox_plan, argv, fds=fds, use_pty=use_pty,
                                    rlimits=rlimits or [], cgroup_procs=cgroup_procs)
            finally:
                if stdin == subprocess.DEVNULL:
                    os.close(fds[0])
            if proc is not None:
                return proc
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=stdin, stdout=stdout,
                                stderr=stderr, start_new_session=True, preexec_fn=setup,
                                close_fds=True)
        orphans.claim(proc.pid)
        return proc

    opened: list[int] = []
    try:
        if use_pty:
            try:
                master, slave = os.openpty()
            except OSError as exc:
                raise PtyUnavailable(f"Error: {exc.strerror or exc}") from None
            opened += [master, slave]
            set_window_size(slave, rows, columns)
            if terminal_owner is not None and terminal_owner != os.geteuid():
                os.fchown(slave, terminal_owner, -1)  # the group stays tty, as grantpt set it
            slave_name = os.ttyname(slave)
            if sandbox_plan is not None:  # its name inside, too (sandbox.with_console)
                sandbox_plan = with_console(sandbox_plan, slave_name)
                setup = _child_setup(use_pty, rlimits or [], enter_cgroup,
                                     lambda: enter(sandbox_plan))
            proc = start(slave, slave, slave)
            os.close(slave)
            opened.remove(slave)
            os.set_blocking(master, False)
            return Spawned(proc, pty_master=master, slave_name=slave_name, fds=[master])
        out_r, out_w = os.pipe()
        opened += [out_r, out_w]
        err_r = err_w = None
        if separate_stderr:
            err_r, err_w = os.pipe()
            opened += [err_r, err_w]
        stdin = subprocess.DEVNULL if stdin_fd is None else stdin_fd
        proc = start(stdin, out_w, out_w if err_w is None else err_w)
        readers = [fd for fd in (out_r, err_r) if fd is not None]
        for fd in (out_w, err_w):
            if fd is not None:
                os.close(fd)
                opened.remove(fd)
        for fd in readers:
            os.set_blocking(fd, False)
        return Spawned(proc, stdout=out_r, stderr=err_r, fds=readers)
    except PtyUnavailable:
        raise
    except BaseException as exc:
        for fd in opened:
            try:
                os.close(fd)
            except OSError:
                pass
        if isinstance(exc, FileNotFoundError) and exc.filename == cwd:
            raise SpawnError(f"workdir {cwd} does not exist; pass an existing directory") from None
        if isinstance(exc, NotADirectoryError):
            raise SpawnError(f"workdir {cwd} is not a directory; pass an existing directory") from None
        if isinstance(exc, PermissionError) and exc.filename == cwd:
            raise SpawnError(f"workdir {cwd} is not accessible (permission denied)") from None
        if isinstance(exc, OSError):
            raise SpawnError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        raise


def set_window_size(fd: int, rows: int, columns: int) -> None:
    """The terminal size programs in the PTY see (``TIOCSWINSZ``; either end works)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
