"""Hex dump layouts (redactor/dumps.py): a secret shown by the real xxd, hexdump
and od, in every layout of the class (offset column, grouped and spaced hex,
byte-swapped words, ASCII gutter, line wraps, CRLF), is masked so that it
cannot be read back from the output, exactly as the oracle says under every
chunking (held == oracle after every byte), on both engines; a hypothesis
property over generated layouts; the switch ``hexdump`` in redactor.forms_off."""

from __future__ import annotations

import dataclasses
import random
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paddedcell.redactor import StreamRedactor, Variants, redact
from paddedcell.redactor.dumps import SQUEEZED, _od_name, decode_line
from paddedcell.redactor.oracle import naive_redact, patterns_for
from redactor_engines import assert_chunked_equals_oracle, assert_exact_under_every_split, engine  # noqa: F401 (autouse: both engines)

M = b"######"
SECRET = b"Zq8x$v2-NmP4<t&R7y"  # 18 bytes: every layout wraps it over a line break
SHORT = b"k3Y!w9pQ"  # 8 bytes, the shortest secret with forms

LAYOUTS = [
    "xxd", "xxd -g1", "xxd -g4", "xxd -g8", "xxd -e", "xxd -u", "xxd -c 7", "xxd -c 2", "xxd -i",
    "xxd -c 1", "xxd -g 16", "xxd -b", "xxd -b -c 1", "xxd -ps -c 0",
    "hexdump -C", "hexdump", "hexdump -x", "hexdump -c", "hexdump -b", "hexdump -o", "hexdump -d",
    "od -t x1", "od -x", "od -t x4", "od -t x8", "od -c", "od -a", "od -A x -t x1z", "od -w6 -t x2",
    "od -An -tx1", "od -An -tx2", "od -An -tx1 -v -w8",
    "od -b", "od -o", "od -d", "od -t d1", "od -A n -t d1", "od -A d -t u1z", "od -t d2",
    "od --endian=big -t u2", "od -t d4", "od -i",
    "hexdump -v -e '16/1 \"%02x \" \"\\n\"'", "hexdump -v -e '\"%07.7_ax  \" 8/2 \"%04x \" \"\\n\"'",
    "hexdump -v -e '\"%07.7_ao \" 16/1 \"%03o \" \"\\n\"'", "hexdump -v -e '16/1 \"%d \" \"\\n\"'",
]
BEFORE = [b"", b"a", b"key=", b"0123456789abcde"]  # every alignment of the secret in a word of 1, 2, 4 bytes


def dump(layout: str, data: bytes) -> bytes:
    name = layout.split()[0]
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (Debian: xxd, bsdextrautils)")
    return subprocess.run(["bash", "-c", layout], input=data, capture_output=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}).stdout


