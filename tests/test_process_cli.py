"""``paddedcell process ACTION`` against a real daemon."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from supervisor_helpers import BIN, Daemon, base_env, py


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    home = tmp_path_factory.mktemp("process-cli") / "home"
    home.mkdir(mode=0o700)
    d = Daemon(home)
    yield d
    d.stop()


def process(daemon, *args, agent="cli-agent"):
    env = base_env(daemon.home, **({"AGENT_ID": agent} if agent else {}))
    return subprocess.run([str(BIN / "paddedcell"), "process", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def start(daemon, command, agent="cli-agent", **fields):
    return daemon.call("/exec", {"command": command, "agentId": agent, "background": True,
                                 **fields})["details"]["sessionId"]


def test_list_log_write_kill_remove(daemon):
    sid = start(daemon, "stty -echo; " + py("import sys\nprint('ready', flush=True)\n"
                           "for line in sys.stdin: print('got', line.strip(), flush=True)"), pty=True)
    listed = process(daemon, "list")
    assert listed.returncode == 0 and sid in listed.stdout
    for _ in range(200):
        if "ready" in process(daemon, "log", sid).stdout:
            break
        time.sleep(0.05)
    wrote = process(daemon, "write", sid, "--data", "ping\n")
    assert wrote.stdout.strip() == f"Wrote 5 bytes to session {sid}."
    for _ in range(50):
        log = process(daemon, "log", sid)
        if "got ping" in log.stdout:
            break
        time.sleep(0.05)
    assert "ready\ngot ping" in log.stdout
    assert process(daemon, "log", sid, "--offset", "1", "--limit", "1").stdout.startswith("got ping")
    killed = process(daemon, "kill", sid)
    assert killed.stdout.strip() == f"Termination requested for session {sid}."
    for _ in range(50):
        if "Process stopped by request" in process(daemon, "poll", sid).stdout:
            break
        time.sleep(0.05)
    removed = process(daemon, "remove", sid, "--json")
    assert json.loads(removed.stdout)["content"][0]["text"] == f"Removed session {sid}."


def test_paste_and_send_keys_on_a_pty(daemon):
    sid = start(daemon, py("import sys\nprint(repr(sys.stdin.readline()), flush=True)"), pty=True)
    time.sleep(0.3)
    pasted = process(daemon, "paste", sid, "--text", "hello", "--no-bracketed")
    assert pasted.stdout.strip() == f"Pasted 5 chars to session {sid}."
    sent = process(daemon, "send-keys", sid, "--key", "Enter")
    assert sent.returncode == 0
    out = ""
    for _ in range(50):  # each poll returns only new output: the line may span two
        out += process(daemon, "poll", sid, "--timeout", "200").stdout
        if "'hello\\n'" in out:
            break
    assert "'hello\\n'" in out


def test_unknown_session_fails_with_exit_1(daemon):
    result = process(daemon, "poll", "no-such-session")
    assert result.returncode == 1 and result.stdout.strip() == "No session found for no-such-session"


def test_agent_identity_is_required(daemon):
    result = process(daemon, "list", agent=None)
    assert result.returncode == 2 and "AGENT_ID" in result.stderr


def test_another_agent_cannot_see_or_kill(daemon):
    sid = start(daemon, "sleep 30", agent="owner")
    try:
        assert sid not in process(daemon, "list", agent="other").stdout
        assert process(daemon, "kill", sid, agent="other").returncode == 1
    finally:
        process(daemon, "remove", sid, agent="owner")
