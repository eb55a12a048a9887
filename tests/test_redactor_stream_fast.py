"""The redactor's per-feed fast path (issue 21, 4 KiB feeds): ``StreamRedactor.feed``
with its no-hit case inline, ``scan_keep`` (scan, hold and sync in one call), the
inline first tests of :meth:`Viewed.scan_keep`, the literal engines' lean
``spans`` and :meth:`PrefixIndex.hold`'s gram test. Each must give what the
slow path gives: a secret (and each of its forms) cut by a PTY-sized feed at
every offset comes out masked as the oracle says, and ``scan_keep`` equals
``scan`` plus ``sync`` of the cut on any buffer."""

from __future__ import annotations

import base64
import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import StreamRedactor, matcher, redact
from paddedcell.redactor.oracle import naive_held, naive_redact, patterns_for
from paddedcell.redactor.views import Viewed
from redactor_engines import engine  # noqa: F401 (autouse: every test on both engines)

pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")
SECRET = b"Zq8xv2NmP4tR7yWb3KdLs9FhJ6cQe1Ua"
FEED = 4096


def filler(n: int, seed: int) -> bytes:
    """Printable text with a line break every ~60 bytes (as a PTY shows)."""
    rng = random.Random(seed)
    out = bytearray(rng.randbytes(n).translate(bytes(32 + i % 95 for i in range(256))))
    for i in range(59, n, 61):
        out[i] = 10
    return bytes(out)


FORMS = {
    "plain": SECRET,
    "wrapped base64": base64.b64encode(SECRET)[:20] + b"\n" + base64.b64encode(SECRET)[20:],
    "percent": b"".join(b"%%%02X" % c if i % 3 == 0 else bytes([c]) for i, c in enumerate(SECRET)),
    "csi": SECRET[:10] + b"\x1b[1;31m" + SECRET[10:] + b"\x1b[0m",
    "hex dump": b"\n" + b"".join(b"%08x: %s\n" % (i, SECRET[i : i + 8].hex(" ").encode()) for i in range(0, 32, 8)),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_form_cut_by_a_4k_feed_at_every_offset(form):
    """The secret's form straddles the first 4 KiB feed's end at every offset
    (and starts right at the second one): the fast path's output is the oracle's."""
    text = FORMS[form]
    patterns = patterns_for([SECRET])
    for o in range(len(text) + 1):
        data = filler(FEED - o, o) + text + filler(300, -o)
        expected = naive_redact(data, patterns)
        assert expected.count(b"######") >= 1, (form, o)
        r = StreamRedactor([SECRET])
        out = [r.feed(data[i : i + FEED]) for i in range(0, len(data), FEED)]
        assert b"".join(out) + r.flush() == expected, (form, o)


def test_held_after_each_4k_feed_is_the_oracles():
    """Several secrets' prefixes end the feeds: the fast path keeps exactly the live tail."""
    secrets = [SECRET, b"ghp_" + SECRET, b"sk-live-" + SECRET[::-1]]
    patterns = patterns_for(secrets)
    data = bytearray()
    for i in range(12):
        s = secrets[i % 3]
        data += filler(FEED - len(data) % FEED - 1 - i % 7, i) + s[: 1 + i * 3 % len(s)]
    data = bytes(data)
    r, seen, out = StreamRedactor(secrets), b"", []
    for i in range(0, len(data), FEED):
        out.append(r.feed(data[i : i + FEED]))
        seen += data[i : i + FEED]
        assert r.held == naive_held(seen, patterns), i
    assert b"".join(out) + r.flush() == naive_redact(data, patterns) == redact(data, secrets)


ALPHABET = b"Zq8%2A\x1b[m;1\n\r -ab0f:*" + SECRET[:6]
#: Pieces spliced in: the secret, two lines of its hex dump, its percent form, most of
#: its hex wrapped after 2 digits (a long last line that holds).
PIECES = [SECRET, b"00000000: 5a71 3878 7632 4e6d 5034 7452  Zq8xv2NmP4tR\n",
          b"0000000c: 3779 5762 334b 644c 7339 4668  7yWb3KdLs9Fh\n", FORMS["percent"],
          SECRET.hex()[:2].encode() + b"\n" + SECRET.hex()[2:63].encode()]


def slow_scan(e: Viewed, buf: bytes, final: bool) -> tuple[int, list[tuple[int, int]], int]:
    """What ``scan_keep`` gives, step by step through the methods (no inline test)."""
    found = e.base.spans(buf)
    best = 0 if final else e.base.hold(buf)
    if e._gates is not None:
        lines, percent = e._gates.scan(buf)
        if e._dump is not None:
            best = max(best, e._dump.scan(buf, final, found, lines))
        if percent is not None and e._percent_args is not None and (
                percent or (not final and buf.find(b"%", max(0, len(buf) - 3)) >= 0)):
            best = max(best, Viewed._percent_step(e, *e._percent_args, buf, final, found, percent))
    for step, lead, args in e._steps:
        if lead is None or lead in buf:
            best = max(best, step(e, *args, buf, final, found))
    if e._base_wrap is not None and not final:
        best = max(best, e._wrap_hold(*e._base_wrap, buf))
    cut = len(buf) - best
    return best, sorted(found), (e.sync(buf, cut) if best or e.sync_always else cut)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(sorted(set(ALPHABET)) + [-1, -2, -3, -4, -5]), max_size=120), st.booleans())