def readable(out: bytes, secret: bytes, run: int = 4) -> list[bytes]:
    """Runs of ``run`` secret bytes that can be read back from ``out``: in its
    text (gutters) or in the bytes of its dump lines, in any reading (hex,
    octal, decimal, binary; either byte order)."""
    decoded = [decode_line(line) or {} for line in out.split(b"\n")]
    shown = [out] + [b"".join(d.get(key, b"") for d in decoded) for key in {k for d in decoded for k in d}]
    return [secret[i:i + run] for i in range(len(secret) - run + 1)
            if any(secret[i:i + run] in s for s in shown)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_is_masked_and_cannot_be_read_back(layout):
    """The secret after each of BEFORE, in one session's output."""
    text = b"".join(b"$ cmd\n" + dump(layout, before + SECRET + b"\n") for before in BEFORE) + b"$ "
    out = redact(text, [SECRET])
    assert out == naive_redact(text, patterns_for([SECRET]))
    assert out.count(M) == len(BEFORE), out.decode()
    assert readable(out, SECRET) == [], out.decode()
    r, chunked = StreamRedactor([SECRET]), b""
    for i in range(0, len(text), 61):  # a cut in every line
        chunked += r.feed(text[i:i + 61])
    assert chunked + r.flush() == out


@pytest.mark.parametrize("layout", ["xxd", "hexdump -C", "hexdump", "od -t x1", "od -c", "xxd -i", "xxd -e",
                                    "od -b", "hexdump -d", "od -A n -t d1", "xxd -b"])
def test_exact_under_every_split_and_byte_by_byte(layout):
    text = b"> " + dump(layout, b"pw:" + SHORT + b"\n") + b"ok\r\n"
    assert_exact_under_every_split(text, SHORT, naive_redact(text, patterns_for([SHORT])))


BLOCK = b"Q7#kLm2@vX9!pR4$"  # one dump line of 16 bytes
HEAD, TAIL = b"header-line-0001", b"trailer-9876543210"


@pytest.mark.parametrize("layout", ["od -c", "hexdump -C", "od -b"])
@pytest.mark.parametrize("secret, data", [
    (BLOCK * 2, HEAD + BLOCK * 4 + TAIL),  # a secret of repeated lines: shown as a line and `*`
    (BLOCK[-8:] + BLOCK[:8], HEAD + BLOCK * 3 + TAIL),  # across two repeats
    (BLOCK[-5:] + TAIL[:5], HEAD + BLOCK * 5 + TAIL),  # from the squeezed run into the next line
], ids=["repeated", "across", "out-of"])
def test_squeezed_lines_read_as_the_line_before_them(layout, secret, data):
    shown = dump(layout, data)
    assert b"\n*\n" in shown
    text = b"$ x\n" + shown
    out = redact(text, [secret])
    assert out == naive_redact(text, patterns_for([secret])) and M in out
    assert b"\n*\n" not in out  # the squeezed line is part of the mask
    assert_chunked_equals_oracle([secret], text, list(range(3, len(text), 23)))


@pytest.mark.parametrize("layout", ["xxd", "od -d", "hexdump -C", "od -c"])
def test_a_long_dump_is_read_in_windows_around_its_marked_lines(layout):
    """Each line holding a trigger is read with a window of its run, not the whole
    run: secrets deep in long runs, next to a squeezed run, in the first and the
    last line, two of them one line apart, are masked as the oracle says."""
    rng = random.Random(11)
    noise = lambda n: bytes(rng.getrandbits(8) for _ in range(n))  # noqa: E731
    data = (SECRET + noise(200) + SECRET + noise(20) + SECRET + BLOCK * 4 + SECRET + noise(150)
            + SHORT + noise(7) + SECRET)
    text = b"$ x\n" + dump(layout, data)
    expected = naive_redact(text, patterns_for([SECRET, SHORT]))
    assert expected.count(M) >= 4
    assert_chunked_equals_oracle([SECRET, SHORT], text, list(range(5, len(text), 257)))


@pytest.mark.parametrize("layout", ["xxd", "hexdump -C", "od -c", "od -d"])
def test_a_long_secret_beside_a_decoy_with_its_head(layout):
    """A secret longer than the scanned cut (its last 40 bytes; the rest
    compared on a hit) dumped next to a decoy with the same first 50 bytes,
    as JWTs share their header: the secret masked, the decoy not, as the
    oracle says, at every chunking."""
    secret = b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJxMiIsImlhdCI6MTcwMH0.Zq8x"
    decoy = secret[:50] + b"QkV0c2xvZ2ZpbGVzLXNhbWUtaGVhZA.nope"
    text = b"$ x\n" + dump(layout, b"a " + decoy + b" b " + secret + b" c " + decoy + b"\n")
    expected = naive_redact(text, patterns_for([secret]))
    assert expected.count(M) >= 1 and readable(expected, secret[-24:], 8) == []  # (the head is the decoy's too)
    assert redact(text, [secret]) == expected
    assert_chunked_equals_oracle([secret], text, list(range(7, len(text), 61)))


def test_pty_line_endings():
    text = dump("xxd", b"token " + SECRET).replace(b"\n", b"\r\n")
    out = redact(text, [SECRET])
    assert out == M + b"\r\n"  # the lines it touches are one mask


@pytest.mark.parametrize("layout", ["od -An -tx1", "od -b", "od -d", "xxd -b"])
def test_the_switch_leaves_dumps_alone(layout):
    text = dump(layout, SECRET)
    off = dataclasses.replace(Variants(), hexdump=False, fragments=False)
    assert redact(text, [SECRET], variants=off) == text
    out = redact(text, [SECRET])
    assert M in out and readable(out, SECRET) == []


def test_a_partial_line_is_held_only_while_it_may_become_a_dump_line():
    r = StreamRedactor([SECRET])
    assert r.feed(b"bash-5.1$ ") == b"bash-5.1$ "  # a prompt: released at once
    assert r.feed(b"\n00000000: 5a71 38") == b"\n"  # may be a dump line: held until its end
    assert r.held == len(b"00000000: 5a71 38")
    assert r.feed(b"7a\n$ ") == b"00000000: 5a71 387a\n$ "
    assert r.flush() == b""


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from([b" ", b"  ", b"\t", b"-", b"0", b"7", b"a", b"F", b"x", b":", b",", b"|", b">",
                                 b"*", b"nul", b"sp", b"T", b"z", b"%"]), max_size=14).map(b"".join))
