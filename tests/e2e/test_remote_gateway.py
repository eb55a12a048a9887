"""`paddedcell remote` against a real OpenClaw 2026.9.6 gateway (one gateway for the module).

The gateway runs with token auth and `gateway.nodes.pairing.autoApproveLocal: false`,
so this loopback client is paired the way a remote one is (a request, then
`openclaw devices approve`). PaddedCell's plugin is linked in, with its daemon.
Agent `main` runs exec freely; agent `asker` has `tools.exec.mode: ask`, so its
native exec calls wait for an exec approval and its `pcexec` calls for a plugin
approval (PaddedCell's own); `paddedcell remote approvals` answers both from a
second process. Every output of every command and the database are scanned byte by
byte for the secrets at the end.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import running_stack, venv_python
from fake_model import Reply, ToolCall
from harness import Gateway, PaddedcellDaemon, deep_merge

SHARED = "e2e-remote-shared-token-7Hq2Rk9w"
#: OpenClaw 2026.9.6's limit on a plugin approval's description (the plugin cuts to it).
APPROVAL_DESCRIPTION_MAX = 512


REMOTE_CONFIG = {
    "gateway": {"auth": {"mode": "token", "token": SHARED},
                "nodes": {"pairing": {"autoApproveLocal": False}}},
    # Agents main (the default: it owns session keys without an agent prefix, such as
    # `remote chat`'s own) and asker, in the keyed form OpenClaw 2026.9.6 migrates
    # `agents.list` to on disk (`plugins install` used to do it here). Migrated only in
    # the gateway's memory, the default marker is dropped and an unprefixed key is refused
    # ("Multiple agents are configured, but session key … has no explicit owner").
    "agents": {"defaults": {"systemAgent": {"agentId": "main"}}, "ownership": "explicit",
               "entries": {"main": {}, "asker": {"tools": {"exec": {"mode": "ask"}}}}},
}


class RemoteGateway(Gateway):
    """The harness's gateway (PaddedCell's plugin linked, exec mode full) with the config's
    token auth instead of `--auth none`, real pairing, and agent `asker` in ask mode. The
    plugin's approvals wait longer than an operator's watcher takes to answer."""

    run_args = ()
    ready_timeout = 180  # a loaded CI machine

    def __init__(self, root: Path, path: str, model_port: int, daemon: PaddedcellDaemon, **options):
        options.setdefault("extra_config", REMOTE_CONFIG)
        options.setdefault("plugin_config", {"approvalTimeoutMs": 120_000})
        options.setdefault("load_plugin_by_path", True)  # no `plugins install` run (~20 s)
        super().__init__(root, path, model_port, daemon, **options)
        # The default agent works in the defaults' workspace (as the migration writes it).
        self.extra_config = deep_merge(self.extra_config, {"agents": {"entries": {"main": {
            "workspace": str(self.workspace)}}}})


@pytest.fixture(scope="module")
def stack(tmp_path_factory, openclaw_bin_path, fake_model):
    """One daemon + gateway for every case here (named `stack` so a failure gets the logs)."""
    root = tmp_path_factory.mktemp("remote-gw")
    daemon = PaddedcellDaemon(root / "paddedcell-home", python=venv_python())
    with running_stack(root, openclaw_bin_path, fake_model, daemon, gateway_class=RemoteGateway) as s:
        yield s


@pytest.fixture(scope="module")
def gateway(stack):
    return stack.gateway


class Cli:
    """`paddedcell remote …` in its own PADDEDCELL_HOME; every byte it prints is kept."""

    def __init__(self, home: Path):
        self.home = home
        self.transcript: list[str] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
        env["PADDEDCELL_HOME"] = str(self.home)
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "paddedcell.cli.main", "remote", *args]

    def run(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.argv(*args), input=input, capture_output=True, text=True, env=self.env(),
                              timeout=timeout)
        self.transcript += [proc.stdout, proc.stderr]
        return proc

    def start(self, *args: str, **env: str) -> "Running":
        return Running(self, subprocess.Popen(self.argv(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True, env={**self.env(), **env}))


class Running:
    """A long-running command: its NDJSON events, read in a thread."""

    def __init__(self, cli: Cli, proc: subprocess.Popen):
        self.cli, self.proc = cli, proc
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.cli.transcript.append(line)
            try:
                self.events.put(json.loads(line))
            except ValueError:
                self.events.put({"event": "text", "line": line})
        self.events.put(None)

    def wait_for(self, predicate, timeout: float = 90, what: str = "an event") -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event is None:
                break
            self.seen.append(event)
            if predicate(event):
                return event
        raise AssertionError(f"no {what} within {timeout} s; saw {self.seen[-15:]}; "
                             f"stderr {self.finish(5)[1][-1500:]}")

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60) -> tuple[int | None, str]:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self.cli.transcript.append(err)
        return self.proc.returncode, err


def tool_results(model, case: str) -> list[str]:
    """What the tools returned to the model in ``case`` (for failure messages)."""
    requests = model.requests_for(case)
    messages = requests[-1]["messages"] if requests else []
    return [str(m.get("content"))[:300] for m in messages if m.get("role") == "tool"]


def events_of(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_signature_payload_matches_openclaws_own_builder(openclaw_bin_path):
    """Our v3/v2 strings against `buildDeviceAuthPayload[V3]` from the installed dist/."""
    from paddedcell.remote import protocol

    node_dir = next(Path(d) for d in openclaw_bin_path.split(":") if (Path(d) / "openclaw").exists())
    dist = node_dir.parent / "lib" / "node_modules" / "openclaw" / "dist"
    module = next(dist.glob("device-auth-*.mjs"))
    params = {"deviceId": "abc", "clientId": "cli", "clientMode": "cli", "role": "operator",
              "scopes": ["operator.read", "operator.write"], "signedAtMs": 1737264000000, "token": "t0k",
              "nonce": "n-1", "platform": " Linux ", "deviceFamily": "DeskTop"}
    script = (f"const m = await import({json.dumps(str(module))});"
              f"const p = {json.dumps(params)};"
              "const fns = Object.values(m).filter(f => typeof f === 'function');"
              "console.log(JSON.stringify(fns.map(f => { try { return f(p); } catch (e) { return null; } })));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True,
                         env={**os.environ, "PATH": openclaw_bin_path}, timeout=60)
    assert out.returncode == 0, out.stderr
    theirs = {text for text in json.loads(out.stdout) if isinstance(text, str) and text.startswith("v")}
    common = dict(device_id="abc", scopes=("operator.read", "operator.write"), signed_at_ms=1737264000000,
                  token="t0k", nonce="n-1")
    ours = {protocol.signature_payload("v3", **common, platform=" Linux ", device_family="DeskTop"),
            protocol.signature_payload("v2", **common)}
    assert ours == theirs


def test_remote_client_against_a_real_gateway(stack, gateway, fake_model, tmp_path):
    home = tmp_path / "pch"
    home.mkdir(mode=0o700)
    cli = Cli(home)
    url = f"ws://127.0.0.1:{gateway.port}"
    model = fake_model.model
    started = time.monotonic()

    def step(name: str) -> None:
        print(f"[remote e2e] {time.monotonic() - started:6.1f} s  {name}", flush=True)

    # 01-05: add, list, test
    assert cli.run("add", "gw", f"127.0.0.1:{gateway.port}", "--auth", "token", input=SHARED + "\n").returncode == 0
    reach = cli.run("test", url)
    assert reach.returncode == 0 and "challenge received" in reach.stdout, reach.stderr
    pending = cli.run("test", "gw")
    assert pending.returncode == 3, pending.stdout + pending.stderr
    assert "openclaw devices approve " in pending.stderr

    step('07: pair')
    # 07: pair — pending, the exact approve command, approved on the gateway host, connected
    pair = cli.start("pair", "gw", "--json", PADDEDCELL_REMOTE_PAIRING_POLL_SECONDS="0.5")
    waiting = pair.wait_for(lambda e: e.get("event") == "pending" and e.get("requestId"), 60, "a pending event")
    assert waiting["command"] == f"openclaw devices approve {waiting['requestId']}"
    gateway.openclaw("devices", "approve", waiting["requestId"])
    pair.wait_for(lambda e: e.get("event") == "paired", 60, "paired")
    assert pair.finish()[0] == 0
    listed = json.loads(cli.run("list", "--json").stdout.splitlines()[0])
    assert listed["status"] == "connected" and listed["serverVersion"] == "2026.9.6"

    step('06: the de')
    # 06: the device token is reused on the next connect
    again = cli.run("test", "gw", "--json")
    assert again.returncode == 0 and events_of(again)[-1]["deviceToken"] == "reused", again.stdout

    from paddedcell.remote.store import RemoteStore
    with RemoteStore(home) as store:
        device_token = store.secrets(store.get("gw")).device_token
        device_id = store.get("gw").device_id
    assert device_token and len(device_token) >= 20

    step('08-10: cha')
    # 08-10: chat with a streamed reply and a tool call shown as it runs
    model.script("rchat", [ToolCall("exec", {"command": "echo remote-tool-ran"}),
                           Reply("The remote answer is 42.")])
    chat = cli.run("chat", "gw", "--json", "-m", "[case:rchat] run the tool")
    assert chat.returncode == 0, chat.stderr
    events = events_of(chat)
    tools = [(e["name"], e["kind"], e["phase"]) for e in events if e["event"] == "tool"]
    assert ("exec", "execute", "running") in tools and ("exec", "execute", "completed") in tools, tools
    assert "".join(e["text"] for e in events if e["event"] == "delta") == "The remote answer is 42."
    assert events[-1]["event"] == "final" and events[-1]["state"] == "final"
    first_delta = next(i for i, e in enumerate(events) if e["event"] == "delta")
    assert first_delta > next(i for i, e in enumerate(events) if e["event"] == "tool"), "tool shown as it ran"

    step('11: approvals')
    # 11: approvals answered by `paddedcell remote approvals` from a second process, four at
    # once: a native exec allowed (it runs) and one rejected (it does not), and PaddedCell's
    # own plugin approvals (pcexec under tools.exec.mode ask, a 10 KB command) likewise.
    # OpenClaw gives agent `asker` the subdirectory `asker` of the default workspace, and a
    # sandboxed pcexec sees (and, under a root daemon, owns) only its agent's workspace.
    ws = gateway.workspace / "asker"
    markers = {case: ws / f"{case}.txt" for case in ("exec-yes", "exec-no", "pc-yes", "pc-no")}
    padding = "x" * 10_000
    model.script("exec-yes", [ToolCall("exec", {"command": f"touch {markers['exec-yes']}"}), Reply("ran it")])
    model.script("exec-no", [ToolCall("exec", {"command": f"touch {markers['exec-no']}"}), Reply("could not")])
    model.script("pc-yes", [ToolCall("pcexec", {"command": f"touch {markers['pc-yes']}; : {padding}"}),
                            Reply("ran it")])
    model.script("pc-no", [ToolCall("pcexec", {"command": f"touch {markers['pc-no']}; : {padding}"}),
                           Reply("could not")])
    watcher = cli.start("approvals", "gw", "--json", "--max", str(len(markers)))
    watcher.wait_for(lambda e: e.get("event") == "state" and e.get("state") == "connected", 60,
                     "the watcher connected")
    chats = {case: cli.start("chat", "gw", "--json", "--session", f"agent:asker:{case}",
                             "-m", f"[case:{case}] touch it") for case in markers}
    wanted = {"exec-yes": ("exec", "allow-once"), "exec-no": ("exec", "deny"),
              "pc-yes": ("plugin", "allow-once"), "pc-no": ("plugin", "deny")}
    asked: dict[str, dict] = {}
    while len(asked) < len(markers):
        request = watcher.wait_for(lambda e: e.get("event") == "approval", 120, "the approval requests")
        case = next(c for c, m in markers.items() if str(m) in request["text"])
        kind, decision = wanted[case]
        assert request["type"] == kind, request
        if kind == "plugin":  # the 10 KB command asked about, cut to the gateway's limit
            title = "pcexec: run a shell command: "
            assert request["text"].startswith(title), request
            description = request["text"][len(title):]
            assert len(description) <= APPROVAL_DESCRIPTION_MAX and description.endswith("…"), request
            assert f"Command: touch {markers[case]}; : xxx" in description, request
            assert request["allowed"] == ["allow-once", "deny"], request
        asked[case] = request
        watcher.send(f"{request['id']} {decision}")
    # A decision can come before the next request: the loop above read past it.
    decided = {e["id"]: e for e in watcher.seen if e.get("event") == "approval-decided"}
    while len(decided) < len(markers):
        event = watcher.wait_for(lambda e: e.get("event") == "approval-decided", 60, "the decisions sent")
        decided[event["id"]] = event
    for case, request in asked.items():
        assert decided[request["id"]]["decision"] == wanted[case][1]
        assert decided[request["id"]]["by"] == "operator" and "error" not in decided[request["id"]]
    assert watcher.finish()[0] == 0
    for case, chat_proc in chats.items():
        final = chat_proc.wait_for(lambda e: e.get("event") == "final", 120, f"the final of {case}")
        assert final["state"] == "final", (case, final)
        assert chat_proc.finish()[0] == 0
        assert not any(e.get("event") == "approval-decided" for e in chat_proc.seen), \
            f"{case}: decided by the watcher, not the chat"
    ran = {case for case, marker in markers.items() if marker.exists()}
    assert ran == {"exec-yes", "pc-yes"}, (f"ran: {sorted(ran)} (allowed ones must run, rejected ones not); "
                                          f"tool results: { {c: tool_results(model, c) for c in markers} }")

    step('status: he')
    # status: health, version, agents, sessions
    status = events_of(cli.run("status", "--json"))[0]
    assert status["state"] == "connected" and status["version"] == "2026.9.6", status
    assert {"main", "asker"} <= set(status["agents"]) and status["sessions"] >= 3

    step('12: the ga')
    # 12: the gateway restarts under a connected client; it reconnects and says so
    # (backoff capped at 2 s, a named setting, so the test does not sit out 30 s waits)
    live = cli.start("approvals", "gw", "--json", PADDEDCELL_REMOTE_BACKOFF_MAX_SECONDS="2",
                     PADDEDCELL_REMOTE_MAX_RECONNECT_ATTEMPTS="100")
    live.wait_for(lambda e: e.get("event") == "state" and e.get("state") == "connected", 30, "connected")
    gateway.stop()   # a whole restart of the process (same state, same port) under the client
    gateway.start()
    live.wait_for(lambda e: e.get("event") == "state" and e.get("state") != "connected", 60, "the loss noticed")
    live.wait_for(lambda e: e.get("event") == "state" and e.get("state") == "connected", 180, "reconnected")
    assert json.loads(cli.run("list", "--json").stdout.splitlines()[0])["status"] == "connected"

    step('a revoked ')
    # a revoked device token: the live socket is closed, the next connect says what happened
    gateway.openclaw("devices", "revoke", "--device", device_id, "--role", "operator")
    live.wait_for(lambda e: e.get("event") == "state" and "revoked this device's token" in e.get("detail", ""),
                  60, "the revocation (close 4001) in words")
    last = live.wait_for(lambda e: e.get("event") == "error", 120, "the live client's last word")
    assert "no longer accepts this device's token" in last["message"], last
    assert "openclaw devices approve " in last["message"], last
    assert live.finish(60)[0] == 3, "the live client stops: the device waits for approval again"
    again = cli.run("test", "gw")
    assert again.returncode == 3 and "openclaw devices approve " in again.stderr, again.stderr
    listed = json.loads(cli.run("list", "--json").stdout.splitlines()[0])
    assert listed["status"] == "pending" and listed["pairingRequestId"], listed

    # no secret in the database files or anything the client printed
    blobs = b"".join(p.read_bytes() for p in home.glob("remote.db*"))
    printed = "".join(cli.transcript).encode()
    for secret in (SHARED, device_token):
        for form in (secret.encode(), secret.encode().hex().encode()):
            assert form not in blobs, "a secret is in remote.db"
            assert form not in printed, "a secret was printed"
