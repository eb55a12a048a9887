"""`paddedcell remote` speed and size, with baselines measured in the same run.

Rows (goal in brackets; each with its baseline and the ratio, the machine is noisy):
- connect + handshake with a stored device token, p50 [≤ 50 ms]: from the call to
  connected (hello-ok in, the device token checked, the state stored; the close after it
  is not timed), against the scripted local gateway (tests/remote_fake_gateway.py: the
  real signature check) and, with ``--real``, against a real OpenClaw gateway started
  here, with the gateway's own time answering ``connect`` and the client's CPU beside it;
  baseline: a bare WebSocket open (TCP + upgrade) to the same server;
- first streamed delta shown, p50 [≤ 10 ms after it arrives]: from the frame's arrival in
  the client (the reader task) to the redacted text written by the CLI's output layer;
  baseline: the same frame's arrival to a bare ``print``;
- ``remote list`` with 100 remotes, p50 [≤ 150 ms], a fresh process of the console script
  each run, with bytecode, and with PYTHONDONTWRITEBYTECODE=1 with and without PaddedCell's
  bytecode compiled at install; baseline: ``paddedcell --version``, and ``python -c pass``;
- the client's peak RSS during a chat [≤ 60 MB]; baseline: ``python -c pass``.

    .venv/bin/python benchmarks/remote.py [--samples N] [--real] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import trio
import trio_websocket

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

from bench_common import percentile  # noqa: E402
from remote_fake_gateway import FakeGateway, ThreadedGateway  # noqa: E402

from paddedcell import config  # noqa: E402
from paddedcell.remote import connection  # noqa: E402
from paddedcell.remote.client import RemoteClient  # noqa: E402
from paddedcell.remote.store import RemoteStore  # noqa: E402

SHARED = "bench-shared-token-0123456789"


def env_for(home: Path) -> dict[str, str]:
    """PADDEDCELL_HOME=home; bytecode written and used, as an installed package has it
    (with PYTHONDONTWRITEBYTECODE every run would compile every module again)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PADDEDCELL_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PADDEDCELL_HOME"] = str(home)
    return env


def new_home(root: Path, name: str) -> Path:
    home = root / name
    home.mkdir(mode=0o700)
    return home


# -- connect + handshake ----------------------------------------------------------------

CPU: list[float] = []  # this process's CPU per handshake (the client's share with a real gateway)
ANSWER: list[float] = []  # connect frame sent -> its response in: the gateway's own work


class _ConnectClock:
    """Stamps the connect frame leaving and its response arriving (wraps two functions
    for the duration of a run: a benchmark-only probe, not in the library)."""

    def __enter__(self):
        self.sent = self.answered = 0.0
        self._send, self._parse = trio_websocket.WebSocketConnection.send_message, connection.protocol.parse_frame
        clock = self

        async def send(ws, message):
            if '"method":"connect"' in message[:300]:
                clock.sent = time.perf_counter()
            return await clock._send(ws, message)

        def parse(text):
            frame = clock._parse(text)
            if clock.sent and not clock.answered and type(frame).__name__ == "Response":
                clock.answered = time.perf_counter()
            return frame
        trio_websocket.WebSocketConnection.send_message = send
        connection.protocol.parse_frame = parse
        return self

    def __exit__(self, *exc):
        trio_websocket.WebSocketConnection.send_message = self._send
        connection.protocol.parse_frame = self._parse


async def handshake_times(home: Path, url: str, samples: int) -> tuple[list[float], list[float]]:
    """Connect (stored device token) until connected — hello-ok in, the token checked and
    the state stored — then closes (teardown, not timed).
    Baseline: a bare WebSocket open (TCP + upgrade) to the same server."""
    settings = config.load(environ={"PADDEDCELL_HOME": str(home)})
    store = RemoteStore(home)
    client = RemoteClient(store, store.get("gw"), settings, lambda kind, fields: None)
    assert store.secrets(store.get("gw")).device_token, "pair first: no stored device token"
    ours, bare = [], []
    CPU.clear()
    ANSWER.clear()
    for _ in range(samples):
        with _ConnectClock() as clock:
            start, cpu = time.perf_counter(), time.process_time()
            async with client.connect("status"):
                ours.append((time.perf_counter() - start) * 1000)
                CPU.append((time.process_time() - cpu) * 1000)
        ANSWER.append((clock.answered - clock.sent) * 1000)
        async with trio.open_nursery() as nursery:
            start = time.perf_counter()
            ws = await connection.dial(nursery, url, False, settings)
            bare.append((time.perf_counter() - start) * 1000)
            await ws.aclose()
            nursery.cancel_scope.cancel()
    return ours, bare


