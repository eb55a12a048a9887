"""The hold (redactor/holds.py) against the naive definition, on both engines:
adversarial pattern sets (case pairs, NUL bytes, line breaks, patterns that
are prefixes of others, long hex forms) and every prefix of adversarial text."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import holds
from paddedcell.redactor.holds import PrefixIndex, _Grams
from redactor_engines import engine  # noqa: F401 (autouse: every test on both engines)


def naive_hold(buf: bytes, patterns, raised: int = 0) -> int:
    """Longest suffix of ``buf`` shorter than the longest pattern (plus ``raised``)
    that starts a pattern."""
    longest = max(map(len, patterns), default=0) + raised
    for length in range(min(len(buf), longest - 1), 0, -1):
        if any(p.startswith(buf[-length:]) for p in patterns):
            return length
    return 0


# Few bytes, so that prefixes, overlaps and shared heads are common: case pairs
# (the fast engine folds case), NUL (Hyperscan's C strings), line breaks (their
# own heads group), space and comma (bytes that cut a tail when a group lacks them).
ALPHABET = b"aAbB\x00\n\r ,9"


def over(alphabet: bytes, low: int, high: int):
    return st.lists(st.sampled_from(list(alphabet)), min_size=low, max_size=high).map(bytes)


@st.composite
def pattern_sets(draw):
    """Patterns of 1 to 40 bytes over a few alphabets, some extending others."""
    alphabets = [ALPHABET, b"ab", b"aA\x00", b"ab\n", b"0123456789abcdef", b"0123456789, ", b"%2F:-", b" \nxy"]
    patterns = []
    for _ in range(draw(st.integers(1, 10))):
        alphabet = draw(st.sampled_from(alphabets))
        p = draw(over(alphabet, 1, 40))
        if patterns and draw(st.booleans()):  # extends another pattern
            p = draw(st.sampled_from(patterns)) + p
        patterns.append(p)
    return patterns


@st.composite
def texts(draw, patterns):
    """Text that repeats the patterns' heads and ends in pieces of them."""
    pieces = []
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            p = draw(st.sampled_from(patterns))
            pieces.append(p[: draw(st.integers(1, len(p)))])
        else:
            pieces.append(draw(over(ALPHABET + b"%2F:-xy", 0, 12)))
    return b"".join(pieces)


FIXED = [
    ([b"abcdefghij"], b"xxabcdefghi"),  # a tail one byte short of the pattern
    ([b"abcdefghij"], b"xxabcdefghij"),  # the whole longest pattern is not held
    ([b"abc", b"abcdefghij"], b"abc"),  # a whole shorter pattern is
    ([b"aaaaaaaaaa"], b"a" * 30),  # a head at every position
    ([b"AbCdEfGhIj", b"abcdefghij"], b"..aBcDeFgHi"),  # a case pair, neither matches
    ([b"\x00" * 8 + b"x"], b"\x00" * 20),
    ([b"ab\ncdefgh", b"abcdefghij"], b"ab\ncdefg"),  # a line break inside a pattern
    ([b"ab cdefghijk"], b"xx ab cdefgh"),  # a space inside a pattern
    ([b"a"], b"aaa"),
    ([b"ab", b"abcdefgh"], b"ab" * 8),
    ([b"abcdefgh"], b"xabcdefg"),  # patterns of exactly HEAD bytes
]


@pytest.mark.parametrize("patterns, text", FIXED)
def test_fixed_cases_at_every_cut(engine, patterns, text):
    index = PrefixIndex(patterns, engine)
    for cut in range(len(text) + 1):
        assert index.hold(text[:cut]) == naive_hold(text[:cut], patterns), text[:cut]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_hold_is_the_longest_suffix_that_starts_a_pattern(engine, data):
    patterns = data.draw(pattern_sets())
    text = data.draw(texts(patterns))
    index = PrefixIndex(patterns, engine)
    # Views and dumps raise maxlen by one (a whole p[:-1] is held there).
    raised = data.draw(st.integers(0, 1))
    index.maxlen += raised
    for cut in range(len(text) + 1):
        assert index.hold(text[:cut]) == naive_hold(text[:cut], patterns, raised), (patterns, text[:cut])


def test_a_near_miss_after_a_held_tail_is_not_held(engine):
    """The index asks the pattern that last held a tail first (its witness):
    a tail that differs from it in its last byte only must still be bisected."""
    patterns = [b"abcdefghijkl", b"abcdefghijXY", b"zz"]
    index = PrefixIndex(patterns, engine)
    for text in (b"xx abcdefghij", b"xx abcdefghiX", b"xx abcdefghijX", b"abcdefghijk", b"abcdefghijkX",
                 b"xx abcdefg", b"xx abcdefX", b"abcdefghijX", b"abcdefghijZ"):
        assert index.hold(text) == naive_hold(text, patterns), text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_hold_does_not_depend_on_the_buffers_asked_before(engine, data):
    """Cuts in any order, each also with its last byte changed: one index answers
    every one as a fresh one would (its witness is only ever a shortcut)."""
    patterns = data.draw(pattern_sets())
    text = data.draw(texts(patterns))
    index = PrefixIndex(patterns, engine)
    for cut in data.draw(st.permutations(range(1, len(text) + 1))):
        for buf in (text[:cut], text[: cut - 1] + data.draw(st.sampled_from([b"a", b"b", b"9", b"\n", b"x"]))):
            assert index.hold(buf) == naive_hold(buf, patterns), (patterns, buf)


