"""Long literals found by sampled grams (issue 21, k = 10 000 at 4 KiB feeds):
``_native.lit_set``/``lit_find`` against their definition (every occurrence of
every literal, each once), their refusals, :class:`matcher.SampledMatcher` inside
:class:`matcher.HyperscanMatcher` (the long literals apart, the short ones on
Hyperscan, gated or not) against :class:`matcher.FindMatcher`, and the
redactor with it on every set, at every split and byte by byte. Skipped where
the C module was not built or is switched off (PADDEDCELL_NATIVE=0): the
sampled matcher is not used there."""

from __future__ import annotations

import base64
import random
from collections import OrderedDict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import matcher
from paddedcell.redactor.oracle import naive_redact, patterns_for
from redactor_engines import engine  # noqa: F401 (autouse: every test on both engines)

native = pytest.importorskip("paddedcell.redactor._native")

needs_native = pytest.mark.skipif(matcher._lit_set is None, reason="PADDEDCELL_NATIVE=0")
needs_hyperscan = pytest.mark.skipif(matcher.HYPERSCAN_PROBLEM is not None, reason="no pyperscan")
pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")


def occurrences(literals, buf: bytes) -> list[tuple[int, int]]:
    """The definition: every (start, end) where one of the literals occurs."""
    return sorted((s, s + len(p)) for p in set(literals) for s in range(len(buf) - len(p) + 1)
                  if buf.startswith(p, s))


def small(alphabet: bytes):
    """Bytes of a few letters (shared grams, self-overlapping literals)."""
    return lambda b: bytes(alphabet[c % len(alphabet)] for c in b)


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 9).flatmap(lambda stride: st.tuples(
    st.just(stride),
    st.lists(st.binary(min_size=stride + 7, max_size=stride + 30).map(small(b"ab\x00")), min_size=1, max_size=25),
    st.lists(st.one_of(st.binary(max_size=12).map(small(b"ab\x00c")), st.integers(0, 24)), max_size=30))))
@example((1, [b"\0" * 8], [b"\0" * 9]))
@example((9, [b"ab" * 8], [b"a", 0, b"b", 0, b"ab"]))
def test_lit_find_is_every_occurrence(case):
    """``lit_find`` against its definition: every occurrence of every literal, each
    once, whatever each literal's anchor (shared grams, runs of one byte, NULs),
    on buffers built of literals and bytes between them."""
    stride, literals, pieces = case
    literals = tuple(sorted(set(literals)))
    buf = b"".join(literals[p % len(literals)] if isinstance(p, int) else p for p in pieces)
    table = native.lit_set(literals, stride)
    found = native.lit_find(table, literals, buf)
    assert sorted(found) == occurrences(literals, buf)
    assert len(found) == len(set(found))


@needs_native
@pytest.mark.parametrize("stride", [1, 2, 5, 25])
def test_each_literal_at_every_offset_modulo_the_stride(stride):
    """Each literal (a shared head, then its own bytes) alone, at offsets 0 .. stride
    of a buffer and touching its end: found there, once."""
    rng = random.Random(stride)
    head = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    literals = tuple(sorted({head[: rng.randrange(len(head))] + rng.randbytes(rng.randrange(stride + 7, 60))
                             for _ in range(300)} | {bytes(stride + 7), b"\xff" * (stride + 9)}))
    table = native.lit_set(literals, stride)
    for p in literals:
        for at in range(stride + 1):
            buf = b"~" * at + p
            assert native.lit_find(table, literals, buf) == [(at, at + len(p))], (p, at)
            assert native.lit_find(table, literals, buf[:-1]) == []


@needs_native
def test_lit_find_with_many_literals_sharing_a_head():
    """20 000 literals sharing a 36-byte head (a JWT secret's forms): every occurrence
    in a buffer of some of them, none in the head repeated."""
    rng = random.Random(5)
    head = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    literals = tuple(sorted({head + base64.b64encode(rng.randbytes(24)) for _ in range(20_000)}))
    table = native.lit_set(literals, 25)
    some = rng.sample(literals, 200)
    buf = b" ".join(some)
    assert sorted(native.lit_find(table, literals, buf)) == occurrences(some, buf)
    assert native.lit_find(table, literals, head * 200) == []


@needs_native
def test_lit_set_and_lit_find_refuse_what_they_cannot_read():
    """A literal shorter than stride + 7, not bytes, a stride out of range; a table of
    any other size (cut, grown, a forged head); not a tuple: refused before a read."""
    lits = (b"abcdefghij",)
    for bad, stride in (((b"abcdefghi",), 3), ((b"abcdefghij", "x"), 1), ([b"abcdefghij"], 1),
                        (lits, 0), (lits, 65536)):
        with pytest.raises(TypeError):
            native.lit_set(bad, stride)
    table = native.lit_set(lits, 3)
    assert native.lit_find(table, lits, b"xabcdefghij") == [(1, 11)]
    for bad in (table[:-8], table + bytes(8), bytes(24) + table[24:], b"\xff" * len(table)):
        with pytest.raises(ValueError):
            native.lit_find(bad, lits, b"abcdefghij" * 100)
    with pytest.raises(TypeError):
        native.lit_find(b"short", lits, b"abcdefghij")
    with pytest.raises(TypeError):
        native.lit_find(table, list(lits), b"abcdefghij")
    assert native.lit_find(table, (), b"abcdefghij") == []  # another tuple: no read past it


