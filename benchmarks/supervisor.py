"""Supervisor benchmarks (issue 4), each against a baseline measured in the same run.

1. ``pcexec --pty`` streaming a 64 MiB file to /dev/null vs a raw Python PTY
   read loop (``pty.fork`` + ``os.read`` until EIO) running the same ``cat``.
   Goal: >= 0.9x the raw loop. A context row says how many cores the raw loop
   alone keeps busy (the kernel's tty work, cat, the reader): at the machine's
   core count, every CPU second a pump adds slows the command's output.
2. Pipe streaming through the supervisor with 10 secrets (variants on) vs a raw
   pipe read loop (1 MiB pipe buffer, ``os.read``) of the same ``cat``.
   Goal: >= 1 GB/s; and the pump path's CPU <= 1.5x the session's filter alone on
   the same bytes (issue 21), both with the matcher built (its cold build: a row).
3. ``POST /exec {"command": "true"}`` round trip on a running daemon vs a bare
   ``bash -c true`` spawn. Goal: p50 overhead <= 10 ms.
4. Daemon RSS idle, and its peak under 64 sessions flooding output (8 agents x
   8 sessions, ``cat /dev/zero``) for a few seconds. Goal: <= 40 MB idle, and
   peak - idle within ``supervisor.global_buffer_bytes`` (64 MiB).
5. Sandbox start-up (issue 10): ``POST /exec true`` p50 on a daemon with the
   namespace sandbox (allow-list root, own network namespace, the session proxy)
   vs one without, interleaved, each call after a pause (IDLE_SECONDS: an agent's
   commands come seconds apart, and a daemon's background work after a session, such
   as the next sandbox spares, must not land in the other daemon's timing). Goal:
   <= +10 ms. A context row: the same, BURST calls back to back to each daemon.
6. ``pass_mgr get`` inside a session (over the session channel) vs the same
   call outside any session (today's direct store read). Goal: no slower.
7. Daemon latency under redaction load (issue 9): p50/p99/max of ``/healthz``,
   ``/vault/check-leak``, ``/lifecycle/message-start`` and ``/query-restart``
   while 8 background sessions of an agent with 50 JWT secrets (and an admin
   password, so the guard scans too) stream the JWTs' shared prefix, beside the
   same figures idle; then ``/healthz`` while they stream ``xxd /dev/urandom``
   (the guard's hex dump view) and URL-escaped lines (its %XX view). Goal: p99
   <= 50 ms and max <= 250 ms under load. ``--only-latency`` runs this one alone.

    python benchmarks/supervisor.py            # all four, ~1-2 min on 2 cores
    python benchmarks/supervisor.py --quick    # smaller inputs, fewer rounds
    python benchmarks/supervisor.py --json     # machine-readable results
    python benchmarks/supervisor.py --only-throughput   # rows 1 and 2 only
    python benchmarks/supervisor.py --only-pipes --quick --rounds 3   # row 2, 128 MiB
    python benchmarks/supervisor.py --only-flood        # rows "daemon RSS" only

Each run uses a fresh temporary PADDEDCELL_HOME and stops the daemon it starts.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import pty
import random
import shlex
import signal
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import trio  # noqa: E402

from paddedcell import config  # noqa: E402
from paddedcell.daemon.client import DaemonClient  # noqa: E402
from paddedcell.supervisor import LaunchSpec, Supervisor  # noqa: E402

MIB = 1024 * 1024
BIN = Path(sys.executable).parent


def make_file(directory: Path, size: int) -> Path:
    """Printable text with newlines, like real command output."""
    rng = random.Random(2026)
    table = bytes(10 if i % 80 == 79 else 32 + i % 95 for i in range(256))
    path = directory / f"corpus-{size}.txt"
    with open(path, "wb") as f:
        for _ in range(size // MIB):
            f.write(rng.randbytes(MIB).translate(table))
    return path


def medians(fns: dict, rounds: int) -> dict:
    """Median seconds of each function over ``rounds`` rounds, run in turn.

    Interleaving puts each baseline and its contender under the same load on
    a shared machine; back-to-back blocks of rounds did not (the ratios of
    one row moved by 0.3 between runs).
    """
    return {name: statistics.median(values) for name, values in rounds_of(fns, rounds).items()}


def rounds_of(fns: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds of each function in each of ``rounds`` rounds, run in turn (see
    :func:`medians`)."""
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(fn())
    return times


def pairs_note(times: dict[str, list[float]], name: str) -> str:
    """The rounds of ``name`` against the raw loop's: per-round ratios (each pair ran
    back to back, under the same load) and the best round of each. On a shared machine
    a PTY round stalls now and then (session 14: 16 MiB in 0.2 s, or 1.0-2.1 s while
    another process kept a core busy, the raw loop's rounds as often as the pump's: the
    kernel's tty work waits for a core), which moves a median of five by 0.2."""
    pairs = [raw / ours for raw, ours in zip(times["raw"], times[name])]
    return (f"per-round ratios {' '.join(f'{r:.2f}' for r in pairs)}; best round of each "
            f"{min(times['raw']) / min(times[name]):.2f}")


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (/proc/stat: user, nice,
    system, irq, softirq)."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return sum(fields[i] for i in (0, 1, 2, 5, 6)) / os.sysconf("SC_CLK_TCK")


