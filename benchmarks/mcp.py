"""`paddedcell mcp`: what the MCP layer adds to a pcexec call, and how fast it answers a client.

Starts a daemon in a throwaway PADDEDCELL_HOME (vault initialised, one secret for the
agent, as in real use), then measures in one run, rounds interleaved:

- ``POST /exec {"command": "true"}`` on one kept-alive connection (the plugin's path,
  the baseline), and the same with ``stream: true`` on a fresh connection per call
  (what the MCP server does, so that a cancelled call can close it);
- ``tools/call pcexec {"command": "true"}`` over stdio to one ``paddedcell mcp``, which
  also scans the call's arguments and its result for the admin password (two
  ``POST /vault/check-leak``, timed alone beside it);
- start-up: spawn ``paddedcell mcp`` → ``initialize`` answered, → first ``tools/list``
  answered, → first ``tools/call`` answered (the SDK imported by then); beside it,
  ``python -c 'import mcp.server.lowlevel'`` (the import the front keeps off the first
  answer) and ``python -c pass``.

    .venv/bin/python benchmarks/mcp.py [--samples 300] [--starts 15] [--json]

Goals (issue 14): MCP p50 overhead over POST /exec <= 10 ms; initialize answered
<= 300 ms after spawn.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import daemon_env, percentile, start_daemon, stop_daemon, timed
from paddedcell.daemon.client import _UnixConnection

BIN = Path(sys.executable).parent
AGENT = "bench-agent"
ADMIN = "Bench-admin-password-42"


class Server:
    """``paddedcell mcp`` over raw stdio lines."""

    def __init__(self, env: dict[str, str], workspace: Path):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([str(BIN / "paddedcell"), "mcp", "--agent-id", AGENT,
                                      "--agent-workspace", str(workspace)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.ident = 0

    def request(self, method: str, params: dict) -> dict:
        self.ident += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.ident, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.ident:
                return answer

    def initialize(self) -> None:
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.proc.stdin.flush()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(15)


def stream_exec(path: str, body: dict) -> dict:
    conn = _UnixConnection(path, 60)
    try:
        conn.request("POST", "/exec", body=json.dumps({**body, "stream": True}).encode(),
                     headers={"content-type": "application/json"})
        response = conn.getresponse()
        last = None
        for line in response:
            if line.strip():
                last = json.loads(line)
        return last
    finally:
        conn.close()


def startup_row(name: str, values: list[float]) -> dict:
    return {"operation": name, "n": len(values), "p50_ms": round(statistics.median(values), 2),
            "p90_ms": round(percentile(values, 90), 2), "max_ms": round(max(values), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="pc-bench-mcp-"))
    home, workspace = root / "home", root / "workspace"
    workspace.mkdir(parents=True)
    env = daemon_env(home, drop=("AGENT_ID", "AGENT_WORKSPACE", "AGENT"))
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    home.mkdir(mode=0o700)
    daemon, client = start_daemon(home, env, timeout=60)
    try:
        subprocess.run([str(BIN / "pass_mgr"), "admin", "init", "--password-stdin"], input=ADMIN + "\n",
                       text=True, env=env, check=True, capture_output=True)
        subprocess.run([str(BIN / "pass_mgr"), "set", AGENT, str(workspace), "db", "bench-secret-value",
                        ADMIN], text=True, env=env, check=True, capture_output=True)

        body = {"command": "true", "agentId": AGENT, "agentWorkspace": str(workspace)}
        server = Server(env, workspace)
        server.initialize()
        call = {"name": "pcexec", "arguments": {"command": "true"}}
        for _ in range(10):  # warm-up: first calls build the matcher, import lazily
            client.call("POST", "/exec", body)
            stream_exec(client.path, body)
            assert server.request("tools/call", call)["result"]["isError"] is False
        results: dict[str, list[float]] = {"POST /exec (kept-alive, baseline)": [],
                                           "POST /exec stream (fresh connection)": [],
                                           "MCP tools/call pcexec": [],
                                           "POST /vault/check-leak (the MCP layer does 2)": []}
        leak = {"text": json.dumps({"command": "true"}), "source": "bench"}
        for _ in range(args.samples):
            results["POST /exec (kept-alive, baseline)"].append(timed(lambda: client.call("POST", "/exec", body)))
            results["POST /exec stream (fresh connection)"].append(timed(lambda: stream_exec(client.path, body)))
            results["MCP tools/call pcexec"].append(timed(lambda: server.request("tools/call", call)))
            results["POST /vault/check-leak (the MCP layer does 2)"].append(
                timed(lambda: client.call("POST", "/vault/check-leak", leak)))
        server.close()

        starts: dict[str, list[float]] = {"spawn -> initialize answered": [],
                                          "spawn -> first tools/list answered": [],
                                          "spawn -> first tools/call answered": []}
        for _ in range(args.starts):
            s = Server(env, workspace)
            s.initialize()
            starts["spawn -> initialize answered"].append((time.perf_counter() - s.started) * 1000)
            s.request("tools/list", {})
            starts["spawn -> first tools/list answered"].append((time.perf_counter() - s.started) * 1000)
            s.request("tools/call", call)
            starts["spawn -> first tools/call answered"].append((time.perf_counter() - s.started) * 1000)
            s.close()
        for name, code in (("python -c 'import mcp.server.lowlevel' (kept off the path)",
                            "import mcp.server.lowlevel"), ("python -c pass", "pass")):
            starts[name] = [timed(lambda: subprocess.run([sys.executable, "-c", code], check=True))
                            for _ in range(max(3, args.starts // 3))]
        client.close()
    finally:
        stop_daemon(daemon, wait=15)

    rows = [{"operation": name, "n": len(values), "p50_ms": round(statistics.median(values), 3),
             "p90_ms": round(percentile(values, 90), 3), "p99_ms": round(percentile(values, 99), 3)}
            for name, values in results.items()]
    baseline = rows[0]["p50_ms"]
    overhead = round(rows[2]["p50_ms"] - baseline, 3)
    start_rows = [startup_row(name, values) for name, values in starts.items()]
    report = {"samples": args.samples, "starts": args.starts, "python": sys.version.split()[0],
              "loadavg_1m": round(os.getloadavg()[0], 2),
              "goals": {"mcp_p50_overhead_ms": 10, "initialize_ms": 300},
              "mcp_p50_overhead_ms": overhead, "calls": rows, "startup": start_rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"pcexec {{\"command\": \"true\"}}, {args.samples} samples each, rounds interleaved "
          f"(load average {report['loadavg_1m']} on {os.cpu_count()} CPUs)")
    print(f"{'operation':<46} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}")
    for row in rows:
        print(f"{row['operation']:<46} {row['n']:>5} {row['p50_ms']:>8.3f} {row['p90_ms']:>8.3f} {row['p99_ms']:>8.3f}")
    print(f"MCP p50 overhead over POST /exec: {overhead:.3f} ms (goal <= 10 ms)")
    print()
    print(f"start-up, {args.starts} spawns")
    print(f"{'operation':<62} {'n':>4} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8}")
    for row in start_rows:
        print(f"{row['operation']:<62} {row['n']:>4} {row['p50_ms']:>8.2f} {row['p90_ms']:>8.2f} {row['max_ms']:>8.2f}")
    print("goal: initialize answered <= 300 ms after spawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
