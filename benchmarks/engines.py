"""The fast engine's candidates side by side (issue 21): hyperscan 0.9.1 vs pyperscan 0.4.0.

Block-mode scans of the redactor's own pattern set for k secrets (every form on),
interleaved, CPU time; the per-call overhead on 60 bytes (a redactor feed makes
about five scans); GIL release (a 1 ms ticker thread during one 256 MiB scan);
pyperscan's stream mode (SOM_LEFTMOST) across 4 KiB feeds.

The redactor runs on pyperscan since; hyperscan 0.9.1 is no dependency any more:
run this in a scratch venv,
    python3 -m venv /tmp/engines && /tmp/engines/bin/pip install pyperscan==0.4.0 \
        hyperscan==0.9.1 'pyahocorasick>=2.1,<3' && /tmp/engines/bin/python benchmarks/engines.py
"""
import sys, time, threading
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src")); sys.path.insert(0, str(ROOT / "benchmarks"))
import hyperscan, pyperscan as ps
from redaction import make_secrets, random_corpus
from paddedcell.redactor.matcher import _as_regex
from paddedcell.redactor.variants import pattern_set, Variants

def dbs(patterns):
    exprs = [_as_regex(p) for p in patterns]
    hdb = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    hdb.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=hyperscan.HS_FLAG_SOM_LEFTMOST)
    hs_scratch = hyperscan.Scratch(hdb)
    found = []
    def hs(buf):
        found.clear(); hdb.scan(buf, match_event_handler=lambda i, s, e, f, c: found.append((s, e)), scratch=hs_scratch); return len(found)
    pdb = ps.BlockDatabase(*[ps.Pattern(e, ps.Flag.SOM_LEFTMOST) for e in exprs])
    pf = []
    def on(ctx, tag, s, e):
        pf.append((s, e)); return ps.Scan.Continue
    sc = pdb.build(None, on)
    def pp(buf):
        pf.clear(); sc.scan(buf); return len(pf)
    sdb = ps.StreamDatabase(*[ps.Pattern(e, ps.Flag.SOM_LEFTMOST) for e in exprs])
    sf = []
    def son(ctx, tag, s, e):
        sf.append((s, e)); return ps.Scan.Continue
    ss = sdb.build(None, son)
    return hs, pp, ss, sf

data = random_corpus(32 << 20)
for k in (10, 1000):
    secrets = make_secrets(k)
    pats = pattern_set(secrets, Variants())
    t = time.process_time(); hs, pp, ss, sf = dbs(pats); build = time.process_time() - t
    assert hs(data[:1 << 20]) == pp(data[:1 << 20])
    res = {"hyperscan": [], "pyperscan": []}
    for _ in range(5):
        for name, f in (("hyperscan", hs), ("pyperscan", pp)):
            t = time.process_time(); f(data); res[name].append(len(data) / (time.process_time() - t) / 1e6)
    small = data[:60]
    over = {}
    for name, f in (("hyperscan", hs), ("pyperscan", pp)):
        t = time.perf_counter()
        for _ in range(20000): f(small)
        over[name] = (time.perf_counter() - t) / 20000 * 1e6
    # stream mode over 4 KiB feeds
    ss.reset(); sf.clear()
    t = time.process_time()
    for i in range(0, len(data), 4096): ss.scan(data[i:i + 4096])
    stream = len(data) / (time.process_time() - t) / 1e6
    print(f"k={k} patterns={len(pats)} build {build:.1f}s  block 32 MiB MB/s: hyperscan {max(res['hyperscan']):.0f} pyperscan {max(res['pyperscan']):.0f}; "
          f"per-call 60 B us: hyperscan {over['hyperscan']:.1f} pyperscan {over['pyperscan']:.1f}; pyperscan stream 4 KiB feeds {stream:.0f} MB/s")
# GIL: ticker during one long scan
big = data * 8
for name, f in (("hyperscan", hs), ("pyperscan", pp)):
    ticks = [0]; stop = threading.Event()
    def tick():
        while not stop.is_set(): time.sleep(0.001); ticks[0] += 1
    th = threading.Thread(target=tick); th.start(); t = time.perf_counter(); f(big); el = time.perf_counter() - t; stop.set(); th.join()
    print(f"GIL {name}: {ticks[0]} ticks of 1 ms during a {el*1000:.0f} ms scan of 256 MiB")
