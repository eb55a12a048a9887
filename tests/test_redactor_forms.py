"""Each form a secret takes in real terminal output: produced by the real tool
where one exists, masked whole, through every split, with minimal hold-back,
and left alone when its variant is off."""

from __future__ import annotations

import base64
import dataclasses
import html
import shutil
import subprocess
import warnings
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import ShortSecretWarning, StreamRedactor, Variants, matcher, redact
from paddedcell.redactor.oracle import naive_held, naive_redact, patterns_for
from paddedcell.redactor import stream as stream_module
from paddedcell.redactor.variants import fragments
from redactor_engines import assert_exact_under_every_split, engine  # noqa: F401 (autouse: every test on both engines)

M = b"######"
pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")



def bash(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script, "bash", *args], capture_output=True, check=True)


def only_off(field: str) -> Variants:
    """Every variant on except ``field`` and fragments (which would mask part of it)."""
    return dataclasses.replace(Variants(), **{field: False, "fragments": False})


def check(secret: bytes, shown: bytes, field: str | None):
    """``shown`` (a form of ``secret`` with text around it) is masked whole, exactly
    as the oracle says, under every single split and byte by byte."""
    text = b"<< " + shown + b" >>"
    patterns = patterns_for([secret])
    expected = naive_redact(text, patterns)
    assert expected == b"<< " + M + b" >>", expected
    assert_exact_under_every_split(text, secret, expected)
    if field is not None:  # the variant is what masks it
        assert shown in redact(text, [secret], variants=only_off(field))


MESSY = b"s3cr'et \"p@ss\" $HOME `id` \\n!;^&<>|*?~=x"


def test_set_x_single_quote_form():
    trace = bash("set -x; : \"$1\"", MESSY.decode()).stderr
    shown = trace.split(b"+ : ", 1)[1].rstrip(b"\n")
    assert b"'\\''" in shown
    check(MESSY, shown[1:-1], "shell")


def test_declare_p_double_quote_form():
    out = bash('v=$1; declare -p v', MESSY.decode()).stdout
    shown = out.split(b'v="', 1)[1].rsplit(b'"', 1)[0]
    assert b'\\"' in shown and b"\\$" in shown and b"\\`" in shown
    check(MESSY, shown, "shell")


def test_printf_q_form():
    shown = bash('printf %q "$1"', MESSY.decode()).stdout
    assert b"\\;" in shown and b"\\!" in shown
    check(MESSY, shown, "shell")


def test_python_bytes_repr_of_non_ascii_secret():
    secret = "pässwörd-Zürich-42".encode()
    shown = repr(secret)[2:-1].encode()
    assert b"\\xc3\\xa4" in shown
    check(secret, shown, "escapes")


def test_backslash_escapes_both_ways():
    written = b"tab\\there\\x41-value-9"  # as typed in a config file
    printed = bash('printf %b "$1"', written.decode()).stdout
    assert printed == b"tab\there\x41-value-9"
    check(written, printed, "escapes")
    raw = b"line\tone\x01two-long"
    check(raw, b"line\\tone\\x01two-long", "escapes")


@pytest.mark.parametrize("encode", [
    lambda s: html.escape(s.decode()).encode(),
    lambda s: s.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;")
                .replace(b'"', b"&quot;").replace(b"'", b"&apos;"),
    lambda s: s.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;")
                .replace(b'"', b"&#34;").replace(b"'", b"&#39;"),
], ids=["html.escape", "xml-apos", "numeric"])
def test_entities(encode):
    secret = b"p<w>&d'q\"-entity-1"
    check(secret, encode(secret), "entities")


def test_doubling():
    secret = b"it's-a-'secret'-42"
    check(secret, secret.replace(b"'", b"''"), "doubling")
    dollar = b"pa$$word$with$dollars"
    check(dollar, dollar.replace(b"$", b"$$"), "doubling")


def test_encode_uri_component_keeps_some_characters_literal():
    secret = b"a!b~c*d'e(f)g h/i?j=k"
    shown = quote(secret, safe="-_.!~*'()").encode()  # JavaScript's encodeURIComponent
    assert b"!" in shown and b"%20" in shown
    check(secret, shown, "url")
    check(secret, shown.replace(b"%2F", b"%2f").replace(b"%3F", b"%3f").replace(b"%3D", b"%3d")
          .replace(b"%20", b"%20"), "url")


