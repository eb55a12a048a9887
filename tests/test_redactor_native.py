"""The redactor's optional C gates (paddedcell/redactor/_native.c) against the
Python/regex forms that define them: the dump view's candidate lines
(dumps.CandidateLines: one multi-line regex, with Hyperscan or re) and the
``%XX`` view's triggers (views.PercentGate), on random, adversarial and
dump-like buffers (xxd/hexdump/od lines, ``%`` runs, ``\\r``, buffer ends);
and the switch PADDEDCELL_NATIVE=0. Skipped where the module was not built
(no compiler at install): the Python forms run there, and the other redactor
suites test them (CI also runs them with PADDEDCELL_NATIVE=0)."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import dumps, matcher, views

native = pytest.importorskip("paddedcell.redactor._native")

from test_redactor_dumps import SECRET, layout_lines, mixed_lines  # noqa: E402
from test_redactor_holds import pattern_sets, texts  # noqa: E402

#: The tests comparing the two forms, skipped under PADDEDCELL_NATIVE=0 (the module is
#: there, the redactor does not use it; the switch's own test runs).
needs_native = pytest.mark.skipif(dumps._native is None, reason="PADDEDCELL_NATIVE=0")

ENGINES = [pytest.param(matcher.HyperscanMatcher, id="hyperscan",
                        marks=pytest.mark.skipif(matcher.HYPERSCAN_PROBLEM is not None, reason="no pyperscan")),
           pytest.param(matcher.AhoMatcher, id="portable")]


@contextlib.contextmanager
def python_gates():
    """Build gates inside this block to get their Python/regex forms."""
    saved = dumps._native, views._native
    dumps._native = views._native = None
    try:
        yield
    finally:
        dumps._native, views._native = saved


def regex_starts(buf: bytes, hyperscan: bool, limit: int = 10**9) -> list[int] | None:
    with python_gates():
        lines = dumps.CandidateLines(hyperscan)
    lines.LIMIT = limit
    return lines.starts(buf)


#: The SIMD levels of the gates' pass this CPU runs (3 AVX-512, 2 AVX2, 1 SSE2, 0 scalar):
#: each is checked against the Python forms (the machine picks the best one).
BEST = native._set_simd(99)
LEVELS = [level for level in range(BEST, -1, -1) if native._set_simd(level) == level]
native._set_simd(BEST)


@contextlib.contextmanager
def simd(level: int):
    """The native gates at this level inside the block."""
    assert native._set_simd(level) == level
    try:
        yield
    finally:
        native._set_simd(BEST)


def each_level(f, *args):
    """f(*args) at every level: the same result at each, returned."""
    out = []
    for level in LEVELS:
        with simd(level):
            out.append(f(*args))
    assert all(o == out[0] for o in out), list(zip(LEVELS, out))
    return out[0]


def native_starts(buf: bytes, limit: int = 10**9) -> list[int] | None:
    lines = dumps.CandidateLines(False)
    assert lines.starts == lines._native_starts
    lines.LIMIT = limit
    return each_level(lines.starts, buf)


def assert_same_lines(buf: bytes) -> None:
    want = regex_starts(buf, False)
    assert native_starts(buf) == want
    if matcher.HYPERSCAN_PROBLEM is None:
        assert regex_starts(buf, True) == want  # (the two regex forms agree too)
    # The limit: None past it, the same list up to it. (The re form checks it from the
    # second line on: with a limit of 0 it says [0] for the first line alone; the limit is 32 up.)
    for limit in {1, max(1, len(want) - 1), max(1, len(want))}:
        expected = want if len(want) <= limit * (1 + len(buf) // 65536) else None
        assert native_starts(buf, limit) == expected == regex_starts(buf, False, limit)


#: Bytes the candidate regex cares about, and a few it does not.
_DUMPISH = b"0123456789abcdefABCDEF -:xX,|><\r\n\t*\\gz%.\x00\xff"


def _od_line(rng: random.Random, data: bytes) -> bytes:
    """od -c / od -a style lines, right and wrong (names, escapes, octal, odd spacing)."""
    fields = []
    for c in data:
        kind = rng.randrange(6)
        if kind == 0:
            fields.append(dumps._od_char(c))
        elif kind == 1:
            fields.append(dumps._od_name(c))
        elif kind == 2:
            fields.append(rng.choice([b" nul", b"  nl", b" sp", b"  del", b"  \\n", b"    ", b" 303", b"   x"]))
        else:
            fields.append(rng.choice([dumps._od_char(c), dumps._od_name(c)]))
    offset = rng.choice([b"0000000", b"0000", b"00000000000000000", b"000", b"", b"  0000000", b"00a0"])
    return offset + b"".join(fields) + rng.choice([b"", b" ", b"  ", b"\r", b" \r\r", b"|", b"x"])


@st.composite
def dumpish(draw):
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    pieces = []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["bytes", "dumpish", "layout", "od", "gutter"]))
        if kind == "bytes":
            pieces.append(draw(st.binary(max_size=30)))
        elif kind == "dumpish":
            pieces.append(bytes(rng.choice(_DUMPISH) for _ in range(rng.randrange(40))))
        elif kind == "layout":
            pieces.append(layout_lines(draw(st.binary(min_size=1, max_size=40)), rng))
        elif kind == "od":
            pieces.append(_od_line(rng, draw(st.binary(max_size=12))))
        else:  # gutters: '|' and '>' ... '<' with other bytes, \r, ends
            pieces.append(rng.choice([b"", b" ", b"\t", b"-"]) + rng.choice([b"0", b"a1", b"-f"])
                          + bytes(rng.choice(b"0a :x,-") for _ in range(rng.randrange(6)))
                          + rng.choice([b"|", b">", b"  ", b" "])
                          + bytes(rng.choice(b"|<>\r ab") for _ in range(rng.randrange(5))))
        pieces.append(rng.choice([b"\n", b"\r\n", b"\n\n", b"", b"\r\r\n"]))
    return b"".join(pieces)


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dumpish())
@example(b"")
@example(b"\n")
@example(b"0")
@example(b"0\r")
@example(b"\r0")
@example(b"a  \rxyz\n")
@example(b"0|\r|\r\n|")  # the same '|' cannot open and close a gutter
@example(b"0|\r\n0||\r\r")
@example(b"0>\r<\n0><\n0>\n0<>")
@example(b"-\n--0\n-0\n - 0\n \t-f x\n")
@example(b"0000000 nul soh\n0000000  nl\n0000 sp\r\n00000000000000000 nul\n000 nul\n")
@example(b"0000000   h   e  \\n\n0000000 303 251   x")
def test_candidate_lines_equal_the_regex(buf):
    assert_same_lines(buf)


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_lines())
def test_candidate_lines_equal_the_regex_on_mixed_dumps(buf):
    assert_same_lines(buf)


@needs_native
def test_candidate_lines_on_random_text_and_long_lines():
    rng = random.Random(21)
    printable = bytes(range(32, 127))
    for size in (1, 100, 4096, 65536 + 17):
        text = bytes(rng.choice(printable) if rng.random() > 0.02 else 10 for _ in range(size))
        assert_same_lines(text)
    long = b"0a" + b" 0a" * 5000  # a class run longer than any dump line: still a candidate (no length cap)
    assert_same_lines(long + b"\n" + long + b"  x\n" + long + b"|y|\r\n" + long + b"z")
    assert_same_lines(b"\n".join(layout_lines(SECRET * 40, rng) for _ in range(50)))
    for run in range(0, 40):  # runs of line breaks (skipped 16 at a time) before and after candidates
        assert_same_lines(b"\n" * run + b"0a 1b\n" + b"\n" * run + b"x\n" + b"\n" * run + b"ff  g" + b"\n" * run)
        assert_same_lines(b"x\n" * run + b"0\n" + b"%" * run + b"\r\n" * run + b"1")


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_candidate_limit_on_a_dump(engine):
    """Past the limit (per 64 KiB begun) None, as the regex scans say."""
    rng = random.Random(3)
    dump = b"".join(layout_lines(bytes(rng.randrange(256) for _ in range(64)), rng) for _ in range(30))
    for buf in (dump, dump * 300):
        with python_gates():
            want = dumps.CandidateLines(engine is matcher.HyperscanMatcher).starts(buf)
        assert dumps.CandidateLines(engine is matcher.HyperscanMatcher).starts(buf) == want


# -- %XX triggers ----------------------------------------------------------------

_TOKENS = [b"%", b"%%", b"%4", b"%zz", b"x", b"yy", b"a", b"Z", b"q", b"4", b"%5a", b"%5A", b"%61", b"%71",
           b"%34", b"%25", b"%20", b"%ff", b"%FF", b"\xff", b"%00", b"\x00", b"%7"]


def _gates(secrets, engine):
    nat = views.PercentGate(secrets, engine)
    with python_gates():
        ref = views.PercentGate(secrets, engine)
    assert nat.hits == nat._native_hits and ref.hits != ref._native_hits
    return nat, ref


def assert_same_hits(secrets, text, engine) -> None:
    nat, ref = _gates(secrets, engine)
    want = ref.hits(text) if b"%" in text else None
    assert each_level(nat.hits, text) == want
    if want is not None:
        ref._around = None  # every token one by one (the form without the window scan)
        assert ref.hits(text) == want


_SECRET_BYTES = st.binary(min_size=1, max_size=12).map(lambda b: bytes(b"aZ%4q\xff\x00"[c % 7] for c in b))


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(secrets=st.lists(_SECRET_BYTES, min_size=1, max_size=3),
       text=st.lists(st.sampled_from(_TOKENS), max_size=60).map(b"".join))
@example(secrets=[b"qaZ4q4q4"], text=b"xxqa%5Ax4x4x")
@example(secrets=[b"qaZ4q4q4"], text=b"%71a%5A")
@example(secrets=[b"qaZ4q4q4"], text=b"q%61%5A4%71")
@example(secrets=[b"Z"], text=b"x%5A y%5a %5")
@example(secrets=[b"Zq"], text=b"x%5Aq y%5a%71 Z%71%")
@example(secrets=[b"%%%"], text=b"%25%%25%")
def test_percent_hits_equal_the_python_gate(engine, secrets, text):
    assert_same_hits(secrets, text, engine)


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_percent_hits_on_urls_and_random_text(engine):
    """Real secrets (k = 1, 10), their URL-encoded forms in text, random text with '%'."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import redaction as R

    rng = random.Random(9)
    for k in (1, 10):
        secrets = R.make_secrets(k)
        parts = []
        for s in secrets:
            parts.append(b"?t=" + b"".join(b"%%%02X" % c if rng.random() < 0.3 else bytes([c]) for c in s) + b"&")
            parts.append(bytes(rng.randrange(32, 127) for _ in range(rng.randrange(200))))
        text = b"".join(parts) + R.random_corpus(30000, seed=k)
        for a, b in [(0, len(text)), (5, 999), (len(text) - 40, len(text)), (len(text) - 2, len(text))]:
            assert_same_hits(secrets, text[a:b], engine)