def fake_handshake(root: Path, samples: int) -> tuple[list[float], list[float]]:
    home = new_home(root, "handshake")
    with ThreadedGateway(FakeGateway()) as gateway:
        store = RemoteStore(home)
        store.add("gw", gateway.url, auth_type="token", secret=SHARED)
        trio.run(_first_connect, home)
        return trio.run(handshake_times, home, gateway.url, samples)


async def _first_connect(home: Path) -> None:
    settings = config.load(environ={"PADDEDCELL_HOME": str(home)})
    store = RemoteStore(home)
    await RemoteClient(store, store.get("gw"), settings, lambda k, f: None).handshake("test")


def real_handshake(root: Path, samples: int) -> tuple[list[float], list[float]]:
    """Start a real OpenClaw gateway (tests/e2e), pair through `openclaw devices approve`."""
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    from fake_model import FakeModelServer
    from harness import PaddedcellDaemon, openclaw_path
    from test_remote_gateway import SHARED as GATEWAY_TOKEN
    from test_remote_gateway import RemoteGateway

    home = new_home(root, "real")
    with FakeModelServer() as model:
        # The e2e's gateway; its plugin's daemon is never needed (no tool runs here).
        gateway = RemoteGateway(root / "gw", openclaw_path(), model.port, PaddedcellDaemon(root / "daemon"))
        (root / "gw").mkdir()
        gateway.prepare()
        gateway.start()
        try:
            RemoteStore(home).add("gw", f"ws://127.0.0.1:{gateway.port}", auth_type="token", secret=GATEWAY_TOKEN)
            test = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "remote", "test", "gw", "--json"],
                                  env=env_for(home), capture_output=True, text=True)
            request = RemoteStore(home).get("gw").pairing_request_id
            assert request, test.stdout + test.stderr
            gateway.openclaw("devices", "approve", request)
            trio.run(_first_connect, home)
            return trio.run(handshake_times, home, f"ws://127.0.0.1:{gateway.port}", samples)
        finally:
            gateway.stop()


# -- first delta --------------------------------------------------------------------------

def first_delta(root: Path, samples: int) -> tuple[list[float], list[float]]:
    """Arrival (the reader's receive) → shown (the CLI's Output wrote the redacted text)."""
    from paddedcell.cli.remote import Output

    home = new_home(root, "delta")
    arrivals: list[float] = []
    original = connection.Gateway._dispatch

    def stamped(self, frame):
        if getattr(frame, "event", None) == "chat":
            arrivals.append(time.perf_counter())
        return original(self, frame)
    connection.Gateway._dispatch = stamped

    async def script(ws, gw):
        while not any(r["method"] == "chat.send" for r in gw.requests):
            await trio.sleep(0.001)
        gw.requests.clear()
        for state, text in (("delta", "Hello from the gateway"), ("final", "Hello from the gateway")):
            await gw.event(ws, "chat", {"runId": "r", "state": state,
                                        "message": {"content": [{"type": "text", "text": text}]}})

    gateway = FakeGateway(script=None, methods={"sessions.resolve": lambda p: {"key": p["key"]},
                                                "chat.send": lambda p: {"runId": "r"}})
    ours, bare = [], []
    with ThreadedGateway(gateway):
        store = RemoteStore(home)
        store.add("gw", gateway.url, auth_type="token", secret=SHARED)
        settings = config.load(environ={"PADDEDCELL_HOME": str(home)})
        for _ in range(samples):
            gateway.script = script
            out = Output(True, settings, store.all_secret_values())
            shown: list[float] = []
            sink = io.StringIO()

            def emit(kind, fields):
                if kind == "delta" and not shown:
                    with redirect_stdout(sink):
                        out.reply(fields["text"])
                        out.finish_reply()  # the JSON mode holds nothing back after this
                    shown.append(time.perf_counter())
            arrivals.clear()
            client = RemoteClient(store, store.get("gw"), settings, emit)
            trio.run(lambda: client.chat("hi", session="s"))
            ours.append((shown[0] - arrivals[0]) * 1000)
            start = time.perf_counter()
            with redirect_stdout(sink):
                print("Hello from the gateway")
            bare.append((time.perf_counter() - start) * 1000)
    connection.Gateway._dispatch = original
    return ours, bare


