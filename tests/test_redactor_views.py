"""Pattern forms (redactor/views.py): a secret with separators inside it —
any whitespace run, a line break anywhere in its base64/hex, per-byte %XX,
CSI escapes — produced by the real tool where one exists, masked as one mask
through every split, with held == oracle after every byte, and left alone with
its switch off; hypothesis properties over small alphabets with the separators."""

from __future__ import annotations

import base64
import dataclasses
import random
import shutil
import subprocess
from collections import OrderedDict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import StreamRedactor, Variants, matcher, redact, stream
from paddedcell.redactor.oracle import _csi_length, naive_held, naive_redact, patterns_for, scan_view
from paddedcell.redactor.variants import base64_inner_forms
from paddedcell.redactor.views import VIEWS, Viewed
from redactor_engines import assert_chunked_equals_oracle, assert_exact_under_every_split, engine  # noqa: F401 (autouse: every test on both engines)

M = b"######"
pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")
SECRET = b"Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua"



def sh(script: str, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["bash", "-c", script, "bash", *args], input=stdin, capture_output=True,
                          check=True).stdout


def off(field: str) -> Variants:
    """Every form on except ``field`` (comma-separated names) and fragments (which would mask slices of it)."""
    return dataclasses.replace(Variants(), **{f: False for f in (*field.split(","), "fragments")})


def check(secrets: list[bytes], text: bytes, field: str, masks: int = 1) -> bytes:
    """``text`` is redacted as the oracle says, with ``masks`` masks, through
    every single split, byte by byte with held == oracle after every byte; and
    with ``field`` off, no mask at all."""
    patterns = patterns_for(secrets)
    expected = naive_redact(text, patterns)
    assert expected.count(M) == masks, expected
    assert redact(text, secrets) == expected
    for cut in range(1, len(text)):
        r = StreamRedactor(secrets)
        assert r.feed(text[:cut]) + r.feed(text[cut:]) + r.flush() == expected, cut
    r, seen, out = StreamRedactor(secrets), b"", b""
    for i in range(len(text)):
        out += r.feed(text[i : i + 1])
        seen += text[i : i + 1]
        assert r.held == naive_held(seen, patterns), seen
    assert out + r.flush() == expected
    assert M not in redact(text, secrets, variants=off(field))
    return expected


# -- (a) any whitespace run where a multi-line secret has whitespace ----------

KEY = b"-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5P\nUFFSU1RVVldY  WVphYmNk\n-----END KEY-----"


def test_printf_mixed_whitespace_is_one_mask():
    lines = KEY.replace(b"  ", b"\n").split(b"\n")
    assert len(lines) == 5
    shown = sh("printf '%s\\r\\r\\n \\t%s  \\t%s\\r\\n\\n%s\\t%s' \"$@\"", *(x.decode() for x in lines))
    assert b"\r\r\n \t" in shown and b"  \t" in shown
    out = check([KEY], b"> " + shown + b" <", "crlf")
    assert out == b"> " + M + b" <"


def test_unquoted_echo_and_double_space_secret():
    secret = b"correct  horse\tbattery staple"  # a run of spaces and a tab
    shown = sh("echo $1", secret.decode()).rstrip(b"\n")
    assert shown == b"correct horse battery staple"
    assert check([secret], b"[" + shown + b"]\n", "crlf") == b"[" + M + b"]\n"
    assert redact(b"[correct \r\n  horse battery\n\tstaple]", [secret]) == b"[" + M + b"]"


def test_whitespace_outside_the_secret_is_not_masked():
    secret = b"alpha-1\nbeta-22"  # lines under 8 bytes: no line-alone forms
    assert redact(b"x \n alpha-1 \t beta-22 \n y", [secret]) == b"x \n " + M + b" \n y"
    assert redact(b"alpha-1 beta-2", [secret]) == b"alpha-1 beta-2"
    assert redact(b"alpha-1 -beta-22", [secret]) == b"alpha-1 -beta-22"


# -- (b) base64 and hex wrapped at any column, any offset ---------------------