@needs_native
def test_no_percent_is_none():
    nat, _ = _gates([b"secretvalue"], matcher.AhoMatcher)
    assert nat.hits(b"") is None and nat.hits(b"no percent here") is None
    assert nat.hits(b"100%") == []


# -- the switch ------------------------------------------------------------------

def test_the_switch_forces_the_python_gates():
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    code = ("from paddedcell.redactor import dumps, views; "
            "print(dumps._native is None, views._native is None, "
            "(lambda c: c.starts == c._native_starts)(dumps.CandidateLines(False)))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    off = subprocess.run([sys.executable, "-c", code], env=dict(env, PADDEDCELL_NATIVE="0"),
                         capture_output=True, text=True, check=True).stdout.split()
    on = subprocess.run([sys.executable, "-c", code], env={k: v for k, v in env.items() if k != "PADDEDCELL_NATIVE"},
                        capture_output=True, text=True, check=True).stdout.split()
    assert off == ["True", "True", "False"]
    assert on == ["False", "False", "True"]


@needs_native
@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from([b"\n", b"*", b"*\n", b"\n*\r\n", b"\r", b"x", b"0a 1b", b"y" * 100, b"*\r\r",
                                 b" *", b"**"]), max_size=12).map(b"".join), st.integers(0, 2000),
       st.sampled_from([0, 1, 3, 8, 256]))