def test_long_hex_forms_and_many_patterns_sharing_heads(engine):
    """Forms of 300+ bytes (a secret's hex, %XX) beside thousands of patterns
    that share their first bytes: every tail length, exactly."""
    rng = random.Random(21)
    secret = bytes(rng.randrange(256) for _ in range(170))
    hexed = secret.hex().encode()
    percent = b"".join(b"%%%02X" % c for c in secret)
    decoys = {hexed[: rng.randrange(8, 40)] + bytes(rng.choices(b"0123456789abcdef", k=20)) for _ in range(2000)}
    windows = {hexed[i : i + 12] for i in range(0, 300, 7)}
    patterns = sorted({hexed, percent, hexed.upper(), *decoys, *windows})
    index = PrefixIndex(patterns, engine)
    assert index.maxlen == len(percent) > 500
    prefixes = {p[:k] for p in patterns for k in range(1, len(p) + 1)}

    def naive_hold(buf: bytes, patterns) -> int:  # the same definition, by a set of every prefix
        return next((k for k in range(min(len(buf), index.maxlen - 1), 0, -1) if buf[-k:] in prefixes), 0)

    for form in (hexed, percent, hexed.upper()):
        for length in list(range(1, 40)) + list(range(40, len(form) + 1, 37)) + [len(form) - 1, len(form)]:
            text = b"0123 " + form[:length]
            assert index.hold(text) == naive_hold(text, patterns), (form[:12], length)
    filler = bytes(rng.choices(b"0123456789abcdef \n", k=4000))
    for end in range(3000, 4000, 97):
        text = filler[:end] + hexed[: end % 200]
        assert index.hold(text) == naive_hold(text, patterns), end


def test_an_empty_buffer_and_an_empty_set_hold_nothing(engine):
    assert PrefixIndex([], engine).hold(b"anything") == 0
    assert PrefixIndex([b"abcdefghij"], engine).hold(b"") == 0


@pytest.fixture(params=["c", "python"])
def gram_build(request, monkeypatch):
    """Each build of the gram filter: ``_native.gram_bits`` (skipped without
    the C module) and the Python one."""
    if request.param == "python":
        monkeypatch.setattr(holds, "_gram_bits", None)
    elif holds._gram_bits is None:
        pytest.skip("no C module (or PADDEDCELL_NATIVE=0)")
    return request.param


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(min_size=8, max_size=70), min_size=1, max_size=12))
def test_the_gram_filter_passes_every_gram_of_every_pattern(gram_build, patterns):
    """The hold skips its heads scans when the last 8 bytes are no pattern's
    8-gram: a gram the filter missed would lose a held tail."""
    grams = _Grams.of(patterns)
    for p in patterns:
        for i in range(len(p) - 7):
            assert grams.holds(p[i : i + 8]), (p, i)


def test_the_gram_filter_turns_most_other_bytes_away(gram_build):
    rng = random.Random(8)
    patterns = [rng.randbytes(rng.randrange(8, 200)) for _ in range(300)]
    grams = _Grams.of(patterns)
    others = [rng.randbytes(8) for _ in range(2000)]
    assert sum(map(grams.holds, others)) < 2000 * 0.15
    if gram_build == "python":
        assert _Grams.of([b"x" * (_Grams.BUDGET + 1)]) is None  # past its budget: no filter, every hold scans


def test_the_c_gram_filter_grows_to_keep_its_false_positives_few(monkeypatch):
    """Past 2^24 bits (here 1.3 M distinct grams) a second pass sizes the
    bitmap from the grams counted; :attr:`_Grams.MAX_BITS` caps it."""
    if holds._gram_bits is None:
        pytest.skip("no C module (or PADDEDCELL_NATIVE=0)")
    rng = random.Random(21)
    patterns = [rng.randbytes(1 << 16) for _ in range(20)]
    grams = _Grams.of(patterns)
    assert grams._prime > 1 << 24
    assert sum(map(int.bit_count, grams._bits)) <= _Grams.FILL * grams._prime
    for p in patterns:
        for i in rng.sample(range(len(p) - 7), 2000):
            assert grams.holds(p[i : i + 8])
    others = [rng.randbytes(8) for _ in range(4000)]
    assert sum(map(grams.holds, others)) < 4000 * 0.1
    monkeypatch.setattr(_Grams, "MAX_BITS", 1 << 24)
    assert _Grams.of(patterns)._prime < 1 << 24
