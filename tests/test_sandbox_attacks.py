"""Sandbox v2 (supervisor/sandbox_plan.py, docs/design.md §1): an allow-list, not a deny-list.

Each test is something a hostile agent's command did on a host where the sandbox only
hid PADDEDCELL_HOME and the stores: reach a human's tmux or screen server, a FIFO
runner, a local service, write the human's ``.bashrc`` or PATH, PaddedCell's own
files, another agent's workspace, read the host key through a second mount, write
``core_pattern`` under a root daemon, take the host down with a fork bomb or a memory
hog. Plus: what agents need still works inside (a compiler, a loopback server, a
persistent home). Tools the tests play come from scripts/ensure-test-tools.sh.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddedcell.supervisor import sandbox
from supervisor_helpers import Daemon, give_workspace, needs_sandbox, pid_by_argv0, two_agent_home

pytestmark = needs_sandbox()

ADMIN = "admin-pw-for-tests-1"
A1_DB = "A1-attack-value-0000-aaaa"
VICTIM_DB = "VICTIM-attack-value-9999-vv"
ROOT = sandbox.host_root()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("attacks")
    home, ws, wv = two_agent_home(root, A1_DB, VICTIM_DB, ADMIN)
    human, human_bin = root / "human", root / "human-bin"
    for d in (human, human_bin, human / ".ssh"):
        d.mkdir(mode=0o700)
    (human / ".bashrc").write_text("# the human's\n")
    (human / ".ssh" / "authorized_keys").write_text("")
    (wv / "deploy.sh").write_text("echo deploying\n")
    daemon = Daemon(home, HOME=str(human),
                    PATH=f"{human_bin}{os.pathsep}{Path(sys.executable).parent}"
                         f"{os.pathsep}{os.environ.get('PATH', '')}")
    yield {"root": root, "home": home, "ws": ws, "wv": wv, "human": human,
           "human_bin": human_bin, "daemon": daemon}
    daemon.stop()


def run(world, command, agent="a1", timeout=60, **fields):
    ws = world["ws"] if agent == "a1" else world["wv"]
    result = world["daemon"].call("/exec", {"command": command, "agentId": agent,
                                            "agentWorkspace": str(ws), "awaitResults": True,
                                            "timeoutSeconds": timeout, **fields})
    return result["content"][0]["text"]


def q(path) -> str:
    return shlex.quote(str(path))


def need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (scripts/ensure-test-tools.sh installs it)")
    return found


def test_a_tmux_server_started_outside_is_out_of_reach(world, tmp_path):
    need("tmux")
    flag = world["ws"] / "tmux-pwned"
    for sock in (tmp_path / "tmux.sock", Path(f"/tmp/pc-tmux-{os.getpid()}")):
        subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "sleep 120"], check=True)
        try:
            out = run(world, f"tmux -S {q(sock)} run-shell 'touch {q(flag)}'; echo rc=$?; "
                             f"ls -la {q(sock)}")
            time.sleep(0.3)
            assert "rc=0" not in out and not flag.exists(), out
        finally:
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def test_a_screen_session_started_outside_is_out_of_reach(world, tmp_path):
    need("screen")
    name = f"pc-human-{os.getpid()}"
    flag = world["ws"] / "screen-pwned"
    screendir = tmp_path / "screens"
    screendir.mkdir(mode=0o700)
    env = {**os.environ, "SCREENDIR": str(screendir)}
    subprocess.run(["screen", "-dmS", name, "sh"], env=env, check=True)
    try:
        out = run(world, f"SCREENDIR={q(screendir)} screen -S {name} -X stuff "
                         f"'touch {q(flag)}\\n'; echo rc=$?; screen -ls; "
                         "ls /run/screen /var/run/screen")
        time.sleep(0.5)
        assert "rc=0" not in out and name not in out and not flag.exists(), out
    finally:
        subprocess.run(["screen", "-S", name, "-X", "quit"], env=env, capture_output=True)


def test_a_fifo_runner_in_tmp_gets_nothing(world):
    fifo = Path(f"/tmp/pc-runner-{os.getpid()}.fifo")
    os.mkfifo(fifo, 0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        # /tmp is the session's own: the write lands in a file nobody reads.
        run(world, f"echo 'cat keys' > {q(fifo)}; ls -l {q(fifo)}")
        try:
            assert os.read(reader, 100) == b""
        except BlockingIOError:
            pass
    finally:
        os.close(reader)
        fifo.unlink()


def test_local_services_and_abstract_sockets_outside_are_out_of_reach(world):
    # sshd, a database, the systemd user bus, X11: the session's network namespace has
    # its own loopback and no abstract socket of the host's.
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0pc-bus-{os.getpid()}"
    abstract.bind(name)
    abstract.listen(1)
    code = ("import socket\n"
            f"for fam, addr in ((socket.AF_INET, ('127.0.0.1', {tcp.getsockname()[1]})),"
            f" (socket.AF_UNIX, {name!r})):\n"
            "    s = socket.socket(fam)\n"
            "    try:\n"
            "        s.connect(addr); print('REACHED', fam)\n"
            "    except OSError as e:\n"
            "        print('REFUSED', e)\n")
    try:
        out = run(world, f"{q(sys.executable)} -c {q(code)}")
        assert "REACHED" not in out and out.count("REFUSED") == 2, out
    finally:
        tcp.close()
        abstract.close()


def test_cron_and_at_take_no_job(world):
    need("crontab")
    before = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
    flag = world["ws"] / "cron-pwned"
    out = run(world, f"echo '* * * * * touch {q(flag)}' | crontab -; echo rc=$?; "
                     f"echo 'touch {q(flag)}' | at now + 1 minute; echo rc2=$?")
    assert "rc=0" not in out and "rc2=0" not in out, out
    after = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
    assert after == before


def test_the_humans_home_and_path_are_not_there(world):
    human, human_bin = world["human"], world["human_bin"]
    out = run(world, f"echo 'cp $PADDEDCELL_HOME/keys/host.key /tmp' >> {q(human)}/.bashrc; "
                     f"echo rc1=$?; echo ssh-ed25519 AAAA >> {q(human)}/.ssh/authorized_keys; "
                     f"echo rc2=$?; printf '#!/bin/sh\\ntee /tmp/pw\\n' > {q(human_bin)}/pass_mgr; "
                     f"echo rc3=$?; ls {q(human)} {q(human_bin)}; echo HOME=$HOME")
    for rc in ("rc1=0", "rc2=0", "rc3=0"):
        assert rc not in out, out
    assert (human / ".bashrc").read_text() == "# the human's\n"
    assert (human / ".ssh" / "authorized_keys").read_text() == ""
    assert not (human_bin / "pass_mgr").exists()
    assert f"HOME={human}\n" not in out + "\n"


def test_the_agent_home_persists_across_sessions_and_is_its_own(world):
    run(world, "mkdir -p ~/.cache/pip && echo kept > ~/.cache/pip/marker")
    assert "kept" in run(world, "cat ~/.cache/pip/marker")
    assert "kept" not in run(world, "cat ~/.cache/pip/marker", agent="victim")


def test_paddedcell_s_own_files_are_read_only(world):
    import paddedcell

    package = Path(paddedcell.__file__).parent
    out = run(world, f"touch {q(package)}/evil.py; echo rc1=$?; "
                     f"touch {q(Path(sys.prefix) / 'bin' / 'evil')}; echo rc2=$?; "
                     f"cat {q(package)}/__init__.py >/dev/null; echo rc3=$?")
    assert "rc1=0" not in out and "rc2=0" not in out and "rc3=0" in out, out
    assert not (package / "evil.py").exists()


def test_another_agents_workspace_and_stores_are_absent(world):
    wv, ws = world["wv"], world["ws"]
    out = run(world, f"echo 'cat $HOME/x' >> {q(wv)}/deploy.sh; echo rc1=$?; ls -A {q(wv)}; "
                     f"mv {q(ws)}/.paddedcell {q(ws)}/moved; echo rc2=$?; "
                     f"ls -A {q(ws)}/.paddedcell; echo END")
    assert "rc1=0" not in out and "rc2=0" not in out and "END" in out, out
    assert (wv / "deploy.sh").read_text() == "echo deploying\n"
    assert "secrets" not in out, out  # our own store is covered too
    assert (ws / ".paddedcell").is_dir()


@pytest.mark.skipif(not ROOT, reason="a second mount of a filesystem needs root to make")
def test_a_second_mount_of_the_same_filesystem_shows_nothing(world):
    alias = Path(f"/mnt/pc-alias-{os.getpid()}")
    alias.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(world["root"]), str(alias)], check=True)
    try:
        key = alias / "home" / "keys" / "host.key"
        assert key.exists()
        out = run(world, f"echo BYTES=$(cat {q(key)} | wc -c); ls {q(alias)}; echo END")
        assert "BYTES=0" in out and "END" in out and "keys" not in out.replace(str(key), ""), out
    finally:
        subprocess.run(["umount", str(alias)], check=True)
        alias.rmdir()


def test_core_pattern_and_proc_sys_are_not_writable(world):
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    out = run(world, "echo '|/tmp/x' > /proc/sys/kernel/core_pattern; echo rc=$?; id -u; "
                     "touch owned-by-me")
    assert "rc=0" not in out, out
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before
    if ROOT:  # a root daemon's session runs as the agent's own unprivileged uid
        assert (world["ws"] / "owned-by-me").stat().st_uid != 0


def test_a_compiler_writes_into_the_workspace_and_its_program_runs(world):
    need("cc")
    (world["ws"] / "hello.c").write_text('#include <stdio.h>\nint main(void){puts("hi-from-c");}\n')
    out = run(world, "cc -o hello hello.c && ./hello")
    assert "hi-from-c" in out, out


def test_a_server_on_a_loopback_port_inside_the_session(world):
    code = ("import http.server, threading, urllib.request\n"
            "srv = http.server.HTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
            "threading.Thread(target=srv.serve_forever, daemon=True).start()\n"
            "url = 'http://127.0.0.1:%d/' % srv.server_address[1]\n"
            "print('STATUS', urllib.request.urlopen(url, timeout=5).status)\n")
    out = run(world, f"{q(sys.executable)} -c {q(code)} 2>&1")
    assert "STATUS 200" in out, out


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A daemon with small limits: 64 processes, 256 MiB of memory per process."""
    root = tmp_path_factory.mktemp("limits")
    home, ws, wv = root / "home", root / "ws-a1", root / "ws-victim"
    for d in (home, ws, wv):
        d.mkdir(mode=0o700)
    # Agent uids of their own (RLIMIT_NPROC counts every process of a uid on the host: a
    # session another test left behind under the default range's first uid would count).
    uids = "1700000000:65536"
    give_workspace(home, "a1", ws, supervisor__sandbox_uid_range=uids)
    give_workspace(home, "victim", wv, supervisor__sandbox_uid_range=uids)
    daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX_PROCESSES="64",
                    PADDEDCELL_SUPERVISOR_SANDBOX_MEMORY_BYTES=str(256 * 1024 * 1024),
                    PADDEDCELL_SUPERVISOR_SANDBOX_UID_RANGE=uids)
    yield {"home": home, "ws": ws, "wv": wv, "daemon": daemon}
    daemon.stop()


