"""No namespaces means another Unix user (``supervisor.sandbox = "user"``, what "auto"
falls back to under a root daemon; docs/design.md §1): each agent's commands run as its
own unprivileged uid, so what an agent's process does after it left its session — an
orphan that outlived it, a forged session marker, a request straight to the daemon's
socket — meets file permissions, not an environment variable anyone can set.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from paddedcell.supervisor import sandbox
from supervisor_helpers import (BIN, Daemon, base_env, give_workspace, pid_by_argv0, read_through_terminal,
                                two_agent_home)

pytestmark = pytest.mark.skipif(not sandbox.host_root(),
                                reason="running agents as their own uids needs a root daemon")

ADMIN = "admin-pw-for-tests-1"
A1_DB = "A1-user-mode-value-0000"
VICTIM_DB = "VICTIM-user-mode-value-9999"
#: The standalone pass_mgr: an agent's uid may not reach the interpreter of this venv.
PASS_MGR_DIR = Path(__file__).parents[1] / "dist" / "pass_mgr"


@pytest.fixture(scope="module")
def world():
    if not os.access(PASS_MGR_DIR / "pass_mgr", os.X_OK):
        pytest.skip("dist/pass_mgr is not built (make binary)")
    # Without namespaces the agents' uids reach pass_mgr by its real path: a checkout
    # below a directory closed to other users (a mktemp -d clone, /root) cannot serve them.
    closed = [p for p in (PASS_MGR_DIR, *PASS_MGR_DIR.parents) if not os.stat(p).st_mode & 0o001]
    if closed:
        pytest.skip(f"user mode needs PaddedCell where other users can reach it; {closed[0]} "
                    "is closed to them (chmod o+x, or install it elsewhere)")
    # Not under pytest's 0700 basetemp: the agents' uids reach their workspaces by path.
    root = Path(tempfile.mkdtemp(prefix="pc-user-mode-", dir="/tmp"))
    root.chmod(0o711)
    home, ws, wv = two_agent_home(root, A1_DB, VICTIM_DB, ADMIN)
    path = f"{PASS_MGR_DIR}:/usr/bin:/bin"
    daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="user", PATH=path)
    yield {"home": home, "ws": ws, "wv": wv, "daemon": daemon, "path": path}
    daemon.stop()
    shutil.rmtree(root, ignore_errors=True)


def run(world, command, agent="a1"):
    ws = world["ws"] if agent == "a1" else world["wv"]
    return world["daemon"].call("/exec", {"command": command, "agentId": agent,
                                          "agentWorkspace": str(ws), "awaitResults": True,
                                          "timeoutSeconds": 60})["content"][0]["text"]


def script(world, name: str, text: str) -> str:
    """A script in a1's workspace (the command scanner refuses identity variables in a
    command's own text), readable by a1's uid; the command that runs it."""
    path = world["ws"] / name
    path.write_text(text)
    path.chmod(0o755)
    return f"sh {shlex.quote(str(path))}"


def test_each_agent_runs_as_its_own_uid_and_cannot_read_the_home(world):
    out_a1 = run(world, f"id -u; cat {shlex.quote(str(world['home']))}/keys/host.key; "
                        "pass_mgr get db")
    out_victim = run(world, "id -u", agent="victim")
    uid_a1, uid_victim = int(out_a1.split()[0]), int(out_victim.split()[0])
    assert 0 not in (uid_a1, uid_victim) and uid_a1 != uid_victim
    assert "Permission denied" in out_a1 and "######" in out_a1, out_a1  # its own, masked
    assert A1_DB not in out_a1


@pytest.mark.parametrize("via", ["daemon", "pcexec"])
def test_an_orphan_claiming_another_agent_gets_nothing(world, via):
    loot = world["ws"] / f"loot-{via}"
    wv = shlex.quote(str(world["wv"]))
    command = script(world, f"orphan-{via}.sh",
                     f"( env -i AGENT_ID=victim AGENT_WORKSPACE={wv} PATH={world['path']} "
                     f"setsid sh -c 'sleep 2; pass_mgr get db > {shlex.quote(str(loot))} 2>&1' & )\n"
                     "echo left\n")
    if via == "daemon":
        assert "left" in run(world, command)
    else:  # a foreground pcexec that exits first: the orphan goes to init, no supervisor above
        env = base_env(world["home"], AGENT_ID="a1", AGENT_WORKSPACE=str(world["ws"]),
                       PADDEDCELL_SUPERVISOR_SANDBOX="user",
                       PATH=f"{world['path']}:{BIN}")
        done = subprocess.run([str(BIN / "pcexec"), command], env=env, capture_output=True,
                              text=True, timeout=60, cwd=str(world["ws"]))
        assert "left" in done.stdout, done
    deadline = time.monotonic() + 20
    while not (loot.exists() and loot.read_text().strip()):
        assert time.monotonic() < deadline, "the orphan never wrote"
        time.sleep(0.1)
    time.sleep(0.3)
    text = loot.read_text()
    assert VICTIM_DB not in text and "######" not in text, text


def test_a_request_straight_to_the_daemon_socket_is_closed_to_an_agent(world):
    sock = world["home"] / "run" / "paddedcell.sock"
    assert sock.exists()
    code = ("import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n"
            f"    s.connect({str(sock)!r})\n"
            "    s.sendall(b'POST /exec HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n'\n"
            "              b'Content-Length: 49\\r\\n\\r\\n{\"command\":\"pass_mgr get db\",\"agentId\":\"victim\"}')\n"
            "    print('CONNECTED', s.recv(4096))\nexcept OSError as e:\n    print('REFUSED', e)\n")
    out = run(world, script(world, "post.sh", f"env -i /usr/bin/python3 -c {shlex.quote(code)}\n"))
    assert "REFUSED" in out and "CONNECTED" not in out, out
    assert VICTIM_DB not in out


def test_another_agents_session_marker_cannot_be_read(world):
    daemon = world["daemon"]
    sid = daemon.call("/exec", {"command": "exec -a pc-victim-sleeper sleep 30",
                                "agentId": "victim", "agentWorkspace": str(world["wv"]),
                                "background": True})["details"]["sessionId"]
    try:
        pid = pid_by_argv0("pc-victim-sleeper")
        out = run(world, f"cat /proc/{pid}/environ | tr '\\0' '\\n' | grep PADDEDCELL; "
                         f"echo rc=$?; ls -l /proc/{pid}/fd 2>&1 | head -3")
        assert "PADDEDCELL_TREE" not in out and "PADDEDCELL_CHANNEL" not in out, out
        assert "Permission denied" in out, out
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "victim"})


def test_a_pass_mgr_the_agent_uids_cannot_reach_refuses_agent_commands(tmp_path):
    """Installed under a directory closed to other users (/root, a 0700 home), pass_mgr
    would fail inside every command: refuse them up front, in one line with the fix."""
    closed = Path(tempfile.mkdtemp(prefix="pc-closed-", dir="/tmp"))
    try:
        closed.chmod(0o700)
        (closed / "pass_mgr").write_text("#!/bin/sh\nexit 0\n")
        (closed / "pass_mgr").chmod(0o755)
        ws = Path(tempfile.mkdtemp(prefix="pc-user-ws-", dir="/tmp"))
        ws.chmod(0o755)
        give_workspace(tmp_path / "home", "a1", ws)
        env = base_env(tmp_path / "home", AGENT_ID="a1", AGENT_WORKSPACE=str(ws),
                       PADDEDCELL_SUPERVISOR_SANDBOX="user", PATH=f"{closed}:/usr/bin:/bin")
        done = subprocess.run([str(BIN / "pcexec"), "echo ran"], env=env, capture_output=True,
                              text=True, timeout=60, cwd=str(ws))
        assert done.returncode != 0 and "ran" not in done.stdout, done
        line = done.stderr.strip()
        assert "agent commands refused" in line and f"{closed} is mode 0700" in line, line
        assert f"chmod o+rx {closed}" in line and len(line.splitlines()) == 1, line
    finally:
        shutil.rmtree(closed, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


def test_the_agent_reopens_its_own_terminal_and_not_the_hosts_console(world):
    """A PTY session as the agent's uid reads typed lines through ``/dev/tty`` and its
    slave's own name (the slave is the agent's); the host's ``/dev/console`` stays closed."""
    log = read_through_terminal(world["daemon"], {"agentId": "a1",
                                                  "agentWorkspace": str(world["ws"]),
                                                  "timeoutSeconds": 60},
                                names=("/dev/tty", '"$(tty)"'))
    assert "got-0=line-0" in log and "got-1=line-1" in log and "FAILED" not in log, log
    out = run(world, "(exec 3<>/dev/console) && echo CONSOLE-OPENED; id -u")
    assert "CONSOLE-OPENED" not in out, out
