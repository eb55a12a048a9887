"""``paddedcell remote`` as a user runs it (subprocesses, no terminal): secrets from
stdin only, plain lines and NDJSON, confirmation, redaction of the operator's own
secrets in everything a gateway sends, approvals answered on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from remote_fake_gateway import FakeGateway, ThreadedGateway  # noqa: E402

SHARED = "cli-shared-token-Vb72Lq0x"


def run(home, *args, input=None, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
    env["PADDEDCELL_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "remote", *args], input=input,
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "pch"
    path.mkdir(mode=0o700)
    return path


def test_add_list_edit_remove(home):
    added = run(home, "add", "gw1", "127.0.0.1:1", "--auth", "token", input=SHARED + "\n")
    assert added.returncode == 0, added.stderr
    assert "added gw1 (ws://127.0.0.1:1)" in added.stdout
    assert SHARED not in added.stdout + added.stderr
    missing = run(home, "add", "gw2", "ws://h:1", "--auth", "token", input="")
    assert missing.returncode == 2 and "no token given" in missing.stderr
    run(home, "add", "alpha", "wss://alpha.example")
    listed = run(home, "list")
    assert listed.stdout.splitlines() == ["alpha\t\topenclaw\twss://alpha.example",
                                          "gw1\t\topenclaw\tws://127.0.0.1:1"]
    rows = [json.loads(line) for line in run(home, "list", "--json").stdout.splitlines()]
    assert [r["name"] for r in rows] == ["alpha", "gw1"] and rows[1]["auth"] == "token"
    assert all(SHARED not in json.dumps(r) for r in rows)
    edited = run(home, "edit", "gw1", "--url", "ws://127.0.0.1:2", "--name", "gw9")
    assert edited.returncode == 0 and "updated gw9 (ws://127.0.0.1:2)" in edited.stdout
    refused = run(home, "remove", "gw9")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert run(home, "remove", "gw9", "--yes").returncode == 0
    assert "gw9" not in run(home, "list").stdout
    assert SHARED.encode() not in (home / "remote.db").read_bytes()
    assert run(home, "list", "--json").stdout.count("\n") == 1
    unknown = run(home, "remove", "nope", "--yes")
    assert unknown.returncode == 1 and "no remote named 'nope'" in unknown.stderr


def test_test_command_outcomes(home):
    assert "Unsupported protocol: http:" in run(home, "test", "http://127.0.0.1:1").stderr
    with ThreadedGateway(FakeGateway()) as gateway:
        reachable = run(home, "test", f" 127.0.0.1:{gateway.port} ")
        assert reachable.returncode == 0
        assert reachable.stdout.strip() == f"ok: ws://127.0.0.1:{gateway.port} is an OpenClaw gateway (challenge received)"
        run(home, "add", "gw", gateway.url, "--auth", "token", input=SHARED + "\n")
        ok = run(home, "test", "gw")
        assert ok.returncode == 0 and "ok: gw connected (gateway fake-1, protocol 4, device token issued)" in ok.stdout
        assert "device token reused" in run(home, "test", "gw").stdout
        assert "\tconnected\t" in run(home, "list").stdout
        gateway.connect_error = {"code": "X", "message": "pairing required",
                                 "details": {"code": "PAIRING_REQUIRED", "requestId": "req-5"}}
        gateway.device_token = None
        pending = run(home, "test", "gw")
        assert pending.returncode == 3
        assert "openclaw devices approve req-5" in pending.stderr


def redacting_gateway():
    async def script(ws, gw):
        import trio
        while not any(r["method"] == "chat.send" for r in gw.requests):
            await trio.sleep(0.01)
        leak = f"the token is {SHARED} ok"
        for cut in range(0, len(leak) + 1, 7):
            await gw.event(ws, "chat", {"runId": "r1", "state": "delta",
                                        "message": {"content": [{"type": "text", "text": leak[:cut]}]}})
        await gw.event(ws, "agent", {"runId": "r1", "stream": "tool", "data": {
            "phase": "start", "name": "exec", "toolCallId": "t", "args": {"command": f"curl -H 'X: {SHARED}'"}}})
        await gw.event(ws, "exec.approval.requested", {"id": "ap-1", "request": {
            "command": f"echo {SHARED}", "allowedDecisions": ["allow-once", "deny"]}})
        while not any(r["method"] == "exec.approval.resolve" for r in gw.requests):
            await trio.sleep(0.01)
        await gw.event(ws, "chat", {"runId": "r1", "state": "final",
                                    "message": {"content": [{"type": "text", "text": leak}]}})
    return FakeGateway(script=script, methods={
        "sessions.resolve": lambda p: {"key": p["key"]}, "chat.send": lambda p: {"runId": "r1"},
        "exec.approval.resolve": lambda p: {"ok": True}})


@pytest.mark.parametrize("mode", ["plain", "json"])
def test_chat_output_never_shows_the_operators_secrets(home, mode):
    with ThreadedGateway(redacting_gateway()) as gateway:
        run(home, "add", "gw", gateway.url, "--auth", "token", input=SHARED + "\n")
        args = ["chat", "gw", "-m", "hi", "--session", "s1"] + (["--json"] if mode == "json" else [])
        out = run(home, *args, input="ap-1 deny\n")
        assert out.returncode == 0, out.stderr
        text = out.stdout + out.stderr
        assert SHARED not in text and SHARED[:12] not in text
        assert "######" in text
        decided = [r for r in gateway.requests if r["method"] == "exec.approval.resolve"]
        assert decided[0]["params"] == {"id": "ap-1", "decision": "deny"}
        if mode == "json":
            events = [json.loads(line) for line in out.stdout.splitlines()]
            assert events[-1]["event"] == "final"
            assert "".join(e["text"] for e in events if e["event"] == "delta") == "the token is ###### ok"
            assert any(e["event"] == "approval" and e["allowed"] == ["allow-once", "deny"] for e in events)
        else:
            assert "tool running execute exec" in out.stdout
            assert out.stdout.rstrip().endswith("final final")


def test_chat_on_a_gateway_without_a_default_agent_says_which_to_pass_and_exits_2_at_once(home):
    """OpenClaw's ``selectionRequired``: the one line lists the agents (no reconnect
    backoff: it used to take ~3 min), and ``--agent`` then reaches that agent's store."""
    async def script(ws, gw):
        import trio
        while not any(r["method"] == "chat.send" for r in gw.requests):
            await trio.sleep(0.01)
        await gw.event(ws, "chat", {"runId": "r1", "state": "final",
                                    "message": {"content": [{"type": "text", "text": "hello"}]}})
    gateway = FakeGateway(script=script, methods={
        "agents.list": lambda p: {"defaultId": "main", "mainKey": "main", "selectionRequired": True,
                                  "agents": [{"id": "main"}, {"id": "ops"}, {"id": "cron", "kind": "system"}]},
        "sessions.resolve": lambda p: {"key": p["key"]}, "chat.send": lambda p: {"runId": "r1"}})
    with ThreadedGateway(gateway):
        run(home, "add", "gw", gateway.url, "--auth", "token", input=SHARED + "\n")
        refused = run(home, "chat", "gw", "-m", "hi", timeout=20)
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            "paddedcell remote: gw has several agents and no default one; pass --agent with one of: main, ops"]
        assert not any(r["method"] == "chat.send" for r in gateway.requests)
        wrong = run(home, "chat", "gw", "-m", "hi", "--agent", "cron", "--json", timeout=20)
        assert wrong.returncode == 2
        assert json.loads(wrong.stdout.splitlines()[-1]) == {
            "event": "error", "message": "gw has no agent 'cron'; pass --agent with one of: main, ops"}
        chosen = run(home, "chat", "gw", "-m", "hi", "--agent", "ops", "--session", "work")
        assert chosen.returncode == 0, chosen.stderr
        assert "final final" in chosen.stdout
        sent = [r for r in gateway.requests if r["method"] == "chat.send"]
        assert [r["params"]["sessionKey"] for r in sent] == ["agent:ops:work"]