@example(b"a" * 600, 600, 256)
@example(b"a" * 300 + b"\n*\n*\n", 306, 256)
@example(b"x\n*\n", 10, 256)
def test_dump_sync_equals_python(buf, i, line_max):
    i = min(i, len(buf))
    saved = dumps.LINE_MAX
    dumps.LINE_MAX = line_max
    try:
        want = dumps.DumpFinder.sync(buf, i)
    finally:
        dumps.LINE_MAX = saved
    assert native.dump_sync(buf, i, line_max) == want
    if line_max == dumps.LINE_MAX:
        assert dumps._native_sync(buf, i) == want


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(buf=dumpish(), text=st.lists(st.sampled_from(_TOKENS), max_size=30).map(b"".join))
def test_gates_equal_the_python_gates(engine, buf, text):
    """Gates.scan: the candidate lines and the %XX triggers in one call each way."""
    secrets = [SECRET, b"qaZ4q4q4"]
    with python_gates():
        ref = views.Gates(dumps.CandidateLines(engine is matcher.HyperscanMatcher), set(secrets), engine)
    nat = views.Gates(dumps.CandidateLines(engine is matcher.HyperscanMatcher), set(secrets), engine)
    assert nat.scan.func is native.gates_for  # (the C call itself; _native_scan its form with a frame)
    for b in (buf, buf + text, text + b"\n" + buf, text):
        assert each_level(nat.scan, b) == ref.scan(b) == nat._native_scan(b)


@needs_native
@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b"a", b"bc", b"x" * 15, b"y" * 16, b"z" * 33, b"\n" * 17]),
                max_size=20).map(b"".join), st.integers(0, 15))
def test_strip_breaks_deletes_every_line_break(buf, skip):
    """The line-break view in C, at every alignment of the 16-byte blocks; views.WrapView.view uses it."""
    buf = buf[skip:]
    want = buf.translate(None, b"\r\n")
    assert each_level(native.strip_breaks, buf) == want == views.VIEWS["wrap"].view(buf)
    assert each_level(native.strip_breaks, bytearray(buf)) == want
    if want == buf:
        assert native.strip_breaks(buf) is buf


@needs_native
@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b"a", b"bc", b"x" * 15, b"\n" * 16, b"\r\n" * 9, b"\n" * 33]),
                max_size=20).map(b"".join), st.integers(0, 15), st.integers(-2, 400))
def test_last_not_break_is_the_end_of_rstrip(buf, skip, end):
    """The last byte that is no line break, at every alignment of the 16-byte blocks
    (views.Viewed._wrap_hold after a run of breaks)."""
    buf = buf[skip:]
    want = len(buf[: max(0, end)].rstrip(b"\r\n")) - 1
    assert native.last_not_break(buf, end) == want
    assert native.last_not_break(bytearray(buf), end) == want