def test_a_fork_bomb_and_a_memory_hog_leave_the_daemon_and_other_sessions_alive(limited):
    daemon = limited["daemon"]
    bomb = daemon.call("/exec", {"command": "exec -a pc-fork-bomb bash -c 'b(){ b | b & }; b; "
                                            "sleep 30'",
                                 "agentId": "a1", "agentWorkspace": str(limited["ws"]),
                                 "background": True})["details"]["sessionId"]
    try:
        pid_by_argv0("pc-fork-bomb", timeout=60)  # a loaded CI machine starts it late
        time.sleep(2)
        hog = ("b = []\ntry:\n    while True: b.append(bytearray(16 << 20))\n"
               "except MemoryError:\n    print('HOG-STOPPED', len(b) * 16, 'MiB')\n")
        started = time.monotonic()
        answer = daemon.call("/exec", {"command": f"echo alive; {q(sys.executable)} -c {q(hog)}",
                                       "agentId": "victim", "agentWorkspace": str(limited["wv"]),
                                       "awaitResults": True, "timeoutSeconds": 60})
        out = answer["content"][0]["text"]
        assert "alive" in out and "HOG-STOPPED" in out, out
        assert int(out.split("HOG-STOPPED")[1].split()[0]) <= 256
        assert time.monotonic() - started < 30
        assert daemon.client.healthy()
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": bomb, "agentId": "a1"})
    assert daemon.client.healthy()
