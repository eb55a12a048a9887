"""Every session's uid has a name (supervisor/sandbox_plan.py ``agent_identity``;
docs/design.md §1): under a root daemon an agent runs as a uid the host's passwd does
not know, so the sandbox binds the host's /etc/passwd and /etc/group plus its line
read-only over them. Without it ``ssh`` refuses to start ("No user exists for uid"),
``whoami`` and ``getpass.getuser()`` fail.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from paddedcell.supervisor import sandbox
from paddedcell.supervisor.sandbox_plan import identity_texts, user_name
from supervisor_helpers import (BIN, PASS_MGR_DIR, TERMINAL_NAMES, Daemon, base_env, give_workspace,
                                needs_sandbox, pass_mgr_closed_to_others, read_through_terminal,
                                reopen_terminal_probe, world_for_other_uids)

PASSWD = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
#: What a session prints about who it is; each line is checked.
PROBE = ("echo id-un=$(id -un); echo whoami=$(whoami); echo user=$USER logname=$LOGNAME; "
         "python3 -c 'import getpass; print(\"getpass=\" + getpass.getuser())'; "
         "echo getent=$(getent passwd $(id -u)); echo group=$(getent group $(id -g)); "
         "echo home=$HOME; "
         "if command -v ssh >/dev/null; then ssh -V 2>&1 | sed 's/^/ssh-v=/'; "
         "ssh -o BatchMode=yes -o ConnectTimeout=5 -p {port} 127.0.0.1 true 2>&1 "
         "| sed 's/^/ssh=/'; fi; "
         "(echo 'evil::0:0::/:/bin/sh' >> /etc/passwd) 2>/dev/null && echo WROTE-PASSWD; true")


def test_a_uid_the_host_does_not_know_gets_a_line_and_the_host_lines_stay():
    name, passwd, group = identity_texts(PASSWD, GROUP, agent_id="a1", uid=1500000000,
                                         gid=1500000000, home="/h/agents/a1/home")
    assert name == "agent-a1"
    assert passwd == PASSWD + "agent-a1:x:1500000000:1500000000:PaddedCell agent:/h/agents/a1/home:/bin/sh\n"
    assert group == GROUP + "agent-a1:x:1500000000:\n"
    # A uid and gid the host knows: its own name, its home the session's $HOME (ssh
    # looks there for ~/.ssh; the host's is hidden), the host's files where they agree.
    assert identity_texts(PASSWD, GROUP, agent_id="a1", uid=65534, gid=65534, home="/h") == (
        "nobody", PASSWD.replace("/nonexistent", "/h"), None)
    assert identity_texts(PASSWD, GROUP, agent_id="a1", uid=0, gid=0, home="/root") == (
        "root", None, None)


@pytest.mark.parametrize("agent_id", ["Evil\nroot::0:0::/:/bin/sh", "a:b", "UPPER.Case",
                                      "x" * 60, None])
def test_an_agent_id_never_breaks_or_adds_a_line(agent_id):
    name, passwd, _ = identity_texts(PASSWD, GROUP, agent_id=agent_id, uid=1500000001,
                                     gid=1500000001, home="/h:x\nroot::0:0::/:/bin/sh")
    assert re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name), name
    added = passwd[len(PASSWD):]
    assert added.count("\n") == 1 and added.count(":") == 6, added
    assert added.split(":")[5] == "/nonexistent"


def test_a_name_the_host_already_uses_is_not_reused():
    assert user_name("nobody", 1500000002, {"agent-nobody": 1000}) == "agent-1500000002"
    assert user_name("nobody", 1500000002, {"agent-nobody": 1500000002}) == "agent-nobody"


def _check(out: str, expected: str, port: int) -> None:
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for key in ("id-un", "whoami", "getpass"):
        assert lines.get(key) == expected, out
    assert lines.get("user") == f"{expected} logname={expected}", out
    entry = lines["getent"].split(":")
    assert entry[0] == expected and entry[5] == lines["home"], out
    assert lines["group"].split(":")[0] != "", out
    assert "WROTE-PASSWD" not in out, out
    if shutil.which("ssh"):
        assert lines.get("ssh-v", "").startswith("OpenSSH"), out
        assert "No user exists" not in out and "Connection refused" in out, out


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("profile", ["auto", "user"])
def test_pcexec_sees_its_own_name(tmp_path, profile):
    """pcexec: the agent's uid under root (both profiles), the user's own otherwise."""
    if profile == "user":
        if not sandbox.host_root():
            pytest.skip("sandbox = \"user\" runs agents as their own uids: needs root")
        if pass_mgr_closed_to_others():
            pytest.skip("user mode needs dist/pass_mgr where other users can reach it")
    elif not sandbox.available()[0]:
        pytest.skip(f"no namespaces for the sandbox: {sandbox.available()[1]}")
    with world_for_other_uids("pc-identity-", 0o777 if profile == "user" else 0o700) as (home, ws):
        give_workspace(home, "Agent.One", ws, supervisor__sandbox=profile)
        before = Path("/etc/passwd").read_bytes(), Path("/etc/group").read_bytes()
        port = _closed_port()
        env = base_env(home, AGENT_ID="Agent.One", AGENT_WORKSPACE=str(ws),
                       PADDEDCELL_SUPERVISOR_SANDBOX=profile,
                       PATH=f"{PASS_MGR_DIR}:{BIN}:/usr/bin:/bin")
        done = subprocess.run([str(BIN / "pcexec"), PROBE.format(port=port)], env=env,
                              capture_output=True, text=True, timeout=60, cwd=str(ws))
        expected = ("agent-agent-one" if sandbox.host_root()
                    else pwd.getpwuid(os.getuid()).pw_name)
        _check(done.stdout + done.stderr, expected, port)
        assert (Path("/etc/passwd").read_bytes(), Path("/etc/group").read_bytes()) == before


@needs_sandbox()
@pytest.mark.skipif(not sandbox.host_root(), reason="agents get uids of their own only "
                                                    "under a root daemon")
def test_daemon_sessions_of_two_agents_each_see_their_own_name(tmp_path):
    """Through the daemon (the zygote's spare builds the sandbox) and per agent."""
    home, ws, wv = tmp_path / "home", tmp_path / "ws", tmp_path / "wv"
    for path in (home, ws, wv):
        path.mkdir(mode=0o700)
    give_workspace(home, "a1", ws)
    give_workspace(home, "victim", wv)
    port = _closed_port()
    with Daemon(home) as daemon:
        for agent, workspace in (("a1", ws), ("victim", wv)):
            out = daemon.call("/exec", {"command": PROBE.format(port=port), "agentId": agent,
                                        "agentWorkspace": str(workspace),
                                        "awaitResults": True, "timeoutSeconds": 60})
            text = out["content"][0]["text"]
            _check(text, f"agent-{agent}", port)
            assert "agent-a1" not in text or agent == "a1", text  # only its own line
    assert "agent-" not in Path("/etc/passwd").read_text()


def test_the_copies_follow_the_hosts_files(tmp_path):
    """A user added on the host shows in the next session; a removed copy is rewritten."""
    from types import SimpleNamespace

    from paddedcell.supervisor.sandbox_plan import agent_identity

    etc, settings = tmp_path / "etc", SimpleNamespace(home_text=str(tmp_path / "home"))
    etc.mkdir()
    (etc / "passwd").write_text(PASSWD)
    (etc / "group").write_text(GROUP)
    name, binds = agent_identity(settings, "a1", 1500000000, 1500000000, "/h", str(etc))
    assert name == "agent-a1" and set(binds) == {"/etc/passwd", "/etc/group"}
    copy = Path(binds["/etc/passwd"])
    assert copy.stat().st_mode & 0o777 == 0o644
    (etc / "passwd").write_text(PASSWD + "alice:x:1000:1000::/home/alice:/bin/sh\n")
    agent_identity(settings, "a1", 1500000000, 1500000000, "/h", str(etc))
    assert "alice:x:1000" in copy.read_text() and copy.read_text().endswith(
        "agent-a1:x:1500000000:1500000000:PaddedCell agent:/h:/bin/sh\n")
    copy.unlink()
    assert agent_identity(settings, "a1", 1500000000, 1500000000, "/h", str(etc))[1] == binds
    assert "agent-a1" in copy.read_text()


TTY_PROBE = ("tty; echo tty-rc=$?; ls /dev/pts | tr '\\n' ' '; echo; "
             "ls -l /dev | grep -c '^c.* 136,' | sed 's/^/pty-nodes=/'")


def _check_tty(out: str) -> None:
    assert "/dev/console" in out and "tty-rc=0" in out, out
    assert "pty-nodes=1" in out, out  # its own slave only; the host's others stay out
    assert "ptmx" in out and not any(w.isdigit() for w in out.split()), out


@needs_sandbox()
def test_a_pty_session_has_a_terminal_name_and_no_other_pty(tmp_path):
    """``tty`` inside a PTY session names its terminal (its own slave at /dev/console);
    a PTY the host has open besides is not there (pcexec and the daemon's zygote)."""
    master, slave = os.openpty()  # another PTY on the host
    try:
        home, ws = tmp_path / "home", tmp_path / "ws"
        home.mkdir(mode=0o700)
        ws.mkdir(mode=0o700)
        give_workspace(home, "a1", ws)
        done = subprocess.run([str(BIN / "pcexec"), "--pty", TTY_PROBE],
                              env=base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws)),
                              capture_output=True, text=True, timeout=60, cwd=str(ws))
        _check_tty(done.stdout)
        with Daemon(home) as daemon:
            out = daemon.call("/exec", {"command": TTY_PROBE, "agentId": "a1", "pty": True,
                                        "agentWorkspace": str(ws), "awaitResults": True,
                                        "timeoutSeconds": 60})
            _check_tty(out["content"][0]["text"])
    finally:
        os.close(master)
        os.close(slave)