@needs_native
def test_strip_breaks_on_text():
    rng = random.Random(4)
    for density in (0.0, 0.01, 0.1, 0.5, 1.0):
        buf = bytes(rng.choice(b"\r\n") if rng.random() < density else rng.randrange(32, 127) for _ in range(70000))
        for end in (70000, 64 * 5, 64 * 5 + 1, 64 * 5 - 1, 63, 1):  # (AVX-512: 64-byte blocks, a masked rest)
            assert each_level(native.strip_breaks, buf[:end]) == buf[:end].translate(None, b"\r\n")


def gram_hits_by_definition(gate, text: bytes) -> list[tuple[int, int]]:
    """The C gate's hits with the 8-gram check, from the view of the whole buffer:
    the hits without it whose token has fewer than seven view bytes after it or
    lies in eight view-consecutive bytes whose gram's bit is set (mod the prime)."""
    base = native.percent_hits(text, *gate._tables[:4])
    if base is None:
        return None
    bits, prime = gate._tables[4:]
    view = views.VIEWS["percent"]
    tokens, starts, _ = view.layout(text, 0, len(text))
    seen = view.view(text)
    at = {s: k for (s, _, _, _), k in zip(tokens, starts)}

    def bit(g: bytes) -> bool:
        r = int.from_bytes(g, sys.byteorder) % prime
        return bits[r >> 3] >> (r & 7) & 1 == 1

    out = []
    for s, e in base:
        k = at[s]
        if len(seen) - k - 1 < 7 or any(bit(seen[j : j + 8]) for j in range(max(0, k - 7), k + 1)):
            out.append((s, e))
    return out


_GRAM_SECRETS = st.binary(min_size=8, max_size=14).map(lambda b: bytes(b"aZ%4q"[c % 5] for c in b))


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(secrets=st.lists(_GRAM_SECRETS, min_size=1, max_size=3),
       text=st.lists(st.sampled_from(_TOKENS), max_size=80).map(b"".join))
@example(secrets=[b"qaZ4q4q4"], text=b"xxqa%5A4q4q4xxxxxxxx")
@example(secrets=[b"qaZ4q4q4"], text=b"xxxxxxxxqa%5Aqqqqqqqq")
@example(secrets=[b"qaZ4q4q4"], text=b"%71aZ4q4q4%34yyyyyyyyy")
@example(secrets=[b"qaZ4q4q4"], text=b"yyyyyyyyq%61Z4q4q%34")
@example(secrets=[b"qaZ4q4q4"], text=b"qaZ4q4q%34yyyyyyyy")  # the last byte: only the window ending at it
def test_percent_hits_with_grams_by_definition(monkeypatch, secrets, text):
    """With the 8-gram check (views.PercentGate.GRAMS_FROM), percent_hits is its
    definition at every SIMD level, and every token of an occurrence in the view
    (or of a pattern's prefix ending the buffer, the hold's) is still a trigger."""
    monkeypatch.setattr(views.PercentGate, "GRAMS_FROM", 1)
    gate = views.PercentGate(secrets, matcher.AhoMatcher)
    assert len(gate._tables) == 6
    got = each_level(gate.hits, text)
    assert got == gram_hits_by_definition(gate, text)
    assert each_level(lambda t: native.gates(t, 10**9, dumps._CHARS_LINE.fullmatch, gate._tables)[1], text) == got
    if got is None:
        return
    view = views.VIEWS["percent"]
    tokens, starts, _ = view.layout(text, 0, len(text))
    seen = view.view(text)
    need = set()
    for (s, e, _, _), k in zip(tokens, starts):
        for p in secrets:
            for i in range(max(0, k - len(p) + 1), k + 1):
                if seen.startswith(p, i) or (i + len(p) > len(seen) and p.startswith(seen[i:])
                                             and len(seen) - i >= 2):
                    need.add((s, e))
    assert need <= set(got), (need - set(got))


@needs_native
def test_percent_grams_only_for_big_sets_of_long_patterns():
    """The 8-gram check is built from GRAMS_FROM patterns, all of 8 bytes or more."""
    few = views.PercentGate([b"secretvalue%d" % i for i in range(10)], matcher.AhoMatcher)
    assert len(few._tables) == 4
    many = [b"secretvalue%d" % i for i in range(views.PercentGate.GRAMS_FROM)]
    assert len(views.PercentGate(many, matcher.AhoMatcher)._tables) == 6
    assert len(views.PercentGate(many + [b"short"], matcher.AhoMatcher)._tables) == 4
    with pytest.raises(TypeError):
        native.percent_hits(b"%41", *views.PercentGate(many, matcher.AhoMatcher)._tables[:4], b"", 9)
    with pytest.raises(TypeError):
        native.gates(b"%41", 1, dumps._CHARS_LINE.fullmatch, few._tables + (b"\xff", 9))