@example([-5], False)
@example([-2, 48], False)
def test_scan_keep_is_the_steps_and_the_sync_of_the_cut(items, final):
    """On any buffer (separators, tokens, incomplete ones, dump lines, the secret spliced in)."""
    buf = b"".join(PIECES[-c - 1] if c < 0 else bytes([c]) for c in items)
    e = StreamRedactor([SECRET]).fresh()._engine
    assert isinstance(e, Viewed) and e._dump is not None
    hold, found, keep = e.scan_keep(buf, final)
    assert (hold, sorted(found), keep) == slow_scan(e, buf, final)
    assert e.scan(buf, final) == (hold, found)


def test_the_literal_engines_lean_spans_agree_with_scan_parts():
    """Matcher.spans returns early on no hit; with hits it is scan_parts' spans."""
    m = matcher.build([SECRET, b"another-secret-value"], windows={SECRET: [0, 5, 10]}, width=12)
    for buf in (b"", b"nothing here", SECRET, b"xx" + SECRET[3:20] + b"yy another-secret-value"):
        assert sorted(m.spans(buf)) == sorted(m.scan_parts(buf)[0])


@pytest.mark.skipif(matcher.HYPERSCAN_PROBLEM is not None, reason="no pyperscan")
def test_a_scan_interrupted_leaves_no_hit_for_the_next():
    """Hits left in the thread's list by an interrupted scan are not reported later."""
    m = matcher.HyperscanMatcher([SECRET])
    assert m.spans(SECRET) == [(0, len(SECRET))]
    _, acc, _ = m._local.scanners
    acc.append((5, 7))  # as if a scan had stopped before its list was taken
    assert m.spans(b"plain text") == []
    assert m.spans(b"") == []
    assert matcher.HyperscanMatcher([]).spans(b"abc") == []


@pytest.fixture
def split_databases(monkeypatch):
    """Hyperscan builds its database without the escape forms for any set (not
    only from SPLIT_MIN patterns on), and the redactor builds afresh (no cached
    matcher of the same secrets without one)."""
    from collections import OrderedDict

    from paddedcell.redactor import stream

    monkeypatch.setattr(matcher.HyperscanMatcher, "SPLIT_MIN", 1)
    monkeypatch.setattr(stream, "_cache", OrderedDict())


