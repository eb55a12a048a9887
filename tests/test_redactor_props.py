"""Property tests: any secrets, any text, any chunking — against the slow oracle."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import ShortSecretWarning, StreamRedactor, redact
from paddedcell.redactor import matcher
from paddedcell.redactor.oracle import naive_held, naive_redact, patterns_for
from paddedcell.redactor.variants import Variants, expand
from redactor_engines import engine  # noqa: F401 (autouse: every test on both engines)

pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")


MASK = b"######"
# A small alphabet makes overlaps, self-overlaps and prefixes common. No "#":
# a secret inside the mask could not be kept out of the output (see docstring).
ALPHABET = b"abc\n\r%+/=\x00\xc3\xa9\xff"

def text_over(alphabet: bytes, min_size: int, max_size: int):
    return st.lists(st.sampled_from(list(alphabet)), min_size=min_size, max_size=max_size).map(bytes)


short_secret = text_over(ALPHABET, 1, 5)
long_secret = text_over(ALPHABET, 8, 14)
unicode_secret = st.text(alphabet="aé€\n😀b", min_size=2, max_size=9)
secret_lists = st.lists(st.one_of(short_secret, long_secret, unicode_secret), min_size=1, max_size=4)


@st.composite
def planted(draw):
    """Secrets, a text with secrets and their variants planted, and a chunking."""
    secrets = draw(secret_lists)
    variants = draw(st.sampled_from([True, False]))
    raw = [s.encode() if isinstance(s, str) else s for s in secrets]
    forms = sorted(patterns_for(raw, variants=True))  # plant variants even when off
    pieces = draw(
        st.lists(
            st.one_of(text_over(ALPHABET, 0, 6), st.sampled_from(forms), st.sampled_from(raw)),
            max_size=8,
        )
    )
    data = b"".join(pieces)
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=6)))
    else:
        cuts = list(range(1, len(data)))  # one byte per feed
    return secrets, variants, data, cuts


def chunks_of(data: bytes, cuts) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted())
@example(([b"secsec", b"secret"], False, b"secsecret", [6]))
@example(([b"aab"], False, b"aaab", [2]))
@example(([b"abab"], False, b"abababab", [1, 3, 5]))
def test_stream_equals_oracle_under_any_chunking(case):
    secrets, variants, data, cuts = case
    patterns = patterns_for(secrets, variants=variants)
    expected = naive_redact(data, patterns, MASK)
    r = StreamRedactor(secrets, mask=MASK, variants=variants)
    seen = b""
    out = []
    for chunk in chunks_of(data, cuts):
        out.append(r.feed(chunk))
        seen += chunk
        assert r.held == naive_held(seen, patterns)  # minimal, never more
    out.append(r.flush())
    got = b"".join(out)
    assert got == expected
    assert redact(data, secrets, mask=MASK, variants=variants) == expected
    for p in patterns:
        assert p not in got


@settings(max_examples=200, deadline=None)
@given(
    secrets=st.lists(st.binary(min_size=1, max_size=12).filter(lambda s: b"#" not in s), min_size=1, max_size=5),
    data=st.binary(max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=5),
)
def test_arbitrary_bytes(secrets, data, cuts):
    cuts = sorted({c for c in cuts if c <= len(data)})
    patterns = patterns_for(secrets)
    expected = naive_redact(data, patterns)
    r = StreamRedactor(secrets)
    got = b"".join(r.feed(c) for c in chunks_of(data, cuts)) + r.flush()
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(
    first=st.lists(long_secret, min_size=1, max_size=3),
    later=st.lists(long_secret, min_size=1, max_size=3),
    before=text_over(ALPHABET, 0, 30),
    after=st.lists(st.one_of(text_over(ALPHABET, 0, 6), long_secret), max_size=6),
)
def test_add_secrets_masks_everything_after(first, later, before, after):
    """Secrets added mid-stream never appear in output produced after the call."""
    r = StreamRedactor(first, variants=False)
    r.feed(before)
    r.add_secrets(later)
    tail = b"".join(after) + b"".join(later)
    got = r.feed(tail) + r.flush()
    # Output produced after the call holds no secret, old or new: every
    # occurrence that is not already emitted starts in the held tail or later.
    for s in first + later:
        assert s not in got


@settings(max_examples=150, deadline=None)
@given(
    secrets=st.lists(text_over(b"abcdefgh", 8, 16), min_size=1, max_size=30),
    data=st.lists(st.one_of(text_over(b"abcdefgh", 0, 20), text_over(b"abcdefgh", 8, 16)), max_size=10),
)
def test_engines_agree(secrets, data):
    text = b"".join(data) + b"".join(secrets[:2])
    pats = sorted(patterns_for(secrets, variants=True))
    ref = sorted(set(matcher.FindMatcher(pats).spans(text)))
    e = matcher.ENGINE(pats)  # each engine in turn (the module's autouse fixture)
    assert sorted(set(e.spans(text))) == ref
    assert e.hold(text) == matcher.FindMatcher(pats).hold(text)


def test_warning_is_a_user_warning_category():
    assert issubclass(ShortSecretWarning, UserWarning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        StreamRedactor([b"ab"])
    assert [w.category for w in caught] == [ShortSecretWarning]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 60),
    variants=st.booleans(),
    chunk_sizes=st.lists(st.sampled_from([1, 7, 4096, 5000, 65536, 70000]), min_size=1, max_size=4),
)
def test_realistic_sizes(seed, k, variants, chunk_sizes):
    """Real-size secrets and reads, planted at random offsets."""
    import random

    rng = random.Random(seed)
    alnum = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    secrets = [bytes(rng.choices(alnum, k=rng.choice([8, 12, 16, 24, 40]))) for _ in range(k)]
    patterns = patterns_for(secrets, variants=variants)  # literals, and the views in .views
    text = bytearray(rng.randbytes(150_000).translate(bytes(32 + i % 95 for i in range(256))))
    for _ in range(40):
        p = rng.choice(sorted(patterns))
        at = rng.randrange(len(text) - len(p))
        text[at : at + len(p)] = p
    data = bytes(text)
    expected = naive_redact(data, patterns)
    r = StreamRedactor(secrets, variants=variants)
    out, i, n = [], 0, 0
    while i < len(data):
        # Small reads for the first 3000 feeds only, so 1-byte reads stay quick.
        size = chunk_sizes[n % len(chunk_sizes)] if n < 3000 else len(data)
        out.append(r.feed(data[i : i + size]))
        i += size
        n += 1
    out.append(r.flush())
    assert b"".join(out) == expected


def _naive_prefix_hold(buf: bytes, patterns: list[bytes]) -> int:
    """Longest suffix of ``buf`` shorter than the longest pattern that starts a pattern."""
    longest = max(map(len, patterns))
    for length in range(min(len(buf), longest - 1), 0, -1):
        if any(p.startswith(buf[-length:]) for p in patterns):
            return length
    return 0


CASED = b"aAbBqQeE\\\x00:"


@st.composite
def case_pairs(draw):
    """Patterns equal but for ASCII case (folded into one caseless expression by
    the fast engine), with NUL and backslash-E (not quotable), and a text full
    of case variants that are not patterns."""
    base = draw(st.lists(text_over(CASED, 1, 9), min_size=1, max_size=6))
    flips = [bytes.upper, bytes.lower, bytes.swapcase, bytes.title]
    patterns = set(base)
    for p in base:
        patterns.update(f(p) for f in draw(st.lists(st.sampled_from(flips), max_size=3)))
    pieces = [f(p) for p in base for f in flips]
    text = b"".join(draw(st.lists(st.one_of(text_over(CASED, 0, 6), st.sampled_from(pieces)), max_size=14)))
    return sorted(patterns), text


@settings(max_examples=120, deadline=None)
@given(case_pairs())
def test_engines_agree_on_patterns_equal_but_for_case(case):
    patterns, text = case
    e = matcher.ENGINE(patterns)  # each engine in turn (the module's autouse fixture)
    assert sorted(set(e.spans(text))) == sorted(set(matcher.FindMatcher(patterns).spans(text)))
    for cut in range(len(text) + 1):
        assert e.hold(text[:cut]) == _naive_prefix_hold(text[:cut], patterns), cut


def test_the_fast_engine_folds_case_pairs_and_confirms_each_hit():
    if matcher.HYPERSCAN_PROBLEM is not None:
        pytest.skip(f"pyperscan unavailable here ({matcher.HYPERSCAN_PROBLEM})")
    pats = [b"6a6B7c", b"6A6B7C", b"6a6b7c", b"plain-Secret"]
    e = matcher.HyperscanMatcher(pats)
    assert e._confirm is not None  # the three hex forms are one caseless expression
    text = b"6a6B7c 6A6b7C 6A6B7C plain-secret plain-Secret 6a6b7c"
    assert sorted(e.spans(text)) == [(0, 6), (14, 20), (34, 46), (47, 53)]