def test_may_become_is_its_plain_regex(partial):
    """dumps._MAY_BECOME (possessive, for speed) accepts what its plain,
    backtracking form does: the language the docstring describes."""
    from paddedcell.redactor import dumps

    plain = re.compile(rb"[ \t]*-|[ \t]*(?:-?[0-9A-Fa-f](?:[0-9A-Fa-fxX:, ]|-(?=[0-9]|$))*(?:(?: {2}|\||>).*)?)?|\*"
                       rb"|[0-9A-Fa-f]{4,16}(?: {1,2}(?:%s)|   [!-~])*(?: {1,3}[a-z0-9]{0,3})?" % dumps._NAMES, re.S)
    assert (dumps._MAY_BECOME.fullmatch(partial) is None) == (plain.fullmatch(partial) is None)


@settings(max_examples=5000, deadline=None)
@given(st.lists(st.sampled_from([b" ", b"  ", b"\t", b"-", b"0", b"7", b"a", b"F", b"x", b":", b",", b"|", b">",
                                 b"*", b"nul", b"sp", b"T", b"z", b"%", b"\r", b"\x00", b"\xff",
                                 b"ack", b"dc1", b"esc", b"del", b"ff", b"cr", b"bel", b"k", b"e", b"   "]),
                max_size=14).map(b"".join))
@example(b"0000 ack")  # a name whose first letters are hex digits
@example(b"0a7F  dc")
@example(b"0000: 4142  xhello")  # a gutter after two spaces
@example(b"2026-11-30T10:06:59Z INFO")
@example(b"eyJhbGciOiJIUzI1NiIs")
@example(b"e\rx")
@example(b"e\r")
def test_may_become_equals_its_regex(partial):
    """may_become's early rejections (its first byte, its second after a hex digit) reject
    only what the regex rejects."""
    from paddedcell.redactor import dumps

    want = bool(partial) and len(partial) <= dumps.LINE_MAX and dumps._MAY_BECOME.fullmatch(partial.rstrip(b"\r")) is not None
    assert dumps.may_become(partial) == want


# -- property: generated layouts, any chunking, held == oracle ----------------------


#: Octal and decimal field widths by word size (od pads the one, right-aligns the other).
_OCTAL_WIDTH = {1: 3, 2: 6, 4: 11, 8: 22}
_UNSIGNED_WIDTH = {1: 3, 2: 5, 4: 10, 8: 20}
_SIGNED_WIDTH = {1: 4, 2: 6, 4: 11, 8: 20}


