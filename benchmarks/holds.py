"""The hold alone: ``PrefixIndex.hold`` per buffer, this tree against a baseline
revision's, in the same run.

Pattern set: every pattern of a redactor of k secrets with every form on (the
set its hold is asked about: literals, forms, fragment windows), from
``benchmarks/redaction.py``'s secrets. Buffers: the last 4 KiB (a PTY read) or
64 KiB (a pipe read) of slices of its three corpora (random text, a token log,
the secrets' shared prefix line after line), each cut at an offset that leaves
a held tail (the end of some pattern's prefix) in half of them. The baseline
is ``redactor/matcher.py`` of ``--baseline`` (default c90b4ad, before issue
21's hold), loaded from git beside this tree's ``redactor/holds.py``; both
answer every buffer, and the run stops if they disagree.

    python benchmarks/holds.py                    # k = 1 10 100 1000, 4 KiB and 64 KiB
    python benchmarks/holds.py --k 10 --json      # machine-readable
    python benchmarks/holds.py --baseline HEAD~3  # another baseline

Times are process CPU time, the best of ``--repeat`` rounds, old and new
interleaved in each round; index build times are measured once each.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import redaction as R  # noqa: E402
from paddedcell.redactor import StreamRedactor  # noqa: E402
from paddedcell.redactor import holds, matcher  # noqa: E402


def load_baseline(rev: str):
    """The baseline's matcher module (it imports nothing of the package)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/paddedcell/redactor/matcher.py"],
                            check=True, capture_output=True).stdout
    path = Path(tempfile.mkdtemp(prefix="holds-baseline-")) / "baseline_matcher.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("baseline_matcher", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def redactor_patterns(secrets: list[bytes]) -> list[bytes]:
    """Every pattern of a redactor of these secrets (forms and fragment windows)."""
    return list(StreamRedactor(secrets)._patterns)


def buffers(corpus: bytes, patterns: list[bytes], size: int, count: int, seed: int = 21) -> list[bytes]:
    """``count`` buffers of ``size`` bytes; half end in a proper prefix of a pattern."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        start = rng.randrange(0, len(corpus) - size)
        buf = corpus[start : start + size]
        if i % 2:
            p = rng.choice(patterns)
            piece = p[: rng.randrange(1, len(p))] if len(p) > 1 else b""
            buf = buf[len(piece) :] + piece
        out.append(buf)
    return out


def timed(index, bufs: list[bytes]) -> float:
    hold = index.hold
    t0 = time.process_time()
    for b in bufs:
        hold(b)
    return (time.process_time() - t0) / len(bufs) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536])
    ap.add_argument("--buffers", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default="c90b4ad")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    old_module = load_baseline(args.baseline)
    engine, old_engine = matcher.ENGINE, getattr(old_module, matcher.ENGINE.__name__)
    rows, builds = [], []
    for k in args.k:
        secrets = R.make_secrets(k)
        patterns = redactor_patterns(secrets)
        t0 = time.process_time()
        old = old_module.PrefixIndex(patterns, old_engine, direct=16)  # as the baseline's Matcher built it
        old_build = time.process_time() - t0
        t0 = time.process_time()
        new = holds.PrefixIndex(patterns, engine)
        new_build = time.process_time() - t0
        builds.append({"k": k, "patterns": len(patterns), "old_build_s": round(old_build, 3),
                       "new_build_s": round(new_build, 3)})
        corpora = {"random": R.random_corpus(4 << 20), "tokens": R.token_corpus(4 << 20),
                   "adversarial": R.adversarial_corpus(secrets, 4 << 20)}
        for name, corpus in corpora.items():
            for size in args.sizes:
                bufs = buffers(corpus, patterns, size, args.buffers)
                for b in bufs:
                    if old.hold(b) != new.hold(b):
                        raise SystemExit(f"holds differ at k={k} {name} {size}: {old.hold(b)} != {new.hold(b)}")
                best_old = best_new = float("inf")
                for _ in range(args.repeat):
                    best_old = min(best_old, timed(old, bufs))
                    best_new = min(best_new, timed(new, bufs))
                rows.append({"k": k, "corpus": name, "size": size, "old_us": round(best_old, 2),
                             "new_us": round(best_new, 2), "speedup": round(best_old / best_new, 1)})
                if not args.json:
                    print(rows[-1], file=sys.stderr)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    if args.json:
        print(json.dumps({"baseline": args.baseline, "engine": engine.name, "load": load,
                          "holds": rows, "builds": builds}, indent=1))
        return 0
    print(f"PrefixIndex.hold, us per buffer (CPU), baseline {args.baseline} vs this tree, engine {engine.name}, "
          f"best of {args.repeat}, {os.cpu_count()} CPUs, load {load}")
    print("| k | corpus | buffer | baseline us | new us | speed-up |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['k']} | {r['corpus']} | {r['size'] // 1024} KiB | {r['old_us']} | {r['new_us']} | "
              f"{r['speedup']}x |")
    print("\nIndex build (CPU s)\n| k | patterns | baseline | new |\n|---|---|---|---|")
    for b in builds:
        print(f"| {b['k']} | {b['patterns']} | {b['old_build_s']} | {b['new_build_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