@pytest.mark.parametrize("width", [17, 5, 76])
def test_base64_of_a_line_wrapped_at_any_column(width):
    """``base64 -w N app.env``: the secret starts mid-line, the breaks fall anywhere."""
    env = b"DB_HOST=db.internal\nDB_PASSWORD=" + SECRET + b"\nDEBUG=0\n"
    shown = sh(f"base64 -w {width}", stdin=env)
    assert shown.count(b"\n") >= 2
    out = check([SECRET], shown, "wrapped")
    head = base64.b64encode(env)[: (env.index(SECRET) * 8) // 6]  # characters before the secret's bits
    assert out.replace(b"\n", b"").startswith(head.replace(b"\n", b"")[:-2])


def test_base64_with_crlf_line_ends():
    shown = sh("base64 -w 9", stdin=b"x=" + SECRET).replace(b"\n", b"\r\n")
    check([SECRET], b"<" + shown + b">", "wrapped")


@pytest.mark.parametrize("tool", ["xxd -p -c 7", "xxd -p -u -c 5", "od -An -tx1 -v"])
def test_hex_dumps_wrapped_at_any_column(tool):
    if shutil.which(tool.split()[0]) is None:
        pytest.skip(f"{tool.split()[0]} not installed")
    shown = sh(f'printf "key: %s\\n" "$1" | {tool}', SECRET.decode())
    if tool.startswith("od"):
        # od puts spaces between bytes: a hex dump layout (test_redactor_dumps.py), not this form
        no_dumps = dataclasses.replace(off("fragments"), hexdump=False)
        assert redact(shown, [SECRET], variants=no_dumps) == shown
        assert redact(shown, [SECRET], variants=off("fragments")).strip(b"#\n") == b""
        return
    assert shown.count(b"\n") > 5
    out = check([SECRET], shown, "wrapped,hexdump")  # one hex field per line is a dump layout too
    assert SECRET.hex().encode() not in out.replace(b"\n", b"").lower()


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=24).map(lambda b: b.translate(bytes(b" \t\n\r\x0b\x0cab\x85\xa0"[c % 10] for c in range(256)))))
def test_space_view_is_its_token_substitution(part):
    """SpaceView.view (split and join, for speed) is the view its tokens define:
    every whitespace run one space, at the ends too (and not NEL or NBSP)."""
    view = VIEWS["space"]
    assert view.view(part) == view.token.sub(b" ", part)


# -- (c) per-byte URL encoding, either case ------------------------------------

def mixed_url(secret: bytes, rng: random.Random) -> bytes:
    out = []
    for c in secret:
        r = rng.random()
        if r < 0.4:
            out.append(bytes([c]))
        else:
            hexed = "%02x" % c
            out.append(("%" + "".join(ch.upper() if rng.random() < 0.5 else ch for ch in hexed)).encode())
    return b"".join(out)


@pytest.mark.parametrize("seed", range(4))
def test_url_each_byte_literal_or_escaped(seed):
    shown = mixed_url(SECRET + b"/+&=", random.Random(seed))
    assert b"%" in shown
    check([SECRET + b"/+&="], b"GET /cb?token=" + shown + b"&x=1 HTTP/1.1\r\n", "url")


def test_curl_style_query_with_a_literal_percent_nearby():
    secret = b"p@ss w0rd!%zz"
    shown = b"%70@ss%20w0rd%21%25zz"
    check([secret], b"%%" + shown + b"%4", "url")


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_url_forms_far_from_the_end_of_a_feed(chunk):
    """The %XX view runs only in windows around its triggers: forms planted
    deep inside big feeds, among stray %XX of the secret's bytes, next to
    feed boundaries, are masked as the oracle says."""
    rng = random.Random(chunk)
    filler = bytes(rng.choice(b"abcdefZq8x %41%5a%7A\n") for _ in range(3000))
    pieces = [filler[:900], mixed_url(SECRET, rng), filler[900:2000], b"%5Aq8", mixed_url(SECRET, rng),
              filler[2000:], mixed_url(SECRET, rng)[:-1]]
    text = b"".join(pieces)
    patterns = patterns_for([SECRET])
    expected = naive_redact(text, patterns)
    assert expected.count(M) >= 2
    r, out = StreamRedactor([SECRET]), []
    for i in range(0, len(text), chunk):
        out.append(r.feed(text[i:i + chunk]))
        if chunk >= 64:
            assert r.held == naive_held(text[:i + chunk], patterns)
    assert b"".join(out) + r.flush() == expected


def test_url_gate_tokens_of_other_bytes_and_of_the_secrets_bytes():
    """The %XX view runs only around its triggers (a token of a secret's byte next
    to another of its bytes). Tokens of other bytes (``%20``, ``%FF``), ``100%``,
    and a raw prefix of the secret at the end: no view, the hold is the literal's;
    one token of a secret byte next to the rest just passes. Every split, held ==
    oracle per byte."""
    secret = b"Zq8xv2NmP4tR7yWb"
    for text, masks in [(b"100% of %20 and %ff%FF: Zq8x%FFv2Nm %2 " + secret[:9], 0),
                        (b"%20" + mixed_url(secret, random.Random(1)) + b"%2", 1),
                        (b"x%5a" + secret[1:] + b" %zz%5", 1)]:  # one escaped byte: the gate's whole token
        expected = naive_redact(text, patterns_for([secret]))
        assert expected.count(M) == masks
        assert_exact_under_every_split(text, secret, expected)


