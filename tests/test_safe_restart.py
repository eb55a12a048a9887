"""`safe-restart` on a terminal (driven with pexpect) and its plain-mode edges."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from paddedcell import config
from paddedcell.daemon.client import DaemonClient

SAFE_RESTART = [sys.executable, "-m", "paddedcell.cli.safe_restart"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """The environment of every process here; also this process's (ensure_daemon reads it)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    for name in list(os.environ):
        if name.startswith("PADDEDCELL_") or name in (
                "AGENT", "AGENT_ID", "AGENT_WORKSPACE", "OPENCLAW_SHELL"):
            monkeypatch.delenv(name)
    for name, value in {"PADDEDCELL_HOME": str(home), "PADDEDCELL_RESTART_WATCHDOG_SECONDS": "0.1",
                        "PADDEDCELL_RESTART_STATUS_INTERVAL_SECONDS": "0.1", "TERM": "xterm",
                        "COLUMNS": "120"}.items():
        monkeypatch.setenv(name, value)
    env = dict(os.environ)
    yield env
    settings = config.load(env)
    from paddedcell.daemon.app import read_pid

    pid = read_pid(settings)
    if pid and DaemonClient(settings).healthy():
        os.kill(pid, signal.SIGTERM)  # the daemon this test's safe-restart started


@pytest.fixture
def files(tmp_path):
    ran = tmp_path / "ran"
    rollback = tmp_path / "rollback.sh"
    rollback.write_text(f"#!/bin/sh\necho rollback >> {ran}\n")
    rollback.chmod(0o755)
    return {"ran": ran, "rollback": str(rollback), "log": str(tmp_path / "restart.log"),
            "restart": f"echo gateway-restarting; echo restart >> {ran}",
            "slow_restart": f"echo restart-start >> {ran}; sleep 2; echo restart >> {ran}",
            "status": f"echo Runtime: running; echo status >> {ran}"}


def client(env) -> DaemonClient:
    from paddedcell.daemon.client import ensure_daemon

    return ensure_daemon(config.load(env))


def _sigint_ignored() -> None:
    # As a shell's background job, nohup or a CI runner would start it: the
    # interactive mode must install its own Ctrl-C handler, so every test starts
    # it this way and does not depend on how the suite itself was started.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def spawn(env, files, *extra, restart=None, delay="1"):
    args = [*SAFE_RESTART[1:], "--rollback", files["rollback"], "--log", files["log"],
            "--agent-id", "operator", "--session-key", "tty:1", "--interval", "0.2",
            "--delay", delay, "--recover-timeout", "1", "--restart-cmd",
            restart or files["restart"], "--status-cmd", files["status"], *extra]
    # codec_errors: a Ctrl-C can cut a multi-byte character in half on the terminal.
    return pexpect.spawn(SAFE_RESTART[0], args, env=env, encoding="utf-8", codec_errors="replace",
                         timeout=30, dimensions=(50, 120), preexec_fn=_sigint_ignored)


def ran(files):
    path = Path(files["ran"])
    return path.read_text().split() if path.exists() else []


def test_interactive_shows_table_countdown_output_and_outcome(env, files):
    c = client(env)
    c.call("POST", "/lifecycle/message-start", {"agentId": "worker", "sessionKey": "w:1"})
    child = spawn(env, files)  # a terminal: interactive without asking
    child.expect("NOT_READY")
    child.expect("pre-freeze")  # the live table shows the busy agent draining
    c.call("POST", "/lifecycle/message-end", {"agentId": "worker", "sessionKey": "w:1"})
    child.expect(r"restart in \d+\.\d s")
    child.expect("restart\\| gateway-restarting")  # the job's output, streamed
    child.expect("finished: ok; every agent unfrozen")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert ran(files) == ["restart", "status"]
    states = {a["agentId"]: a["state"] for a in c.call("GET", "/agents")["agents"]}
    assert states == {"worker": "idle"}