@needs_native
def test_percent_hits_in_runs_of_percent_at_every_alignment():
    """Tokens after runs of '%' (skipped 16 bytes at a time) and near the buffer's end."""
    secrets = [b"qaZ4q4q4", SECRET]
    for run in range(40):
        for tail in (b"", b"q", b"4q4x", b"%", b"%3"):
            for text in (b"%" * run + b"qa%5A4q" + b"%" * run + tail, b"x" * run + b"%71a%5a" + tail,
                         b"%" * run + b"%5a%34" + tail, b"%" * run + tail):
                assert_same_hits(secrets, text, matcher.AhoMatcher)


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_gates_at_block_and_batch_edges(engine):
    """Line starts and %HH tokens at every offset around the 64-byte blocks and the
    pass's 64 KiB batches, and buffers ending there (the padded last blocks), at every level;
    also the gates with only one of the two views."""
    secrets = [SECRET, b"qaZ4q4q4"]
    with python_gates():
        ref = views.Gates(dumps.CandidateLines(False), set(secrets), engine)
        ref_lines = views.Gates(dumps.CandidateLines(False), set(), engine)
        ref_pct = views.Gates(None, set(secrets), engine)
    nat = views.Gates(dumps.CandidateLines(False), set(secrets), engine)
    nat_lines = views.Gates(dumps.CandidateLines(False), set(), engine)
    nat_pct = views.Gates(None, set(secrets), engine)
    pieces = [b"\n0a  b\n", b"qa%5A4q", b"\n0", b"%71a%5a", b"\n-f |x|\r\n", b"\n \t0\r", b"%5", b"\n00000000 61 62  ab"]
    rng = random.Random(5)
    filler = bytes(rng.randrange(32, 127) for _ in range(66000)).replace(b"%", b".").replace(b"\n", b".")
    for edge in (64, 128, 4096, 65536):
        for shift in (range(-12, 13) if edge < 65536 else (-4, -3, -1, 0, 1, 2)):
            for piece in pieces:
                at = edge + shift
                buf = filler[:at] + piece + filler[at:at + 100]
                for b in (buf, buf[:at + 2], buf[:edge], buf[:edge + 1], buf[:edge - 1]):
                    assert each_level(nat.scan, b) == ref.scan(b)
                    assert each_level(nat_lines.scan, b) == ref_lines.scan(b)
                    assert each_level(nat_pct.scan, b) == ref_pct.scan(b)


@needs_native
def test_gates_without_the_gil_in_threads(monkeypatch):
    """A buffer of 64 KiB or more: the pass's SIMD loop runs without the GIL; threads
    scanning at once get what one scan alone gets (and what the Python forms say)."""
    import threading

    rng = random.Random(8)
    secrets = [SECRET, b"qaZ4q4q4"]
    parts = []
    while sum(map(len, parts)) < 200_000:
        parts.append(rng.choice([layout_lines(bytes(rng.randrange(256) for _ in range(16)), rng) + b"\n",
                                 bytes(rng.randrange(32, 127) for _ in range(rng.randrange(300))) + b"\n",
                                 b"x%71a%5A4q%34" + b"\n"]))
    buf = b"".join(parts)
    monkeypatch.setattr(dumps.CandidateLines, "LIMIT", 10**6)  # (read when the gates are built)
    with python_gates():
        ref = views.Gates(dumps.CandidateLines(False), set(secrets), matcher.AhoMatcher)
    nat = views.Gates(dumps.CandidateLines(False), set(secrets), matcher.AhoMatcher)
    want = ref.scan(buf)
    assert want[0] and want[1] and each_level(nat.scan, buf) == want
    got = []

    def work():
        for _ in range(20):
            got.append(nat.scan(buf))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 80 and all(g == want for g in got)


@needs_native
@settings(max_examples=80, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.sampled_from([b"aaaaaaaaaaaa", b"\0" * 9, b"abcdefgh"]), max_size=20),
       st.sampled_from([3, 7, 1021, 65521, (1 << 20) - 3]))
def test_gram_bits_is_the_python_bitmap(patterns, prime):
    """holds._Grams' filter, built in C (every 8-byte window of every pattern as a
    native uint64, mod the prime), against its Python form, and its count of bits set."""
    from paddedcell.redactor.holds import _ORDER, _Grams

    grams = {int.from_bytes(p[i : i + 8], _ORDER) for p in patterns for i in range(len(p) - 7)}
    bits, count = native.gram_bits(patterns, prime)
    assert bits == _Grams.python_bits(grams, prime)
    assert count == sum(map(int.bit_count, bits))
    assert native.gram_bits(tuple(patterns), prime)[0] == bits  # any sequence


def test_gram_bits_refuses_what_it_cannot_read():
    with pytest.raises(TypeError):
        native.gram_bits([b"abcdefgh", "abcdefgh"], 1021)
    with pytest.raises(ValueError):
        native.gram_bits([b"abcdefgh"], 0)
    with pytest.raises(TypeError):
        native.gram_bits([b"abcdefgh"])


# ---- the hold in C (holds.PrefixIndex with _native.prefix_table) -------------------------