@settings(max_examples=300, deadline=None)
@given(secrets=st.lists(st.binary(min_size=1, max_size=12).map(lambda b: bytes(b"aZ%4q"[c % 5] for c in b)),
                        min_size=1, max_size=3),
       text=st.lists(st.sampled_from([b"%", b"4", b"5", b"1", b"a", b"A", b"Z", b"q", b"%5a", b"%5A", b"%61",
                                      b"%25", b"%34", b"%71", b"%7"]), max_size=40).map(b"".join))
@example(secrets=[b"qaZ4q4q4"], text=b"xxqa%5Ax4x4x")  # only the two bytes before it make a triple
@example(secrets=[b"qaZ4q4q4"], text=b"xxxq%61Z4xxx")  # only the bytes on either side
@example(secrets=[b"qaZ4q4q4"], text=b"xxx4%5A4qxxx")  # only the two bytes after it
def test_percent_gate_reports_every_token_in_a_run_of_pattern_bytes(engine, secrets, text):
    """Against the view of the whole buffer: every ``%XX`` token whose byte is
    in ``w`` view-consecutive bytes of a pattern (w = 3, or the shortest
    pattern's length; 2 for a token among the last two view bytes) is a
    trigger, and only tokens of pattern bytes are (short patterns, ``%`` and
    hex digits among the secrets' bytes, tokens at both ends of the buffer)."""
    from paddedcell.redactor.views import PercentGate, PercentView

    view = VIEWS["percent"]
    tokens, starts, _ = view.layout(text, 0, len(text))
    seen = view.view(text)
    width = min(3, *map(len, secrets))
    want = set()
    for (s, e, v, _), k in zip(tokens, starts):
        w = width if k < len(seen) - 2 else min(width, 2)
        if any(seen[j:j + w] in p for p in secrets for j in range(max(0, k - w + 1), min(k, len(seen) - w) + 1)):
            want.add((s, e))
    got = set(PercentGate(secrets, engine).hits(text)) if b"%" in text else set()
    assert want <= got
    assert all(PercentView._decoded[text[s:e]][0] in b"".join(secrets) for s, e in got)


@settings(max_examples=300, deadline=None)
@given(secrets=st.lists(st.binary(min_size=3, max_size=12).map(lambda b: bytes(b"aZ%4q"[c % 5] for c in b)),
                        min_size=1, max_size=3),
       text=st.lists(st.sampled_from([b"x", b"yyyy", b"a", b"Z", b"q", b"4", b"%", b"aZ", b"Zq", b"qa", b"Z4",
                                      b"%5a", b"%5A", b"%61", b"%71", b"%34", b"%25", b"%20"]),
                     max_size=60).map(b"".join))
@example(secrets=[b"qaZ4q4q4"], text=b"xyyqa%5Axyyyy%71yyyy%34yyx")  # lone tokens: only the bytes before one
@example(secrets=[b"qaZ4q4q4"], text=b"xyyyy%71yyyyx4%34q4xyyyy%61yyx")  # on either side
@example(secrets=[b"qaZ4q4q4"], text=b"xyyyy%71yyyyx%5A4qxyyyy%61yyx")  # after it
@example(secrets=[b"qaZ4q4q4"], text=b"xyyyy%71a%5Axyyyy%34yyyy")  # two tokens, one raw byte between
@example(secrets=[b"qaZ4q4q4"], text=b"xyyyy%71yyyyx%34yyyyyqa%5Axyyyy")  # the third window's triple
def test_percent_gate_windows_find_what_token_by_token_checks_find(engine, secrets, text):
    """The gate's scan of the raw bytes around lone tokens (``PercentGate._around``)
    passes exactly the tokens that checking every token one by one passes."""
    from paddedcell.redactor.views import PercentGate

    gate = PercentGate(secrets, engine)
    got = gate.hits(text) if b"%" in text else []
    gate._around = None  # every token checked one by one
    assert got == (gate.hits(text) if b"%" in text else [])