@pytest.fixture
def sampled(monkeypatch):
    """Hyperscan samples every set's literals of 12 bytes or more (not only from
    SAMPLE_MIN patterns on, stride 5), and the redactor builds afresh."""
    from paddedcell.redactor import stream

    monkeypatch.setattr(matcher.HyperscanMatcher, "SAMPLE_MIN", 1)
    monkeypatch.setattr(matcher.HyperscanMatcher, "SAMPLE_STRIDE", 5)
    monkeypatch.setattr(stream, "_cache", OrderedDict())
    built: list[matcher.SampledMatcher] = []
    init = matcher.SampledMatcher.__init__

    def counted(self, *args):
        init(self, *args)
        built.append(self)

    monkeypatch.setattr(matcher.SampledMatcher, "__init__", counted)
    return built


#: Long and short literals: hex, base64, \x escapes, %XX, NULs, one of 12 bytes (the
#: shortest sampled at stride 5), one of 11, and some shorter.
MIXED = [b"6a6b7c6d6e6f70717273747576777879", b"ams3c2x5b3BxcnN0dXZ3eHl6YWJjZGVmZ2hp+/",
         b"\\x6a\\x6b\\x6c\\x6d", b"%6A%6B%6C%6D%6E", b"ab\x00cd\x00ef\x00gh\x00ij", b"plain-Secret-1",
         b"key-12-bytes", b"key-11-byte", b"short-1", b"tiny", b"ab\x00cd", b"aaaaaaaaaaaaaaaaaaaa",
         b"aaaaaaaaab"]


@needs_native
@needs_hyperscan
@pytest.mark.parametrize("gated", [False, True])
def test_sampled_hyperscan_finds_what_find_finds(sampled, monkeypatch, gated):
    """The long literals in the sampled matcher, the short ones on Hyperscan (gated
    too): every occurrence, alone, among the others, and one byte short."""
    if gated:
        monkeypatch.setattr(matcher.HyperscanMatcher, "GATE_MIN", 1)
        monkeypatch.setattr(matcher.HyperscanMatcher, "GATE_GROUP_MIN", 1)
    e = matcher.HyperscanMatcher(MIXED)
    long, short = e._sampled
    assert long.patterns == sorted(p for p in MIXED if len(p) >= 12)
    assert short.patterns == sorted(p for p in MIXED if len(p) < 12)
    find = matcher.FindMatcher(MIXED)
    for filler in (b" ~ ", b"!", b"\n", b"a", b""):
        text = filler.join(MIXED) + filler + b"aaaaaaaaaaaaaaaaaaaaaaaaab"
        assert sorted(e.spans(text)) == sorted(find.spans(text)), filler
    for p in MIXED:
        for around in (b"", b"~", b"~" * 4096):
            assert sorted(e.spans(around + p + around)) == sorted(find.spans(around + p + around)), p
        assert e.spans(b"~" + p[:-1] + b"~" + p[1:]) == find.spans(b"~" + p[:-1] + b"~" + p[1:])
    assert e.spans(b"") == []


@needs_native
@needs_hyperscan
def test_a_set_without_long_literals_is_not_sampled(sampled):
    """Only literals of stride + 7 bytes or more are sampled: a set of short ones stays whole."""
    e = matcher.HyperscanMatcher([b"tiny", b"short-1"])
    assert e._sampled is None and e.spans(b"a tiny short-1") == [(2, 6), (7, 14)]


@pytest.mark.parametrize("escape", [b"", b"\\", b"%", b","])
def test_a_sampled_form_is_masked_at_every_split(sampled, engine, escape):
    """The secret's forms (hex, base32, base64, base85, \\x, %XX, decimal list: long
    literals, sampled on Hyperscan) in a line with or without an escape byte,
    masked under every split and byte by byte, with the held tail equal to the
    oracle's after every byte; on the portable engine, the same."""
    from redactor_engines import assert_exact_under_every_split

    secret = b"s3cr3t-Tok3n-Zq8xv2"
    forms = (secret.hex().encode(), base64.b32encode(secret).rstrip(b"="), base64.b64encode(secret),
             base64.b85encode(secret), base64.a85encode(secret), b"".join(b"\\x%02x" % c for c in secret),
             b"".join(b"%%%02X" % c for c in secret), b", ".join(b"%d" % c for c in secret))
    for form in forms:
        text = b"id=1 " + escape + b" value=" + form + b" end\n"
        expected = naive_redact(text, patterns_for([secret]))
        assert form not in expected and b"######" in expected, form
        assert_exact_under_every_split(text, secret, expected)
    # (the sampled matcher was used: on Hyperscan with the C module, each form without an
    # escape holds one of its literals, the whole hex form or a base-N form's aligned piece)
    if engine is matcher.HyperscanMatcher and matcher._lit_set is not None:
        every = {p for m in sampled for p in m.patterns}
        assert forms[0] in every and all(any(p in form for p in every) for form in forms[:5])
    else:
        assert not sampled
