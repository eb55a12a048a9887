"""Throughput of the streaming redactor on three corpora, ripgrep in the same run.

Corpora (``--size-mib`` each, default 32):

* ``random``: seeded random printable text, a newline about every 100 bytes;
* ``tokens``: a token-heavy log: every line an API request, 30 % of them with
  a JWT (same header as the secrets, other claims and signature) and 20 % with
  a ``ghp_`` key: tokens that share prefixes with the secrets but are not them;
* ``adversarial``: the longest prefix that two secrets of the set share,
  repeated line after line (``yes 'eyJhbGciOi…'``).

Secrets: half JWTs (HS256 header, ``{"sub","iat","scope"}`` claims, 32-byte
signature), half ``ghp_`` keys; k in {10, 100, 1 000, 10 000}. Every redactor
runs with the default forms on (every variant and fragments), as a session
does. Reads of 4 KiB (a PTY) and 64 KiB (a pipe). Contenders: the default
engine (Hyperscan), the portable engine (pyahocorasick) at 64 KiB, and
``rg -F -c -f secrets`` on the same file (the secrets alone: less work than
ours, which also looks for every form and fragment). Build times: cold (a new
secret set) and warm (the per-digest cache a supervisor hits on every command).

    python benchmarks/redaction.py                 # full matrix, 32 MiB corpora
    python benchmarks/redaction.py --quick         # 8 MiB, k <= 1 000
    python benchmarks/redaction.py --json          # machine-readable results
    python benchmarks/redaction.py --views-baseline  # + the same runs without the pattern forms' views
    python benchmarks/redaction.py --dump-baseline   # + the same runs with the hexdump form off
    python benchmarks/redaction.py --setup         # first install Debian's ripgrep if rg is missing

Setup: ripgrep is the baseline; ``--setup`` installs it from Debian (``apt-get install
ripgrep``, as root) when ``rg`` is not on PATH. Without it the rg column stays empty.

``--views-baseline`` adds two Hyperscan columns measured in the same run with
the pattern forms (redactor/views.py: whitespace runs, wrapped base64/hex,
per-byte %XX, CSI inside a secret) left out and every literal form kept: what
the views cost, on the same data at the same machine load. ``--dump-baseline``
does the same with only the hex dump form off (``Variants.hexdump``, redactor/dumps.py).

Times are process CPU time (``--clock wall`` for elapsed): the machine is
shared, and CPU time charges each contender, ripgrep included, only for its
own work. Each case is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from paddedcell.redactor import StreamRedactor, Variants  # noqa: E402
from paddedcell.redactor import matcher as _matcher  # noqa: E402
from paddedcell.redactor import stream as _stream  # noqa: E402

MIB = 1024 * 1024
MASK = b"######"
ALNUM = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
JWT_HEADER = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
CLOCK = "cpu"
#: The forms with the hex dump form off (--dump-baseline).
NO_DUMP = dataclasses.replace(Variants(), hexdump=False)


def clock() -> float:
    return time.process_time() if CLOCK == "cpu" else time.perf_counter()


def child_clock() -> float:
    if CLOCK == "cpu":
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime
    return time.perf_counter()


def _b64(raw: bytes) -> bytes:
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


def make_jwt(rng: random.Random) -> bytes:
    claims = {"sub": f"user-{rng.randrange(10**6)}", "iat": 1_700_000_000 + rng.randrange(10**7),
              "scope": "read write"}
    payload = json.dumps(claims, separators=(",", ":")).encode()
    return JWT_HEADER + b"." + _b64(payload) + b"." + _b64(rng.randbytes(32))


def make_ghp(rng: random.Random) -> bytes:
    return b"ghp_" + bytes(rng.choices(ALNUM, k=36))


def make_secrets(k: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed * 100_003 + k)
    return [make_jwt(rng) if i % 2 == 0 else make_ghp(rng) for i in range(k)]


def random_corpus(size: int, seed: int = 2026) -> bytes:
    rng = random.Random(seed)
    printable = bytes(range(32, 127))
    table = bytes(10 if i % 100 == 99 else printable[i % 95] for i in range(256))
    return rng.randbytes(size).translate(table)


def token_corpus(size: int, seed: int = 2027) -> bytes:
    rng = random.Random(seed)
    lines, n = [], 0
    while n < size:
        line = b"2026-11-30T10:%02d:%02dZ INFO api request id=%08x path=/v1/items/%d" % (
            rng.randrange(60), rng.randrange(60), rng.getrandbits(32), rng.randrange(10**5))
        r = rng.random()
        if r < 0.3:
            line += b" authorization=Bearer " + make_jwt(rng)
        elif r < 0.5:
            line += b" token=" + make_ghp(rng)
        line += b"\n"
        lines.append(line)
        n += len(line)
    return b"".join(lines)[:size]


def shared_prefix(secrets: list[bytes]) -> bytes:
    """The longest prefix two secrets of the set share."""
    ordered = sorted(secrets)
    best = b""
    for a, b in zip(ordered, ordered[1:]):
        i = 0
        while i < min(len(a), len(b)) and a[i] == b[i]:
            i += 1
        if i > len(best):
            best = a[:i]
    return best


def adversarial_corpus(secrets: list[bytes], size: int) -> bytes:
    line = shared_prefix(secrets) + b"\n"
    return (line * (size // len(line) + 1))[:size]


def run_stream(secrets, data: bytes, chunk: int, repeat: int, engine=None, variants=None) -> tuple[float, int]:
    """Best MB/s of a redactor (built before timing, as a session's is) and its mask count.

    The reads are cut before the clock starts and the output is dropped, as a
    pump writes it on; one more, untimed run counts the masks.
    """
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    best = 0.0
    for _ in range(repeat):
        r = StreamRedactor(secrets, engine=engine, **({"variants": variants} if variants else {}))
        feed = r.feed
        t0 = clock()
        for c in chunks:
            feed(c)
        r.flush()
        best = max(best, len(data) / max(clock() - t0, 1e-9) / 1e6)
    r = StreamRedactor(secrets, engine=engine)
    masks = sum(r.feed(c).count(MASK) for c in chunks) + r.flush().count(MASK)
    return best, masks


class no_views:
    """Build redactors without the pattern forms' views (literal forms only)."""

    def __enter__(self):
        self._saved = _stream.view_patterns
        _stream.view_patterns = lambda *a, **k: {}
        _stream._cache.clear()

    def __exit__(self, *exc):
        _stream.view_patterns = self._saved
        _stream._cache.clear()


def run_rg(secrets, path: Path, tmp: Path, repeat: int) -> float | None:
    rg = shutil.which("rg") or (str(Path(sys.executable).parent / "rg")
                                if (Path(sys.executable).parent / "rg").exists() else None)
    if rg is None:
        return None
    pfile = tmp / "secrets.txt"
    pfile.write_bytes(b"\n".join(secrets) + b"\n")
    best = float("inf")
    for _ in range(repeat):
        t0 = child_clock()
        subprocess.run([rg, "-F", "-c", "-f", str(pfile), str(path)], stdout=subprocess.DEVNULL, check=False)
        best = min(best, child_clock() - t0)
    return path.stat().st_size / max(best, 1e-9) / 1e6


def build_seconds(secrets, engine=None) -> tuple[float, float, int]:
    """Cold build (empty cache), warm build (cache hit), and the pattern count."""
    _stream._cache.clear()
    t0 = clock()
    r = StreamRedactor(secrets, engine=engine)
    cold = clock() - t0
    t0 = clock()
    StreamRedactor(secrets, engine=engine)
    warm = clock() - t0
    return cold, warm, r.pattern_count


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 MiB corpora, k <= 1 000")
    ap.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    ap.add_argument("--size-mib", type=int, default=None, help="size of each corpus (default 32, --quick 8)")
    ap.add_argument("--k", type=int, nargs="*", default=None, help="secret counts (default 10 100 1000 10000)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per case; the best is reported")
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    ap.add_argument("--no-portable", action="store_true", help="skip the pyahocorasick engine")
    ap.add_argument("--views-baseline", action="store_true",
                    help="also run Hyperscan without the pattern forms' views (same run, same data)")
    ap.add_argument("--dump-baseline", action="store_true",
                    help="also run Hyperscan (and the portable engine) with the hexdump form off")
    ap.add_argument("--setup", action="store_true",
                    help="install ripgrep from Debian (apt-get, as root) when rg is missing")
    args = ap.parse_args(argv)
    if args.setup and shutil.which("rg") is None:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "ripgrep"], check=True,
                       stdout=subprocess.DEVNULL)
    global CLOCK
    CLOCK = args.clock
    size = (args.size_mib or (8 if args.quick else 32)) * MIB
    ks = args.k or ([10, 100, 1000] if args.quick else [10, 100, 1000, 10_000])
    log = (lambda *a: print(*a, file=sys.stderr, flush=True))
    t_start = time.perf_counter()
    res = {"corpus_bytes": size, "repeat": args.repeat, "clock": CLOCK, "python": sys.version.split()[0],
           "engine": _matcher.ENGINE.name, "cpu_count": os.cpu_count(),
           "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()), "rows": [], "build": []}
    fixed = {"random": random_corpus(size), "tokens": token_corpus(size)}
    tmp = Path(tempfile.mkdtemp(prefix="pc-bench-"))
    try:
        for k in ks:
            secrets = make_secrets(k)
            cold, warm, patterns = build_seconds(secrets)
            res["build"].append({"k": k, "engine": _matcher.ENGINE.name, "cold_s": round(cold, 3),
                                 "warm_s": round(warm, 5), "patterns": patterns})
            if not args.no_portable and k <= 1000:
                cold_p, warm_p, _ = build_seconds(secrets, _matcher.AhoMatcher)
                res["build"].append({"k": k, "engine": "pyahocorasick", "cold_s": round(cold_p, 3),
                                     "warm_s": round(warm_p, 5), "patterns": patterns})
            log(f"k={k}: built in {cold:.1f} s ({patterns} patterns)")
            corpora = dict(fixed, adversarial=adversarial_corpus(secrets, size))
            for name, data in corpora.items():
                path = tmp / f"{name}.txt"
                path.write_bytes(data)
                row = {"k": k, "corpus": name}
                for chunk in (4096, 65536):
                    rate, masks = run_stream(secrets, data, chunk, args.repeat)
                    row[f"hs_{chunk // 1024}k"] = round(rate, 1)
                    row["masks"] = masks
                    if args.views_baseline:
                        with no_views():
                            rate, _ = run_stream(secrets, data, chunk, args.repeat)
                        row[f"noviews_{chunk // 1024}k"] = round(rate, 1)
                    if args.dump_baseline:
                        rate, _ = run_stream(secrets, data, chunk, args.repeat, variants=NO_DUMP)
                        row[f"nodump_{chunk // 1024}k"] = round(rate, 1)
                if not args.no_portable and k <= 1000:
                    sample = data[: max(MIB, size // 8)]  # the portable engine is slow: a prefix
                    rate, _ = run_stream(secrets, sample, 65536, 1, _matcher.AhoMatcher)
                    row["aho_64k"] = round(rate, 1)
                    if args.dump_baseline:
                        rate, _ = run_stream(secrets, sample, 65536, 1, _matcher.AhoMatcher, NO_DUMP)
                        row["aho_nodump_64k"] = round(rate, 1)
                row["rg"] = run_rg(secrets, path, tmp, args.repeat)
                if row["rg"] is not None:
                    row["rg"] = round(row["rg"], 1)
                res["rows"].append(row)
                log(f"  {name}: {row} ({time.perf_counter() - t_start:.0f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print_table(res)
    return 0


def _f(v) -> str:
    return "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.1f}")


def print_table(res) -> None:
    print(f"\nStreamRedactor, every form on; MB/s of {res['clock']} time, best of {res['repeat']} "
          f"({res['corpus_bytes'] // MIB} MiB per corpus, Python {res['python']}, {res['cpu_count']} CPUs, "
          f"load {res['load_average']})")
    views = any("noviews_4k" in r for r in res["rows"])
    dump = any("nodump_4k" in r for r in res["rows"])
    head = ["corpus", "k", "hyperscan 4K", "hyperscan 64K", "portable 64K", "rg -F -f", "masks"]
    if dump:
        head[5:5] = ["portable no dump 64K"]
        head[4:4] = ["no dump 4K", "no dump 64K"]
    if views:
        head[4:4] = ["no views 4K", "no views 64K"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in sorted(res["rows"], key=lambda r: (r["corpus"], r["k"])):
        extra = f"{_f(r['noviews_4k'])} | {_f(r['noviews_64k'])} | " if views else ""
        if dump:
            extra += f"{_f(r['nodump_4k'])} | {_f(r['nodump_64k'])} | "
        aho = _f(r.get('aho_64k')) + (f" | {_f(r.get('aho_nodump_64k'))}" if dump else "")
        print(f"| {r['corpus']} | {r['k']} | {_f(r['hs_4k'])} | {_f(r['hs_64k'])} | {extra}{aho} "
              f"| {_f(r['rg'])} | {r['masks']} |")
    print("\nBuild (StreamRedactor of k secrets, every form)")
    print("| k | engine | patterns | cold s | warm (cache hit) ms |")
    print("|---|---|---|---|---|")
    for b in res["build"]:
        print(f"| {b['k']} | {b['engine']} | {b['patterns']} | {b['cold_s']:.2f} | {b['warm_s'] * 1e3:.2f} |")
    print(f"\nelapsed {res['elapsed_s']} s")


if __name__ == "__main__":
    sys.exit(main())