@needs_sandbox()
def test_the_session_reopens_its_terminal_by_name_as_the_agent(tmp_path):
    """``/dev/tty``, ``$(tty)`` and ``/dev/console`` open read-write and read a typed line
    in a PTY session (pcexec and the daemon's zygote). Under a root daemon the command runs
    as the agent's uid, so the slave must be the agent's, not root's 0620 (EACCES)."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    give_workspace(home, "a1", ws)
    probe = reopen_terminal_probe() + "; sh -c 'echo hi > /dev/console; echo ok'; id -u"
    done = subprocess.run([str(BIN / "pcexec"), "--pty", probe],
                          env=base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws)),
                          capture_output=True, text=True, timeout=60, cwd=str(ws))
    out = done.stdout
    assert "FAILED" not in out and out.count("opened ") == 3 and "\nok" in out, out
    assert "hi" in out and "to /dev/tty" in out, out
    assert (int(out.split()[-1]) == 0) == (os.getuid() == 0 and not sandbox.host_root())
    with Daemon(home) as daemon:
        log = read_through_terminal(daemon, {"agentId": "a1", "agentWorkspace": str(ws),
                                             "timeoutSeconds": 60})
    assert "FAILED" not in log, log
    assert all(f"got-{i}=line-{i}" in log for i in range(len(TERMINAL_NAMES))), log
