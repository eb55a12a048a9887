"""Human-only means not inside any agent session, whatever the environment (docs/design.md §4.3).

``pass_mgr admin init`` (first time and after a lock), ``admin recover`` and
``set`` refuse inside a session's process tree even when the command removed
every agent variable first. With the sandbox (the default where the host has
namespaces) the vault is not even there; without it, ``inside_agent_session``
(ancestry, not the environment) is what refuses.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from supervisor_helpers import BIN, Daemon, base_env, give_workspace, init_vault

ADMIN = "admin-pw-for-tests-1"
AGENT_PW = "agent-chosen-admin-pw-1"


def clean(command: str, home) -> str:
    """``command`` run with no environment but PATH and the real PADDEDCELL_HOME, from a
    script file (the command scanner refuses identity variables in the command text)."""
    import tempfile

    path = shlex.quote(f"{BIN}:/usr/bin:/bin")
    # In the workspace: the sandbox shows the agent its workspace, not the test's tmp dir.
    where = home.parent / "ws" if (home.parent / "ws").is_dir() else home.parent
    fd, script = tempfile.mkstemp(prefix="human-only-", suffix=".sh", dir=str(where))
    os.chmod(script, 0o644)  # a root daemon's session runs as the agent's own uid
    with open(fd, "w") as f:
        f.write(f"exec env -i PATH={path} PADDEDCELL_HOME={shlex.quote(str(home))} "
                f"sh -c {shlex.quote(command)}\n")
    return f"sh {shlex.quote(script)}"


def status(home) -> str:
    out = subprocess.run([str(BIN / "pass_mgr"), "admin", "status"], env=base_env(home),
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


@contextmanager
def session_daemon(tmp_path, sandbox, vault=True):
    """``(home, ws, daemon)``: a daemon in sandbox mode ``sandbox`` on a fresh home (its
    vault initialised with ADMIN unless ``vault`` is false) and a workspace for a1."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    if vault:
        init_vault(home, ADMIN)
    give_workspace(home, "a1", ws)
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX=sandbox) as daemon:
        yield home, ws, daemon


def run_text(daemon, ws, command) -> str:
    """a1 runs ``command`` in a daemon session; its output (waits for the end)."""
    return daemon.call("/exec", {"command": command, "agentId": "a1", "agentWorkspace": str(ws),
                                 "awaitResults": True})["content"][0]["text"]


def wait_text(daemon, sid, needle, agent="a1", seconds=20.0) -> str:
    text = ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = daemon.call("/process", {"action": "log", "sessionId": sid,
                                        "agentId": agent})["content"][0]["text"]
        if needle in text:
            break
        time.sleep(0.1)
    return text


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_admin_init_of_an_uninitialised_vault_from_a_session(tmp_path, sandbox):
    with session_daemon(tmp_path, sandbox, vault=False) as (home, ws, daemon):
        command = clean(f"printf '{AGENT_PW}\\n{AGENT_PW}\\n' | pass_mgr admin init "
                        "--password-stdin; echo rc=$?", home)
        text = run_text(daemon, ws, command)
        assert "rc=0" not in text, text
        assert status(home) == "uninitialized"


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_admin_init_after_a_lock_from_a_session_started_before_it(tmp_path, sandbox):
    with session_daemon(tmp_path, sandbox) as (home, ws, daemon):
        flag = ws / "locked"
        command = (f"while [ ! -e {shlex.quote(str(flag))} ]; do sleep 0.1; done; "
                   + clean(f"printf '{AGENT_PW}\\n' | pass_mgr admin init --password-stdin; "
                           "echo rc=$?; printf '%s\\n' " + AGENT_PW
                           + " | pass_mgr admin recover --password-stdin; echo rc2=$?", home))
        sid = daemon.call("/exec", {"command": command, "agentId": "a1",
                                    "agentWorkspace": str(ws), "background": True}
                          )["details"]["sessionId"]
        subprocess.run([str(BIN / "pass_mgr"), "admin", "check-leak"], input=f"x {ADMIN} y",
                       env=base_env(home), capture_output=True, text=True, timeout=30)
        assert status(home) == "locked"
        flag.touch()
        text = wait_text(daemon, sid, "rc2=")
        assert "rc2=" in text, text
        assert "rc=0" not in text and "rc2=0" not in text, text
        assert status(home) == "locked"


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_set_from_a_session_with_the_admin_password(tmp_path, sandbox):
    # Even an agent that learnt the admin password cannot set from inside a session.
    with session_daemon(tmp_path, sandbox) as (home, ws, daemon):
        command = clean(f"pass_mgr set victim {shlex.quote(str(ws))} db planted-value-123 "
                        f"{ADMIN}; echo rc=$?", home)
        text = run_text(daemon, ws, "X=1; " + command)
        assert "rc=0" not in text, text
        got = subprocess.run([str(BIN / "pass_mgr"), "get", "db"],
                             env=base_env(home, AGENT_ID="victim", AGENT_WORKSPACE=str(ws)),
                             capture_output=True, text=True, timeout=30)
        assert "planted-value-123" not in got.stdout


def test_an_orphan_of_a_plain_pcexec_is_still_inside_the_session(tmp_path):
    # Foreground pcexec adopts orphans (it is a child subreaper): a command that drops its
    # environment and leaves its parent behind (`( env -i setsid sh -c … & )`) has pcexec
    # as its parent, not the marked shell. Unsandboxed, ancestry must still see pcexec.
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    init_vault(home, ADMIN)
    give_workspace(home, "a1", ws)
    out = tmp_path / "orphan-out"
    probe = (f"sleep 0.5; {shlex.quote(sys.executable)} -c "
             "'from paddedcell.agent_session import inside_agent_session as f; print(f())' "
             f"> {shlex.quote(str(out))}")
    command = clean(f"( setsid sh -c {shlex.quote(probe)} & ); sleep 3", home)
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws),
                   PADDEDCELL_SUPERVISOR_SANDBOX="none")
    subprocess.run([str(BIN / "pcexec"), command], env=env, capture_output=True, text=True,
                   timeout=60)
    assert out.read_text().strip() == "True"