# -- remote list, RSS -------------------------------------------------------------------------

def run_ms(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000


def list_times(root: Path, samples: int) -> dict[str, list[float]]:
    """``remote list`` as a user runs it (the console script), in three set-ups: bytecode
    written and used (an installed package); PYTHONDONTWRITEBYTECODE=1 with PaddedCell's
    bytecode compiled at install (make venv); and PYTHONDONTWRITEBYTECODE=1 with none, so
    every start compiles PaddedCell's modules (an editable install never compiled: a copy
    of src/ first on PYTHONPATH). Baselines: ``paddedcell --version``, ``python -c pass``."""
    import shutil

    home = new_home(root, "list")
    store = RemoteStore(home)
    for index in range(100):
        store.add(f"gw{index:03d}", f"ws://10.0.{index // 250}.{index % 250 + 1}:18789",
                  auth_type="token", secret=f"{SHARED}-{index}")
    store.close()
    env = env_for(home)
    script = Path(sys.executable).parent / "paddedcell"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "paddedcell.cli.main"]
    uncompiled = root / "src-uncompiled"
    shutil.copytree(REPO / "src" / "paddedcell", uncompiled / "paddedcell",
                    ignore=shutil.ignore_patterns("__pycache__"))
    no_write = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    no_bytecode = {**no_write, "PYTHONPATH": str(uncompiled)}
    times: dict[str, list[float]] = {"list": [], "list-nowrite": [], "list-nobytecode": [],
                                     "version": [], "python": []}
    run_ms(cli + ["remote", "list"], env)  # warm-up: writes the bytecode
    for _ in range(samples):
        times["list"].append(run_ms(cli + ["remote", "list"], env))
        times["list-nowrite"].append(run_ms(cli + ["remote", "list"], no_write))
        times["list-nobytecode"].append(run_ms(cli + ["remote", "list"], no_bytecode))
        times["version"].append(run_ms(cli + ["--version"], env))
        times["python"].append(run_ms([sys.executable, "-c", "pass"], env))
    assert not any(uncompiled.rglob("*.pyc")), "PYTHONDONTWRITEBYTECODE was not honoured"
    return times