def test_multi_line_secret_through_a_pty_and_unquoted_echo():
    secret = b"-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5P  UFFSU1RVVldY\nWVphYmNkZWZnaGlq\n-----END KEY-----"
    check(secret, secret.replace(b"\n", b"\r\r\n"), "crlf")
    echoed = bash("echo $1", secret.decode()).stdout.rstrip(b"\n")
    assert b"\n" not in echoed and b"  " not in echoed
    check(secret, echoed, "crlf")
    r = StreamRedactor([secret])
    line = b"WVphYmNkZWZnaGlq"  # one line alone (e.g. grep, head)
    assert r.feed(b"> " + line + b" <") + r.flush() == b"> " + M + b" <"


def test_fragments_slice_and_truncated_tail():
    v = "Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua"
    check(v.encode(), bash('echo -n "${1:1}"', v).stdout, "fragments")
    check(v.encode(), bash('printf "%s" "${1:0:29}"', v).stdout, "fragments")
    r = StreamRedactor([v])
    assert r.feed(b"x " + v[:11].encode() + b" y") + r.flush() == b"x " + v[:11].encode() + b" y"  # 11 < 12


def test_fragment_min_setting():
    v = b"Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua"
    assert redact(b"[" + v[3:17] + b"]", [v], fragment_min=16) == b"[" + v[3:17] + b"]"
    assert redact(b"[" + v[3:19] + b"]", [v], fragment_min=16) == b"[" + M + b"]"
    with pytest.raises(ValueError):
        StreamRedactor([v], fragment_min=4)


def test_fragments_are_only_distinctive():
    header = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    payload = base64.urlsafe_b64encode(b'{"sub":"agent-7","scope":"deploy"}').rstrip(b"=")
    jwt = header + b"." + payload + b".Qm9ndXMtc2lnbmF0dXJlLXZhbHVlLTEyMzQ"
    grams = fragments([jwt], 12)
    signature = len(header) + len(payload) + 2
    assert grams and all(jwt.find(g) + 12 - signature >= 8 for g in grams)  # 8+ signature bytes each
    other = header + b"." + base64.urlsafe_b64encode(b'{"sub":"someone-else"}').rstrip(b"=") + b".c2lnLW90aGVy"
    log = b"token=" + other + b"\n"
    assert redact(log, [jwt]) == log  # another JWT in a log is not masked
    key = b"ghp_x7Kq2mZp9LwR4tVb8NcY3dHf6JsG"
    assert min(len(g) - g.count(b"ghp_") * 4 for g in fragments([key], 12)) == 8
    assert redact(b"ghp_x7Kq2mZzzzzzzzzzz", [key]) == b"ghp_x7Kq2mZzzzzzzzzzz"
    a, b = b"shared-middle-XYZ-Kq2mZp9LwR4t", b"other-start-shared-middle-XYZ-77"
    assert not any(g in b for g in fragments([a, b], 12) if g in a)  # a window in both is nobody's


def test_secret_starting_with_a_mask_byte_does_not_reappear_at_the_joint():
    v = "#Tok3n-x9Kq2mZp"  # 15 bytes: no fragments to help
    out = bash('printf "%s%s" "$1" "${1:1}"', v).stdout
    for variants in (True, False):
        got = redact(out, [v], variants=variants)
        assert v.encode() not in got, got
    w = "x9Kq2mZp-Tok3n#"  # ends with the mask's first byte
    got = redact(bash('printf "%s%s" "${1:0:14}" "$1"', w).stdout, [w])
    assert w.encode() not in got