def background_cores(seconds: float = 1.0) -> float:
    """Cores busy while this process sleeps: other work on a shared machine."""
    before = machine_busy_seconds()
    time.sleep(seconds)
    return (machine_busy_seconds() - before) / seconds


# --- 1. PTY ------------------------------------------------------------------------


def raw_pty_read(path: Path) -> float:
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("cat", ["cat", str(path)])
    total = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError as exc:
            if exc.errno == errno.EIO:
                break
            raise
        if not chunk:
            break
        total += len(chunk)
    os.waitpid(pid, 0)
    os.close(fd)
    return time.perf_counter() - start


def busy_cores(fn) -> tuple[float, float]:
    """``(seconds of fn(), CPU seconds the whole machine was busy meanwhile)``, from
    /proc/stat (the kernel's tty work runs in kworkers, neither ours nor cat's)."""
    before = machine_busy_seconds()
    wall = fn()
    return wall, machine_busy_seconds() - before


def pcexec_pty(path: Path, env: dict) -> float:
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        # Run from the corpus's directory: the session sandbox shows the work
        # directory, not the rest of /tmp.
        subprocess.run([str(BIN / "pcexec"), "--pty", f"cat {shlex.quote(str(path))}"],
                       stdout=sink, env=env, check=True, cwd=path.parent)
    return time.perf_counter() - start


# --- 2. pipes ---------------------------------------------------------------------