@contextlib.contextmanager
def python_holds():
    """Build prefix indexes (and redactors) inside this block to get the Python hold."""
    from paddedcell.redactor import holds, stream

    saved = holds._prefix_table
    holds._prefix_table = None
    stream._cache.clear()  # a cached matcher was built with the C hold
    try:
        yield
    finally:
        holds._prefix_table = saved
        stream._cache.clear()


def both_holds(patterns, engine=None):
    """The same patterns' index with the C hold and with the Python one."""
    from paddedcell.redactor.holds import PrefixIndex

    engine = engine or matcher.ENGINE
    fast = PrefixIndex(patterns, engine)
    with python_holds():
        slow = PrefixIndex(patterns, engine)
    return fast, slow


def every_prefix(patterns) -> set[bytes]:
    return {p[:k] for p in patterns for k in range(1, len(p) + 1)}


def defined_hold(buf: bytes, prefixes: set[bytes], maxlen: int) -> int:
    """The definition: the longest suffix of at most maxlen - 1 bytes that starts a pattern."""
    return next((k for k in range(min(len(buf), maxlen - 1), 0, -1) if buf[-k:] in prefixes), 0)


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_c_hold_is_the_python_hold_at_every_cut(data):
    """Patterns that extend each other over a few bytes (NUL, line breaks, case pairs),
    text made of their pieces: the C hold, the Python hold and the definition agree
    at every cut, with maxlen as built and raised by one (views, dumps)."""
    patterns = data.draw(pattern_sets())
    text = data.draw(texts(patterns))
    fast, slow = both_holds(patterns)
    if fast._bits is None:
        return  # no pattern of 8 bytes: no gram filter, no C table (the Python hold runs)
    assert fast._table is not None and slow._table is None
    prefixes = every_prefix(patterns)
    for raised in (0, 1):
        fast.maxlen = slow.maxlen = max(map(len, patterns)) + raised
        for cut in range(len(text) + 1):
            buf = text[:cut]
            want = defined_hold(buf, prefixes, fast.maxlen)
            assert fast.hold(buf) == slow.hold(buf) == want, (patterns, buf, raised)
            # short_hold (the line-break view's, on 8 bytes across a break): at most 7 bytes
            assert fast.short_hold(buf[-8:]) == slow.short_hold(buf[-8:]) == defined_hold(
                buf[-8:], prefixes, min(fast.maxlen, 8)), (patterns, buf, raised)


@needs_native
def test_the_c_hold_with_its_filters_saturated():
    """3 000 patterns over 4 bytes: the Bloom filters and the gram bitmap pass almost
    anything, so every answer comes from the sorted patterns; every cut of a text of
    their pieces, and the same cuts as a memoryview."""
    rng = random.Random(2112)
    patterns = {bytes(rng.choices(b"ab\nc", k=rng.randrange(1, 30))) for _ in range(3000)}
    fast, slow = both_holds(patterns)
    ordered = sorted(patterns)
    text = b"".join(p[: rng.randrange(1, len(p) + 1)] for p in rng.choices(ordered, k=300))
    prefixes = every_prefix(patterns)
    for cut in range(len(text) + 1):
        buf = text[max(0, cut - 64) : cut]
        want = defined_hold(buf, prefixes, fast.maxlen)
        assert fast.hold(buf) == want == slow.hold(buf), buf
        assert native.prefix_hold(fast._table, fast.maxlen, memoryview(buf)) == want


@needs_native
def test_the_c_hold_of_shared_headers_and_near_misses():
    """JWT-like patterns sharing a 36-byte header, fragments of them, and text
    that diverges from them at every byte: each cut held exactly (the witness
    pattern, asked first, must never answer for a tail it does not start)."""
    rng = random.Random(7)
    header = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    alnum = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    secrets = [header + bytes(rng.choices(alnum, k=rng.randrange(20, 60))) for _ in range(40)]
    patterns = set(secrets) | {s[i : i + 12] for s in secrets for i in range(36, len(s) - 12, 5)}
    fast, slow = both_holds(patterns)
    prefixes = every_prefix(patterns)
    for s in secrets[:10]:
        for k in range(1, len(s) + 1):
            for tail in (s[:k], s[: k - 1] + b"#", s[: k - 1] + bytes([s[k - 1] ^ 1])):
                buf = b"x=Bearer " + tail
                want = defined_hold(buf, prefixes, fast.maxlen)
                assert fast.hold(buf) == want == slow.hold(buf), buf


@needs_native
def test_a_stream_split_at_every_offset_is_the_same_with_either_hold():
    """A redactor built with the C hold and one with the Python hold, over text
    of the secrets' shared header, their pieces and near misses, split in two at
    every offset: the same output, equal to one-shot redaction."""
    from paddedcell.redactor import StreamRedactor, redact

    rng = random.Random(11)
    header = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    alnum = b"abcdefghijklmnopqrstuvwxyz0123456789"
    secrets = [header + bytes(rng.choices(alnum, k=30)) for _ in range(6)] + [b"ghp_" + bytes(rng.choices(alnum, k=36))]
    text = b"".join([b"auth=Bearer " + header + b"zz\n", b"t=" + secrets[0] + b"\n", secrets[1][:50],
                     b" x " + secrets[6][:20] + b"\n", secrets[2].hex().encode()[:70], b"\n", header[:20]])
    fast = StreamRedactor(secrets)
    with python_holds():
        slow = StreamRedactor(secrets)
    assert fast._engine.base._prefix._table is not None and slow._engine.base._prefix._table is None
    want = redact(text, secrets)
    for cut in range(len(text) + 1):
        outs = []
        for r in (fast.fresh(), slow.fresh()):
            outs.append(r.feed(text[:cut]) + r.feed(text[cut:]) + r.flush())
        assert outs[0] == outs[1] == want, cut