ALPHA = b"abcdefghij#"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secrets=st.lists(st.lists(st.sampled_from(list(ALPHA)), min_size=2, max_size=24).map(bytes)
                     .filter(lambda s: s.strip(b"#")), min_size=1, max_size=3),
    pieces=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 20), st.integers(0, 20)), max_size=6),
    noise=st.lists(st.lists(st.sampled_from(list(ALPHA)), max_size=4).map(bytes), max_size=6),
    cut=st.integers(0, 200),
)
def test_masked_output_never_contains_a_secret_or_form(secrets, pieces, noise, cut):
    """Slices of secrets (fragments), mask bytes and noise, in any order and split:
    exact against the oracle, and no pattern survives, also where a mask meets text."""
    parts = []
    for (which, a, b), n in zip(pieces, noise + [b""] * len(pieces)):
        s = secrets[which % len(secrets)]
        parts += [s[min(a, b):max(a, b)] or s, n]
    data = b"".join(parts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortSecretWarning)
        patterns = patterns_for(secrets, fragment_min=8)
        expected = naive_redact(data, patterns)
        r = StreamRedactor(secrets, fragment_min=8)
    cut = min(cut, len(data))
    assert r.feed(data[:cut]) + r.feed(data[cut:]) + r.flush() == expected
    for p in patterns:
        assert p not in expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12), shared=st.booleans(),
       chunk=st.sampled_from([1, 5, 64, 4096]))
def test_fragments_by_sampling_equal_the_oracle(seed, k, shared, chunk):
    """Random slices of real-size secrets (some sharing long runs, so that some
    windows have no unique gram and fall back to literals), fed in chunks."""
    import random

    rng = random.Random(seed)
    alnum = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    common = bytes(rng.choices(alnum, k=20))
    secrets = []
    for _ in range(k):
        s = bytes(rng.choices(alnum, k=rng.choice([16, 20, 32, 45])))
        if shared and rng.random() < 0.5:
            cut = rng.randrange(len(s))
            s = s[:cut] + common[: rng.randrange(8, 20)] + s[cut:]
        secrets.append(s)
    parts = []
    for _ in range(12):
        s = rng.choice(secrets)
        a = rng.randrange(len(s))
        b = rng.randrange(a, len(s) + 1)
        parts += [s[a:b], bytes(rng.choices(alnum + b" \n", k=rng.randrange(0, 6)))]
    data = b"".join(parts)
    patterns = patterns_for(secrets)
    expected = naive_redact(data, patterns)
    # grams scanned apart (sparse, and dense: every gram, looked up in C at every step-th
    # offset, where the C module is built), and merged
    dense_modes = (False, True) if matcher._gram_set is not None else (False,)
    for merge_limit, dense in [(0, d) for d in dense_modes] + [(matcher.Matcher.MERGE_LIMIT, False)]:
        saved, matcher.Matcher.MERGE_LIMIT = matcher.Matcher.MERGE_LIMIT, merge_limit
        saved_min = matcher.FragmentFinder.NATIVE_MIN
        matcher.FragmentFinder.NATIVE_MIN = 0 if dense else saved_min
        try:
            stream_module._cache.clear()
            r = StreamRedactor(secrets)
        finally:
            matcher.Matcher.MERGE_LIMIT = saved
            matcher.FragmentFinder.NATIVE_MIN = saved_min
        assert r._engine._merged == (merge_limit > 0)
        assert r._engine.fragments.dense == dense
        out = b"".join(r.feed(data[i : i + chunk]) for i in range(0, len(data), chunk)) + r.flush()
        assert out == expected
    stream_module._cache.clear()
    if chunk == 1:
        r, seen = StreamRedactor(secrets), b""
        for i in range(len(data)):
            r.feed(data[i : i + 1])
            seen += data[i : i + 1]
            assert r.held == naive_held(seen, patterns)


def test_fragment_window_without_a_unique_gram_is_a_literal():
    w = b"Kq2mZp9LwR4t"  # every 8-byte gram of it is also in another secret, the window is not
    one = b"prefix-" + w + b"-suffix-1"
    two = b"other-" + w[:11] + b"-tail-two"
    three = b"third-" + w[1:] + b"-tail-three"
    r = StreamRedactor([one, two, three])
    assert w in r._engine.fragments.literals
    text = b"[" + w + b"]"
    assert redact(text, [one, two, three]) == naive_redact(text, patterns_for([one, two, three])) == b"[" + M + b"]"


