"""Shared helpers for the supervisor, pcexec, daemon-exec and process tests.

Commands are built from ``sys.executable`` (as trio's own subprocess tests
do), so they behave the same on every machine.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paddedcell import config

PY = shlex.quote(sys.executable)
BIN = Path(sys.executable).parent
#: The pass_mgr binary's directory: agents of their own uid (``sandbox = "user"``) run it.
PASS_MGR_DIR = Path(__file__).parents[1] / "dist" / "pass_mgr"


def pass_mgr_closed_to_others() -> Path | None:
    """The first directory on the way to dist/pass_mgr that other users cannot cross
    (or the binary itself when missing), or None: user mode needs it reachable."""
    closed = [p for p in (PASS_MGR_DIR, *PASS_MGR_DIR.parents) if not os.stat(p).st_mode & 0o001]
    if closed:
        return closed[0]
    return None if os.access(PASS_MGR_DIR / "pass_mgr", os.X_OK) else PASS_MGR_DIR / "pass_mgr"


@contextlib.contextmanager
def world_for_other_uids(prefix: str, workspace_mode: int):
    """``(home, ws)`` under a fresh 0711 directory in /tmp that agents of other uids can
    cross (pytest's own tmp_path is 0700): home 0700, the workspace ``workspace_mode``."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        root.chmod(0o711)
        home, ws = root / "home", root / "ws"
        home.mkdir(mode=0o700)
        ws.mkdir(mode=workspace_mode)
        yield home, ws
    finally:
        shutil.rmtree(root, ignore_errors=True)


def py(code: str) -> str:
    """A shell command running ``code`` in this Python."""
    return f"{PY} -c {shlex.quote(code)}"


def make_settings(home: Path, **overrides):
    home.mkdir(parents=True, exist_ok=True)
    return config.load(environ={"PADDEDCELL_HOME": str(home)},
                       overrides={k.replace("__", "."): v for k, v in overrides.items()})


def alive(pid: int) -> bool:
    """Running (not a zombie, not gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def pid_by_argv0(name: str, timeout: float = 20.0) -> int:
    """The host pid of the process whose ``argv[0]`` is ``name`` (``exec -a NAME``).

    A pid a command reports (``$$``) is its PID-namespace pid when the sandbox is
    on (supervisor/sandbox.py); this finds the process from outside instead.
    """
    deadline = time.monotonic() + timeout
    wanted = name.encode() + b"\0"
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        if f.read().startswith(wanted):
                            return int(entry)
                except OSError:
                    continue
        time.sleep(0.02)
    raise AssertionError(f"no process named {name}")


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


def base_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PADDEDCELL_") and k not in
           ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "OPENCLAW_SHELL")}
    env["PADDEDCELL_HOME"] = str(home)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def daemon_cwd(home: Path) -> Path:
    """A test daemon's working directory, which an exec without a workdir runs in: one of
    its own beside ``home``, not the checkout's, which a clean clone in ``mktemp -d``
    leaves 0700 (a root daemon's agent uid cannot enter it) and which an agent should not
    be given anyway."""
    cwd = home.parent / f"{home.name}-cwd"
    cwd.mkdir(exist_ok=True)
    cwd.chmod(0o755)
    return cwd


class Daemon:
    """A daemon in a temp PADDEDCELL_HOME, stopped with SIGTERM to its own pid."""

    def __init__(self, home: Path, open_files: int | None = None, **env: str):
        """``open_files``: the daemon's RLIMIT_NOFILE (floods run out of it sooner)."""
        self.home = home
        self.env = base_env(home, **env)
        self.log = open(home / "daemon-test.log", "ab")
        self.cwd = daemon_cwd(home)

        def limit() -> None:  # the soft limit: a session may raise its own again
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE,
                               (open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

        self.proc = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "serve"],
                                     env=self.env, stdout=self.log, stderr=self.log,
                                     cwd=self.cwd, start_new_session=True,
                                     preexec_fn=limit if open_files else None)
        from paddedcell.daemon.client import DaemonClient
        self.client = DaemonClient(config.load(environ=self.env), timeout=60)
        deadline = time.monotonic() + 15
        while not self.client.healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("daemon did not start: "
                                     + (home / "daemon-test.log").read_text()[-2000:])
            time.sleep(0.05)

    def __enter__(self) -> "Daemon":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, path: str, body: dict) -> dict:
        # Explicit timeout: the client's kept-alive socket keeps healthy()'s 2 s otherwise.
        return self.client.call("POST", path, body, timeout=300)

    def rss_kib(self, field: str = "VmRSS") -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(field)

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def init_vault(home: Path, admin_password: str = "admin-pw-for-tests-1") -> str:
    env = base_env(home)
    subprocess.run([str(BIN / "pass_mgr"), "admin", "init", "--password-stdin"],
                   input=admin_password + "\n", env=env, check=True, capture_output=True, text=True)
    return admin_password