def _number_fields(row: bytes, rng: random.Random) -> bytes:
    """``row`` as od prints octal or decimal words: size, byte order, sign, padding drawn."""
    size = rng.choice([s for s in (1, 2, 4, 8) if len(row) % s == 0])
    order = rng.choice(["little", "big"])
    radix = rng.choice(["o", "u", "d", "zero"])
    out = []
    for i in range(0, len(row), size):
        v = int.from_bytes(row[i:i + size], order)
        if radix == "o":
            out.append(b" %0*o" % (_OCTAL_WIDTH[size], v))
        elif radix == "zero":
            out.append(b"   %0*d" % (_UNSIGNED_WIDTH[size], v))
        elif radix == "u":
            out.append(b" %*d" % (_UNSIGNED_WIDTH[size], v))
        else:
            if v >> (8 * size - 1):
                v -= 1 << (8 * size)
            out.append(b" %*d" % (_SIGNED_WIDTH[size], v))
    return b"".join(out)


def layout_lines(data: bytes, rng: random.Random) -> bytes:
    """``data`` in a random dump layout of the class; repeated lines squeezed to ``*`` or not."""
    per = rng.choice([1, 2, 3, 4, 8, 16])
    group = rng.choice([1, 2, 4, 16])
    little = rng.random() < 0.5
    kind = rng.choice(["xxd", "C", "plain", "none", "i", "c", "a", "numbers", "bits"])
    eol = rng.choice([b"\n", b"\r\n"])
    offset = rng.choice([b"%07o", b"%07d", b"%07x", b""])
    if kind == "numbers":
        per = rng.choice([1, 2, 4, 8, 16])
        data += bytes(-len(data) % per)  # od pads the last word with zeros
    squeeze = rng.random() < 0.5
    lines, previous = [], None
    for off in range(0, len(data), per):
        row = data[off:off + per]
        if squeeze and row == previous and len(row) == per:
            if lines[-1] != b"*":
                lines.append(b"*")
            continue
        previous = row
        if kind == "i":
            lines.append(b"  " + b", ".join(b"0x%02x" % c for c in row) + b",")
            continue
        if kind == "c":
            lines.append(b"%07o" % off + b"".join(b"   %c" % c if 32 < c < 127 else b" %03o" % c for c in row))
            continue
        if kind == "a":  # od -a: names, 7 bits
            lines.append(b"%07o" % off + b"".join(_od_name(c) for c in row))
            continue
        if kind == "numbers":
            lines.append((offset % off if offset else b"") + _number_fields(row, rng))
            continue
        if kind == "bits":
            lines.append(b"%08x: " % off + b" ".join(format(c, "08b").encode() for c in row) + b"  "
                         + bytes(c if 32 <= c < 127 else 46 for c in row))
            continue
        groups = [row[i:i + group] for i in range(0, len(row), group)]
        hexed = b" ".join((g[::-1] if little else g).hex().encode() for g in groups)
        if kind == "xxd":
            lines.append(b"%08x: " % off + hexed + b"  " + bytes(c if 32 <= c < 127 else 46 for c in row))
        elif kind == "C":
            lines.append(b"%08x  " % off + hexed + b"  |" + bytes(c if 32 <= c < 127 else 46 for c in row) + b"|")
        elif kind == "plain":
            lines.append(b"%07o " % off + hexed)
        else:
            lines.append(b" " + hexed)
    return eol.join(lines) + eol


@st.composite
def dumped(draw):
    secrets = draw(st.lists(st.binary(min_size=8, max_size=12) | st.binary(min_size=1, max_size=4).map(
        lambda b: b * (8 // len(b) + 1)), min_size=1, max_size=2))  # a repeated block: squeezed lines
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        pad = draw(st.binary(max_size=6))
        secret = rng.choice(secrets)
        pieces.append(layout_lines(pad + secret * rng.choice([1, 1, 2]) + draw(st.binary(max_size=6)), rng)
                      if rng.random() < 0.7 else draw(st.sampled_from([b"ab 12\n", b"00 ", b"  ", b"x\n", b"0x1"])))
    data = b"".join(pieces)
    cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=12)))
    return secrets, data, cuts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dumped())
