"""The remote client library over the scripted gateway: device tokens, revocation,
pairing, sessions, the chat stream, tool calls and approvals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

sys.path.insert(0, str(Path(__file__).parent))

from remote_fake_gateway import FakeGateway, GatewayFault  # noqa: E402

from paddedcell import config  # noqa: E402
from paddedcell.remote.client import Approval, RemoteClient, summarize_status  # noqa: E402
from paddedcell.remote.connection import ConnectRefused  # noqa: E402
from paddedcell.remote.protocol import Event, RemoteError  # noqa: E402
from paddedcell.remote.store import RemoteStore  # noqa: E402

SHARED = "shared-token-for-tests-9Qw"


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "pch"
    path.mkdir(mode=0o700)
    return path


def make(home, gateway, auth="token", **overrides):
    settings = config.load(environ={"PADDEDCELL_HOME": str(home)},
                           overrides={f"remote.{k}": v for k, v in overrides.items()})
    store = RemoteStore(home)
    if store.find("gw") is None:
        store.add("gw", gateway.url, auth_type=auth, secret=SHARED if auth == "token" else None)
    events = []
    client = RemoteClient(store, store.get("gw"), settings, lambda kind, fields: events.append((kind, fields)))
    return client, events


async def test_the_device_token_is_stored_sealed_and_reused(nursery, home):
    gateway = FakeGateway()
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)
    first = await client.handshake()
    assert first["deviceToken"] == "issued"
    assert gateway.connects[0]["params"]["auth"]["token"] == SHARED
    client2, _ = make(home, gateway)
    second = await client2.handshake()
    assert second["deviceToken"] == "reused"
    assert gateway.connects[1]["params"]["auth"]["token"] == gateway.device_token
    assert client2.store.get("gw").status == "connected"
    assert gateway.device_token.encode() not in (home / "remote.db").read_bytes()


async def test_a_revoked_device_token_is_dropped_and_said_clearly(nursery, home):
    gateway = FakeGateway()
    await nursery.start(gateway.serve)
    client, _ = make(home, gateway)
    await client.handshake()

    def revoked(params):
        if params["auth"].get("token") == gateway.device_token:
            return {"code": "INVALID_REQUEST", "message": "unauthorized",
                    "details": {"code": "AUTH_TOKEN_MISMATCH"}}
        return {"code": "NOT_PAIRED", "message": "pairing required",
                "details": {"code": "PAIRING_REQUIRED", "requestId": "req-new"}}
    gateway.on_connect = revoked
    client, _ = make(home, gateway)
    with pytest.raises(ConnectRefused) as caught:
        await client.handshake()
    assert caught.value.failure.kind == "pending"
    assert "no longer accepts this device's token" in str(caught.value)
    assert "openclaw devices approve req-new" in str(caught.value)
    assert client.store.secrets(client.store.get("gw")).device_token is None
    row = client.store.get("gw")
    assert row.status == "pending" and row.pairing_request_id == "req-new"


async def test_a_revoked_token_without_a_shared_secret_says_pair_again(nursery, home):
    gateway = FakeGateway()
    await nursery.start(gateway.serve)
    client, _ = make(home, gateway, auth="none")
    await client.handshake()
    gateway.connect_error = {"code": "INVALID_REQUEST", "message": "unauthorized",
                             "details": {"code": "AUTH_TOKEN_MISMATCH"}}
    client, _ = make(home, gateway, auth="none")
    with pytest.raises(ConnectRefused, match="revoked or rotated on the gateway; pair again: paddedcell remote pair gw"):
        await client.handshake()
    assert client.store.get("gw").status == "error"


async def test_pairing_polls_until_approved_and_shows_poll_errors(nursery, home):
    gateway = FakeGateway()
    await nursery.start(gateway.serve)
    answers = iter([{"code": "X", "message": "pairing required",
                     "details": {"code": "PAIRING_REQUIRED", "requestId": "req-1"}},
                    {"code": "UNAVAILABLE", "message": "gateway starting", "retryable": True},
                    None])
    gateway.on_connect = lambda params: next(answers)
    client, events = make(home, gateway, pairing_poll_seconds=0.05)
    result = await client.pair()
    assert result["state"] == "connected"
    kinds = [kind for kind, _ in events]
    assert "pending" in kinds and "poll-error" in kinds
    pending = next(fields for kind, fields in events if kind == "pending")
    assert pending["command"] == "openclaw devices approve req-1"


async def test_pairing_times_out_with_what_to_do(nursery, home):
    gateway = FakeGateway(connect_error={"code": "X", "message": "pairing required",
                                         "details": {"code": "PAIRING_REQUIRED", "requestId": "req-7"}})
    await nursery.start(gateway.serve)
    client, events = make(home, gateway, pairing_poll_seconds=0.05, pairing_timeout_seconds=0.3)
    with pytest.raises(RemoteError, match="not approved within 0:01; gw stays pending.*approve req-7"):
        await client.pair()
    assert client.store.get("gw").status == "pending"


def chat_gateway(script_events, **extra):
    sessions = {}

    def resolve(params):
        key = params["key"]
        if key not in sessions and key not in sessions.values():
            raise GatewayFault("INVALID_REQUEST", f"No session found: {key}")
        return {"ok": True, "key": sessions.get(key, key)}

    def create(params):
        sessions[params["key"]] = f"agent:main:{params['key']}"
        return {"ok": True, "key": sessions[params["key"]]}

    resolved = []

    async def send(params):
        return {"runId": "run-1", "status": "started"}

    async def script(ws, gw):
        while not any(r["method"] == "chat.send" for r in gw.requests):
            await trio.sleep(0.01)
        for name, payload in script_events:
            if name == "wait-resolve":
                while len([r for r in gw.requests if r["method"].endswith("approval.resolve")]) < payload:
                    await trio.sleep(0.01)
                continue
            await gw.event(ws, name, payload)

    methods = {"sessions.resolve": resolve, "sessions.create": create, "chat.send": send,
               "exec.approval.resolve": lambda p: resolved.append(p) or {"ok": True},
               "plugin.approval.resolve": lambda p: resolved.append(p) or {"ok": True},
               "chat.history": lambda p: {"messages": [{"role": "assistant", "content": "from history"}]}}
    return FakeGateway(methods=methods, script=script, **extra), resolved


def chat(text, state="delta"):
    return ("chat", {"runId": "run-1", "state": state, "message": {"content": [{"type": "text", "text": text}]}})


def tool(phase, name="read_file", **data):
    return ("agent", {"runId": "run-1", "stream": "tool", "data": {"phase": phase, "name": name,
                                                                    "toolCallId": "t1", **data}})


async def test_chat_streams_deltas_tools_and_remembers_the_session(nursery, home):
    gateway, _ = chat_gateway([
        chat("Hel"), tool("start", args={"path": "/etc/hosts"}), chat("Hello"), tool("result"),
        ("agent", {"runId": "other", "stream": "tool", "data": {"phase": "start", "name": "exec"}}),
        ("agent", {"runId": "run-1", "stream": "thinking", "data": {"text": "hmm"}}),
        tool("start", name="Breadcrumb"), tool("result", name="Breadcrumb", isError=True),
        chat("Hello world", "final")])
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)
    result = await client.chat("hi", attachments=["/tmp/a b.txt"])
    assert result["state"] == "final" and result["text"] == "Hello world"
    deltas = "".join(fields["text"] for kind, fields in events if kind == "delta")
    assert deltas == "Hello world"
    tools = [(f["name"], f["kind"], f["phase"]) for kind, f in events if kind == "tool"]
    assert tools == [("read_file", "read", "running"), ("read_file", "read", "completed"),
                     ("Breadcrumb", "other", "running"), ("Breadcrumb", "other", "failed")]
    assert ("thinking", {"text": "hmm"}) in events
    send = next(r for r in gateway.requests if r["method"] == "chat.send")
    assert send["params"]["message"] == '@"/tmp/a b.txt" hi'
    assert send["params"]["idempotencyKey"]
    session = next(f for k, f in events if k == "session")
    assert session["how"] == "created" and session["key"].startswith("agent:main:paddedcell-")
    assert client.store.get("gw").session_key == session["key"]
    # the next chat resumes it
    client2, events2 = make(home, gateway)
    gateway.requests.clear()
    await client2.chat("again")
    assert next(f for k, f in events2 if k == "session") == {"key": session["key"], "how": "resumed"}


def multi_agent_gateway(*, default="ops", selection_required=False):
    """OpenClaw's keyed ``agents.list`` form: a session key must name an agent when the
    gateway has no default one (2026.9.6 refuses unqualified keys then)."""
    sessions = set()

    def roster(params):
        return {"defaultId": default, "mainKey": "main", "scope": "per-sender",
                "ownership": "explicit" if selection_required else "legacy",
                "selectionRequired": selection_required,
                "agents": [{"id": "main"}, {"id": "ops"}, {"id": "system-cron", "kind": "system"}]}

    def qualified(key):
        if not key.startswith(("agent:main:", "agent:ops:")):
            raise GatewayFault("INVALID_REQUEST", f"session key {key} names no agent")
        return key

    def resolve(params):
        if qualified(params["key"]) not in sessions:
            raise GatewayFault("INVALID_REQUEST", f"No session found: {params['key']}")
        return {"ok": True, "key": params["key"]}

    def create(params):
        sessions.add(qualified(params["key"]))
        return {"ok": True, "key": params["key"]}

    async def script(ws, gw):  # one turn per connection: answer this connection's send
        def sends():
            return sum(r["method"] == "chat.send" for r in gw.requests)
        before = sends()
        while sends() == before:
            await trio.sleep(0.01)
        if not ws.closed:  # a refused chat's connection is gone by then
            await gw.event(ws, "chat", {"runId": "run-1", "state": "final",
                                        "message": {"content": [{"type": "text", "text": "ok"}]}})

    return FakeGateway(methods={"agents.list": roster, "sessions.resolve": resolve, "sessions.create": create,
                                "chat.send": lambda p: {"runId": "run-1", "status": "started"}},
                       script=script)


def sent_key(gateway):
    sends = [r for r in gateway.requests if r["method"] == "chat.send"]
    return sends[-1]["params"]["sessionKey"]


async def test_chat_goes_to_the_gateways_default_agent_or_the_one_asked_for(nursery, home):
    gateway = multi_agent_gateway()
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)
    await client.chat("hi")
    first = sent_key(gateway)
    assert first.startswith("agent:ops:paddedcell-")
    await make(home, gateway)[0].chat("again")  # the last session, resumed
    assert sent_key(gateway) == first
    await make(home, gateway)[0].chat("hi", session="work")
    assert sent_key(gateway) == "agent:ops:work"
    await make(home, gateway)[0].chat("hi", session="main", agent="MAIN")
    assert sent_key(gateway) == "agent:main:main"
    # the stored session is ops': an ops chat resumes it, a main chat starts its own
    client.store.set_session_key(client.store.get("gw"), first)
    await make(home, gateway)[0].chat("hi", agent="main")
    assert sent_key(gateway).startswith("agent:main:paddedcell-") and sent_key(gateway) != first


async def test_without_a_default_agent_the_error_lists_the_agents(nursery, home):
    gateway = multi_agent_gateway(selection_required=True)
    await nursery.start(gateway.serve)
    for kwargs, message in (({}, "gw has several agents and no default one; pass --agent with one of: main, ops$"),
                            ({"agent": "nope"}, "gw has no agent 'nope'; pass --agent with one of: main, ops$"),
                            ({"agent": "main", "session": "agent:ops:x"},
                             "--agent main does not match the session key's agent ops")):
        client, _ = make(home, gateway)
        with pytest.raises(RemoteError, match=message):
            await client.chat("hi", **kwargs)
    assert not any(r["method"] == "chat.send" for r in gateway.requests)
    client, _ = make(home, gateway)
    await client.chat("hi", agent="main")
    assert sent_key(gateway).startswith("agent:main:paddedcell-")
    await make(home, gateway)[0].chat("hi", session="agent:ops:x")
    assert sent_key(gateway) == "agent:ops:x"


async def test_a_final_without_text_falls_back_to_history(nursery, home):
    gateway, _ = chat_gateway([("chat", {"runId": "run-1", "state": "final"})])
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)
    result = await client.chat("hi")
    assert result["text"] == "from history"


async def test_a_chat_error_is_reported(nursery, home):
    gateway, _ = chat_gateway([("chat", {"runId": "run-1", "state": "error", "errorMessage": "model down"})])
    await nursery.start(gateway.serve)
    client, _ = make(home, gateway)
    with pytest.raises(RemoteError, match="model down"):
        await client.chat("hi")


def approval_event(approval_id, command, allowed=None, kind="exec"):
    request = {"command": command, "agentId": "main", "sessionKey": "agent:main:x"} if kind == "exec" else \
        {"title": "pcexec", "description": command}
    if allowed is not None:
        request["allowedDecisions"] = allowed
    return (f"{kind}.approval.requested", {"id": approval_id, "request": request})


async def test_approvals_at_once_each_get_their_own_decision_sent_back(nursery, home):
    gateway, resolved = chat_gateway([
        approval_event("ap-1", "rm -rf /tmp/x"), approval_event("ap-2", "ls", ["allow-once", "deny"]),
        approval_event("pl-3", "pcexec wants: ls", kind="plugin"),
        ("wait-resolve", 3), chat("done", "final")])
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)
    answers = {"ap-1": "deny", "ap-2": "allow-always", "pl-3": "allow-once"}
    order = []

    async def decide(approval: Approval) -> str:
        await trio.sleep({"ap-1": 0.2, "ap-2": 0.05, "pl-3": 0.1}[approval.id])  # answered out of order
        order.append(approval.id)
        return answers[approval.id]
    await client.chat("go", decide=decide)
    assert order == ["ap-2", "pl-3", "ap-1"]
    by_id = {r["id"]: r["decision"] for r in resolved}
    # ap-2 does not allow allow-always: the operator's out-of-range choice is a reject
    assert by_id == {"ap-1": "deny", "ap-2": "deny", "pl-3": "allow-once"}
    methods = {r["method"] for r in gateway.requests if r["method"].endswith("resolve")}
    assert methods == {"exec.approval.resolve", "plugin.approval.resolve"}
    shown = next(f for k, f in events if k == "approval" and f["id"] == "ap-2")
    assert shown["allowed"] == ["allow-once", "deny"]


async def test_an_unanswered_approval_is_rejected_after_the_timeout(nursery, home):
    gateway, resolved = chat_gateway([approval_event("ap-9", "make deploy"), ("wait-resolve", 1),
                                      chat("ok", "final")])
    await nursery.start(gateway.serve)
    client, events = make(home, gateway, approval_timeout_seconds=0.2)

    async def never(approval):
        await trio.sleep_forever()
    await client.chat("go", decide=never)
    assert resolved == [{"id": "ap-9", "decision": "deny"}]
    assert ("approval-decided", {"id": "ap-9", "decision": "deny", "by": "timeout"}) in events


async def test_the_approvals_watcher_decides_until_stopped(nursery, home):
    gateway, resolved = chat_gateway([])

    async def script(ws, gw):
        await gw.event(ws, *approval_event("w-1", "echo hi"))
        await gw.event(ws, "exec.approval.resolved", {"id": "w-1", "decision": "allow-once"})
    gateway.script = script
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)

    async def decide(approval):
        return "allow-once"
    with trio.fail_after(5):
        async with trio.open_nursery() as inner:
            inner.start_soon(client.watch_approvals, decide)
            while not resolved:
                await trio.sleep(0.01)
            await trio.sleep(0.05)
            inner.cancel_scope.cancel()
    assert resolved == [{"id": "w-1", "decision": "allow-once"}]
    params = gateway.connects[0]["params"]
    assert "approvals" in params["caps"] and "operator.approvals" in params["scopes"]


def test_approvals_from_events():
    assert Approval.from_event(Event("tick", {})) is None
    assert Approval.from_event(Event("exec.approval.requested", {"request": {}})) is None
    plugin = Approval.from_event(Event("plugin.approval.requested", {"id": "p", "request": {
        "title": "t", "description": "d", "allowedDecisions": ["allow-once", "allow-always", "deny", "bogus"]}}))
    assert plugin.text == "t: d" and plugin.allowed == ("allow-once", "allow-always", "deny")
    assert plugin.resolve_method == "plugin.approval.resolve"


async def test_status_row(nursery, home):
    gateway = FakeGateway(methods={
        "health": lambda p: {"ok": True}, "agents.list": lambda p: {"agents": [{"id": "main"}, {"id": "ops"}]},
        "sessions.list": lambda p: {"sessions": [{"key": "a", "hasActiveRun": True}, {"key": "b"}]}})
    await nursery.start(gateway.serve)
    client, _ = make(home, gateway)
    row = await client.status()
    assert row == {"name": "gw", "state": "connected", "version": "fake-1", "protocol": 4, "health": "ok",
                   "agents": ["main", "ops"], "sessions": 2, "activeSessions": ["a"]}
    assert summarize_status({"name": "x", "state": "connected", "health": {"error": "no"}})["health"] == "degraded"


async def test_what_the_gateway_says_is_stored_redacted(nursery, home):
    gateway = FakeGateway(connect_error={"code": "WEIRD", "message": f"bad token {SHARED} here"})
    await nursery.start(gateway.serve)
    client, events = make(home, gateway)
    with pytest.raises(ConnectRefused) as caught:
        await client.handshake()
    stored = client.store.get("gw").status_detail
    assert SHARED not in stored and "######" in stored
    assert SHARED not in str(events)
    del caught
