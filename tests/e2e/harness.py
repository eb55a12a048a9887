"""Run a real OpenClaw gateway, offline, with the PaddedCell plugin linked in.

Facts this relies on (see ../../docs/openclaw.md): a fresh ``HOME``
holds all of OpenClaw's state (``$HOME/.openclaw``); the model is our fake
OpenAI-compatible server; the gateway is ready when its log says
``[gateway] ready``; it stops cleanly on SIGTERM to its own PID. Nothing here
kills by name: other people's gateways and daemons run on the same machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "openclaw-plugin"
ENV_SCRIPT = REPO / "scripts" / "openclaw-env.sh"
OPENCLAW_VARS = ("OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH", "OPENCLAW_HOME", "OPENCLAW_PROFILE",
                 "OPENCLAW_AGENT_DIR", "OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PORT")
AGENT_VARS = ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL")


class SetupError(RuntimeError):
    """The e2e environment could not be prepared; the message says how to fix it."""


def openclaw_path() -> str:
    """PATH with Node 24 and OpenClaw first, installing both into the cache when absent."""
    try:
        out = subprocess.run(["bash", str(ENV_SCRIPT)], check=True, capture_output=True, text=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        raise SetupError(f"{ENV_SCRIPT} failed (exit {exc.returncode}): {exc.stderr.strip()[-2000:]}") from None
    except subprocess.TimeoutExpired:
        raise SetupError(f"{ENV_SCRIPT} did not finish within 15 minutes") from None
    line = out.stdout.strip().splitlines()[-1]
    prefix = 'export PATH="'
    if not line.startswith(prefix):
        raise SetupError(f"unexpected output from {ENV_SCRIPT}: {line!r}")
    dirs = line[len(prefix):].split(":$PATH")[0]
    return f"{dirs}:{os.environ.get('PATH', '')}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def base_env(home: Path, path: str, paddedcell_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OPENCLAW_VARS + AGENT_VARS}
    env.update(HOME=str(home), PATH=path, PADDEDCELL_HOME=str(paddedcell_home),
               NO_COLOR="1", OPENCLAW_NO_UPDATE_CHECK="1")
    return env


class PaddedcellDaemon:
    """A daemon in its own PADDEDCELL_HOME, started and stopped by PID."""

    def __init__(self, home: Path, python: str = sys.executable, extra_env: dict[str, str] | None = None):
        self.home = home
        self.python = python
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None

    @property
    def command(self) -> list[str]:
        return [self.python, "-m", "paddedcell.cli.main", "serve"]

    @property
    def socket(self) -> Path:
        return self.home / "run" / "paddedcell.sock"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in AGENT_VARS}
        env["PADDEDCELL_HOME"] = str(self.home)
        env["PATH"] = f"{Path(self.python).parent}:{env.get('PATH', '')}"
        env.update(self.extra_env)
        return env

    def run_cli(self, *argv: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), input=input, capture_output=True, text=True, env=self.env(), timeout=60)

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        log = open(self.home / "daemon.log", "ab")
        self.proc = subprocess.Popen(self.command, env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()
        wait_for(lambda: self.socket.exists() or self.proc.poll() is not None, 20, "the paddedcell daemon socket")
        if self.proc.poll() is not None:
            raise SetupError(f"paddedcell daemon exited ({self.proc.returncode}): "
                             f"{(self.home / 'daemon.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


class Gateway:
    """One OpenClaw gateway in a fresh HOME, with the plugin linked and configured."""

    #: `gateway run` arguments past the port (a subclass with token auth drops these).
    run_args: tuple[str, ...] = ("--auth", "none")
    #: Ready in 10-20 s on a quiet host; `make test` runs two passes side by side, each
    #: with its gateways, and a loaded host took over 90 s: a ready gateway ends the wait.
    ready_timeout = 240

    def __init__(self, root: Path, path: str, model_port: int, daemon: PaddedcellDaemon,
                 exec_mode: str = "full", plugin_config: dict[str, Any] | None = None,
                 extra_config: dict[str, Any] | None = None, load_plugin_by_path: bool = False):
        """``load_plugin_by_path``: name the plugin in ``plugins.load.paths`` (what
        ``openclaw plugins install --link`` records there) instead of running that command,
        ~20-40 s per gateway (it rebuilds OpenClaw's whole plugin index). The plugin loads
        the same (origin ``config``, same hooks and tools); what differs is the install
        record, so OpenClaw warns that it cannot verify where the plugin came from. The
        shared stack keeps the command: test_plugin_loads_clean proves the documented
        install."""
        self.root = root
        self.load_plugin_by_path = load_plugin_by_path
        self.home = root / "home"
        self.workspace = root / "workspace"
        self.port = free_port()
        self.path = path
        self.model_port = model_port
        self.daemon = daemon
        self.exec_mode = exec_mode
        self.plugin_config = {
            "paddedcellHome": str(daemon.home),
            "daemonCommand": daemon.command,
            "restartPollSeconds": 0.5,
            "notificationsWaitSeconds": 2,
            **(plugin_config or {}),
        }
        self.extra_config = extra_config or {}
        self.log_path = root / "openclaw.log"
        self.stdout_path = root / "gateway.out"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        return base_env(self.home, self.path, self.daemon.home)

    def config(self) -> dict[str, Any]:
        config = deep_merge(self.base_config(), self.extra_config)
        if self.load_plugin_by_path:
            config["plugins"]["load"] = {"paths": [str(PLUGIN_DIR)]}
        return config

    def base_config(self) -> dict[str, Any]:
        return {
            "gateway": {"mode": "local", "bind": "loopback", "port": self.port, "auth": {"mode": "none"}},
            "agents": {"defaults": {
                "workspace": str(self.workspace), "skipBootstrap": True,
                "model": {"primary": "fake/fake-model"}, "timeoutSeconds": 120,
                "heartbeat": {"every": "0m"},
            }},
            "models": {"mode": "merge", "providers": {"fake": {
                "baseUrl": f"http://127.0.0.1:{self.model_port}/v1", "apiKey": "fake-local",
                "api": "openai-completions", "timeoutSeconds": 60,
                "models": [{"id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000, "maxTokens": 4096}],
            }}},
            "tools": {"exec": {"mode": self.exec_mode}, "toolSearch": False},
            "skills": {"workshop": {"autonomous": {"mode": "off"}}},
            "logging": {"file": str(self.log_path)},
            "plugins": {"entries": {"paddedcell": {
                "enabled": True,
                "hooks": {"allowConversationAccess": True},
                "config": self.plugin_config,
            }}},
        }

    def openclaw(self, *argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(["openclaw", *argv], env=self.env(), capture_output=True, text=True,
                              timeout=timeout, cwd=self.root)
        if check and proc.returncode != 0:
            raise SetupError(f"openclaw {' '.join(argv)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def prepare(self) -> None:
        (self.home / ".openclaw").mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        # Under a root daemon each agent runs as a uid of its own and the daemon gives no
        # directory away: each workspace given as its refusal says (OpenClaw gives an agent
        # other than the default one the subdirectory of its id).
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from supervisor_helpers import give_workspace

        give_workspace(self.daemon.home, "main", self.workspace)
        agents = self.config()["agents"]
        ids = [a.get("id") for a in agents.get("list", ())] + list(agents.get("entries", {}))
        for agent in {i for i in ids if i and i != "main"}:
            (self.workspace / agent).mkdir(exist_ok=True)
            give_workspace(self.daemon.home, agent, self.workspace / agent)
        config_path = self.home / ".openclaw" / "openclaw.json"
        config_path.write_text(json.dumps(self.config(), indent=2))
        if self.load_plugin_by_path:
            return
        self.openclaw("plugins", "install", "--link", str(PLUGIN_DIR), "--force", "--accept-capabilities")
        # `plugins install` rewrites the config; put our entry back on top of what it recorded.
        written = json.loads(config_path.read_text())
        written.setdefault("plugins", {}).setdefault("entries", {})["paddedcell"] = \
            self.config()["plugins"]["entries"]["paddedcell"]
        config_path.write_text(json.dumps(written, indent=2))

    def start(self) -> None:
        out = open(self.stdout_path, "ab")
        self.proc = subprocess.Popen(["openclaw", "gateway", "run", "--port", str(self.port), *self.run_args],
                                     env=self.env(), cwd=self.root, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        out.close()

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise SetupError(f"openclaw gateway exited ({self.proc.returncode}):\n{self.output()[-4000:]}")
            return "[gateway] ready" in self.output()
        wait_for(ready, self.ready_timeout, "the OpenClaw gateway to be ready", interval=0.25)

    def output(self) -> str:
        text = ""
        for path in (self.stdout_path, self.log_path):
            if path.exists():
                text += path.read_text(errors="replace")
        return text

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def agent(self, session: str, message: str, timeout: float = 120, agent: str = "main") -> dict[str, Any]:
        proc = self.openclaw("agent", "--agent", agent, "--session-key", session, "--message", message,
                             "--timeout", str(int(timeout)), "--json", timeout=timeout + 30, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"openclaw agent failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout[proc.stdout.index("{"):])

    def history(self, session: str) -> list[dict[str, Any]]:
        params = json.dumps({"sessionKey": f"agent:main:{session}"})
        # The CLI's own RPC timeout is 10 s: a gateway on a loaded 2-core machine (a CI run
        # beside other work) answered later than that; the subprocess timeout stays 120 s.
        proc = self.openclaw("gateway", "call", "chat.history", "--params", params, "--json",
                             "--timeout", "90000")
        answer = json.loads(proc.stdout[proc.stdout.index("{"):])
        return answer.get("messages", answer.get("result", {}).get("messages", []))