@pytest.mark.parametrize("text", [
    b"%5A" + SECRET[1:],                                        # the first byte alone encoded: trigger at the start
    SECRET[:-1] + b"%61",                                       # the last byte alone encoded: trigger at the end
    b"%5a%71" + SECRET[2:],                                     # two tokens in a row
    b"%%%5A" + SECRET[1:-1] + b"%61%",                          # stray % right beside the edge tokens
    b"%5A%5A" + SECRET[1:] + b" %61%61" + SECRET[:-1] + b"%61",  # a token of a secret byte beside no pair of it
    b"Z%71x Zq%38x q%38x%5A" + SECRET[1:],                      # tokens in a pair of the secret, not in a triple
    b"say " + SECRET[:-1] + b"%61 and more",                    # the last byte encoded, text after it
    b"said %5A" + SECRET[1:] + b" and more",                    # the first byte encoded, text before it
])
def test_percent_gate_edges_at_every_split(text):
    """Occurrences whose only trigger sits at the very edge of the occurrence
    (its first or last byte encoded), beside stray ``%`` and tokens of the
    secret's bytes that are no trigger: exact at every split, held == oracle per byte."""
    expected = naive_redact(text, patterns_for([SECRET]))
    assert expected.count(M) >= 1
    assert_exact_under_every_split(text, SECRET, expected)


@pytest.mark.parametrize("text", [
    b"%5A" + SECRET[1:],
    SECRET[:-1] + b"%61",
    b"%5a%71" + SECRET[2:] + b" tail",
    b"%%%5A" + SECRET[1:-1] + b"%61%",
    b"x" * 9 + SECRET[:12] + b"%" + SECRET[12:15].hex().encode() + b"%" + SECRET[15:16].hex().encode() + SECRET[16:],
    b"Z%71x Zq%38x q%38x%5A" + SECRET[1:],
    b"said " + SECRET[:9] + b"%4d" + SECRET[10:-5] + b" and " + SECRET[:20] + b"%" + SECRET[20:21].hex().encode(),
    b"%5A" + SECRET[1:7] + b"%" + SECRET[7:8].hex().encode() + b"!" + SECRET[:8] + b"%" + SECRET[8:9].hex().encode(),
    b"say " + SECRET[:-1] + b"%61 and more",  # the last byte encoded: only the window ending at it
])
def test_percent_gate_with_grams_at_every_split(monkeypatch, text):
    """The C gate's 8-gram check (PercentGate.GRAMS_FROM lowered to 1): occurrences
    with a token at their edges or inside, prefixes ending the buffer with a
    token among their last seven view bytes or before: exact at every split,
    held == oracle per byte."""
    from paddedcell.redactor.views import PercentGate

    monkeypatch.setattr(PercentGate, "GRAMS_FROM", 1)
    monkeypatch.setattr(stream, "_cache", OrderedDict())  # (built sets are cached: these are built anew)
    if PercentGate.__init__.__globals__["_native"] is not None:
        assert len(StreamRedactor([SECRET])._engine._gates._percent._tables) == 6
    expected = naive_redact(text, patterns_for([SECRET]))
    assert_exact_under_every_split(text, SECRET, expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from([b"x", b"%", b"%2", b"yyyyyy", b"\n", b"%41", b"%5a"]) | st.integers(0, 31).map(
           lambda i: b"".join(b"%%%02x" % c if (c + i) % 3 == 0 else bytes([c]) for c in SECRET[i:])),
           max_size=12).map(b"".join),
       cuts=st.lists(st.integers(0, 400), max_size=6))
def test_percent_gate_with_grams_chunked(monkeypatch, pieces, cuts):
    """Percent-encoded suffixes of the secret among stray tokens, fed in pieces: held
    == oracle after each piece with the 8-gram check on."""
    from paddedcell.redactor.views import PercentGate

    monkeypatch.setattr(PercentGate, "GRAMS_FROM", 1)
    monkeypatch.setattr(stream, "_cache", OrderedDict())  # (built sets are cached: these are built anew)
    data = pieces + b"%" + SECRET[:1].hex().encode() + SECRET[1:] + pieces[:40]
    assert_chunked_equals_oracle([SECRET], data, sorted({c for c in cuts if c < len(data)}))


@pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")
@pytest.mark.parametrize("secret, text", [(b"Z", b"x%5A y%5a"), (b"Zq", b"x%5Aq y%5a%71 Z%71%"),
                                          (b"Zq8", b"x%5Aq8 y%5a%718%38 Zq%38 %5Aq")])