def test_pair_waits_with_the_command_to_run_and_ctrl_c_leaves_it_pending(home):
    import signal
    import time

    gateway = FakeGateway(connect_error={"code": "X", "message": "pairing required",
                                         "details": {"code": "PAIRING_REQUIRED", "requestId": "req-77"}})
    with ThreadedGateway(gateway):
        run(home, "add", "gw", gateway.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
        env.update(PADDEDCELL_HOME=str(home), PADDEDCELL_REMOTE_PAIRING_POLL_SECONDS="0.2")
        proc = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "remote", "pair", "gw"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        first = proc.stdout.readline()
        assert first.startswith("pending 5:00 openclaw devices approve req-77"), first
        deadline = time.monotonic() + 20
        while len(gateway.connects) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(gateway.connects) >= 3, "it polls again"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "gw stays pending" in err
    listed = json.loads(run(home, "list", "--json").stdout)
    assert listed["status"] == "pending" and listed["pairingRequestId"] == "req-77"


def test_on_a_terminal_list_is_a_table_and_chat_asks_for_approvals(home):
    """The terminal idiom: a rich table, and an approval prompt answered with a key."""
    pexpect = pytest.importorskip("pexpect")

    async def script(ws, gw):
        import trio
        while not any(r["method"] == "chat.send" for r in gw.requests):
            await trio.sleep(0.01)
        await gw.event(ws, "exec.approval.requested", {"id": "ap-tty", "request": {
            "command": "make deploy", "allowedDecisions": ["allow-once", "deny"]}})
        while not any(r["method"] == "exec.approval.resolve" for r in gw.requests):
            await trio.sleep(0.01)
        await gw.event(ws, "chat", {"runId": "r1", "state": "final",
                                    "message": {"content": [{"type": "text", "text": "deployed"}]}})
    gateway = FakeGateway(script=script, methods={
        "sessions.resolve": lambda p: {"key": p["key"]}, "chat.send": lambda p: {"runId": "r1"},
        "exec.approval.resolve": lambda p: {"ok": True}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
    env.update(PADDEDCELL_HOME=str(home), COLUMNS="120", TERM="xterm")
    with ThreadedGateway(gateway):
        run(home, "add", "gw", gateway.url)
        child = pexpect.spawn(sys.executable, ["-m", "paddedcell.cli.main", "remote", "list"], env=env,
                              encoding="utf-8", timeout=30)
        child.expect("Name")
        child.expect("gw")
        child.expect(pexpect.EOF)
        chat = pexpect.spawn(sys.executable, ["-m", "paddedcell.cli.main", "remote", "chat", "gw", "-m", "go",
                                              "--session", "s"], env=env, encoding="utf-8", timeout=30)
        chat.expect(r"allow exec 'make deploy'.*\[o\]nce / \[r\]eject")
        chat.sendline("a")  # not offered: asked again
        chat.expect("answer one of")
        chat.sendline("r")
        chat.expect("deployed")
        chat.expect(pexpect.EOF)
        chat.close()
    assert chat.exitstatus == 0
    decided = [r["params"] for r in gateway.requests if r["method"] == "exec.approval.resolve"]
    assert decided == [{"id": "ap-tty", "decision": "deny"}]


def test_each_command_connects_with_only_its_scopes(home):
    """The connect frame of every command carries exactly its scopes and caps; before the
    device holds a token it asks for the pairing set (one approval covers every command)."""
    read, write, approvals = "operator.read", "operator.write", "operator.approvals"

    async def script(ws, gw):
        import trio
        caps = gw.connects[-1]["params"]["caps"]
        if caps == ["approvals"]:  # the watcher: one request to decide
            await gw.event(ws, "exec.approval.requested", {"id": "ap-w", "request": {"command": "true"}})
        elif "tool-events" in caps:  # the chat: its final once it has sent the message
            sent = sum(r["method"] == "chat.send" for r in gw.requests)
            while sum(r["method"] == "chat.send" for r in gw.requests) == sent:
                await trio.sleep(0.01)
            await gw.event(ws, "chat", {"runId": "r1", "state": "final",
                                        "message": {"content": [{"type": "text", "text": "ok"}]}})
    gateway = FakeGateway(device_token=None, script=script, methods={
        "sessions.resolve": lambda p: {"key": p["key"]}, "chat.send": lambda p: {"runId": "r1"},
        "exec.approval.resolve": lambda p: {"ok": True}, "health": lambda p: {"ok": True},
        "agents.list": lambda p: {"agents": []}, "sessions.list": lambda p: {"sessions": []}})

    def connect_of(*args, input=None):
        """(scopes, caps) of the command's one connect; exit 0 also means the fake
        verified the signature over exactly those scopes."""
        before = len(gateway.connects)
        out = run(home, *args, input=input)
        assert out.returncode == 0, out.stderr
        assert len(gateway.connects) == before + 1, "one connect"
        params = gateway.connects[-1]["params"]
        return params["scopes"], params["caps"]

    with ThreadedGateway(gateway):
        run(home, "add", "gw", gateway.url)
        # No device token yet: the pairing set, whatever the command.
        assert connect_of("test", "gw") == ([read, write, approvals], [])
        gateway.device_token = "dev-token-scopes-0123456789"
        assert connect_of("pair", "gw") == ([read, write, approvals], [])
        # Paired: each command its own scopes only.
        assert connect_of("test", "gw") == ([read], [])
        assert connect_of("status", "gw", "--json") == ([read], [])
        assert connect_of("chat", "gw", "-m", "hi", "--session", "s") == \
            ([read, write, approvals], ["tool-events", "approvals"])
        assert connect_of("approvals", "gw", "--max", "1", input="ap-w deny\n") == ([approvals], ["approvals"])
        assert connect_of("pair", "gw") == ([read, write, approvals], [])