@pytest.mark.parametrize("tool", ["base64", "openssl base64", "xxd -p", "xxd -p -u"])
def test_encoders_that_wrap_lines(tool):
    """A secret encoded alone: the wrapped encoding is masked, through every split;
    at most the characters that also encode what follows it (padding, the
    newline) stay, and the variant is what masks it."""
    if shutil.which(tool.split()[0]) is None:
        pytest.skip(f"{tool.split()[0]} not installed")
    secret = b"Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua-" * 2  # 66 bytes: hex and base64 both wrap
    shown = bash(f'printf %s "$1" | {tool}', secret.decode()).stdout
    assert b"\n" in shown.rstrip(b"\n")
    text = b"<< " + shown + b">>"
    patterns = patterns_for([secret])
    expected = naive_redact(text, patterns)
    assert redact(text, [secret]) == expected
    assert expected.startswith(b"<< " + M) and len(expected) <= len(b"<< " + M + b">>") + 4, expected
    for cut in range(1, len(text), 7):
        r = StreamRedactor([secret])
        assert r.feed(text[:cut]) + r.feed(text[cut:]) + r.flush() == expected
    off = dataclasses.replace(Variants(), wrapped=False, fragments=False)
    assert M not in redact(text, [secret], variants=off)[: len(b"<< ") + 40]


def test_multi_line_secret_printed_with_any_whitespace_is_one_mask():
    """Mixed whitespace between the lines of a key (not one of the literal forms):
    one mask (the whitespace view); with crlf off, nothing of it."""
    lines = [b"-----BEGIN KEY-----", b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", b"WVphYmNkZWZnaGlq", b"-----END KEY-----"]
    secret = b"\n".join(lines)
    shown = lines[0] + b"\r\n \t" + lines[1] + b"  \r\r\n" + lines[2] + b"\t" + lines[3]
    check(secret, shown, "crlf")


def test_forms_switch_off_from_settings():
    from paddedcell import config
    from paddedcell.redactor.filters import filter_options as redactor_options

    v = Variants.from_settings(True, "fragments, url")
    assert not v.fragments and not v.url and v.hex and v.shell
    assert Variants.from_settings(False, "") == Variants.none()
    with pytest.raises(ValueError, match="unknown form nope"):
        Variants.from_settings(True, "hex,nope")
    settings = config.load(environ={"PADDEDCELL_HOME": "/nonexistent", "PADDEDCELL_REDACTOR_FORMS_OFF": "hex"})
    options = redactor_options(settings)
    secret = b"Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua"
    assert redact(b"<" + secret.hex().encode() + b">", [secret], **options) == b"<" + secret.hex().encode() + b">"
    assert redact(b"<" + secret[1:] + b">", [secret], **options) == b"<" + M + b">"  # fragments still on


@pytest.mark.skipif(matcher._gram_set is None, reason="no C module (PADDEDCELL_NATIVE=0 or not built)")
def test_dense_fragments_find_every_window_at_every_alignment(monkeypatch):
    """Grams looked up at every step-th offset (:attr:`FragmentFinder.dense`): each
    window of a secret alone, at each offset of the buffer modulo the step, and cut
    by a feed at every byte, is masked as the oracle says (the sampled offset falls
    on each of the window's first ``step`` grams once)."""
    from paddedcell.redactor import stream as stream_module
    from collections import OrderedDict

    monkeypatch.setattr(matcher.Matcher, "MERGE_LIMIT", 0)
    monkeypatch.setattr(matcher.FragmentFinder, "NATIVE_MIN", 0)
    monkeypatch.setattr(stream_module, "_cache", OrderedDict())
    secret = b"Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua"
    r = StreamRedactor([secret])
    finder = r._engine.fragments
    assert finder.dense and not r._engine._merged
    step = finder.width - finder.GRAM + 1
    patterns = patterns_for([secret])
    for i in range(len(secret) - finder.width + 1):
        window = secret[i : i + finder.width]
        for before in range(step + 1):
            text = b"~" * before + window + b"~"
            expected = naive_redact(text, patterns)
            assert M in expected, (i, before)
            assert redact(text, [secret]) == expected
            for cut in range(1, len(text)):
                s = r.fresh()
                assert s.feed(text[:cut]) + s.feed(text[cut:]) + s.flush() == expected, (i, before, cut)