def test_prefix_table_refuses_what_it_cannot_read():
    bits = bytes(128)
    with pytest.raises(ValueError):
        native.prefix_table([b"b", b"a"], bits, 1021)  # not sorted
    with pytest.raises(TypeError):
        native.prefix_table([b"a", "b"], bits, 1021)
    with pytest.raises(TypeError):
        native.prefix_table([b"", b"a"], bits, 1021)
    with pytest.raises(TypeError):
        native.prefix_table([b"a"], bytes(2), 1021)  # a bitmap shorter than the prime's


# ---- the last line's quick tests (views.Viewed.scan_keep) --------------------------------

_PARTIAL_PIECES = [b"0", b"00000010", b": ", b" ", b"  ", b"\t", b"-", b"-1", b"x", b"X", b"0x", b",", b":", b"|",
                   b">", b"*", b"\r", b"\r\r", b"ab", b"Z", b"T", b"2026-11-30T10:", b"ey", b"g", b"%", b"   a",
                   b" nul", b" sp", b"  \\n", b" 101", b"fe", b"a" * 130, b"0" * 260, b"\x00", b"\xff"]


@needs_native
@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_PARTIAL_PIECES), max_size=12).map(b"".join), st.binary(max_size=3))
@example(b"*", b"")
@example(b"*\r\r", b"")
@example(b"  *", b"")
@example(b"0" * 256, b"")
@example(b"0" * 257, b"")
@example(b"\r", b"")
def test_dump_partial_is_may_become(line, before):
    """The last line's dump test in C (views.Viewed.scan_keep) against dumps.may_become,
    from every start: layouts' pieces, blanks, gutters, '*', '\\r' runs, lines past LINE_MAX."""
    buf = before.replace(b"\n", b"") + b"\n" + line
    for start in range(len(buf) - len(line), len(buf) + 1):
        want = dumps.may_become(buf[start:])
        assert native.dump_partial(dumps.LINE_MAX, dumps.may_become, buf, start) is want, buf[start:]
        if start < len(buf):
            assert views._partial_may_become(buf, start) is want


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=60), st.binary(min_size=1, max_size=20))
def test_all_in_is_rstrip(buf, allowed):
    c, py = views._all_in(allowed), (lambda b, s: not b[s:].rstrip(allowed))
    assert isinstance(c, views.partial)
    for start in range(len(buf) + 1):
        assert c(buf, start) is py(buf, start), (buf, start)
    assert c(buf + allowed, len(buf)) and c(allowed * 3, 0)


@needs_native
def test_gates_for_is_gates_with_the_limit_per_64k():
    """views.Gates.scan as one call (the buffer last): gates() with the limit per 64 KiB begun."""
    rng = random.Random(3)
    tables = views.PercentGate([b"qaZ4q4q4", b"secretvalue"], matcher.AhoMatcher)._tables
    line = b"0000a0 61 62 63  |abc|\n"
    for size in (0, 1, 63, 64, 4096, 65535, 65536, 65537, 200_000):
        buf = bytes(rng.choice(b"ab %5A\n0123") for _ in range(size))
        for many in (b"", line * 40, line * 70):
            text = many + buf
            for limit in (0, 1, 32):
                for t in (None, tables):
                    want = native.gates(text, limit * (1 + len(text) // 65536), dumps._CHARS_LINE.fullmatch, t)
                    assert native.gates_for(limit, dumps._CHARS_LINE.fullmatch, t, text) == want


def _runs_by_definition(buf: bytes, classes: list[bytes], runs: list[int]) -> int:
    """Bit j: ``buf`` holds ``runs[j]`` bytes of ``classes[j]`` in a row (the gates' definition)."""
    return sum(1 << j for j, (cls, n) in enumerate(zip(classes, runs))
               if matcher.longest_run(buf, frozenset(cls)) >= n)


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120).map(lambda b: bytes(c % 8 + 48 for c in b) if b[:1] == b"\0" else b),
       st.lists(st.tuples(st.binary(min_size=1, max_size=6).map(lambda b: bytes(c % 8 + 48 for c in b)),
                          st.integers(1, 40)), min_size=1, max_size=8))