def raw_pipe_read(path: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
    fd = proc.stdout.fileno()
    try:
        fcntl.fcntl(fd, 1031, MIB)  # F_SETPIPE_SZ, as the supervisor does
    except OSError:
        pass
    while os.read(fd, MIB):
        pass
    proc.wait()
    return time.perf_counter() - start


def supervised(path: Path, settings, secrets: list[str], use_pty: bool = False) -> float:
    """The supervisor in this process, output also written to /dev/null like pcexec."""
    sink = open(os.devnull, "wb")

    def live(stream: str, data: bytes) -> None:
        sink.write(data)
        sink.flush()

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            sup = Supervisor(settings, nursery)
            start = time.perf_counter()
            session = sup.start(LaunchSpec(command=f"cat {shlex.quote(str(path))}", pty=use_pty,
                                           cwd=str(path.parent),
                                           secrets=secrets, timeout_seconds=0,
                                           on_output=live if use_pty else None))
            await session.done.wait()
            elapsed = time.perf_counter() - start
            assert session.outcome.exit_code == 0 and session.buffer.end >= path.stat().st_size
            nursery.cancel_scope.cancel()
            return elapsed
    try:
        return trio.run(main)
    finally:
        sink.close()


def filter_alone(path: Path, settings, secrets: list[str],
                 sanitize: bool = False, guard: bool = False) -> tuple[float, float]:
    """The same bytes through the redactor the session builds (``new_filter``, the
    settings' forms) -- with ``sanitize``, through the session's whole filter
    (``Session._filter``: OpenClaw's sanitizer first) -- fed in the pump's batch size
    from a view, as the pump feeds its read buffer, the matcher already built (as the
    pump's is): ``(wall, CPU)`` seconds of the feeding alone. Reading the file is left
    out of both (the pump's figures leave out ``cat``'s reading too: it is another
    process); it was 0.26-0.31 of the 2.25 CPU s this row showed for 512 MiB. The goal
    (issue 21) counts the sanitizer as the pump's cost, against the redactor alone.
    ``guard``: the admin-password guard after the redactor, as a daemon whose admin
    password a human gave runs it (``vault.leak.LeakStream``)."""
    from paddedcell.execspec.ansi import OutputSanitizer
    from paddedcell.redactor.filters import new_filter
    from paddedcell.supervisor.session import REDACTED_BATCH

    data = path.read_bytes()
    view = memoryview(data)
    redactor = new_filter(secrets, settings)
    if guard:
        from paddedcell.vault.leak import LeakDetector, LeakStream

        redactor = LeakStream(LeakDetector.create("bench-admin-password-pipes"), redactor,
                              on_hit=lambda: None)
    sanitizer = OutputSanitizer(None) if sanitize else None

    def feed() -> float:
        start = time.perf_counter()
        for i in range(0, len(data), REDACTED_BATCH):
            batch = view[i:i + REDACTED_BATCH]
            redactor.feed(sanitizer.feed(batch) if sanitizer else bytes(batch))
        if sanitizer:
            redactor.feed(sanitizer.flush())
        redactor.flush()
        return time.perf_counter() - start
    return cpu_seconds(feed)


def cpu_seconds(fn) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of ``fn()`` (this process's CPU time, all threads; to the
    nanosecond: ``os.times`` counts 10 ms ticks, 5-10% of a 128 MiB row)."""
    before = time.process_time()
    wall = fn()
    return wall, time.process_time() - before


# --- 3 and 4: the daemon -------------------------------------------------------------


class Daemon:
    def __init__(self, env: dict):
        self.env = env
        self.proc = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "serve"],
                                     env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.client = DaemonClient(config.load(environ=env))
        deadline = time.monotonic() + 20
        while not self.client.healthy():
            if time.monotonic() > deadline:
                raise SystemExit("the daemon did not start")
            time.sleep(0.05)

    def call(self, path: str, body: dict) -> dict:
        return self.client.call("POST", path, body, timeout=120)

    def rss_mib(self, field: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.client.close()
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(30)


def give_workspace(env: dict, agent: str, workspace: Path) -> None:
    """Under a root daemon, hand ``workspace`` to ``agent``'s own uid as an operator must
    (the daemon refuses a workspace that uid cannot write and gives none away)."""
    from paddedcell.supervisor import sandbox, sandbox_plan

    if sandbox.host_root():
        os.chown(workspace, *sandbox_plan.agent_ids(config.load(environ=env), agent))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def exec_round_trip(daemon: Daemon, rounds: int) -> tuple[list[float], list[float]]:
    body = {"command": "true", "agentId": "bench"}
    for _ in range(5):  # warm up the connection and the thread pool
        daemon.call("/exec", body)
    subprocess.run(["bash", "-c", "true"], check=True)
    exec_ms, spawn_ms = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        daemon.call("/exec", body)
        exec_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], check=True)
        spawn_ms.append((time.perf_counter() - start) * 1000)
    return exec_ms, spawn_ms


def flood(daemon: Daemon, seconds: float) -> dict:
    # Warm up: one run big enough to evict from its ring loads what any busy
    # daemon has loaded for output without secrets, so "peak - idle" measures
    # the flood, not a one-time import.
    daemon.call("/exec", {"command": "head -c 8000000 /dev/zero", "agentId": "warm"})
    idle = daemon.rss_mib()
    sessions = []
    for agent in range(8):
        for _ in range(8):
            answer = daemon.call("/exec", {"command": "cat /dev/zero", "agentId": f"flood{agent}",
                                           "background": True, "timeoutSeconds": 0})
            sessions.append((f"flood{agent}", answer["details"]["sessionId"]))
    peak = idle
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, daemon.rss_mib())
        time.sleep(0.1)
    flooding_peak = max(peak, daemon.rss_mib("VmHWM"))
    log = daemon.call("/process", {"action": "list", "agentId": "flood0"})
    running = sum(1 for s in log["details"]["sessions"] if s["status"] == "running")
    for agent, sid in sessions:
        daemon.call("/process", {"action": "remove", "agentId": agent, "sessionId": sid})
    peak = max(peak, daemon.rss_mib("VmHWM"))
    return {"idle_mib": idle, "peak_mib": peak, "flooding_peak_mib": flooding_peak,
            "after_mib": daemon.rss_mib(), "sessions": len(sessions),
            "running_per_agent": running}


def daemon_rows(env: dict, settings, exec_rounds: int, flood_s: float) -> list[dict]:
    """Rows 3 and 4 on one daemon: the exec round trip (when ``exec_rounds``), its idle
    RSS and its peak under 64 flooding sessions."""
    rows: list[dict] = []
    daemon = Daemon(env)
    try:
        if exec_rounds:
            exec_ms, spawn_ms = exec_round_trip(daemon, exec_rounds)
            p50_exec, p50_spawn = statistics.median(exec_ms), statistics.median(spawn_ms)
            rows.append({"benchmark": 'POST /exec {"command":"true"} p50', "ours": p50_exec,
                         "baseline": p50_spawn, "unit": "ms",
                         "ratio": p50_exec - p50_spawn,
                         "goal": "p50 overhead <= 10 ms", "met": p50_exec - p50_spawn <= 10,
                         "p90_ours": percentile(exec_ms, 0.9), "p90_baseline": percentile(spawn_ms, 0.9)})
        idle = daemon.rss_mib()
        rows.append({"benchmark": "daemon RSS idle", "ours": idle, "baseline": None,
                     "unit": "MiB", "ratio": None, "goal": "<= 40 MB", "met": idle <= 40 / 1.048576})
        result = flood(daemon, flood_s)
        budget = settings["supervisor.global_buffer_bytes"] / MIB
        grown = result["peak_mib"] - result["idle_mib"]
        rows.append({"benchmark": f"daemon RSS peak, {result['sessions']} flooding sessions",
                     "ours": result["peak_mib"], "baseline": result["idle_mib"], "unit": "MiB",
                     "note": "baseline = RSS after one warm-up run (libraries loaded)",
                     "ratio": grown, "goal": f"peak - idle <= budget ({budget:.0f} MiB)",
                     "met": grown <= budget})
    finally:
        daemon.stop()
    return rows


# --- 5 and 6: the sandbox and the session channel (issue 10) -------------------------


GET_TIMER = (
    "import os, statistics, subprocess, sys, time\n"
    "rounds = int(sys.argv[1]); ms = []\n"
    "for _ in range(rounds):\n"
    "    t = time.perf_counter()\n"
    "    subprocess.run(['pass_mgr', 'get', 'bench_key'], stdout=subprocess.DEVNULL, check=True)\n"
    "    ms.append((time.perf_counter() - t) * 1000)\n"
    "print('P50=%.3f' % statistics.median(ms))\n")


#: The pause before each timed sandbox start-up call (see row 5).
IDLE_SECONDS = 0.1
#: Back-to-back calls per daemon per round in the context row.
BURST = 5


def sandbox_and_channel(env: dict, tmp_path: Path, rounds: int) -> list[dict]:
    """Sandbox start-up: ``POST /exec true`` on a sandboxed daemon vs an unsandboxed
    one, interleaved. ``pass_mgr get`` inside a session (over the session channel)
    vs the same call outside any session (today's direct read of the store)."""
    from paddedcell.supervisor import sandbox

    rows: list[dict] = []
    workspace = tmp_path / "bench-ws"
    workspace.mkdir(mode=0o700, exist_ok=True)
    admin = "bench-admin-password-1"
    subprocess.run([str(BIN / "pass_mgr"), "admin", "init", "--password-stdin"], env=env,
                   input=admin + "\n", text=True, check=True, capture_output=True)
    subprocess.run([str(BIN / "pass_mgr"), "set", "bench", str(workspace), "bench_key",
                    "bench-secret-value-0123456789", admin], env=env, check=True,
                   capture_output=True)
    available, why = sandbox.available()
    homes = {}
    daemons = {}
    try:
        for name, profile in (("sandboxed", "namespaces"), ("unsandboxed", "none")):
            if name == "sandboxed" and not available:
                continue
            home = tmp_path / f"home-{name}"
            home.mkdir(mode=0o700)
            denv = dict(env, PADDEDCELL_HOME=str(home), PADDEDCELL_SUPERVISOR_SANDBOX=profile)
            homes[name] = home
            # The uid an agent runs as is recorded per home (first come, first served): the
            # workspace goes to the uid of the daemon that runs it. Both homes are fresh and
            # give "bench" the first uid of the range; the rows above used env's home.
            give_workspace(denv, "bench", workspace)
            daemons[name] = Daemon(denv)
        body = {"command": "true", "agentId": "bench", "agentWorkspace": str(workspace)}
        times: dict[str, list[float]] = {name: [] for name in daemons}
        burst: dict[str, list[float]] = {name: [] for name in daemons}
        for name, daemon in daemons.items():
            for _ in range(5):
                answer = daemon.call("/exec", body)
            if answer.get("details", {}).get("exitCode") != 0:  # time a refusal? never
                raise SystemExit(f"sandbox start-up: {name} failed: {answer}")
        for _ in range(rounds):
            for name, daemon in daemons.items():
                time.sleep(IDLE_SECONDS)
                start = time.perf_counter()
                daemon.call("/exec", body)
                times[name].append((time.perf_counter() - start) * 1000)
        for _ in range(max(2, rounds // BURST)):
            for name, daemon in daemons.items():
                time.sleep(IDLE_SECONDS)
                for _ in range(BURST):
                    start = time.perf_counter()
                    daemon.call("/exec", body)
                    burst[name].append((time.perf_counter() - start) * 1000)
        if "sandboxed" in times:
            on, off = statistics.median(times["sandboxed"]), statistics.median(times["unsandboxed"])
            rows.append({"benchmark": "sandbox start-up: POST /exec true p50", "ours": on,
                         "baseline": off, "unit": "ms", "ratio": on - off,
                         "goal": "sandboxed - unsandboxed <= 10 ms", "met": on - off <= 10,
                         "p90_ours": percentile(times["sandboxed"], 0.9),
                         "p90_baseline": percentile(times["unsandboxed"], 0.9)})
            on, off = statistics.median(burst["sandboxed"]), statistics.median(burst["unsandboxed"])
            rows.append({"benchmark": f"  context: {BURST} back to back, p50", "ours": on,
                         "baseline": off, "unit": "ms", "ratio": on - off, "goal": "-",
                         "met": True})
        else:
            rows.append({"benchmark": f"sandbox start-up (unavailable: {why})", "ours": 0.0,
                         "baseline": None, "unit": "ms", "ratio": None, "goal": "-",
                         "met": True})
    finally:
        for daemon in daemons.values():
            daemon.stop()

    # pass_mgr get: the same timing script outside a session (direct) and inside one.
    get_rounds = max(10, rounds // 2)
    give_workspace(env, "bench", workspace)  # pcexec runs on env's home: its uid for "bench"
    script = workspace / "get_timer.py"  # in the workspace: the sandbox shows nothing else
    script.write_text(GET_TIMER)
    agent_env = dict(env, AGENT_ID="bench", AGENT_WORKSPACE=str(workspace),
                     PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    direct = subprocess.run([sys.executable, str(script), str(get_rounds)], env=agent_env,
                            capture_output=True, text=True, check=True)
    inside = subprocess.run([str(BIN / "pcexec"), f"{shlex.quote(sys.executable)} "
                             f"{shlex.quote(str(script))} {get_rounds}"], env=agent_env,
                            capture_output=True, text=True, check=True, cwd=str(workspace))
    d_ms = float(direct.stdout.split("P50=")[1].split()[0])
    c_ms = float(inside.stdout.split("P50=")[1].split()[0])
    rows.append({"benchmark": "pass_mgr get p50: session channel vs direct", "ours": c_ms,
                 "baseline": d_ms, "unit": "ms", "ratio": c_ms / d_ms,
                 "goal": "channel <= direct read", "met": c_ms <= d_ms * 1.05,
                 "note": "inside a pcexec session (sandbox " + ("on" if available else "off")
                         + ") vs the same CLI outside any session"})
    return rows


# --- 7: daemon latency while sessions redact adversarial output (issue 9) ------------


def _daemon_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency_under_load(env: dict, tmp_path: Path, rounds: int, sessions: int = 8,
                       secret_count: int = 50) -> list[dict]:
    """p50/p99/max of /healthz, /vault/check-leak, /lifecycle/message-start and
    /query-restart, idle and while ``sessions`` background sessions of an agent
    with ``secret_count`` JWT secrets stream the prefix those JWTs share
    (``yes 'eyJhbGciOi…'``: the redactor's worst case). Interleaved probes over
    one kept-alive connection, 2 ms apart."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import redaction as corpora

    from paddedcell import vault

    home = tmp_path / "home-latency"
    home.mkdir(mode=0o700)
    # Cheap KDF: the benchmark sets 50 secrets, each set checks the admin password.
    denv = dict(env, PADDEDCELL_HOME=str(home), PADDEDCELL_VAULT_KDF_MEMORY_KIB="8192",
                PADDEDCELL_VAULT_KDF_ITERATIONS="1", PADDEDCELL_VAULT_KDF_LANES="1")
    settings = config.load(environ=denv)
    workspace = tmp_path / "latency-ws"
    workspace.mkdir(mode=0o700)
    give_workspace(denv, "load", workspace)
    admin = "bench-admin-password-latency"
    vault.init_admin(admin, settings)
    rng = random.Random(9)
    jwts = [corpora.make_jwt(rng).decode() for _ in range(secret_count)]
    for i, value in enumerate(jwts):
        vault.set_secret("load", str(workspace), f"jwt{i}", value, admin, settings=settings)
    line = corpora.shared_prefix([j.encode() for j in jwts]).decode()
    transcript = "assistant: the deploy finished; 3 warnings, see build log lines 10-40.\n" * 60

    daemon = Daemon(denv)
    rows: list[dict] = []
    try:
        client = daemon.client
        client.call("POST", "/lifecycle/message-start", {"agentId": "blocker", "sessionKey": "b"})
        probes = {
            "/healthz": lambda: client.call("GET", "/healthz", timeout=30),
            "/vault/check-leak": lambda: client.call(
                "POST", "/vault/check-leak", {"text": transcript, "source": "bench"}, timeout=30),
            "/lifecycle/message-start": lambda: client.call(
                "POST", "/lifecycle/message-start", {"agentId": "probe", "sessionKey": "p"}, timeout=30),
            "/query-restart": lambda: client.call(
                "POST", "/query-restart", {"requesterAgentId": "probe", "requesterSessionKey": "p"},
                timeout=30),
        }
        after = {  # undo what a probe changed, untimed, so every round is alike
            "/lifecycle/message-start": lambda: client.call(
                "POST", "/lifecycle/message-end", {"agentId": "probe", "sessionKey": "p"}),
            "/query-restart": lambda: client.call(
                "POST", "/restart-cancel", {"requesterAgentId": "probe", "requesterSessionKey": "p"}),
        }

        def measure() -> dict[str, list[float]]:
            times: dict[str, list[float]] = {name: [] for name in probes}
            for _ in range(rounds):
                for name, probe in probes.items():
                    start = time.perf_counter()
                    probe()
                    times[name].append((time.perf_counter() - start) * 1000)
                    if name in after:
                        after[name]()
                time.sleep(0.002)
            return times

        measure()  # warm-up: imports, the leak detector, the restart store
        idle = measure()
        # Each of the admin-password guard's views at its busiest (base64 runs, hex dump
        # lines, %XX escapes): the guard scans every session's output in the filter threads.
        loads = {"yes(JWT prefix)": (f"yes '{line}'", list(probes)),
                 "xxd /dev/urandom": ("xxd /dev/urandom", ["/healthz"]),
                 "yes(URL, %XX)": ("yes 'GET /search?q=a%20b%2Fc&lang=en%2Dus&page=%32 200'",
                                   ["/healthz"])}
        for load, (command, shown) in loads.items():
            started = []
            for i in range(sessions):
                answer = daemon.call("/exec", {
                    "command": command, "agentId": "load", "agentWorkspace": str(workspace),
                    "background": True, "yieldMs": 10, "timeoutSeconds": 600})
                started.append(answer.get("details", {}).get("sessionId") or answer.get("sessionId"))
            time.sleep(1.0)  # every session built its redactor (cached after the first) and streams
            cpu0, wall0 = _daemon_cpu_seconds(daemon.proc.pid), time.perf_counter()
            loaded = measure()
            cpu = (_daemon_cpu_seconds(daemon.proc.pid) - cpu0) / (time.perf_counter() - wall0)
            listing = daemon.call("/process", {"action": "list", "agentId": "load"})
            for sid in started:
                if sid:
                    try:
                        daemon.call("/process", {"action": "kill", "agentId": "load", "sessionId": sid})
                    except Exception:
                        pass
            for name in shown:
                ms_idle, ms_load = idle[name], loaded[name]
                p99, worst = percentile(ms_load, 0.99), max(ms_load)
                rows.append({
                    "benchmark": f"{name} under load: p50 / p99 / max", "ours": statistics.median(ms_load),
                    "baseline": statistics.median(ms_idle), "unit": "ms", "ratio": None,
                    "p99_ours": p99, "max_ours": worst, "p99_idle": percentile(ms_idle, 0.99),
                    "max_idle": max(ms_idle), "goal": "p99 <= 50 ms, max <= 250 ms",
                    "met": p99 <= 50 and worst <= 250,
                    "note": f"{sessions} sessions x {load}, {secret_count} JWT secrets, "
                            f"daemon CPU {cpu:.0%} while measured, {rounds} rounds"})
            rows[-1]["sessions_listed"] = str(listing)[:200]
            deadline = time.monotonic() + 30  # the killed sessions end (the per-agent cap)
            while time.monotonic() < deadline and any(
                    "endedAt" not in entry for entry in daemon.call(
                        "/process", {"action": "list", "agentId": "load"}).get(
                        "details", {}).get("sessions", [])):
                time.sleep(0.2)
    finally:
        daemon.stop()
    return rows


def loop_turns_under_load(settings, seconds: float = 5.0, sessions: int = 8,
                          secret_count: int = 50) -> dict:
    """The same load in this process: how long one event-loop turn takes, in
    wall and in CPU time of the loop's thread. Wall time includes the OS
    running other processes (a shared machine); CPU time is what our tasks
    did between two checkpoints of a probe task."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import redaction as corpora

    rng = random.Random(9)
    jwts = [corpora.make_jwt(rng).decode() for _ in range(secret_count)]
    line = corpora.shared_prefix([j.encode() for j in jwts]).decode()

    async def main() -> dict:
        async with trio.open_nursery() as nursery:
            sup = Supervisor(settings, nursery)
            running = [sup.start(LaunchSpec(command=f"yes '{line}'", secrets=jwts, timeout_seconds=0))
                       for _ in range(sessions)]
            await trio.sleep(1.0)
            wall, cpu = [], []
            before = sum(s.buffer.end for s in running)
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                t, c = time.perf_counter(), time.thread_time()
                await trio.sleep(0)
                wall.append((time.perf_counter() - t) * 1000)
                cpu.append((time.thread_time() - c) * 1000)
            produced = sum(s.buffer.end for s in running) - before
            nursery.cancel_scope.cancel()
        return {"wall": wall, "cpu": cpu, "mbps": produced / seconds / 1e6}

    result = trio.run(main)
    cpu, wall = result["cpu"], result["wall"]
    return {"benchmark": "event-loop turn under the same load (in process)",
            "ours": percentile(cpu, 0.99), "baseline": None, "unit": "ms", "ratio": None,
            "p99_cpu": percentile(cpu, 0.99), "max_cpu": max(cpu),
            "p99_wall": percentile(wall, 0.99), "max_wall": max(wall),
            "goal": "CPU per turn: a few ms at most",
            "met": max(cpu) <= 5 and result["mbps"] >= 1,  # no output: no load was measured
            "note": f"ours = p99 of the loop thread's CPU time per turn; {len(cpu)} turns, "
                    f"{result['mbps']:.0f} MB/s redacted output in total"}


# --- report -----------------------------------------------------------------------


def pipe_rows(work: Path, settings, secrets: list[str], mib: int, rounds: int) -> list[dict]:
    """Row 2: the pipe pump against a raw pipe read, the redactor alone on the same
    bytes, and the pump path's CPU (read sizes, the sanitizer, the guard, aggregation:
    issue 21's budget is 1.5x the redactor alone): a session's CPU less a one-line
    session's (the same secrets; the start-up and end: spawning through the sandbox,
    the session's tasks), which is no per-byte work and which the redactor alone does
    not pay either. The session's whole filter (sanitizer + redactor) is context."""
    big = make_file(work, mib * MIB)
    tiny = work / "one-line.txt"
    tiny.write_bytes(b"x\n")
    supervised(make_file(work, MIB), settings, secrets)  # warm: imports, sandbox probe
    cpu: dict[str, list[float]] = {"ours": [], "alone": [], "fixed": [], "filter": [], "guard": []}

    def timed(name, fn, measured=cpu_seconds):
        wall, used = measured(fn)
        cpu[name].append(used)
        return wall

    times = medians({"raw": lambda: raw_pipe_read(big),
                     "ours": lambda: timed("ours", lambda: supervised(big, settings, secrets)),
                     "fixed": lambda: timed("fixed", lambda: supervised(tiny, settings, secrets)),
                     "alone": lambda: timed("alone", lambda: filter_alone(big, settings, secrets),
                                            measured=lambda fn: fn()),
                     "filter": lambda: timed("filter", lambda: filter_alone(
                         big, settings, secrets, sanitize=True), measured=lambda fn: fn()),
                     "guard": lambda: timed("guard", lambda: filter_alone(
                         big, settings, secrets, guard=True), measured=lambda fn: fn())},
                    rounds)
    raw, ours, alone = times["raw"], times["ours"], times["alone"]
    rate = mib * MIB / ours / 1e9
    session, fixed, cpu_alone, cpu_filter = (statistics.median(cpu[name])
                                             for name in ("ours", "fixed", "alone", "filter"))
    path = session - fixed
    return [
        {"benchmark": f"pipes + 10 secrets, {mib} MiB", "ours": rate,
         "baseline": mib * MIB / raw / 1e9, "unit": "GB/s", "ratio": raw / ours,
         "goal": ">= 1 GB/s", "met": rate >= 1.0,
         "note": f"{rounds} rounds; the session's start-up and end included "
                 f"({times['fixed'] * 1000:.0f} ms wall for one line)"},
        {"benchmark": "  context: the redactor alone, same data",
         "ours": mib * MIB / alone / 1e9, "baseline": None, "unit": "GB/s", "ratio": None,
         "goal": "(the pipe row's ceiling)", "met": True,
         "note": f"the pump's batch size; with OpenClaw's sanitizer first (the session's "
                 f"whole filter) {mib * MIB / times['filter'] / 1e9:.2f} GB/s"},
        {"benchmark": "  context: redactor + admin-password guard, same data",
         "ours": mib * MIB / times["guard"] / 1e9, "baseline": mib * MIB / alone / 1e9,
         "unit": "GB/s", "ratio": statistics.median(cpu["guard"]) / cpu_alone,
         "goal": "(a daemon with an admin password runs it too)", "met": True,
         "note": "ratio: CPU s of redactor + guard / redactor alone (vault.leak.LeakStream "
                 "after the session's redactor, as the daemon builds it)"},
        {"benchmark": "  pump path / redactor alone, CPU s", "ours": path,
         "baseline": cpu_alone, "unit": "s", "ratio": path / cpu_alone,
         "goal": "<= 1.5x", "met": path / cpu_alone <= 1.5,
         "note": f"pump path = session {session:.3f} - one-line session {fixed:.3f} CPU s; "
                 f"whole session {session / cpu_alone:.2f}x; against sanitizer + redactor "
                 f"{path / cpu_filter:.2f}x; wall {ours / alone:.2f}x"},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer rounds")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--only-sandbox", action="store_true",
                        help="run only the sandbox start-up and channel benchmarks (5, 6)")
    parser.add_argument("--only-latency", action="store_true",
                        help="run only the daemon-latency-under-load benchmark (7)")
    parser.add_argument("--only-throughput", action="store_true",
                        help="run only the PTY and pipe throughput benchmarks (1, 2)")
    parser.add_argument("--only-pipes", action="store_true",
                        help="run only the pipe throughput rows (2)")
    parser.add_argument("--only-flood", action="store_true",
                        help="run only the daemon RSS rows, idle and under 64 floods (4)")
    parser.add_argument("--rounds", type=int, help="rounds of the throughput rows (1 quick, 5)")
    args = parser.parse_args()
    pty_mib, pipe_mib, rounds, exec_rounds, flood_s = (
        (16, 128, 1, 30, 2.0) if args.quick else (64, 512, 5, 100, 4.0))
    rounds = args.rounds or rounds

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pc-bench-supervisor-") as tmp:
        tmp_path = Path(tmp)
        home = tmp_path / "home"
        home.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PADDEDCELL_") and k not in ("AGENT_ID", "AGENT_WORKSPACE")}
        env["PADDEDCELL_HOME"] = str(home)
        os.environ["PADDEDCELL_HOME"] = str(home)
        settings = config.load(environ=env)

        if args.only_sandbox:
            rows += sandbox_and_channel(env, tmp_path, exec_rounds)
            _report(rows, args)
            return
        if args.only_flood:
            rows += daemon_rows(env, settings, exec_rounds=0, flood_s=flood_s)
            _report(rows, args)
            return
        if args.only_latency:
            rows += latency_under_load(env, tmp_path, 100 if args.quick else 300)
            rows.append(loop_turns_under_load(settings))
            _report(rows, args)
            return
        rng = random.Random(5)
        secrets = ["".join(rng.choices(string.ascii_letters + string.digits, k=24))
                   for _ in range(10)]
        # The corpora in a directory of their own: a session's work directory must not
        # hold PADDEDCELL_HOME (the sandbox refuses to run there).
        work = tmp_path / "work"
        work.mkdir()
        if args.only_pipes:
            rows += pipe_rows(work, settings, secrets, pipe_mib, rounds)
            _report(rows, args)
            return
        small = make_file(work, pty_mib * MIB)
        # pcexec as installed: with our modules' bytecode cached (pip compiles
        # it at install time), not recompiled at every start because the
        # calling environment sets PYTHONDONTWRITEBYTECODE.
        cli_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cli_env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
        subprocess.run([str(BIN / "pcexec"), "--pty", "true"], env=cli_env, check=True,
                       stdout=subprocess.DEVNULL)
        # The matcher is built once per secret set and cached (the daemon builds it at
        # an agent's first session): timed on its own, then every contender runs warm.
        from paddedcell.redactor.filters import new_filter

        start = time.perf_counter()
        new_filter(secrets, settings)
        build_ms = (time.perf_counter() - start) * 1000
        idle_before = background_cores()
        pty_rounds = rounds_of({"raw": lambda: raw_pty_read(small),
                             "cli": lambda: pcexec_pty(small, cli_env),
                             "inproc": lambda: supervised(small, settings, [], use_pty=True),
                             "masked": lambda: supervised(small, settings, secrets,
                                                          use_pty=True)},
                               rounds)
        pty_times = {name: statistics.median(values) for name, values in pty_rounds.items()}
        raw, ours, inproc = pty_times["raw"], pty_times["cli"], pty_times["inproc"]
        rows.append({"benchmark": f"pcexec --pty, {pty_mib} MiB file (CLI, with startup)",
                     "ours": pty_mib * MIB / ours / 1e6, "baseline": pty_mib * MIB / raw / 1e6,
                     "unit": "MB/s", "ratio": raw / ours, "goal": ">= 0.9x raw PTY loop",
                     "met": raw / ours >= 0.9, "note": pairs_note(pty_rounds, "cli")})
        rows.append({"benchmark": f"supervisor PTY pump, {pty_mib} MiB (in process)",
                     "ours": pty_mib * MIB / inproc / 1e6, "baseline": pty_mib * MIB / raw / 1e6,
                     "unit": "MB/s", "ratio": raw / inproc, "goal": ">= 0.9x raw PTY loop",
                     "met": raw / inproc >= 0.9, "note": pairs_note(pty_rounds, "inproc")})
        # The rows above mask nothing (no agent, no secret): a terminal that masks has a
        # reader thread that reads and filters (docs/design.md §3); its rate, for context.
        masked = pty_times["masked"]
        rows.append({"benchmark": "  context: the PTY pump masking 10 secrets",
                     "ours": pty_mib * MIB / masked / 1e6, "baseline": pty_mib * MIB / raw / 1e6,
                     "unit": "MB/s", "ratio": raw / masked, "goal": "(no goal)", "met": True,
                     "note": pairs_note(pty_rounds, "masked")})
        # Context: other work on the machine (other users' benchmarks and builds) while
        # this process slept for a second, before and after the rows above. The raw loop
        # alone keeps ~1.3-1.7 of 2 cores busy (cat's output processing, the reader, the
        # kworkers); what another process adds makes the rounds stall (pairs_note).
        idle_after = background_cores()
        rows.append({"benchmark": "  context: other load, cores busy while we sleep",
                     "ours": max(idle_before, idle_after), "baseline": float(os.cpu_count() or 1),
                     "unit": "cores", "ratio": None,
                     "goal": "(above ~0.5 the PTY rows' medians swing)", "met": True,
                     "note": f"before the PTY rows {idle_before:.2f}, after {idle_after:.2f}"})
        # Context: how busy the machine is during the raw loop, other load included. A
        # terminal refills its ~4 KiB line-discipline buffer only as it is read (a kworker
        # per refill); cat's output processing (ONLCR, n_tty_write: ~0.43 CPU s per 64 MiB)
        # and the reader (~0.25 s, nearly all in the kernel) are most of it, the kworkers
        # ~5% of the samples (perf, session 14). When the cores are full, every CPU second
        # a pump adds costs the command's output as much.
        saturation = [busy_cores(lambda: raw_pty_read(small)) for _ in range(3)]
        wall_s, busy_s = min(saturation)
        rows.append({"benchmark": "  context: cores busy during the raw PTY loop",
                     "ours": busy_s / wall_s, "baseline": float(os.cpu_count() or 1),
                     "unit": "cores", "ratio": None,
                     "goal": "(at the baseline: every CPU s added slows the loop)", "met": True})
        # Context for both rows: the fixed cost of a run (a one-line file), against the
        # raw loop's fork + exec of the same cat. At 0.9x the whole run may spend
        # (1/0.9 - 1) x the raw loop's time more than the raw loop: this row says how
        # much of that the start-up alone takes.
        tiny = work / "tiny.txt"
        tiny.write_bytes(b"x\n")
        start_ms = {name: value * 1000 for name, value in medians(
            {"raw": lambda: raw_pty_read(tiny), "cli": lambda: pcexec_pty(tiny, cli_env),
             "inproc": lambda: supervised(tiny, settings, [], use_pty=True)},
            max(rounds, 5)).items()}
        budget_ms = (1 / 0.9 - 1) * raw * 1000
        rows.append({"benchmark": "  context: start-up, one-line file (CLI)",
                     "ours": start_ms["cli"], "baseline": start_ms["raw"], "unit": "ms",
                     "ratio": None, "goal": f"(0.9x leaves {budget_ms:.0f} ms at {pty_mib} MiB)",
                     "met": True})
        rows.append({"benchmark": "  context: start-up, one-line file (in process)",
                     "ours": start_ms["inproc"], "baseline": start_ms["raw"], "unit": "ms",
                     "ratio": None, "goal": "(same budget)", "met": True})

        rows += pipe_rows(work, settings, secrets, pipe_mib, rounds)
        rows.append({"benchmark": "  matcher build, cold (once per secret set)", "ours": build_ms,
                     "baseline": None, "unit": "ms", "ratio": None, "goal": "(context)",
                     "met": True})

        if args.only_throughput:
            _report(rows, args)
            return
        rows += daemon_rows(env, settings, exec_rounds, flood_s)
        rows += sandbox_and_channel(env, tmp_path, exec_rounds)
        rows += latency_under_load(env, tmp_path, 100 if args.quick else 300)
        rows.append(loop_turns_under_load(settings))

    _report(rows, args)


def _report(rows: list[dict], args) -> None:
    if args.json:
        print(json.dumps({"rows": rows, "quick": args.quick, "cpus": os.cpu_count()}, indent=2))
        return
    print(f"{'benchmark':<50} {'ours':>10} {'baseline':>10} {'unit':>5}  {'ratio/overhead':>14}  goal")
    for row in rows:
        base = "-" if row["baseline"] is None else f"{row['baseline']:.2f}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        mark = "met" if row["met"] else "NOT met"
        print(f"{row['benchmark']:<50} {row['ours']:>10.2f} {base:>10} {row['unit']:>5}  "
              f"{ratio:>14}  {row['goal']} ({mark})")
        if "p99_cpu" in row:
            print(f"{'':<50} CPU p99 {row['p99_cpu']:.2f} / max {row['max_cpu']:.2f} ms; "
                  f"wall p99 {row['p99_wall']:.1f} / max {row['max_wall']:.1f} ms; {row['note']}")
        elif "note" in row:
            print(f"{'':<50} {row['note']}")
        if "p99_ours" in row and "max_ours" in row:
            print(f"{'':<50} p99 {row['p99_ours']:.1f} / max {row['max_ours']:.1f} ms loaded; "
                  f"p99 {row['p99_idle']:.1f} / max {row['max_idle']:.1f} ms idle")
    print("ratio/overhead column: our throughput / the baseline's for throughput rows; "
          "ours - baseline (ms) for the latency row; peak - idle (MiB) for the flood row")


if __name__ == "__main__":
    main()
