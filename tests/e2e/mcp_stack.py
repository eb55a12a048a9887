"""A daemon with an initialised vault and one agent's secret, and `paddedcell mcp` over raw stdio.

Used by tests/e2e/test_mcp_*.py and benchmarks/mcp.py. Nothing here kills by name.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import REPO, PaddedcellDaemon  # noqa: E402

ADMIN_PASSWORD = "Adm1n-mcp-correct-horse-42"
SECRET = "s3cr3t-mcp-Vb8Kq2Wz"
AGENT = "mcp-agent"


@dataclass
class McpStack:
    daemon: PaddedcellDaemon
    workspace: Path
    root: Path

    @property
    def python(self) -> str:
        return self.daemon.python

    @property
    def paddedcell(self) -> str:
        return str(Path(self.python).parent / "paddedcell")

    def server_command(self) -> list[str]:
        return [self.paddedcell, "mcp", "--agent-id", AGENT, "--agent-workspace", str(self.workspace)]

    def server_env(self) -> dict[str, str]:
        """What a client config gives the server: PADDEDCELL_HOME, and PATH for pass_mgr."""
        return {"PADDEDCELL_HOME": str(self.daemon.home),
                "PATH": f"{Path(self.python).parent}:/usr/bin:/bin"}


def start_stack(root: Path, python: str | None = None) -> McpStack:
    python = python or os.path.abspath(sys.executable)
    daemon = PaddedcellDaemon(root / "paddedcell-home", python=python)
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    daemon.start()
    pass_mgr = str(Path(python).parent / "pass_mgr")
    init = daemon.run_cli(pass_mgr, "admin", "init", "--password-stdin", input=ADMIN_PASSWORD + "\n")
    assert init.returncode == 0, init.stderr
    put = daemon.run_cli(pass_mgr, "set", AGENT, str(workspace), "db", SECRET, ADMIN_PASSWORD)
    assert put.returncode == 0, put.stderr
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from supervisor_helpers import give_workspace  # a root daemon gives no directory away

    give_workspace(daemon.home, AGENT, workspace)
    return McpStack(daemon, workspace, root)


class McpProcess:
    """``paddedcell mcp`` driven line by line, as a client would."""

    def __init__(self, command: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._next_id = 100
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30.0) -> dict[str, Any]:
        line = self._lines.get(timeout=timeout)
        assert line, f"paddedcell mcp closed stdout; stderr: {self.stderr()}"
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None,
                timeout: float = 120.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send a request; return its response and the notifications that came before it."""
        self._next_id += 1
        ident = self._next_id
        self.send({"id": ident, "method": method, **({"params": params} if params is not None else {})})
        notes = []
        while True:
            message = self.receive(timeout)
            if message.get("id") == ident and "method" not in message:
                return message, notes
            notes.append(message)

    def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        answer, _ = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                                "clientInfo": {"name": "pytest", "version": "1"}})
        self.send({"method": "notifications/initialized"})
        return answer

    def call(self, tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        answer, _ = self.request("tools/call", {"name": tool, "arguments": arguments, **extra})
        assert "result" in answer, answer
        return answer["result"]

    def close(self) -> int:
        self.proc.stdin.close()
        try:
            return self.proc.wait(15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")


def visible(result: dict[str, Any]) -> str:
    """Everything of a tool result a model may be shown: text and structured content."""
    return json.dumps(result, ensure_ascii=False)


__all__ = ["ADMIN_PASSWORD", "AGENT", "REPO", "SECRET", "McpProcess", "McpStack", "start_stack", "visible"]