def test_dumps_equal_the_oracle_under_any_chunking(case):
    assert_chunked_equals_oracle(*case)


# -- the trigger scan's candidate lines ------------------------------------------------


def lines_read(buf: bytes) -> set[int]:
    """Starts of the lines of ``buf`` that :func:`decode_line` reads as bytes (dump lines).
    A ``*`` line shows no byte, so no trigger lies in it: the trigger scan may skip it (it is
    read with the line before it, which is a candidate)."""
    out, s = set(), 0
    for line in buf.split(b"\n"):
        decoded = decode_line(line)
        if decoded is not None and decoded is not SQUEEZED:
            out.add(s)
        s += len(line) + 1
    return out


@st.composite
def mixed_lines(draw):
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    pieces = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["dump", "junk", "hexish"]))
        if kind == "dump":
            data = draw(st.binary(min_size=1, max_size=40))
            text = layout_lines(data + SECRET + data if draw(st.booleans()) else data, rng)
            pieces.append(draw(st.sampled_from([b"", b" ", b"\t", b"  \t"])) + text)
        elif kind == "hexish":  # near misses: hex runs, separators, no separator, too long
            pieces.append(draw(st.from_regex(rb"\A[ \t]{0,2}[-*0-9a-fA-FxX:|>, \r]{0,40}\n", fullmatch=True)))
        else:
            pieces.append(draw(st.binary(max_size=30)) + b"\n")
    return b"".join(pieces) + draw(st.binary(max_size=8).filter(lambda b: b"\n" not in b))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_lines())
@example(b"*\n")
@example(b"00000000: 4865 6c6c  He\n*\n")
def test_every_dump_line_is_a_candidate_line(buf):
    """The trigger scan skips the lines that are not candidates: every dump line must be one."""
    from paddedcell.redactor import matcher
    from paddedcell.redactor.dumps import CandidateLines

    lines = CandidateLines(matcher.ENGINE is matcher.HyperscanMatcher)
    lines.LIMIT = 10**6
    read = lines_read(buf)
    assert read <= set(lines.starts(buf))
    # ... so the triggers in dump lines are the same, whole buffer or candidate lines.
    finder = _finder(matcher.ENGINE)

    def in_dump_lines(spans):
        return sorted((s, e) for s, e in spans if buf.rfind(b"\n", 0, s) + 1 in read)

    assert in_dump_lines(finder._trigger_spans(buf)) == in_dump_lines(finder._triggers.spans(buf))


def _layout_line():
    """Any line one of decode_line's layout expressions reads (not only what the tools print)."""
    from paddedcell.redactor import dumps

    layouts = [dumps._XXD, dumps._FIELDS, dumps._NUMBERS, dumps._XXD_I, dumps._CHARS]
    return st.sampled_from(layouts).flatmap(lambda rx: st.from_regex(rx, fullmatch=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_layout_line(), st.sampled_from([b"", b"\r", b"\r\r"]), st.binary(max_size=12), st.booleans())
@example(b"00000000  41 42  |AB|", b"", b"x", True)  # a gutter closed: just passes
@example(b"41 42|A|", b"\r", b"", False)  # a gutter right after the fields
@example(b"0000000 del   x  sp", b"", b"", True)  # od -a: names after one space
@example(b"-128  107", b"", b"", True)  # od -An -t d1: a negative first field
def test_every_line_a_layout_reads_is_a_candidate(line, cr, before, first):
    """The candidate gate is whole-line (random text: 1 line in 700 passes): every line
    decode_line reads as bytes must pass it, whatever its fields, at the buffer's start or after a break."""
    from paddedcell.redactor import matcher
    from paddedcell.redactor.dumps import CandidateLines

    line += cr
    decoded = decode_line(line)
    if b"\n" in line or decoded is None or decoded is SQUEEZED:
        return
    buf = line + b"\nzz" if first else before.replace(b"\n", b"") + b"\n" + line + b"\n" + before
    lines = CandidateLines(matcher.ENGINE is matcher.HyperscanMatcher)
    lines.LIMIT = 10**6
    assert (0 if first else buf.index(b"\n") + 1) in lines.starts(buf)


def test_near_misses_are_not_candidates():
    """Lines that hold other bytes before a gutter (text, random bytes) are no candidates:
    the dump finder costs one scan on them."""
    from paddedcell.redactor import matcher
    from paddedcell.redactor.dumps import CandidateLines

    lines = CandidateLines(matcher.ENGINE is matcher.HyperscanMatcher)
    for text in [b"41 42 |AB", b"41 42 >AB", b"deadbeef is a word", b"ab:cd=ef", b"0x41;", b"12 + 3",
                 b"cafe\tbabe", b"a b c d e f g", b"2026-11-30T10:00:00Z INFO"]:
        assert decode_line(text) is None
        assert lines.starts(b"x\n" + text + b"\n") == [], text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_lines())
