"""Round trips of the restart coordinator's routes over the daemon's Unix socket.

Starts a daemon in a throwaway PADDEDCELL_HOME, registers ``--agents`` agents,
then times (one kept-alive connection, like the plugin):

- ``GET /healthz``: the baseline, the HTTP core with no work behind it;
- ``message-start`` / ``message-end`` on random agents (each persists one agent file);
- ``query-restart``: the first call (freezes every agent and writes each one),
  then the requester's repeated polls while one agent is still busy (NOT_READY),
  and other agents' calls (ALREADY_SCHEDULED).

    .venv/bin/python benchmarks/restart_api.py [--agents 1000] [--samples 2000] [--json]

Goal (issue 5): query-restart and message-start p50 <= 2 ms with 1,000 agents.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import daemon_env, percentile, start_daemon, stop_daemon, timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="pc-bench-restart-"))
    env = daemon_env(home)
    daemon, client = start_daemon(home, env, timeout=60)
    try:
        call = client.call
        agents = [f"agent-{i:04d}" for i in range(args.agents)]
        for agent in agents:
            call("POST", "/lifecycle/message-start", {"agentId": agent, "sessionKey": f"{agent}:main"})
            call("POST", "/lifecycle/message-end", {"agentId": agent, "sessionKey": f"{agent}:main"})

        rng = random.Random(5)
        results: dict[str, list[float]] = {"healthz (baseline)": [], "message-start": [],
                                           "message-end": []}
        for _ in range(args.samples):
            results["healthz (baseline)"].append(timed(lambda: call("GET", "/healthz")))
            agent = rng.choice(agents)
            body = {"agentId": agent, "sessionKey": f"{agent}:chat"}
            results["message-start"].append(timed(lambda: call("POST", "/lifecycle/message-start", body)))
            results["message-end"].append(timed(lambda: call("POST", "/lifecycle/message-end", body)))

        # One agent stays busy so the requester's polls keep answering NOT_READY.
        call("POST", "/lifecycle/message-start", {"agentId": agents[0], "sessionKey": "blocker"})
        query = {"requesterAgentId": agents[1], "requesterSessionKey": f"{agents[1]}:chat"}
        first = timed(lambda: call("POST", "/query-restart", query))
        results["query-restart (poll, NOT_READY)"] = [
            timed(lambda: call("POST", "/query-restart", query)) for _ in range(args.samples)]
        results["query-restart (ALREADY_SCHEDULED)"] = [
            timed(lambda: call("POST", "/query-restart",
                               {"requesterAgentId": rng.choice(agents), "requesterSessionKey": "x"}))
            for _ in range(args.samples)]
        results["message-start (frozen, reject)"] = []
        for _ in range(args.samples):
            agent = rng.choice(agents[2:])
            body = {"agentId": agent, "sessionKey": f"{agent}:chat"}
            results["message-start (frozen, reject)"].append(
                timed(lambda: call("POST", "/lifecycle/message-start", body)))
        assert call("POST", "/query-restart", query)["result"] == "NOT_READY"
        call("POST", "/lifecycle/message-end", {"agentId": agents[0], "sessionKey": "blocker"})
        ok_call = timed(lambda: call("POST", "/query-restart", query))
        client.close()
    finally:
        stop_daemon(daemon, wait=15)

    rows = [{"operation": name, "n": len(values), "p50_ms": round(statistics.median(values), 3),
             "p90_ms": round(percentile(values, 90), 3), "p99_ms": round(percentile(values, 99), 3)}
            for name, values in results.items()]
    rows.append({"operation": f"query-restart (first: freezes {args.agents - 1})", "n": 1,
                 "p50_ms": round(first, 3), "p90_ms": None, "p99_ms": None})
    rows.append({"operation": "query-restart (OK)", "n": 1, "p50_ms": round(ok_call, 3),
                 "p90_ms": None, "p99_ms": None})
    report = {"agents": args.agents, "samples": args.samples, "python": sys.version.split()[0],
              "goal": "query-restart and message-start p50 <= 2 ms", "results": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"restart coordinator round trips, {args.agents} agents, {args.samples} samples each")
    print(f"{'operation':<42} {'n':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}")
    for row in rows:
        cells = [f"{row[k]:>8.3f}" if row[k] is not None else f"{'-':>8}"
                 for k in ("p50_ms", "p90_ms", "p99_ms")]
        print(f"{row['operation']:<42} {row['n']:>6} {' '.join(cells)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