def test_percent_gate_with_secrets_shorter_than_three_bytes(secret, text):
    """``variant_min_length`` may be 1: a pattern of one or two bytes holds no
    three consecutive bytes, so the gate's width is the shortest pattern's;
    byte by byte held == oracle, and every split."""
    patterns = patterns_for([secret], variant_min_length=1)
    expected = naive_redact(text, patterns)
    for cut in range(1, len(text)):
        r = StreamRedactor([secret], variant_min_length=1)
        assert r.feed(text[:cut]) + r.feed(text[cut:]) + r.flush() == expected, cut
    r, seen, out = StreamRedactor([secret], variant_min_length=1), b"", b""
    for i in range(len(text)):
        out += r.feed(text[i : i + 1])
        seen += text[i : i + 1]
        assert r.held == naive_held(seen, patterns), seen
    assert out + r.flush() == expected


# -- (d) SGR/CSI inside a secret -----------------------------------------------

def test_grep_color_inside_a_secret_is_one_mask():
    if shutil.which("grep") is None:
        pytest.skip("grep not installed")
    shown = sh('printf "token=%s done\\n" "$1" | grep --color=always "v2NmP4t"', SECRET.decode())
    assert b"\x1b[01;31m\x1b[K" in shown and b"\x1b[m\x1b[K" in shown
    assert check([SECRET], shown, "csi") == b"token=" + M + b" done\n"


def test_a_long_secret_through_escapes_beside_tokens_sharing_its_head_or_its_tail():
    """The views scan a pattern's last 40 bytes and compare the rest: a secret
    longer than that with SGR inside, beside tokens that share its first 40
    bytes (JWT headers) or its last 40 (another start), at the view's very
    start: exact at every split, held == oracle per byte."""
    head = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ"
    secret = head + b"zdWIiOiJhZ2VudCJ9.Zq8xv2NmP4tR7yWb3K"
    coloured = secret[:20] + b"\x1b[01;31m\x1b[K" + secret[20:50] + b"\x1b[m" + secret[50:]
    text = (coloured + b" " + head + b"b3RoZXIifQ.x\x1b[m " + b"Q\x1b[1m" + secret[-45:] + b"\n"
            + head + b"\x1b[32m" + secret[len(head):])
    variants = dataclasses.replace(Variants(), fragments=False)  # the decoys stay unmasked
    patterns = patterns_for([secret], variants)
    expected = naive_redact(text, patterns)
    assert expected.count(M) == 2 and head in expected and secret[-40:] in expected
    for cut in range(1, len(text)):
        r = StreamRedactor([secret], variants=variants)
        assert r.feed(text[:cut]) + r.feed(text[cut:]) + r.flush() == expected, cut
    r, seen, out = StreamRedactor([secret], variants=variants), b"", b""
    for i in range(len(text)):
        out += r.feed(text[i : i + 1])
        seen += text[i : i + 1]
        assert r.held == naive_held(seen, patterns), seen
    assert out + r.flush() == expected


def test_grep_color_on_every_digit():
    if shutil.which("grep") is None:
        pytest.skip("grep not installed")
    shown = sh('printf "%s\\n" "$1" | grep --color=always -E "[0-9]"', SECRET.decode())
    assert shown.count(b"\x1b[") >= 10
    assert check([SECRET], b"> " + shown, "csi") == b"> " + M + b"\n"


def test_paddedcell_redact_masks_colour_inside_a_secret(tmp_path):
    import os
    import sys

    secrets = tmp_path / "secrets"
    secrets.write_bytes(SECRET + b"\n")
    data = b"a " + SECRET[:9] + b"\x1b[1;32m" + SECRET[9:20] + b"\x1b[0m" + SECRET[20:] + b" b\n"
    env = dict(os.environ, PADDEDCELL_HOME=str(tmp_path / "home"))
    out = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "redact", "--secrets-file", str(secrets)],
                         input=data, capture_output=True, env=env)
    assert out.stdout == b"a " + M + b" b\n", out.stderr


def test_partial_escape_at_the_end_is_held_and_released_as_text():
    r = StreamRedactor([SECRET])
    assert r.feed(b"abc\x1b[1;3") == b"abc"
    assert r.held == 5
    assert r.flush() == b"\x1b[1;3"
    r = StreamRedactor([SECRET])
    assert r.feed(b"50%") == b"50" and r.feed(b"4") == b"" and r.feed(b"1 ") == b"%41 "


# -- properties -----------------------------------------------------------------

SEP = {
    "space": [b" ", b"  ", b"\t", b"\r\r\n", b"\n \t"],
    "wrap": [b"\n", b"\r\n", b"\r"],
    "csi": [b"\x1b[m", b"\x1b[01;31m\x1b[K", b"\x1b[K", b"\x1b[1;2 q"],
}