@pytest.mark.skipif(matcher.HYPERSCAN_PROBLEM is not None, reason="no pyperscan")
def test_the_plain_database_finds_what_the_whole_one_finds(split_databases):
    """A buffer without an escape byte is scanned for the patterns without one;
    any other buffer for all of them: either way every occurrence is found."""
    pats = [b"plain-Secret-1", b"6a6B7c6a6B7c", b"6A6B7C6A6B7C", b"%41%42%43%44", b"\\x41\\x42\\x43",
            b"65,66,67,68", b"A\x00B\x00C\x00D\x00", b"&#65;&#66;&#67;"]
    e = matcher.HyperscanMatcher(pats)
    assert e._plain_db is not None
    for filler in (b" plain text ", b" 100% ", b" a\\b ", b" a&b ", b" \x00 ", b" 1,2 "):
        text = filler.join(pats) + filler + b"6a6b7C6A6B7C plain-secret-1"
        assert sorted(e.spans(text)) == sorted(matcher.FindMatcher(pats).spans(text)), filler
        for p in pats:  # each pattern alone (a buffer with its own bytes only)
            assert e.spans(b"x" + p) == [(1, 1 + len(p))], p


@pytest.mark.parametrize("escape", [b"", *(bytes([c]) for c in matcher.ESCAPE_BYTES)])
def test_a_form_in_either_database_is_masked_at_every_split(split_databases, escape):
    """The secret's base64 form (no escape byte: in both databases) and its
    %XX form (in the whole one alone), in a line with or without another
    escape byte, are masked under every split and byte by byte."""
    from redactor_engines import assert_exact_under_every_split

    secret = b"s3cr3t-Tok3n-Zq8xv2"
    for form in (base64.b64encode(secret), b"".join(b"%%%02X" % c for c in secret), b"\\x" + secret.hex().encode()):
        text = b"id=1 " + escape + b" value=" + form + b" end\n"
        expected = redact(text, [secret])
        assert form not in expected and b"######" in expected, form
        assert_exact_under_every_split(text, secret, expected)


@pytest.fixture
def gated_groups(monkeypatch):
    """Hyperscan gives every set literal groups gated by byte-class runs (not only
    from GATE_MIN patterns on), with groups of any size, and the redactor builds
    afresh (no cached matcher of the same secrets without them)."""
    from collections import OrderedDict

    from paddedcell.redactor import stream

    monkeypatch.setattr(matcher.HyperscanMatcher, "GATE_MIN", 1)
    monkeypatch.setattr(matcher.HyperscanMatcher, "GATE_GROUP_MIN", 1)
    monkeypatch.setattr(stream, "_cache", OrderedDict())


#: One pattern per gated group (and the rest): hex, a number list, \x escapes, %XX,
#: base32 upper and lower case, base32hex, base64 both alphabets, and ungated ones.
GATED = [b"6a6b7c6d6e6f70717273747576777879", b"6A6B7C6D6E6F70717273747576777879",
         b"106, 107, 108, 109, 110, 111, 112", b"\\x6a\\x6b\\x6c\\x6d\\x6e\\x6f\\x70\\x71",
         b"%6A%6B%6C%6D%6E%6F%70%71%72%73", b"NJVWY3DPOBYXE43UOV3HO6DZPJQWEY3E",
         b"njvwy3dpobyxe43uov3ho6dzpjqwey3e", b"D9LMOR3FE1ON4SRKELR7ESV3F9GM4OR4",
         b"ams3c2x5b3BxcnN0dXZ3eHl6YWJjZGVmZ2hp+/", b"ams3c2x5b3BxcnN0dXZ3eHl6YWJjZGVmZ2hp-_",
         b"plain-Secret-1", b"ab\x00cd\x00ef\x00gh",
         # long runs (a JWT's base64, a long hex): groups of their own, tested after their class's short one
         base64.b64encode(bytes(range(40, 130))), bytes(range(60, 120)).hex().encode()]