def test_ctrl_c_while_waiting_cancels_and_unfreezes(env, files):
    c = client(env)
    c.call("POST", "/lifecycle/message-start", {"agentId": "worker", "sessionKey": "w:1"})
    c.call("POST", "/lifecycle/message-start", {"agentId": "idler", "sessionKey": "i:1"})
    c.call("POST", "/lifecycle/message-end", {"agentId": "idler", "sessionKey": "i:1"})
    child = spawn(env, files)
    child.expect("NOT_READY")
    child.expect("freeze")
    child.sendintr()
    child.expect("cancelled: the restart was dropped and every agent unfrozen")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    view = c.call("GET", "/agents")
    assert {a["agentId"]: a["state"] for a in view["agents"]} == {"worker": "busy", "idler": "idle"}
    assert view["global"]["restartStatus"] == "idle"
    assert ran(files) == []
    assert "restart cancelled before OK (safe-restart interrupted (Ctrl-C) while waiting); " \
        "every agent unfrozen" in Path(files["log"]).read_text()


def test_ctrl_c_during_countdown_cancels_with_a_log_line(env, files):
    child = spawn(env, files, delay="30")
    child.expect(r"restart in \d+\.\d s")
    child.sendintr()
    child.expect("cancelled")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert "restart cancelled (safe-restart interrupted (Ctrl-C) before the restart command)" \
        in Path(files["log"]).read_text()
    assert ran(files) == []


def test_ctrl_c_after_restart_started_asks_and_can_leave_it_running(env, files):
    child = spawn(env, files, restart=files["slow_restart"], delay="0.2")
    child.expect("phase restart")
    child.sendintr()
    child.expect("Leave the restart job running in the daemon and exit\\?")
    child.sendline("n")  # keep watching
    child.expect("phase")
    child.sendintr()
    child.expect("Leave the restart job running")
    child.sendline("y")
    child.expect("left running")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    c = client(env)
    deadline = time.monotonic() + 20
    while (c.call("GET", "/agents")["global"].get("lastJob") or {}).get("outcome") != "ok":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert ran(files) == ["restart-start", "restart", "status"]


def test_already_scheduled_returns_at_once(env, files):
    c = client(env)
    c.call("POST", "/query-restart", {"requesterAgentId": "other", "requesterSessionKey": "o:1"})
    out = subprocess.run([*SAFE_RESTART, "--rollback", files["rollback"], "--log", files["log"],
                          "--no-interactive"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.startswith("ALREADY_SCHEDULED")


def test_agent_context_is_never_interactive(env, files):
    child = pexpect.spawn(SAFE_RESTART[0], [*SAFE_RESTART[1:], "--rollback", files["rollback"],
                                            "--log", files["log"], "--delay", "30",
                                            "--session-key", "agent:main:chat"],
                          env={**env, "AGENT_ID": "main"}, encoding="utf-8", timeout=30,
                          codec_errors="replace")
    child.expect("OK: every agent is frozen")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    g = client(env).call("GET", "/agents")["global"]
    assert (g["restartScheduledBy"], g["restartSession"]) == ("main", "agent:main:chat")


def test_usage_errors_say_what_to_fix(env, files, tmp_path):
    out = subprocess.run([*SAFE_RESTART, "--rollback", str(tmp_path / "missing.sh"),
                          "--log", files["log"]], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "does not exist" in out.stderr
    out = subprocess.run([*SAFE_RESTART, "--rollback", files["rollback"],
                          "--log", str(tmp_path / "no" / "dir.log")], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_plain_timeout_gives_up_and_unfreezes(env, files):
    c = client(env)
    c.call("POST", "/lifecycle/message-start", {"agentId": "worker", "sessionKey": "w:1"})
    out = subprocess.run([*SAFE_RESTART, "--rollback", files["rollback"], "--log", files["log"],
                          "--interval", "0.1", "--timeout", "0.5", "--no-interactive"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and out.stdout.startswith("NOT_READY")
    assert "TIMEOUT: not every agent froze within 0.5 s" in out.stdout
    view = c.call("GET", "/agents")
    assert view["global"]["restartStatus"] == "idle"
    assert [a["state"] for a in view["agents"]] == ["busy"]
