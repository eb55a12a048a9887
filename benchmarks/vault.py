"""Benchmark: `pass_mgr get` start-to-exit latency beside `pass show`, and the leak scan.

Every row is measured in the same run on the same machine:
  - `python -c pass` (the interpreter floor), the same importing cryptography's Rust
    bindings (the floor of a get that opens an AES-GCM box), `pass show` (Debian pass +
    gpg with a passphrase-less ed25519/cv25519 key made here in a temp GNUPGHOME),
  - `pass_mgr get` through the console script (also with PYTHONDONTWRITEBYTECODE=1, and
    with a daemon running, which answers it over its socket), the onedir binary and the
    onefile binary
    (rows are skipped with a note when a binary is not built: `make binary binary-onefile`),
  - the admin-password leak scan (`check_leak`) in ms per MB of text without a hit,
  - the scan of command output (`vault.output_guard`, what pcexec output passes through)
    in ms per MB fed in 4 KiB and 64 KiB reads, beside the same detector without its
    class prefilter (the window sums every detector used before) as the baseline.

The verdict against ``pass show`` is a comparison of medians: each row's median wall
time over pass show's, both of the same N interleaved runs (every round runs each row
once, in the order listed). Beside it, the median of the round-by-round ratios and the
number of rounds in which the row was the slower one: a median under 1.0 can still lose
a third of its rounds.

Usage: python benchmarks/vault.py [--runs N] [--json] [--setup]

Setup: ``--setup`` installs Debian's ``pass`` (``apt-get install pass``, as root) when it is
missing, so that the ``pass show`` baseline is measured (without it that row is skipped), and
runs ``make binary``, so that the onedir binary measured is the one the sources make (a binary
left from before a change was measured silently: session 14, 1.13x instead of ~0.9x).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = Path(sys.prefix) / "bin" / "pass_mgr"
ONEDIR = ROOT / "dist" / "pass_mgr" / "pass_mgr"
ONEFILE = ROOT / "dist" / "onefile" / "pass_mgr"
SECRET = "bench-secret-value-0123456789"
ADMIN_PW = "benchmark admin password"


def _time_runs(argv: list[str], env: dict[str, str], runs: int, expect: bytes,
               warmup: int = 0) -> tuple[list[float], list[float]]:
    """(wall ms, CPU ms) of each run after ``warmup`` runs; checks the output every time.

    CPU time (user + system of the child and its children, e.g. gpg-agent work is
    not included but gpg is) is much less sensitive to a busy machine than wall time.
    """
    walls, cpus = [], []
    for index in range(runs + warmup):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        elapsed = (time.perf_counter() - start) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode != 0 or result.stdout != expect:
            raise SystemExit(f"{argv[0]} failed: {result.returncode} {result.stderr[-300:]!r}")
        if index >= warmup:
            walls.append(elapsed)
            cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                        * 1000)
    return walls, cpus


def _setup_pass(tmp: Path, env: dict[str, str]) -> dict[str, str] | None:
    if not shutil.which("pass") or not shutil.which("gpg"):
        return None
    gnupg = tmp / "gnupg"
    gnupg.mkdir(mode=0o700)
    penv = dict(env, GNUPGHOME=str(gnupg), PASSWORD_STORE_DIR=str(tmp / "pass-store"))
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                    "PaddedCell Bench <bench@paddedcell.invalid>", "future-default", "default",
                    "never"], env=penv, check=True, capture_output=True)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys"], env=penv,
                             check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines()
                       if line.startswith("fpr:"))
    subprocess.run(["pass", "init", fingerprint], env=penv, check=True, capture_output=True)
    subprocess.run(["pass", "insert", "-m", "db"], input=SECRET + "\n", text=True, env=penv,
                   check=True, capture_output=True)
    return penv


def _setup_vault(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    workspace = tmp / "ws"
    workspace.mkdir(mode=0o700)
    venv = dict(env, PADDEDCELL_HOME=str(tmp / "pc-home"))
    subprocess.run([str(CONSOLE), "admin", "init", "--password-stdin"], input=ADMIN_PW + "\n",
                   text=True, env=venv, check=True, capture_output=True)
    subprocess.run([str(CONSOLE), "set", "bench", str(workspace), "db", SECRET, ADMIN_PW],
                   env=venv, check=True, capture_output=True)
    return dict(venv, AGENT_ID="bench", AGENT_WORKSPACE=str(workspace), PADDEDCELL_AGENT="1")


def _start_daemon(tmp: Path, venv: dict[str, str]):
    """(daemon process, the get's environment) for the "daemon running" row, or (None, why).

    The daemon serves a copy of the home (host key and store generations included), so
    the other rows, on the original home, find no daemon and read locally."""
    home = tmp / "pc-home-daemon"
    shutil.copytree(venv["PADDEDCELL_HOME"], home, symlinks=True)
    denv = dict(venv, PADDEDCELL_HOME=str(home))
    serve_env = {k: v for k, v in denv.items() if not k.startswith("AGENT")
                 and k != "PADDEDCELL_AGENT"}
    proc = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "serve"], env=serve_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        # Through the daemon: the get imports no cryptography.
        probe = subprocess.run([str(CONSOLE), "get", "db"], env=dict(denv, PYTHONPROFILEIMPORTTIME="1"),
                               capture_output=True, text=True)
        if probe.returncode == 0 and "cryptography" not in probe.stderr:
            return proc, denv
        time.sleep(0.2)
    proc.terminate()
    proc.wait(30)
    return None, "the daemon did not answer the get within 20 s"


def _leak_scan(home: Path, repeats: int = 3) -> dict[str, float]:
    """check_leak on 1 MB of text without a hit: ms per MB, wall and CPU (this process).

    Also the worst case: text made only of rearrangements of the password's bytes,
    where every window needs the keyed-digest confirmation.
    """
    sys.path.insert(0, str(ROOT / "src"))
    from paddedcell import config
    from paddedcell.vault import check_leak

    settings = config.load({"PADDEDCELL_HOME": str(home)})
    rng = __import__("random").Random(1)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 .,\n") for _ in range(1 << 20))
    hostile = (ADMIN_PW[::-1] * ((1 << 20) // len(ADMIN_PW) + 1))[:1 << 20]
    check_leak("warm-up", "bench", settings=settings)
    out = {}
    for name, sample in (("typical", text), ("hostile", hostile)):
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            assert not check_leak(sample, "bench", settings=settings)
            walls.append((time.perf_counter() - wall) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
        out[f"{name}_wall_ms_per_mb"] = round(statistics.median(walls), 1)
        out[f"{name}_cpu_ms_per_mb"] = round(statistics.median(cpus), 1)
    return out


def _output_guard(home: Path, megabytes: int = 4) -> dict[str, float]:
    """ms per MB through ``output_guard`` (a LeakStream, no redactor) per read size; the
    baseline is the same stream over the detector without its class prefilter."""
    from paddedcell import config
    from paddedcell.vault import output_guard
    from paddedcell.vault.leak import LeakDetector, LeakStream

    settings = config.load({"PADDEDCELL_HOME": str(home)})
    guard = output_guard(None, "bench", settings=settings)
    rng = __import__("random").Random(2)
    data = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789 .,\n") for _ in range(1 << 20))
    legacy_json = LeakDetector.create(ADMIN_PW).to_json()
    legacy_json.pop("classes")
    legacy_json["forms"] = [form[:3] for form in legacy_json["forms"]]
    legacy = LeakStream(LeakDetector.from_json(legacy_json), None, lambda: None)
    out = {}
    for read in (4096, 65536):
        for name, stream, size in (("guard", guard, megabytes), ("window_sums", legacy, 1)):
            s = stream.fresh()
            wall = time.perf_counter()
            for _ in range(size):
                for start in range(0, len(data), read):
                    s.feed(data[start:start + read])
            s.flush()
            out[f"{name}_{read // 1024}k_ms_per_mb"] = round((time.perf_counter() - wall) * 1000 / size, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--setup", action="store_true",
                        help="install Debian's pass (apt-get, as root) when it is missing, "
                             "and build the onedir binary (make binary) if it is stale")
    args = parser.parse_args()
    if args.setup and shutil.which("pass") is None:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "pass"], check=True,
                       stdout=subprocess.DEVNULL)
    if args.setup:  # (make rebuilds it only when a file it bundles changed)
        subprocess.run(["make", "-C", str(ROOT), "binary"], check=True, stdout=subprocess.DEVNULL)

    # PYTHONDONTWRITEBYTECODE would make the console script recompile every module on
    # every run; an installed pass_mgr runs from cached bytecode.
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("PADDEDCELL_", "AGENT"))
                and k not in ("OPENCLAW_SHELL", "PYTHONDONTWRITEBYTECODE")}
    rows: list[dict] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pc-bench-") as raw_tmp:
        tmp = Path(raw_tmp)
        expect = (SECRET + "\n").encode()
        rows.append(("python -c pass", [sys.executable, "-c", "pass"], base_env, b""))
        # The floor of any get that opens an AES-GCM box with cryptography: the
        # interpreter plus its Rust bindings (a 12 MB extension, ~100 Python types
        # built at import) and nothing of ours.
        rows.append(("python -c <cryptography AESGCM>",
                     [sys.executable, "-c", "from cryptography.hazmat.bindings._rust import openssl"],
                     base_env, b""))
        # The row above pays the interpreter's teardown (~4 ms here) and opens no box; a get
        # ends with os._exit after its first AES-GCM key (OpenSSL's first cipher fetch, ~1 ms).
        # This one does as a get does, and nothing of ours: the floor of the get rows.
        rows.append(("python -c <AESGCM box, os._exit>",
                     [sys.executable, "-c", "import os\n"
                      "from cryptography.hazmat.bindings._rust import openssl\n"
                      "openssl.aead.AESGCM(bytes(32)).encrypt(bytes(12), b'', None)\n"
                      "os._exit(0)"],
                     dict(base_env, CRYPTOGRAPHY_OPENSSL_NO_LEGACY="1"), b""))
        penv = _setup_pass(tmp, base_env)
        if penv is None:
            notes.append("pass show: not measured (apt-get install pass)")
        else:
            rows.append(("pass show", ["pass", "show", "db"], penv, expect))
        venv = _setup_vault(tmp, base_env)
        for label, exe in (("pass_mgr get (console script)", CONSOLE),
                           ("pass_mgr get (onedir binary)", ONEDIR),
                           ("pass_mgr get (onefile binary)", ONEFILE)):
            if os.access(exe, os.X_OK):
                rows.append((label, [str(exe), "get", "db"], venv, expect))
                if exe == CONSOLE:
                    # As this machine's shells run it: cached bytecode is still read, only
                    # never written (a stale or missing .pyc is compiled at every start).
                    rows.append(("pass_mgr get (console, PYTHONDONTWRITEBYTECODE=1)",
                                 [str(exe), "get", "db"], dict(venv, PYTHONDONTWRITEBYTECODE="1"),
                                 expect))
            else:
                notes.append(f"{label}: not measured ({exe.relative_to(ROOT)} is not built)")
        daemon, denv = _start_daemon(tmp, venv)
        if daemon is None:
            notes.append(f"pass_mgr get (console script, daemon running): not measured ({denv})")
        else:
            rows.append(("pass_mgr get (console script, daemon running)",
                         [str(CONSOLE), "get", "db"], denv, expect))
        samples: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, *_ in rows}
        for label, argv, env, want in rows:
            _time_runs(argv, env, 0, want, warmup=2)
        for _ in range(args.runs):  # interleaved, so load changes hit every row alike
            for label, argv, env, want in rows:
                walls, cpus = _time_runs(argv, env, 1, want)
                samples[label][0].extend(walls)
                samples[label][1].extend(cpus)
        results = []
        for label, (walls, cpus) in samples.items():
            results.append({"name": label, "median_ms": round(statistics.median(walls), 1),
                            "p90_ms": round(sorted(walls)[int(0.9 * (len(walls) - 1))], 1),
                            "min_ms": round(min(walls), 1),
                            "cpu_median_ms": round(statistics.median(cpus), 1),
                            "runs": len(walls)})
        if daemon is not None:
            daemon.terminate()
            daemon.wait(30)
        scan = _leak_scan(tmp / "pc-home")
        guard = _output_guard(tmp / "pc-home")
        if penv is not None:
            subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=penv, capture_output=True)

    reference = next((r for r in results if r["name"] == "pass show"), None)
    for row in results:
        row["vs_pass_show"] = (round(row["median_ms"] / reference["median_ms"], 2)
                               if reference else None)
        row["cpu_vs_pass_show"] = (round(row["cpu_median_ms"] / reference["cpu_median_ms"], 2)
                                   if reference else None)
        # Round by round: the median alone hides how often a get is the slower one.
        pairs = (list(zip(samples[row["name"]][0], samples["pass show"][0]))
                 if reference else [])
        row["rounds_slower_than_pass_show"] = (sum(own > other for own, other in pairs)
                                               if reference else None)
        row["round_ratio_median"] = (round(statistics.median(own / other for own, other in pairs),
                                           2) if reference else None)
    report = {"runs": args.runs, "latency": results, "leak_scan": scan, "output_guard": guard,
              "notes": notes, "cpu_count": os.cpu_count()}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"pass_mgr get latency ({args.runs} interleaved runs each, after warm-up)")
    print(f"{'command':56} {'wall med':>9} {'p90':>7} {'min':>7} {'x pass':>7} "
          f"{'rounds':>7} {'> pass':>7} {'CPU med':>8} {'x pass':>7}")
    for row in results:
        known = row["vs_pass_show"] is not None
        ratio = f"{row['vs_pass_show']:.2f}" if known else "-"
        rounds = f"{row['round_ratio_median']:.2f}" if known else "-"
        slower = f"{row['rounds_slower_than_pass_show']}/{row['runs']}" if known else "-"
        cpu_ratio = f"{row['cpu_vs_pass_show']:.2f}" if row["cpu_vs_pass_show"] is not None else "-"
        print(f"{row['name']:56} {row['median_ms']:>9.1f} {row['p90_ms']:>7.1f} "
              f"{row['min_ms']:>7.1f} {ratio:>7} {rounds:>7} {slower:>7} "
              f"{row['cpu_median_ms']:>8.1f} {cpu_ratio:>7}")
    print("(milliseconds; wall = start to exit, CPU = user + system time of the process tree)")
    print(f"(x pass: the row's median wall over pass show's, both of the same {args.runs} "
          "interleaved runs (each round runs every row once, in this order); rounds: the "
          "median of the per-round ratios; > pass: the rounds in which the row took longer "
          "than that round's pass show)")
    print(f"\nleak scan (check_leak, 1 MB, no hit): typical text {scan['typical_wall_ms_per_mb']:.1f} ms "
          f"wall / {scan['typical_cpu_ms_per_mb']:.1f} ms CPU per MB; worst case (every window a "
          f"rearrangement of the password) {scan['hostile_wall_ms_per_mb']:.1f} ms wall / "
          f"{scan['hostile_cpu_ms_per_mb']:.1f} ms CPU per MB")
    print(f"output scan (vault.output_guard, ms per MB): 4 KiB reads {guard['guard_4k_ms_per_mb']:.1f} "
          f"(window sums: {guard['window_sums_4k_ms_per_mb']:.1f}); 64 KiB reads "
          f"{guard['guard_64k_ms_per_mb']:.1f} (window sums: {guard['window_sums_64k_ms_per_mb']:.1f})")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