def set_secret(home: Path, agent: str, workspace: Path, key: str, value: str,
               admin_password: str = "admin-pw-for-tests-1") -> None:
    subprocess.run([str(BIN / "pass_mgr"), "set", agent, str(workspace), key, value, admin_password],
                   env=base_env(home), check=True, capture_output=True, text=True)


def give_workspace(home: Path, agent: str, workspace: Path, **overrides) -> None:
    """What a root daemon's refusal tells an operator to do, done: ``chown UID:GID`` the
    workspace (its top directory) to ``agent``'s own uid (supervisor/sandbox_plan.py gives
    away nothing it did not create). Nothing as an ordinary user (agents run as it)."""
    from paddedcell.supervisor import sandbox, sandbox_plan

    if sandbox.host_root():
        os.chown(workspace, *sandbox_plan.agent_ids(make_settings(home, **overrides), agent))


def two_agent_home(root: Path, a1_db: str, victim_db: str,
                   admin_password: str = "admin-pw-for-tests-1") -> tuple[Path, Path, Path]:
    """``(home, ws, wv)`` under root: an initialised vault, and the workspaces of agents
    ``a1`` and ``victim``, whose ``db`` secrets are ``a1_db`` and ``victim_db``."""
    home, ws, wv = root / "home", root / "ws-a1", root / "ws-victim"
    for d in (home, ws, wv):
        d.mkdir(mode=0o700)
    init_vault(home, admin_password)
    set_secret(home, "a1", ws, "db", a1_db, admin_password)
    set_secret(home, "victim", wv, "db", victim_db, admin_password)
    give_workspace(home, "a1", ws)
    give_workspace(home, "victim", wv)
    return home, ws, wv


def needs_sandbox():
    """The skip mark of tests that need the namespace sandbox (supervisor/sandbox.py)."""
    import pytest

    from paddedcell.supervisor import sandbox

    ok, why = sandbox.available()
    return pytest.mark.skipif(not ok, reason=f"this host has no namespaces for the sandbox: {why}")


#: The session's terminal reopened by each of its names (what pinentry, ssh's password
#: prompt and ``exec </dev/tty`` scripts do); ``$(tty)`` is its own name inside.
TERMINAL_NAMES = ("/dev/tty", '"$(tty)"', "/dev/console")


def reopen_terminal_probe(names=TERMINAL_NAMES) -> str:
    """A command that opens each of ``names`` read-write and writes to it (no input)."""
    return "; ".join(f'(exec 3<>{n} && echo "to {n}" >&3) && echo "opened {n}" '
                     f'|| echo "FAILED {n}"' for n in names)