@st.composite
def shown_forms(draw, secret: bytes):
    """A random member of each pattern form of ``secret``."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    forms = []
    words = secret.split()
    if (b"\n" in secret or b"  " in secret or b"\t" in secret) and len(words) > 1 and len(b" ".join(words)) >= 8:
        forms.append(words[0] + b"".join(rng.choice(SEP["space"]) + w for w in words[1:]))
    for enc in [*base64_inner_forms(secret), secret.hex().encode()]:
        forms.append(b"".join(bytes([c]) + (rng.choice(SEP["wrap"]) if rng.random() < 0.3 else b"")
                              for c in enc))
    forms.append(mixed_url(secret, rng))
    if b"\n" not in secret and b"\r" not in secret:  # fold -w N, any N
        forms.append(b"".join(bytes([c]) + (rng.choice(SEP["wrap"]) if rng.random() < 0.3 else b"")
                              for c in secret))
    forms.append(b"".join(bytes([c]) + (rng.choice(SEP["csi"]) if rng.random() < 0.3 else b"")
                          for c in secret))
    return forms


ALPHABET = b"ab1 \t\n\r%F\x1b[;m"
text_over = lambda lo, hi: st.lists(st.sampled_from(list(ALPHABET)), min_size=lo, max_size=hi).map(bytes)


@st.composite
def planted(draw):
    secrets = draw(st.lists(text_over(8, 14).filter(lambda s: s.strip()), min_size=1, max_size=3))
    pool = [f for s in secrets for f in draw(shown_forms(s))]
    pieces = draw(st.lists(st.one_of(text_over(0, 6), st.sampled_from(pool),
                                     st.sampled_from([b"%", b"%4", b"\x1b", b"\x1b[", b"\x1b[1;3", b"\r\n"])),
                           max_size=8))
    data = b"".join(pieces)
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=6)))
    else:
        cuts = list(range(1, len(data)))
    return secrets, data, cuts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted())
@example(([b"abab%1ab"], b"%%4%61bab%251ab", list(range(1, 15))))
@example(([b"ab\x1b[mab11"], b"\x1b[\x1b[mab\x1b[m\x1b[mab11", [1, 2, 3, 5, 9]))
def test_views_equal_the_oracle_under_any_chunking(case):
    assert_chunked_equals_oracle(*case)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(text_over(8, 12).filter(lambda s: s.strip() and b"\x1b" not in s and b"%" not in s),
                min_size=1, max_size=2), st.data())
def test_every_planted_form_is_masked(secrets, data):
    """Each generated form, between separators, is one mask. (A secret that holds
    a separator token itself, ``%41`` or ``ESC[a``, is decoded in the view like
    the text: see the views docstring; the oracle test covers it.)"""
    for form in data.draw(shown_forms(secrets[0])):
        text = b"<" + form + b">"
        out = redact(text, secrets)
        assert out.startswith(b"<") and out.endswith(b">") and out.count(M) == 1 or form == b"", (form, out)


@pytest.mark.parametrize("family", sorted(VIEWS))
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=60).map(lambda b: b.translate(bytes(ALPHABET[i % len(ALPHABET)] for i in range(256)))),
       at=st.integers(0, 60))
def test_sync_and_tail_layout_agree_with_the_whole_stream(family, data, at):
    """The redactor's tokenizer from any window equals the oracle's whole scan."""
    view = VIEWS[family]
    whole, where, _ = scan_view(family, data)
    assert view.view(data) == whole
    tokens, starts, length = view.layout(data, 0, len(data))
    assert length == len(whole)
    from paddedcell.redactor.views import _start_of_last, _to_raw

    assert [_to_raw(tokens, starts, 0, k) for k in range(length)] == where
    at = min(at, len(data))
    fake = {"base": matcher.FindMatcher([]), "_base_syncs": False, "_dump": None,
            "_synced": [view] if view.needs_sync else [], "_resync": Viewed._resync,
            "_sync_leads": ((view.lead, view.reach),) if view.needs_sync else ()}
    s = Viewed.sync.__get__(type("E", (), fake)())(data, at)
    assert s <= at
    if view.needs_sync:  # the next buffer starts at a token boundary of the whole scan
        deleted, i = [], 0
        while i < len(data):  # CSI sequences the whole scan deletes
            n = _csi_length(data, i) if family == "csi" else 0
            deleted += [(i, i + n)] if n > 0 else []
            i += max(n, 1)
        assert not any(a < s < b for a, b in where + deleted)
    for h in range(1, length + 1):  # the hold's raw start, laid out over a window at the end only
        assert Viewed._tail_start(view, data, len(data), h) == where[length - h][0]
        if family == "wrap":  # ... or counted back through the line breaks
            assert _start_of_last(data, len(data), h) == where[length - h][0]


def test_forms_of_a_secret_added_mid_stream():
    """add_secrets builds a second matcher (with its own views) searched beside the first."""
    other = b"Kq2mZp9LwR4tVb8NcY3dHf6JsG-first"
    r = StreamRedactor([other])
    out = r.feed(b"start %")
    r.add_secrets([SECRET])
    wrapped = base64.b64encode(b"k=" + SECRET)
    wrapped = b"\r\n".join(wrapped[i : i + 7] for i in range(0, len(wrapped), 7))
    text = b"41 " + mixed_url(SECRET, random.Random(3)) + b" " + wrapped + b" " + SECRET[:6] + b"\x1b[1m" + SECRET[6:]
    for i in range(len(text)):
        out += r.feed(text[i : i + 1])
    out += r.flush()
    expected = naive_redact(b"start %" + text, patterns_for([other, SECRET]))
    assert out == expected and expected.count(M) == 3 and SECRET not in out, out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secrets=st.lists(st.lists(st.sampled_from(list(b"abcdefghijkl\n")), min_size=16, max_size=26).map(bytes),
                     min_size=1, max_size=3),
    pieces=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 26), st.integers(0, 26), st.integers(0, 30)),
                    max_size=6),
    merge=st.booleans(),
    chunk=st.sampled_from([1, 3, 17, 4096]),
)
def test_literals_and_fragments_searched_through_the_line_break_view(secrets, pieces, merge, chunk):
    """Literals and fragment windows are found in the CR/LF view and must not
    match across a line break (only encoded forms may); multi-line secrets'
    own windows and forms are searched on the raw bytes."""
    parts = []
    for which, a, b, brk in pieces:
        s = secrets[which % len(secrets)]
        piece = s[min(a, b) : max(a, b)] or s
        cut = brk % (len(piece) + 1)
        parts += [piece[:cut], b"\n" if brk % 3 else b"\r\n", piece[cut:], b"ij"]
    data = b"".join(parts)
    patterns = patterns_for(secrets)
    expected = naive_redact(data, patterns)
    from paddedcell.redactor import stream as stream_module

    saved, matcher.Matcher.MERGE_LIMIT = matcher.Matcher.MERGE_LIMIT, (matcher.Matcher.MERGE_LIMIT if merge else 0)
    try:
        stream_module._cache.clear()
        r = StreamRedactor(secrets)
    finally:
        matcher.Matcher.MERGE_LIMIT = saved
        stream_module._cache.clear()
    out, seen = [], b""
    for i in range(0, len(data), chunk):
        out.append(r.feed(data[i : i + chunk]))
        seen += data[i : i + chunk]
        if chunk == 1:
            assert r.held == naive_held(seen, patterns)
    assert b"".join(out) + r.flush() == expected


def _wrapped_forms(secret: bytes) -> list[bytes]:
    """The secret folded, and its base64/hex wrapped, in the shapes that meet
    every case of the line-break view's triggers: LF and CRLF breaks, blank
    lines, one-character lines, a lone CR, a break right after the first byte
    and right before the last."""
    b64, hx = base64.b64encode(secret), secret.hex().encode()
    fold = lambda s, w, br=b"\n": br.join(s[i : i + w] for i in range(0, len(s), w))  # noqa: E731
    return [fold(secret, 5), fold(b64, 7, b"\r\n"), fold(hx, 1), fold(secret, 2, b"\n\n"),
            secret[:1] + b"\n" + secret[1:], secret[:-1] + b"\r\n\r\n" + secret[-1:],
            b64[:6] + b"\r" + b64[6:], hx[:9] + b"\n\n\n" + hx[9:], fold(secret, 1, b"\r\r\n")]


@pytest.mark.parametrize("chunk", [1, 13, 64, 4096])
def test_wrapped_forms_deep_in_ordinary_multi_line_text(chunk):
    """The line-break view over big feeds of ordinary lines (log lines, ``seq``,
    source code with blank lines): folded and wrapped forms planted deep
    inside them and across feed boundaries are masked as the oracle says,
    with the hold equal to the oracle's after every feed."""
    rng = random.Random(chunk)
    lines = [b"2026-12-01T17:%02d:%02d INFO worker %d done in %d ms" % (i % 60, i % 60, i, rng.randrange(999))
             for i in range(40)]
    lines += [b"%d" % i for i in range(95, 140)]
    lines += [b"def f(x):", b"    return x + 1", b"", b"class Q:", b"    pass", b""] * 4
    rng.shuffle(lines)
    filler = b"\n".join(lines) + b"\n"
    forms = _wrapped_forms(SECRET)
    pieces, at = [], 0
    for form in forms:
        step = rng.randrange(150, 500)
        pieces += [filler[at : at + step], form]
        at += step
    pieces.append(filler[at:])
    text = b"".join(pieces)
    patterns = patterns_for([SECRET])
    expected = naive_redact(text, patterns)
    assert M in expected and not any(form in expected for form in forms)
    # Feeds of `chunk` bytes, and feeds cut inside and around every planted form.
    cuts = list(range(chunk, len(text), chunk))
    starts = [text.index(form) for form in forms]
    edges = sorted({c for s, form in zip(starts, forms) for c in (s, s + 1, s + len(form) // 2, s + len(form) - 1)})
    for points in (cuts, edges):
        r, out, prev = StreamRedactor([SECRET]), [], 0
        for c in points + [len(text)]:
            out.append(r.feed(text[prev:c]))
            if chunk >= 64 or points is edges:
                assert r.held == naive_held(text[:c], patterns), c
            prev = c
        assert b"".join(out) + r.flush() == expected


# -- the views' gates share scans with the literals (issue 21: one scan a feed) --

def _xxd(data: bytes) -> bytes:
    """``xxd``'s lines of ``data`` (16 bytes a line, groups of two, a text gutter)."""
    out = []
    for at in range(0, len(data), 16):
        row = data[at:at + 16]
        groups = b" ".join(row[i:i + 2].hex().encode() for i in range(0, len(row), 2))
        gutter = bytes(c if 32 <= c < 127 else 46 for c in row)
        out.append(b"%08x: %-39s  %s\n" % (at, groups, gutter))
    return b"".join(out)


@st.composite
def literal_beside_triggers(draw):
    """A secret, and text holding it literally beside what the one raw gate scan
    and the literal scan report together: a %XX form (its triggers), a dump of it
    (candidate lines), a multi-line literal form (found through its longest
    piece), a wrapped base64 form, and stray ``%``, ``%XX`` and line breaks."""
    secret = draw(st.binary(min_size=12, max_size=16).map(
        lambda b: bytes(b"Zq8xv2NmP4tR7yWb"[c % 16] for c in b)))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    multi_line = sorted(p for p in patterns_for([secret]) if b"\n" in p)
    wrapped = base64.b64encode(secret)
    forms = [secret, mixed_url(secret, rng), _xxd(b"id=" + secret + b";"),
             wrapped[:7] + b"\n" + wrapped[7:], *(multi_line[:1])]
    filler = [b"100% ", b"%4", b"%41x", b"\n", b"\r\n", b"x" * 3, b"00000010: 6162  ab\n"]
    pieces = draw(st.permutations(forms + draw(st.lists(st.sampled_from(filler), max_size=4))))
    return secret, b"".join(pieces)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(literal_beside_triggers())
def test_a_literal_and_view_triggers_in_one_feed_at_every_split(case):
    """Hits of the literal scan (the secret, a multi-line form's piece, a wrapped
    form) and of the gates (%XX triggers, dump lines) in the same buffer: exact at
    every split, held == oracle after every byte."""
    secret, text = case
    expected = naive_redact(text, patterns_for([secret]))
    assert expected.count(secret) == 0
    assert_exact_under_every_split(text, secret, expected)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(encode=st.lists(st.sampled_from(["raw", "upper", "lower"]), min_size=len(SECRET),
                       max_size=len(SECRET)),
       before=st.text("%4a1A5fZq", max_size=12), after=st.text("%4a1A5fZq", max_size=12),
       cuts=st.lists(st.integers(1, 80), max_size=4))
def test_percent_gate_with_grams_any_byte_encoded(monkeypatch, encode, before, after, cuts):
    """The 8-gram check never drops a token of an occurrence, whichever of the
    secret's bytes are %-encoded (either case) and whatever stray ``%``, hex digits
    and half tokens surround it: held == oracle at every cut (the gram windows are
    decoded around each token as the view decodes them)."""
    from paddedcell.redactor.views import PercentGate

    monkeypatch.setattr(PercentGate, "GRAMS_FROM", 1)
    monkeypatch.setattr(stream, "_cache", OrderedDict())  # (built sets are cached: these are built anew)
    body = b"".join(bytes([c]) if how == "raw" else
                    (b"%%%02X" if how == "upper" else b"%%%02x") % c
                    for c, how in zip(SECRET, encode))
    data = before.encode() + body + after.encode()
    assert_chunked_equals_oracle([SECRET], data, sorted({c for c in cuts if c < len(data)}))