@pytest.mark.skipif(matcher.HYPERSCAN_PROBLEM is not None, reason="no pyperscan")
def test_gated_groups_find_what_the_whole_set_finds(gated_groups):
    """Each group is scanned only on a buffer with a run of its class as long as its
    shortest one; every occurrence is still found: each pattern alone (its run the
    only one), all of them in text that opens no gate, and each one byte short."""
    e = matcher.HyperscanMatcher(GATED)
    gates, groups, rest = e._gated
    assert len(groups) == len(matcher.GATE_CLASSES) + 2 and rest.patterns
    children = [(j, p) for j, p in enumerate(gates.parents) if p >= 0]  # the long runs' groups, at least
    assert len(children) >= 2
    assert all(set(gates.classes[j]) <= set(gates.classes[p]) and gates.runs[p] <= gates.runs[j]
               and gates.parents[p] == -1 for j, p in children)
    find = matcher.FindMatcher(GATED)
    for filler in (b" ~ ", b"!", b"\n", b" 100% ", b" a\\b "):
        text = filler.join(GATED) + filler + b"6a6b7C6d6e6f70717273747576777879"
        assert sorted(e.spans(text)) == sorted(find.spans(text)), filler
    for p in GATED:
        for around in (b"", b"~", b"~" * 4096):
            assert e.spans(around + p + around) == [(len(around), len(around) + len(p))], p
        assert e.spans(b"~" + p[:-1] + b"~" + p[1:]) == find.spans(b"~" + p[:-1] + b"~" + p[1:])


@pytest.mark.skipif(matcher.HYPERSCAN_PROBLEM is not None, reason="no pyperscan")
def test_a_group_is_not_scanned_without_its_run(gated_groups, monkeypatch):
    """Text without a run of a group's class does not call that group's scan (what
    the gates are for), text with one does."""
    e = matcher.HyperscanMatcher(GATED)
    gates, groups, rest = e._gated
    called = []
    for bit, group in groups:
        monkeypatch.setattr(group, "spans", lambda buf, bit=bit, f=group.spans: called.append(bit) or f(buf))
    assert e.spans(b"random ~ text, 100% plain; id=42 " * 100) == []
    assert called == []
    assert e.spans(b"~ " + GATED[0] + b" ~") == [(2, 2 + len(GATED[0]))]
    assert called and all(bit & gates.test(GATED[0]) for bit in called)


@pytest.mark.parametrize("escape", [b"", b"\\", b"%", b","])
def test_a_gated_form_is_masked_at_every_split(gated_groups, escape):
    """The secret's hex, base32, base64 and decimal-list forms (each in a gated group
    on Hyperscan) in a line with or without an escape byte, masked under every split
    and byte by byte, with the held tail equal to the oracle's after every byte."""
    from redactor_engines import assert_exact_under_every_split

    secret = b"s3cr3t-Tok3n-Zq8xv2"
    forms = (secret.hex().encode(), base64.b32encode(secret).rstrip(b"="), base64.b64encode(secret),
             b", ".join(b"%d" % c for c in secret))
    for form in forms:
        text = b"id=1 " + escape + b" value=" + form + b" end\n"
        expected = redact(text, [secret])
        assert form not in expected and b"######" in expected, form
        assert_exact_under_every_split(text, secret, expected)


@pytest.mark.parametrize("size", [1, 7, 64, 4096, 65536])
def test_a_reused_read_buffer_is_copied_with_the_held_tail(size):
    """A pump feeds memoryviews of one read buffer that its next read overwrites: every
    form cut at every batch size comes out as the oracle says (the held tail and the
    plain output are the redactor's own bytes, never views of that buffer)."""
    patterns = patterns_for([SECRET])
    data = b"".join(filler(333 + 17 * i, i) + FORMS[form] for i, form in enumerate(sorted(FORMS)))
    data += filler(5000, 99) + SECRET[:20]
    buffer = bytearray(size)
    r, out = StreamRedactor([SECRET]), []
    for i in range(0, len(data), size):
        chunk = data[i : i + size]
        buffer[: len(chunk)] = chunk
        out.append(r.feed(memoryview(buffer)[: len(chunk)]))
        buffer[:] = b"\x00" * size  # the next read
    assert b"".join(bytes(o) for o in out) + r.flush() == naive_redact(data, patterns)