def read_through_terminal(daemon, body: dict, names=TERMINAL_NAMES) -> str:
    """Run a PTY session of ``daemon`` (``body``: agent, workspace…) that reads one line
    through each of ``names``; type each line after its prompt; the session's log."""
    reads = "; ".join(f'echo want-{i}; read -r line < {n} && echo "got-{i}=$line" '
                      f'|| echo "got-{i} FAILED"' for i, n in enumerate(names))
    agent = body["agentId"]
    sid = daemon.call("/exec", {**body, "command": reads + "; echo all-done", "pty": True,
                                "background": True})["details"]["sessionId"]

    def log() -> str:
        return daemon.call("/process", {"action": "log", "agentId": agent,
                                        "sessionId": sid})["content"][0]["text"]

    def wait_for(text: str) -> str:
        deadline = time.monotonic() + 20
        while text not in (seen := log()):
            if time.monotonic() > deadline:
                return seen
            time.sleep(0.05)
        return seen

    try:
        for i in range(len(names)):
            if "FAILED" in wait_for(f"want-{i}"):
                break
            daemon.call("/process", {"action": "write", "agentId": agent, "sessionId": sid,
                                     "data": f"line-{i}\n"})
            wait_for(f"got-{i}")
        return wait_for("all-done")
    finally:
        daemon.call("/process", {"action": "remove", "agentId": agent, "sessionId": sid})


async def assert_every_cut_masks_exactly(read, secret: str) -> None:
    """A reader thread's batches are whatever it found ready: a secret cut at any byte
    between two batches comes out as the redactor's one-shot output. ``read(parts,
    feed)`` runs the reader over ``parts`` written one at a time and returns
    ``(shown, filter calls)``."""
    from paddedcell.redactor import StreamRedactor

    text = f"before {secret} after".encode()
    start = text.index(secret.encode())
    for cut in range(start, start + len(secret) + 1):
        redactor = StreamRedactor([secret])
        shown, calls = await read([text[:cut], text[cut:]], redactor.feed)
        assert calls == 2
        one_shot = StreamRedactor([secret])
        assert b"".join(shown) + redactor.flush() == one_shot.feed(text) + one_shot.flush(), cut


async def assert_buffer_edges_mask_exactly(read, secret: str, size: int = 4096,
                                           repeat: int = 1) -> None:
    """A part bigger than the reader's buffer is read in several fills: secrets straddle
    the buffer's edge at every offset mod its size (``read(parts, feed, buffer_size=)``)."""
    from paddedcell.redactor import StreamRedactor

    text = b"".join(b"y" * gap + secret.encode() for gap in range(size - 40, size + 40, 7)) * repeat
    redactor = StreamRedactor([secret])
    shown, calls = await read([text], redactor.feed, buffer_size=size)
    assert calls >= len(text) // size
    one_shot = StreamRedactor([secret])
    assert b"".join(shown) + redactor.flush() == one_shot.feed(text) + one_shot.flush()


class ReaderPipe:
    """A non-blocking pipe (read end), an eventfd to stop its reader, closed at the end."""

    def __init__(self):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.stop = os.eventfd(0)

    def close_writer(self) -> None:
        if self.w is not None:
            os.close(self.w)
            self.w = None

    def close(self) -> None:
        self.close_writer()
        os.close(self.r)
        os.close(self.stop)


async def run_reader(parts: list[bytes], filter_batch, make_reader) -> tuple[list[bytes], int]:
    """Run a reader thread (``make_reader(show)(fd, stop_fd, filter)``: readahead's
    ``read_pipe`` or ``read_terminal`` with its buffer and a hand-off to ``show``, made on
    the loop, as a hand-off must be) on a pipe fed ``parts``, each written only once the
    batch holding the one before was filtered (every part boundary is a batch boundary);
    ``(shown pieces, filter calls)``."""
    import threading

    import trio

    shown: list[bytes] = []
    calls = [0]
    filtered = threading.Semaphore(0)

    def counting(view):
        calls[0] += 1
        out = filter_batch(bytes(view))
        filtered.release()
        return out

    reader = make_reader(shown.append)
    pipe = ReaderPipe()
    try:
        def feed():
            for part in parts:
                os.write(pipe.w, part)
                filtered.acquire()  # the batch holding this part was filtered
            pipe.close_writer()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, feed)
            await trio.to_thread.run_sync(reader, pipe.r, pipe.stop, counting)
    finally:
        pipe.close()
    return shown, calls[0]
