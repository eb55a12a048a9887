"""StreamRedactor: table tests run whole, byte by byte and split at every offset."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import warnings
from urllib.parse import quote

import pytest

from paddedcell.redactor import RedactorStateError, ShortSecretWarning, StreamRedactor, Variants, redact
from paddedcell.redactor import matcher
from paddedcell.redactor.oracle import naive_held, naive_redact, patterns_for
from paddedcell.redactor.variants import base64_inner_forms, expand
from redactor_engines import NEEDS_HYPERSCAN

M = b"######"
pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")


@pytest.fixture(autouse=True, params=[
    pytest.param((matcher.HyperscanMatcher, True), id="hyperscan", marks=NEEDS_HYPERSCAN),
    pytest.param((matcher.AhoMatcher, True), id="portable"),
    pytest.param((matcher.HyperscanMatcher, False), id="hyperscan-large-set-paths", marks=NEEDS_HYPERSCAN)])
def engine(request, monkeypatch):
    """Run every test on the fast engine and on the portable one, and once
    with the path a large pattern set takes (literals and fragment grams
    scanned apart)."""
    from paddedcell.redactor import stream as stream_module

    cls, small = request.param
    monkeypatch.setattr(matcher, "ENGINE", cls)
    if not small:
        monkeypatch.setattr(matcher.Matcher, "MERGE_LIMIT", 0)
    stream_module._cache.clear()
    yield cls
    stream_module._cache.clear()


def stream(r: StreamRedactor, chunks) -> bytes:
    return b"".join(r.feed(c) for c in chunks) + r.flush()


def splits(data: bytes, cuts) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def quiet(secrets, **kw) -> StreamRedactor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortSecretWarning)
        return StreamRedactor(secrets, **kw)


# (name, secrets, input, expected one-shot output) — variants off unless noted.
CASES = [
    ("plain", [b"password123"], b"pw=password123;", b"pw=" + M + b";"),
    ("twice", [b"hunter22"], b"hunter22 hunter22", M + b" " + M),
    ("adjacent occurrences join", [b"abcdef"], b"abcdefabcdef", M),
    ("overlapping secrets", [b"secsec", b"secret"], b"xsecsecretx", b"x" + M + b"x"),
    ("nested secret", [b"android", b"androiddebugkey"], b"[androiddebugkey]", b"[" + M + b"]"),
    ("prefix of another", [b"Sam", b"Samwise"], b"Samwise and Sam", M + b" and " + M),
    ("self-overlapping", [b"aab"], b"aaab", b"a" + M),
    ("self-overlapping tower", [b"secsecret"], b"secsecsecret", b"sec" + M),
    ("periodic", [b"abab"], b"ababab", M),
    ("tower of secrets", [b"a1", b"a1a1", b"1a1a1"], b"xa1a1a1a1x", b"x" + M + b"x"),
    ("binary", [b"\x00\xff\xfe\x00"], b"\x01\x00\xff\xfe\x00\x02", b"\x01" + M + b"\x02"),
    ("invalid utf-8 around", [b"token-xyz"], b"\xc3(token-xyz\xa0", b"\xc3(" + M + b"\xa0"),
    ("str secret non-ascii", ["pässwörd"], "a pässwörd b".encode(), b"a " + M + b" b"),
    ("near miss", [b"password123"], b"password12 password1234", b"password12 " + M + b"4"),
    ("empty input", [b"abcdef"], b"", b""),
    ("no secrets", [], b"anything", b"anything"),
    ("multi-line", [b"line1\nline2"], b">line1\nline2<", b">" + M + b"<"),
]


@pytest.mark.parametrize("name,secrets,data,expected", CASES, ids=[c[0] for c in CASES])
def test_table_whole_and_byte_by_byte(name, secrets, data, expected):
    assert redact(data, secrets, variants=False) == expected
    assert naive_redact(data, patterns_for(secrets, variants=False)) == expected
    assert stream(quiet(secrets, variants=False), [data]) == expected
    r = quiet(secrets, variants=False)
    assert stream(r, [data[i : i + 1] for i in range(len(data))]) == expected


TRICKY = [
    ([b"secsec", b"secret"], b"..secsecret..secsec..secret.."),
    ([b"aab", b"ab", b"b"], b"aaabab xaab aabaab"),
    ([b"abcabd", b"cab"], b"abcabcabd abcab cabd"),
    ([b"12345678", b"34567890"], b"1234567890 12345678 345678"),
    ([b"aaaa"], b"aaaaaaa baaa aaaa"),
    ([b"password123"], b"pass password123 passwor password123password123"),
    ([b"xyzzy-key-01", b"key-01-xyzzy"], b"xyzzy-key-01-xyzzy-key-01"),
]


@pytest.mark.parametrize("secrets,data", TRICKY)
@pytest.mark.parametrize("variants", [False, True])
def test_exhaustive_splits(secrets, data, variants):
    """Every single split and every pair of splits gives the one-shot output."""
    expected = naive_redact(data, patterns_for(secrets, variants=variants))
    assert redact(data, secrets, variants=variants) == expected
    n = len(data)
    for k in (1, 2):
        for cuts in itertools.combinations(range(1, n), k):
            got = stream(quiet(secrets, variants=variants), splits(data, cuts))
            assert got == expected, (cuts, got)


@pytest.mark.parametrize("secrets,data", TRICKY)
def test_hold_back_is_minimal_after_every_byte(secrets, data):
    patterns = patterns_for(secrets, variants=True)
    r = quiet(secrets)
    seen = b""
    out = b""
    for i in range(len(data)):
        out += r.feed(data[i : i + 1])
        seen += data[i : i + 1]
        assert r.held == naive_held(seen, patterns), seen
    assert out + r.flush() == naive_redact(data, patterns)
    assert r.held == 0


def test_minimal_hold_examples():
    r = StreamRedactor([b"password123"])
    assert r.feed(b"log line ending in pass") == b"log line ending in "
    assert r.held == 4
    assert r.feed(b"ive") == b"passive"  # no longer a prefix: released at once
    assert r.held == 0
    # A complete secret that is also a prefix of a longer one is masked at once.
    r = StreamRedactor([b"token123", b"token12345"], variants=False)
    assert r.feed(b"a token123") == b"a " + M
    assert r.held == 0
    assert r.feed(b"45 b") == b" b"  # the longer match extends the same mask
    assert r.flush() == b""


def test_flush_releases_partial_match():
    r = StreamRedactor([b"password123"])
    assert r.feed(b"x password12") == b"x "
    assert r.flush() == b"password12"
    assert r.held == 0


def test_mask_run_stays_open_across_feeds():
    r = StreamRedactor([b"abcdefgh", b"efghijkl"], variants=False)
    assert r.feed(b"abcdefgh") == M
    assert r.feed(b"ijkl!") == b"!"  # overlapping continuation: no second mask
    r = StreamRedactor([b"abcdefgh", b"ijklmnop"], variants=False)
    assert r.feed(b"abcdefgh") == M
    assert r.feed(b"ijklmnop.") == b"."  # touching run: still one mask
    assert redact(b"abcdefghijklmnop.", [b"abcdefgh", b"ijklmnop"]) == M + b"."


def test_add_secrets_mid_stream_applies_to_held_tail():
    r = StreamRedactor([b"password123"], variants=False)
    assert r.feed(b"one pass") == b"one "
    r.add_secrets([b"passphrase9"])
    assert r.held == 4
    assert r.feed(b"phrase9 two") == M + b" two"
    assert r.feed(b" password123") == b" " + M
    assert r.flush() == b""


def test_add_secrets_rejects_single_string():
    with pytest.raises(TypeError):
        StreamRedactor().add_secrets("password123")


def test_custom_mask_and_bytes_mask():
    assert redact(b"a hunter22 b", ["hunter22"], mask="[REDACTED]") == b"a [REDACTED] b"
    assert redact(b"a hunter22 b", ["hunter22"], mask=b"**") == b"a ** b"


def test_empty_and_duplicate_secrets_are_ignored():
    r = StreamRedactor(["", b"", "hunter22", b"hunter22"], variants=False)
    assert r.secret_count == 1
    assert stream(r, [b"hunter22"]) == M


def test_bad_secret_type():
    with pytest.raises(TypeError):
        StreamRedactor([123])


def test_short_secret_warns_without_value():
    with pytest.warns(ShortSecretWarning) as record:
        r = StreamRedactor(["Zq9"])
    assert len(record) == 1
    message = str(record[0].message)
    assert "Zq9" not in message and "3 bytes" in message
    assert stream(r, [b"aZq9b"]) == b"a" + M + b"b"


def test_long_enough_secret_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StreamRedactor(["123456"])


def test_short_secret_has_no_variants():
    r = quiet(["abc"])
    assert r.pattern_count == 1
    # "YWJj" (base64 of "abc") is ordinary output for a 3-byte secret.
    assert redact(b"YWJj 616263", ["abc"]) == b"YWJj 616263"


def test_impossible_state_fails_closed():
    r = StreamRedactor([b"abcdefgh"], variants=False)
    r.feed(b"xx")
    r._open = False
    r._pos = r._base + 2  # pretend plain bytes of the buffer were emitted
    r._buf = b"Xabcdefgh"
    with pytest.raises(RedactorStateError):
        r._advance(b"Xabcdefgh" + b"abcdefgh", final=True)


# -- variants --------------------------------------------------------------

SECRET = "s3cr3t/p@ss+wörd=1\n"
RAW = SECRET.encode()


def test_base64_at_every_alignment_and_wrapping_text():
    for prefix in (b"", b"u", b"us", b"usr:", b"user:"):
        for suffix in (b"", b"\n", b"x", b"xy"):
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                text = b"out " + enc(prefix + RAW + suffix) + b" end"
                out = redact(text, [SECRET])
                for inner in base64_inner_forms(RAW):
                    assert inner not in out
                    assert inner.translate(bytes.maketrans(b"+/", b"-_")) not in out
                assert out.startswith(b"out ") and out.endswith(b" end") and M in out


def test_base64_inner_forms_are_stable():
    """Inner form ``a`` appears in base64 of the secret after any 3k+a bytes, before anything."""
    forms = base64_inner_forms(RAW)
    for a, form in enumerate(forms):
        for lead_len in (a, a + 3, a + 6):
            for fill in (b"\x00", b"\xff", b"Q"):
                for trail in (b"", b"\x00", b"\xff\xff", b"abc"):
                    assert form in base64.b64encode(fill * lead_len + RAW + trail)
    # and it is as long as the stable part can be: 8 bits per 6-bit character
    assert all(len(f) >= (8 * len(RAW)) // 6 - 2 for f in forms)


@pytest.mark.parametrize(
    "encoded",
    [
        RAW.replace(b"\n", b"\r\n"),
        quote(RAW, safe="").encode(),
        quote(RAW, safe="").lower().encode(),
        json.dumps(SECRET)[1:-1].encode(),
        json.dumps(SECRET, ensure_ascii=False)[1:-1].encode(),
        RAW.hex().encode(),
        RAW.hex().upper().encode(),
    ],
    ids=["crlf", "url", "url-lower", "json", "json-utf8", "hex", "HEX"],
)
def test_each_variant_is_masked(encoded):
    assert redact(b"<" + encoded + b">", [SECRET]) == b"<" + M + b">"
    assert redact(b"<" + encoded + b">", [SECRET], variants=False) == b"<" + encoded + b">"


def test_variants_switch_individually():
    only_hex = Variants(crlf=False, base64=False, url=False, json=False, hex=True)
    hexed = RAW.hex().encode()
    b64 = base64.b64encode(RAW)
    assert redact(hexed + b" " + b64, [SECRET], variants=only_hex).startswith(M + b" ")
    assert b64 in redact(hexed + b" " + b64, [SECRET], variants=only_hex)
    assert expand(RAW, Variants.none()) == set()


def test_variants_coerce_rejects_other_types():
    with pytest.raises(TypeError):
        StreamRedactor(["hunter22"], variants="yes")


def test_json_variant_skipped_for_non_utf8():
    forms = expand(b"\xff\xfe\x00abcdefg", dataclasses.replace(Variants.none(), json=True))
    assert forms == set()


# -- engines ---------------------------------------------------------------


def test_engines_agree_with_each_other():
    pats = sorted(patterns_for([b"secsec", b"secret", b"aab", b"xyzzy-key-01"], variants=True))
    data = b"aaab secsecret xyzzy-key-01 " + b"xyzzy-key-01".hex().encode() + b" secsec"
    ref = sorted(set(matcher.FindMatcher(pats).spans(data)))
    for engine in matcher.ENGINES:
        try:
            e = engine(pats)
        except ValueError:
            continue  # the engine refuses this pattern set (too short to sample)
        assert sorted(set(e.spans(data))) == ref, engine.__name__
        for i in range(len(data)):
            assert e.hold(data[:i]) == matcher.FindMatcher(pats).hold(data[:i])


def test_long_secret_hold_uses_regex_path_and_stays_minimal():
    """A PEM-sized secret makes every tail check long; still exact and minimal."""
    key = b"-----BEGIN KEY-----\n" + bytes(range(48, 123)) * 5 + b"\n-----END KEY-----"
    assert len(key) > 256
    patterns = patterns_for([key])
    data = b"log: " + key[:200] + b" retry: " + key + b" hex " + key.hex().encode()[:300]
    r = StreamRedactor([key])
    seen, out = b"", b""
    for i in range(0, len(data), 37):
        out += r.feed(data[i : i + 37])
        seen = data[: i + 37]
        assert r.held == naive_held(seen, patterns)
    out += r.flush()
    assert out == naive_redact(data, patterns)
    assert key not in out


def test_one_shot_warning_points_at_caller():
    with pytest.warns(ShortSecretWarning) as record:
        redact(b"xabcx", ["abc"])
    assert record[0].filename == __file__


def test_empty_mask_is_refused():
    # With "" as mask, "ab" + "abc" + "c" would leave "abc" in the output.
    with pytest.raises(ValueError, match="mask"):
        StreamRedactor(["abcdefgh"], mask="")


def test_fresh_shares_the_matcher_and_starts_an_independent_stream():
    proto = StreamRedactor(["s3cret-value-1"])
    assert proto.feed(b"held: s3cret-va") == b"held: "
    a, b = proto.fresh(), proto.fresh()
    assert a._engine is proto._engine and a.held == 0  # no rebuild, no inherited tail
    b.add_secrets(["other-secret-2"])
    for r, data, expected in [(a, b"x s3cret-value-1 other-secret-2", b"x ###### other-secret-2"),
                              (b, b"x s3cret-value-1 other-secret-2", b"x ###### ######")]:
        out = b"".join(r.feed(bytes([c])) for c in data) + r.flush()
        assert out == expected
    assert proto.flush() == b"s3cret-va"  # the prototype's own stream is untouched


def test_add_secrets_masks_a_value_whose_start_is_held():
    """Issue 10: a value learnt mid-run is masked from its first byte not yet emitted."""
    r = StreamRedactor([b"tok-aaaaaaaaaaaa"])  # holds any tail that starts like "tok-"
    assert r.feed(b"x tok-") == b"x "
    assert r.held == 4
    r.add_secrets([b"tok-bbbbbbbbbbbb"])
    assert r.feed(b"bbbbbbbbbbbb") == M  # its first four bytes were held: masked with it
    assert r.feed(b" " + b"tok-bbbbbbbbbbbb".hex().encode()) == b" " + M  # its variants too
    assert r.flush() == b""


def test_add_secrets_mid_stream_after_emitted_bytes_cannot_recall():
    r = StreamRedactor([b"password123"], variants=False)
    assert r.feed(b"abc-new-secret") == b"abc-new-secret"
    r.add_secrets([b"new-secret-value"])
    assert r.feed(b"-value new-secret-value") == b"-value " + M
    assert r.flush() == b""


def test_matchers_are_cached_by_secret_set():
    from paddedcell.redactor import stream as stream_module

    a = StreamRedactor([b"cache-secret-1", b"cache-secret-2"])
    b = StreamRedactor([b"cache-secret-2", b"cache-secret-1"])  # same set, other order
    assert a._engine is b._engine
    c = StreamRedactor([b"cache-secret-1"])
    assert c._engine is not a._engine
    c.add_secrets([b"cache-secret-2"])  # grows into the cached set
    assert c._engine is a._engine
    assert StreamRedactor([b"cache-secret-1", b"cache-secret-2"], variants=False)._engine is not a._engine
    key_bytes = b"".join(stream_module._cache)
    assert b"cache-secret" not in key_bytes  # keys are digests, not secrets


def test_add_secrets_mid_stream_searches_a_small_matcher_beside_the_built_one():
    """A value learnt mid-run is not a rebuild of the whole set (that ran on the
    daemon's loop): the new secrets get a matcher of their own, searched beside
    the old one, until MAX_PARTS; then the whole set is rebuilt once."""
    from paddedcell.redactor import stream as stream_module

    old = [f"old-secret-value-{i:04d}-x9Kq".encode() for i in range(30)]
    r = StreamRedactor(old)
    built = r._engine
    assert r.feed(b"tail: ") == b"tail: "
    new = b"new-secret-Zq8xv2NmP4tR"
    r.add_secrets([new])
    assert isinstance(r._engine, matcher.Union) and r._engine.parts[0] is built
    out = r.feed(new + b" " + new.hex().encode() + b" " + new[2:16] + b" " + old[3]) + r.flush()
    assert out == M + b" " + M + b" " + M + b" " + M, out
    for i in range(stream_module.MAX_PARTS - 1):  # parts: 2, 3, 4, then one rebuild
        r.add_secrets([f"more-secret-{i}-Kq2mZp9LwR4t".encode()])
    assert not isinstance(r._engine, matcher.Union)  # rebuilt whole
    assert r.secret_count == 30 + stream_module.MAX_PARTS
    assert r.feed(b"x more-secret-0-Kq2mZp9LwR4t y") + r.flush() == b"x " + M + b" y"


def test_the_cache_is_bounded_by_patterns_and_keeps_the_newest(monkeypatch):
    from paddedcell.redactor import stream as stream_module

    stream_module._cache.clear()
    monkeypatch.setattr(stream_module, "CACHE_PATTERNS", 1)
    a = StreamRedactor([b"bounded-cache-secret-1"])
    assert len(stream_module._cache) == 1
    StreamRedactor([b"bounded-cache-secret-2"])
    assert len(stream_module._cache) == 1  # the older set was evicted, the newest kept
    assert StreamRedactor([b"bounded-cache-secret-1"])._engine is not a._engine  # rebuilt


def test_a_secret_too_long_for_hyperscan_keeps_the_rest_on_it(engine):
    """Hyperscan refuses expressions of 16 000 characters; such forms are found
    with bytes.find, and the set does not fall back to the portable engine."""
    import os

    big = base64.b64encode(os.urandom(9000))  # 12 000 bytes: its hex and URL forms are too long
    small = b"small-secret-value-42"
    text = b"a " + big + b" b " + big.hex().encode() + b" c " + small + b" d " + big[100:120]
    expected = naive_redact(text, patterns_for([big, small]))
    assert expected == b"a " + M + b" b " + M + b" c " + M + b" d " + M
    r = StreamRedactor([big, small])
    if engine is matcher.HyperscanMatcher:
        assert isinstance(r._engine.literal, matcher.HyperscanMatcher)
        assert r._engine.literal._long is not None
    out = b"".join(r.feed(text[i : i + 4096]) for i in range(0, len(text), 4096)) + r.flush()
    assert out == expected