def test_every_prefix_of_a_dump_line_is_held(buf):
    """A partial line that is the start of a dump line is held (else it could be emitted,
    then masked)."""
    from paddedcell.redactor.dumps import may_become

    for line in buf.split(b"\n"):
        if decode_line(line) is not None:
            assert all(may_become(line[:i]) for i in range(1, len(line) + 1)), line


_finders: dict = {}


def _finder(engine):
    from paddedcell.redactor.dumps import DumpFinder

    if engine not in _finders:
        _finders[engine] = DumpFinder({SECRET, SHORT}, engine)
    return _finders[engine]


def test_many_candidate_lines_scan_the_whole_buffer_with_the_same_output(monkeypatch):
    """Over CandidateLines.LIMIT candidates the whole buffer is scanned: same output as windows."""
    from paddedcell.redactor import dumps, stream

    rng = random.Random(5)
    junk = [b"a %d\n" % i for i in range(40)]  # candidates (a hex field, a space) but no dump run
    text = b"".join(junk) + layout_lines(b"..." + SECRET + b"!!", rng) + b"".join(junk)
    outputs = []
    for limit in (10**6, 0):
        monkeypatch.setattr(dumps.CandidateLines, "LIMIT", limit)
        stream._cache.clear()
        outputs.append(redact(text, [SECRET]))
    stream._cache.clear()
    assert outputs[0] == outputs[1] == naive_redact(text, patterns_for([SECRET]), M)
    assert M in outputs[0]


def test_the_candidate_limit_grows_with_the_buffer():
    """Past CandidateLines.LIMIT candidate lines per 64 KiB begun the whole buffer
    is scanned for triggers (a dump); below it, line by line: a pump's 1 MiB feed of
    text with a few dozen candidate-shaped lines is still read line by line, and a
    dump of a secret among them is masked either way."""
    from paddedcell.redactor import matcher
    from paddedcell.redactor.dumps import CandidateLines

    lines = CandidateLines(matcher.ENGINE is matcher.HyperscanMatcher)
    chunk = b"some text\n0a1b 2c3d\n"
    small = chunk * (CandidateLines.LIMIT + 1)
    assert lines.starts(small) is None
    big = small + b"x" * (1 << 20) + b"\n"
    assert lines.starts(big) == [i * len(chunk) + 10 for i in range(CandidateLines.LIMIT + 1)]
    if shutil.which("xxd") is None:
        pytest.skip("xxd not installed")
    secret = b"Zq8xv2NmP4tR7yWb"
    dump = subprocess.run(["xxd"], input=b"key=" + secret + b";\n", capture_output=True, check=True).stdout
    assert b"5a71 3878" in dump  # "Zq8x"
    for data in (small + dump, big + dump):
        out = redact(data, [secret])
        assert b"5a71" not in out and out.count(b"######") == 1
