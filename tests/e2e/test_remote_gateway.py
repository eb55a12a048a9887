"""`paddedcell remote` against a real OpenClaw 2026.9.6 gateway (one gateway for the module).

The gateway runs with token auth and `gateway.nodes.pairing.autoApproveLocal: false`,
so this loopback client is paired the way a remote one is (a request, then
`openclaw devices approve`). Agent `main` runs exec freely; agent `asker` has
`tools.exec.mode: ask`, so its exec calls wait for an operator's approval, which
`paddedcell remote` gives (or refuses) over the protocol. Every output of every
command and the database are scanned byte by byte for the secrets at the end.
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

from fake_model import Reply, ToolCall
from harness import Gateway, base_env, free_port

SHARED = "e2e-remote-shared-token-7Hq2Rk9w"


class RemoteGateway(Gateway):
    """A gateway with token auth and real pairing, no PaddedCell plugin (none is needed);
    start, stop, output and the `openclaw` CLI are the harness's."""

    run_args = ()  # the config's token auth, not --auth none
    ready_timeout = 180  # a loaded CI machine

    def __init__(self, root: Path, path: str, model_port: int):  # noqa: D107 - no daemon here
        self.root, self.path, self.model_port = root, path, model_port
        self.home = root / "home"
        self.workspace = root / "workspace"
        self.port = free_port()
        self.log_path = root / "openclaw.log"
        self.stdout_path = root / "gateway.out"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        return base_env(self.home, self.path, self.root / "unused-paddedcell-home")

    def prepare(self) -> None:
        (self.home / ".openclaw").mkdir(parents=True)
        self.workspace.mkdir()
        config = {
            "gateway": {"mode": "local", "bind": "loopback", "port": self.port,
                        "auth": {"mode": "token", "token": SHARED},
                        "nodes": {"pairing": {"autoApproveLocal": False}}},
            "agents": {"defaults": {"workspace": str(self.workspace), "skipBootstrap": True,
                                    "model": {"primary": "fake/fake-model"}, "timeoutSeconds": 120,
                                    "heartbeat": {"every": "0m"}},
                       "list": [{"id": "main", "default": True},
                                {"id": "asker", "tools": {"exec": {"mode": "ask"}}}]},
            "models": {"mode": "merge", "providers": {"fake": {
                "baseUrl": f"http://127.0.0.1:{self.model_port}/v1", "apiKey": "fake-local",
                "api": "openai-completions", "timeoutSeconds": 60,
                "models": [{"id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000, "maxTokens": 4096}]}}},
            "tools": {"exec": {"mode": "full"}, "toolSearch": False},
            "skills": {"workshop": {"autonomous": {"mode": "off"}}},
            "logging": {"file": str(self.log_path)},
        }
        (self.home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, openclaw_bin_path, fake_model):
    gw = RemoteGateway(tmp_path_factory.mktemp("remote-gw"), openclaw_bin_path, fake_model.port)
    gw.prepare()
    gw.start()
    yield gw
    gw.stop()


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


def test_remote_client_against_a_real_gateway(gateway, fake_model, tmp_path):
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
    pair = cli.start("pair", "gw", "--json")
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

    step('11: an exe')
    # 11: an exec approval allowed from a second terminal runs; one rejected in the chat does not
    allowed_marker, denied_marker = gateway.root / "approved.txt", gateway.root / "denied.txt"
    model.script("ryes", [ToolCall("exec", {"command": f"touch {allowed_marker}"}), Reply("ran it")])
    model.script("rno", [ToolCall("exec", {"command": f"touch {denied_marker}"}), Reply("could not")])
    watcher = cli.start("approvals", "gw", "--json", "--max", "1")
    watcher.wait_for(lambda e: e.get("event") == "state" and e.get("state") == "connected", 30, "the watcher connected")
    yes = cli.start("chat", "gw", "--json", "--session", "agent:asker:ryes", "-m", "[case:ryes] touch it")
    request = watcher.wait_for(lambda e: e.get("event") == "approval", 90, "the approval request")
    assert request["type"] == "exec" and str(allowed_marker) in request["text"]
    watcher.send(f"{request['id'][:8]} allow-once")
    watcher.wait_for(lambda e: e.get("event") == "approval-decided", 30, "the decision sent")
    yes.wait_for(lambda e: e.get("event") == "final", 90, "the allowed chat's final")
    assert yes.finish()[0] == 0 and watcher.finish()[0] == 0
    assert allowed_marker.exists(), "the allowed command ran"

    no = cli.start("chat", "gw", "--json", "--session", "agent:asker:rno", "-m", "[case:rno] touch it")
    request = no.wait_for(lambda e: e.get("event") == "approval", 90, "the approval request in the chat")
    no.send(f"{request['id']} deny")
    decided = no.wait_for(lambda e: e.get("event") == "approval-decided", 30, "the denial sent")
    assert decided["decision"] == "deny" and decided["by"] == "operator"
    no.wait_for(lambda e: e.get("event") == "final", 90, "the denied chat's final")
    assert no.finish()[0] == 0
    assert not denied_marker.exists(), "the rejected command did not run"

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