def peak_rss_mb(args: list[str], env: dict[str, str]) -> float:
    """VmHWM of a fresh interpreter running ``args`` (a module's argv, or [] for nothing),
    read by the process itself at exit: getrusage's maxrss would count the pages of this
    (large) benchmark process that the fork copied before exec."""
    with tempfile.NamedTemporaryFile("r", suffix=".hwm") as out:
        code = ("import atexit, runpy, sys\n"
                "def hwm():\n"
                f"    open({out.name!r}, 'w').write(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')))\n"
                "atexit.register(hwm)\n"
                f"sys.argv = {['paddedcell'] + args!r}\n"
                + ("runpy.run_module('paddedcell.cli.main', run_name='__main__', alter_sys=True)\n" if args else ""))
        subprocess.run([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return int(out.read().split()[1]) / 1024


def chat_rss(root: Path) -> tuple[float, float]:
    home = new_home(root, "rss")

    async def script(ws, gw):
        while not any(r["method"] == "chat.send" for r in gw.requests):
            await trio.sleep(0.01)
        text = ""
        for word in ("streamed ", "reply ", "with ", "a ", "tool ", "call"):
            text += word
            await gw.event(ws, "chat", {"runId": "r", "state": "delta",
                                        "message": {"content": [{"type": "text", "text": text}]}})
        await gw.event(ws, "agent", {"runId": "r", "stream": "tool",
                                     "data": {"phase": "start", "name": "exec", "args": {"command": "ls"}}})
        await gw.event(ws, "chat", {"runId": "r", "state": "final",
                                    "message": {"content": [{"type": "text", "text": text}]}})
    gateway = FakeGateway(script=script, methods={"sessions.resolve": lambda p: {"key": p["key"]},
                                                  "chat.send": lambda p: {"runId": "r"}})
    with ThreadedGateway(gateway):
        RemoteStore(home).add("gw", gateway.url, auth_type="token", secret=SHARED)
        env = env_for(home)
        ours = peak_rss_mb(["remote", "chat", "gw", "-m", "hi", "--json"], env)
    return ours, peak_rss_mb([], env)


def list_rows(times: dict[str, list[float]]) -> list[tuple]:
    version = percentile(times["version"], 50)
    return [
        ("remote list, 100 remotes (new process)", "ms p50", 150, percentile(times["list"], 50),
         "paddedcell --version", version),
        ("  same, PYTHONDONTWRITEBYTECODE=1, compiled at install", "ms p50", 150,
         percentile(times["list-nowrite"], 50), "paddedcell --version", version),
        ("  same, PYTHONDONTWRITEBYTECODE=1, never compiled", "ms p50", None,
         percentile(times["list-nobytecode"], 50), "paddedcell --version", version),
        ("  (python -c pass, for scale)", "ms p50", None, percentile(times["python"], 50), "", None),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--real", action="store_true", help="also time the handshake against a real OpenClaw gateway")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=("handshake", "delta", "list", "rss"), action="append",
                        help="run only these rows (repeatable; default: all)")
    args = parser.parse_args()
    only = set(args.only or ("handshake", "delta", "list", "rss"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        root = Path(tmp)
        if "handshake" in only:
            ours, bare = fake_handshake(root, args.samples)
            rows.append(("connect+handshake, stored device token (scripted gateway)", "ms p50", 50,
                         percentile(ours, 50), "bare WebSocket open (TCP + upgrade)", percentile(bare, 50)))
        if "handshake" in only and args.real:
            ours, bare = real_handshake(root, args.samples)
            rows.append(("connect+handshake, stored device token (OpenClaw 2026.9.6)", "ms p50", 50,
                         percentile(ours, 50), "bare WebSocket open (TCP + upgrade)", percentile(bare, 50)))
            rows.append(("  of which the gateway answering connect (sent -> hello-ok)", "ms p50", None,
                         percentile(ANSWER, 50), "", None))
            rows.append(("  the client's CPU per connect", "ms p50", None, percentile(CPU, 50), "", None))
        if "delta" in only:
            ours, bare = first_delta(root, args.samples)
            rows.append(("first delta: arrival -> shown (redacted)", "ms p50", 10, percentile(ours, 50),
                         "arrival -> bare print", percentile(bare, 50)))
        if "list" in only:
            rows += list_rows(list_times(root, max(5, args.samples // 3)))
        if "rss" in only:
            ours, bare = chat_rss(root)
            rows.append(("client peak RSS during a chat (VmHWM)", "MB", 60, ours, "python doing nothing", bare))
    if args.json:
        print(json.dumps([{"row": r[0], "unit": r[1], "goal": r[2], "value": round(r[3], 3),
                           "baseline": r[4], "baselineValue": None if r[5] is None else round(r[5], 3),
                           "ratio": None if not r[5] else round(r[3] / r[5], 2),
                           "met": None if r[2] is None else r[3] <= r[2]} for r in rows], indent=1))
        return
    print(f"{'row':58} {'value':>9} {'goal':>6} {'met':>4}   baseline")
    for name, unit, goal, value, base_name, base in rows:
        met = "" if goal is None else ("yes" if value <= goal else "NO")
        ratio = f" ({value / base:.2f}x of {base:.2f})" if base else ""
        print(f"{name:58} {value:9.2f} {'' if goal is None else goal:>6} {met:>4}   {base_name}{ratio} [{unit}]")


if __name__ == "__main__":
    main()