@example(b"0123", [(b"0123", 4)])
@example(b"012x3012", [(b"0123", 4)])
@example(b"x0123", [(b"0123", 5)])
def test_class_runs_is_the_longest_run(buf, spec):
    """matcher.ClassGates' C test (``_native.class_runs``: a byte every run-th, walking
    back from one in the class) against its regex form and the definition, for up to
    eight classes: runs at the buffer's ends, exactly as long as asked, one byte short."""
    classes, runs = [c for c, _ in spec], [n for _, n in spec]
    gates = matcher.ClassGates(classes, runs)
    want = _runs_by_definition(buf, classes, runs)
    assert gates.test(buf) == want
    assert gates.python_test(buf) == want


@needs_native
def test_class_runs_on_long_buffers():
    """Runs placed at every offset of a 4 KiB buffer, each length around the asked one."""
    rng = random.Random(5)
    classes = [c for c in matcher.GATE_CLASSES]
    for n in (1, 2, 24, 25, 63, 200):
        gates = matcher.ClassGates(classes, [n] * len(classes))
        for _ in range(40):
            buf = bytearray(b"~" * 4096)
            j = rng.randrange(len(classes))
            length = n + rng.choice((-1, 0, 1))
            at = rng.randrange(0, 4096 - max(length, 0) + 1)
            buf[at : at + max(length, 0)] = bytes(rng.choice(classes[j]) for _ in range(max(length, 0)))
            want = _runs_by_definition(bytes(buf), classes, [n] * len(classes))
            assert gates.test(bytes(buf)) == gates.python_test(bytes(buf)) == want, (n, length, at)


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=8, max_size=8).map(lambda b: bytes(c % 4 + 97 if b[0] & 1 else c for c in b)),
                max_size=40),
       st.binary(max_size=200).map(lambda b: bytes(c % 4 + 97 if len(b) % 2 else c for c in b)),
       st.integers(1, 9))
@example([b"\0" * 8], b"\0" * 9, 1)
@example([b"abcdefgh"], b"xabcdefgh", 2)
def test_gram_find_is_every_sampled_gram(grams, buf, stride):
    """matcher.GramMatcher's C lookup (``_native.gram_set``/``gram_find``: a Bloom filter
    and an open-addressed table) against its definition: every offset in
    range(0, len(buf) - 7, stride) whose 8 bytes are a gram, in order."""
    sample = [buf[i : i + 8] for i in range(0, max(len(buf) - 7, 0), 3)]  # some grams that occur
    every = set(grams) | set(sample[: len(sample) // 2])
    m = matcher.GramMatcher(every, stride)
    assert m.spans(buf) == [(i, i + 8) for i in range(0, len(buf) - 7, stride) if buf[i : i + 8] in every]


@needs_native
def test_gram_find_with_many_grams():
    """100 000 grams (a table of 2^18 slots, a filter of 2^22 bits): every one found, others not."""
    rng = random.Random(11)
    grams = {rng.randbytes(8) for _ in range(100_000)}
    m = matcher.GramMatcher(grams)
    buf = b"".join(sorted(grams)[:500])
    assert m.spans(buf) == [(i, i + 8) for i in range(len(buf) - 7) if buf[i : i + 8] in grams]
    other = rng.randbytes(40_000)
    assert m.spans(other) == [(i, i + 8) for i in range(len(other) - 7) if other[i : i + 8] in grams]


@needs_native
def test_gram_find_refuses_what_is_not_a_gram_set_table():
    """A table of any other size (cut, grown, or a forged head) is refused before a read."""
    table = native.gram_set([b"abcdefgh"])
    assert native.gram_find(table, 1, b"xabcdefgh") == [(1, 9)]
    for bad in (table[:-8], table + bytes(8), bytes(16) + table[16:], b"\xff" * len(table)):
        with pytest.raises(ValueError):
            native.gram_find(bad, 1, b"abcdefgh" * 100)
    with pytest.raises(TypeError):
        native.gram_find(b"short", 1, b"abcdefgh")


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=150).map(lambda b: bytes(c % 6 + 48 for c in b)),
       st.lists(st.tuples(st.binary(min_size=1, max_size=5).map(lambda b: bytes(c % 6 + 48 for c in b)),
                          st.integers(1, 30), st.integers(-1, 7)), min_size=1, max_size=8))
@example(b"000", [(b"0", 1, 1), (b"0", 2, -1)])  # a parent after its child
def test_class_gates_with_parents(buf, spec):
    """A gate with a parent (a gate without one, before or after it) is open when its
    run is there and its parent is open (the second C pass runs only then): C and
    regex forms against that definition."""
    classes, runs = [c for c, _, _ in spec], [n for _, n, _ in spec]
    roots = [j for j, (_, _, p) in enumerate(spec) if p < 0 or p >= len(spec) or spec[p][2] >= 0 or p == j]
    parents = [-1 if j in roots else p for j, (_, _, p) in enumerate(spec)]
    gates = matcher.ClassGates(classes, runs, parents)
    first = sum(1 << j for j in roots if matcher.longest_run(buf, frozenset(classes[j])) >= runs[j])
    want = first | sum(1 << j for j in range(len(spec)) if j not in roots and first >> parents[j] & 1
                       and matcher.longest_run(buf, frozenset(classes[j])) >= runs[j])
    assert gates.test(buf) == want
    assert gates.python_test(buf) == want
