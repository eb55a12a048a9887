"""Does a big leak scan stall the daemon's other routes? (issue 12)

Starts a daemon in a throwaway PADDEDCELL_HOME (vault initialised with a fast
KDF), starts a session that prints a line every 10 ms, then times ``GET
/healthz`` on its own connection:

- idle (the baseline);
- while ``--parallel`` clients each post a ``--mb`` MB text to
  ``/vault/check-leak`` (no password in it: the whole text is scanned), again
  and again;
- while ``--parallel`` clients each post a ``--mb`` MB command to ``/exec``
  (parsed, scanned for ``pass_mgr get``, redacted for display, spawned), again
  and again (issue 20);
- while one client starts session after session (``true``) and, before each, touches
  every one of ``--stores`` stores of other agents in readable workspaces, so each
  start reads them all again (lock, decrypt: issue 20's "Supervisor.start reads
  changed stores").

    .venv/bin/python benchmarks/daemon_edge.py [--mb 10] [--parallel 4] [--samples 200]
        [--stores 100] [--loads check-leak,exec,starts] [--json]

Goal (issues 12, 20): /healthz p99 <= 50 ms during the scans, the commands and the starts.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_common import daemon_env, percentile, start_daemon, stop_daemon, timed
from paddedcell import config
from paddedcell.daemon.client import DaemonClient

FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}


def healthz_times(client: DaemonClient, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        times.append(timed(lambda: client.call("GET", "/healthz")))
        time.sleep(0.01)
    return times


def make_stores(home: Path, settings, count: int) -> list[Path]:
    """``count`` stores of other agents, each in a workspace any uid can read (so every
    session must mask them); their files, to touch."""
    from paddedcell.vault import generate_secret
    from paddedcell.vault.settings import VaultSettings
    from paddedcell.vault.store import locate

    files = []
    for index in range(count):
        workspace = home / "workspaces" / f"w{index}"
        workspace.mkdir(parents=True)
        workspace.chmod(0o755)
        generate_secret(f"other{index}", str(workspace), "token", settings=settings)
        files.append(Path(locate(VaultSettings.of(settings).path_template, f"other{index}",
                                 str(workspace)).file))
    (home / "workspaces").chmod(0o755)
    return files


def start_sessions(path: str, files: list[Path], stop: threading.Event, done: list[float],
                   errors: list[str]) -> None:
    """Touch every store (a new mtime: each is read again), then start a session; again."""
    body = json.dumps({"command": "true", "agentId": "bench", "timeoutSeconds": 30}).encode()
    request = (b"POST /exec HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
               b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
               ) + body
    tick = 0
    while not stop.is_set():
        tick += 1
        for file in files:
            os.utime(file, ns=(tick * 1_000_000_000, tick * 1_000_000_000))
        if not post_timed(path, request, done, errors):
            return


def post_timed(path: str, request: bytes, done: list[float], errors: list[str]) -> bool:
    """Send one whole request on its own connection; its time (ms) joins ``done``, or its
    answer's start joins ``errors`` (False) when it is not a 200."""
    start = time.perf_counter()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        errors.append(answer[:200].decode("latin-1"))
        return False
    done.append((time.perf_counter() - start) * 1000)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--stores", type=int, default=100)
    parser.add_argument("--loads", default="check-leak,exec,starts",
                        help="which loads to run, comma-separated")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="pc-bench-edge-"))
    env = daemon_env(home)
    from paddedcell.vault import init_admin

    settings = config.load(env, FAST_KDF)
    init_admin("bench admin password", settings)
    wanted = set(args.loads.split(","))
    store_files = make_stores(home, settings, args.stores) if "starts" in wanted else []
    daemon, client = start_daemon(home, env, timeout=120)
    try:  # the daemon scans for the admin password once a human gave it (vault/guard.py)
        client.call("POST", "/vault/guard", {"password": "bench admin password"})
    except Exception:
        pass  # a daemon from before the guard: its detector is sealed in admin.json
    stop = threading.Event()
    scans: dict[str, list[float]] = {}
    errors: list[str] = []
    try:
        client.call("POST", "/exec", {"command": "while :; do echo tick; sleep 0.01; done",
                                      "agentId": "bench", "background": True})
        results = {"healthz idle (baseline)": healthz_times(client, args.samples)}
        text = "lorem ipsum dolor sit amet " * int(args.mb * 1e6 / 27)
        loads = {
            "check-leak": b"POST /vault/check-leak",
            "exec": b"POST /exec",
        }
        bodies = {
            "check-leak": json.dumps({"text": text, "source": "bench"}).encode(),
            # A comment: the shell has nothing to run, every layer still reads it all.
            "exec": json.dumps({"command": "# " + text + "\ntrue", "agentId": "bench",
                                "timeoutSeconds": 30}).encode(),
        }
        del text
        for name, line in loads.items():
            body = bodies.pop(name)
            if name not in wanted:
                continue
            # Encoded once and sent from raw sockets: the load must not take this
            # process's GIL from the thread that times /healthz.
            request = (line + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                       b"content-type: application/json\r\ncontent-length: %d\r\n\r\n"
                       % len(body)) + body
            del body
            stop.clear()
            done: list[float] = []

            def load(request: bytes = request, done: list[float] = done) -> None:
                while not stop.is_set() and post_timed(client.path, request, done, errors):
                    pass

            threads = [threading.Thread(target=load) for _ in range(args.parallel)]
            for thread in threads:
                thread.start()
            time.sleep(1.0)  # the load is under way
            results[f"healthz during {args.parallel} x {args.mb:g} MB {name}"] = healthz_times(
                client, args.samples)
            stop.set()
            for thread in threads:
                thread.join()
            scans[name] = done
        if "starts" in wanted:
            stop.clear()
            done = []
            thread = threading.Thread(target=start_sessions, args=(client.path, store_files,
                                                                   stop, done, errors))
            thread.start()
            time.sleep(1.0)
            results[f"healthz during starts over {args.stores} changed stores"] = healthz_times(
                client, args.samples)
            stop.set()
            thread.join()
            scans["session start"] = done
        client.close()
    finally:
        stop.set()
        stop_daemon(daemon, wait=30)

    rows = [{"operation": name, "n": len(values), "p50_ms": round(statistics.median(values), 3),
             "p99_ms": round(percentile(values, 99), 3), "max_ms": round(max(values), 3)}
            for name, values in results.items()]
    for name, done in scans.items():
        if done:
            what = (f"{name} over {args.stores} changed stores (each)" if name == "session start"
                    else f"{name} {args.mb:g} MB (each, {args.parallel} parallel)")
            rows.append({"operation": what,
                         "n": len(done), "p50_ms": round(statistics.median(done), 3),
                         "p99_ms": round(percentile(done, 99), 3), "max_ms": round(max(done), 3)})
    report = {"python": sys.version.split()[0], "goal": "healthz p99 <= 50 ms during the scans, the commands and the starts",
              "errors": errors, "results": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'operation':<46} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for row in rows:
        print(f"{row['operation']:<46} {row['n']:>5} {row['p50_ms']:>9.3f} {row['p99_ms']:>9.3f} "
              f"{row['max_ms']:>9.3f}")
    for error in errors:
        print(f"error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
