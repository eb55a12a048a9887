"""What the daemon benchmarks share (restart_api.py, daemon_edge.py, mcp.py):
percentiles, a timer, and a daemon in a throwaway PADDEDCELL_HOME."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from paddedcell import config
from paddedcell.daemon.client import DaemonClient


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (``p`` in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def timed(fn) -> float:
    """Milliseconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def daemon_env(home: Path, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment without PADDEDCELL_* (and ``drop``), PADDEDCELL_HOME=home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_") and k not in drop}
    env["PADDEDCELL_HOME"] = str(home)
    return env


def start_daemon(home: Path, env: dict[str, str],
                 timeout: float = 60) -> tuple[subprocess.Popen, DaemonClient]:
    """``paddedcell serve`` with ``env`` (log: home/daemon.log) and a client once /healthz answers.
    A daemon that does not answer within 15 s is stopped, and SystemExit raised."""
    with open(home / "daemon.log", "ab") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "serve"],
                                  env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        client = DaemonClient(config.load(env), timeout=timeout)
        deadline = time.monotonic() + 15
        while not client.healthy():
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit(f"daemon did not start; see {home / 'daemon.log'}")
            time.sleep(0.05)
    except BaseException:
        stop_daemon(daemon)
        raise
    return daemon, client


def stop_daemon(daemon: subprocess.Popen, wait: float = 15) -> None:
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=wait)
