"""Dump layouts: a secret shown by ``xxd``, ``hexdump``, ``od``.

A dump spreads a secret's bytes over lines: an offset column, hex, octal,
decimal or binary fields in groups or words (byte-swapped words in
``hexdump``/``od -x``/``xxd -e``/``od -d``), an ASCII gutter, line breaks,
and ``*`` for repeated lines. No literal and no token view sees it whole, so
this form is a *line view*: each dump line is read as the bytes it shows (in
every reading it allows), the lines of a run of consecutive dump lines are
joined per reading, and the secret is searched in those bytes.

The definition (the oracle implements it over the whole stream, this module
over a scan buffer):

* a *line* is the bytes between two ``\\n`` (or the stream's start); its
  trailing ``\\r`` are not part of it. A line is a *dump line* when
  :func:`decode_line` reads it: at most :data:`LINE_MAX` bytes in one of the
  layouts below, giving one or more *readings* (named byte strings: hex
  big-endian and little-endian per group, octal and decimal words of each
  size and byte order, binary, ``od -c`` characters), or a ``*`` line;
* a *run* is a maximal sequence of consecutive dump lines; a reading's
  *pieces* in it are maximal sequences of its lines that have that reading,
  their bytes joined; a ``*`` line has the readings of the line before it,
  repeated until as long as the longest pattern (the number of lines it
  stands for is not shown; see :func:`run_readings`);
* an *occurrence* is a pattern (a secret of 8 bytes or more) in a piece that
  spans at least one line holding a trigger (:func:`triggers`: what a few
  adjacent bytes of a pattern look like in a dump line); it masks the lines it
  touches as one span, from the first one's start (offset column) to the end
  of the last one (gutter included, its line break left); one span, not one
  per line: a held occurrence must start where the next scan finds it again;
* the hold: a partial last line that :func:`may_become` a dump line, and for
  each reading of the last line, the lines of its last piece from the one
  holding the first byte of the longest suffix of its bytes that is a proper
  prefix of a pattern (when the run may still continue).

Layouts read (``H`` a hex digit, ``N`` a digit): ``xxd`` (``OFFSET: HHHH HHHH
gutter``, any ``-g``/``-c``/``-u``/``-e``; ``-b`` binary groups),
``hexdump -C`` and ``od -tx1z`` (``OFFSET  HH HH  |gutter|`` or
``>gutter<``), ``hexdump``/``od -x``/``od -tx1``/``od -tx4``/``hexdump -e``
(fields separated by one to four spaces; the first field is an offset when
its width is odd or differs from the next one's), ``od -An`` (no offset),
``xxd -i`` (``0xHH, 0xHH,``), ``od -c``/``hexdump -c`` (four-column
characters, C escapes, three-digit octal), ``od -a`` (names, 7 bits a byte), octal fields (``od -b``/``-o``/
``-t o1|o2|o4|o8``, ``hexdump -b``/``-o``: zero-padded, the width gives the
word size), decimal fields (``od -d``/``-s``/``-i``/``-l``/``-t d|uN``,
``hexdump -d``: any spaces between, signed or not, every word size the values
fit, the first field read both as an offset and as data), ``*`` lines. Not
read: an offset as wide as the groups without ``:`` (a custom ``hexdump
-e``), several formats interleaved (``od -c -t x1``), ``od -An -c`` (no
candidate line: its fields need not start with a hex digit).
"""

from __future__ import annotations

import re
import struct
import threading
from bisect import bisect_right
from itertools import accumulate
from typing import Iterable

# The C module (loaded by .holds, or None): the views' gates in C (the candidate lines
# here, the %XX triggers in views.PercentGate); without it the regex forms below, which
# define what it returns, run instead.
from .holds import _native

#: A line longer than this (bytes, ``\\r`` included) is not a dump line
#: (``xxd -c 64`` lines are 227 bytes).
LINE_MAX = 256

_XXD = re.compile(
    rb"[ \t]*[0-9A-Fa-f]{1,16}: *((?:[0-9A-Fa-f]{2}){1,16}(?: (?:[0-9A-Fa-f]{2}){1,16})*)"
    rb"(?:( {2,32})((?:[0-9A-Fa-f]{2}){1,16}))?(?: {2}.*| *)", re.S)
_FIELDS = re.compile(rb"[ \t]*((?:[0-9A-Fa-f]{1,32} {1,4})*[0-9A-Fa-f]{1,32}) *(?:\|.*\||>.*<)?", re.S)
_NUMBERS = re.compile(rb"[ \t]*(-?[0-9A-Fa-f]{1,32}(?: +-?[0-9A-Fa-f]{1,32})*) *(?:\|.*\||>.*<)?", re.S)
_XXD_I = re.compile(rb"[ \t]*(0[xX][0-9A-Fa-f]{2}(?:, ?0[xX][0-9A-Fa-f]{2})*),?")
#: ``od -a``'s names of the control characters, space and DEL (it shows a byte's low 7 bits).
_OD_NAMES = (b"nul soh stx etx eot enq ack bel bs ht nl vt ff cr so si dle dc1 dc2 dc3 dc4 nak syn etb "
             b"can em sub esc fs gs rs us sp").split() + [b"del"]
_NAME = {name: (127 if name == b"del" else i) for i, name in enumerate(_OD_NAMES)}
_NAMES = b"|".join(sorted(_OD_NAMES, key=len, reverse=True))
_CHARS = re.compile(rb"[0-9A-Fa-f]{4,16}((?:   [!-~]|    |  \\[0abfnrtv]| [0-7]{3}| {1,2}(?:%s))+) *" % _NAMES)
_CHAR_FIELD = re.compile(rb"   ([!-~])|(    )|  \\([0abfnrtv])| ([0-7]{3})| {1,2}(%s)" % _NAMES)
_ESCAPE = {b"0": 0, b"a": 7, b"b": 8, b"f": 12, b"n": 10, b"r": 13, b"t": 9, b"v": 11}

_OD_ESCAPES = {0: b"0", 7: b"a", 8: b"b", 12: b"f", 10: b"n", 13: b"r", 9: b"t", 11: b"v"}
#: A secret set whose patterns hold more distinct pairs of adjacent bytes than
#: this gets no dump form: its trigger matcher (about 30 literals a pair) would
#: take too long to build. Text secrets stay under it (62 x 62 alphanumeric
#: pairs: ~65 000 triggers, ~4 s to build once per set); binary keys may not.
PAIR_LIMIT = 6_000
#: What :func:`decode_line` returns for a ``*`` line (od, hexdump: the line
#: before it repeats); see :func:`run_readings`.
SQUEEZED: dict[str, bytes] = {}


def _od_char(c: int) -> bytes:
    """``od -c``'s four columns for byte ``c``."""
    if c in _OD_ESCAPES:
        return b"  \\" + _OD_ESCAPES[c]
    return b"   %c" % c if 32 <= c < 127 else b" %03o" % c


def _od_name(c: int) -> bytes:
    """``od -a``'s four columns for byte ``c`` (its low 7 bits)."""
    c &= 127
    return b"   %c" % c if 32 < c < 127 else b"%4s" % (b"del" if c == 127 else _OD_NAMES[c])


def _values(window: bytes) -> set[int]:
    """A word's values as od and hexdump print them: both byte orders,
    unsigned and signed (two's complement)."""
    bits = 8 * len(window)
    out = set()
    for order in ("big", "little"):
        v = int.from_bytes(window, order)
        out.update((v, v - (1 << bits)) if v >> (bits - 1) else (v,))
    return out


def triggers(patterns) -> set[bytes]:
    """What a dump line shows of a few adjacent bytes of a pattern, next to the
    layout's spaces. An occurrence counts only if a line it touches holds one;
    dump text rarely holds them, other text (hashes, ids, numbers) more rarely.

    * hex: two bytes ``c d`` as a whole two-byte group or the first or last two
      bytes of a larger one (``" cd"``, ``"cd "``, ``"cd\\n"``; byte-swapped
      ``dc``), two groups one, two or four spaces apart (``"c d"``), ``xxd -i``
      items; one byte alone on its line after ``xxd``'s offset (``xxd -c 1``:
      ``": cd  "``); lower and upper case; four bytes inside a group (``xxd -g
      16``, lower case, big-endian);
    * ``od -c`` and ``od -a`` fields; one byte in binary (``xxd -b``: eight
      digits 0 or 1 after a space are a dump's);
    * octal and decimal bytes (``od -b``, ``od -t d1``/``u1``): two of them
      after a space, one space apart or right-aligned as od prints them; a word of 2 or 4 bytes
      (``od -o``/``-d``/``-t d4``/``-i``, ``hexdump -o``/``-d``) as its value in
      either byte order, after a space (decimal, also signed; 2-byte words
      also zero-padded: octal, and decimal in five digits as ``hexdump -d``).

    An occurrence (8 bytes or more) over two lines or more shows two bytes or
    more at the end of its first line or at the start of its last one, or one
    byte per line; inside a line it crosses a group edge or lies in a group.
    Words: it holds a whole aligned word of 2 or 4 bytes. Not covered (each
    trigger costs build time, ~0.1 ms): 8-byte words (``od -t d8``/``-l``),
    4-byte octal words (``od -t o4``), upper-case or little-endian groups of
    16 bytes (``xxd -u -g 16``, ``xxd -e -g 16``), one byte per line without
    xxd's offset (``od -w1``: a line ending in one secret byte would be every
    tenth line of any dump)."""
    out: set[bytes] = set()
    for p in patterns:
        for c, d in {(p[i], p[i + 1]) for i in range(len(p) - 1)}:
            for x, y, o in ((b"%02x" % c, b"%02x" % d, b"0x"), (b"%02X" % c, b"%02X" % d, b"0X")):
                for pair in (x + y, y + x):
                    out.update((b" " + pair, pair + b" ", pair + b"\n", pair + b"\r"))
                out.update((x + b" " + y, x + b"  " + y, x + b"    " + y, x + b", " + o + y))
            for show in (_od_char, _od_name):
                first = show(c)
                out.add((first.lstrip(b" ") or first) + show(d))
            out.add(b" %03o %03o" % (c, d))  # od prints a space before every field
            for u in {c, c - 256 if c > 127 else c}:
                for v in {d, d - 256 if d > 127 else d}:
                    # od -t u1 right-aligns in 3 columns, -t d1 in 4; a custom format, one space
                    out.update(b" %d%s%d" % (u, b" " * k, v) for k in {1, 4 - len(b"%d" % v), 5 - len(b"%d" % v)})
        for size in (2, 4):
            for i in range(len(p) - size + 1):
                window = p[i:i + size]
                for v in _values(window):
                    out.add(b" %d" % v)
                    if size == 2 and v >= 0:
                        out.update((b" %06o" % v, b" %05d" % v))
                if size == 4:
                    out.add(window.hex().encode())
        for c in set(p):  # one byte a line: xxd -c 1 (an offset ends with ": "), xxd -b
            out.update((b": %02x  " % c, b": %02X  " % c, b" " + format(c, "08b").encode()))
    return out


#: What a partial line must look like to be held: blanks, then a hex digit
#: (after a ``-``: a negative decimal) and hex digits, spaces, ``:``, ``,``,
#: ``x``, ``-`` before a digit (an offset, groups, ``0x`` items, decimal
#: fields), and after two spaces, ``|`` or ``>`` anything (a gutter, ``od -c``
#: fields); or a ``*`` (squeezed lines); or ``od -a`` fields (names after one space).
#: Written without backtracking (possessive runs; a run takes a space only when
#: no space follows, since two spaces start the gutter, which takes anything):
#: ``re`` then rejects a log line 2-3x faster (1.4 against 3.6 us for a
#: timestamp), on most feeds' last line; the same language as the plain form
#: in tests/test_redactor_dumps.py.
_MAY_BECOME = re.compile(rb"[ \t]*-|[ \t]*+(?:-?[0-9A-Fa-f](?:[0-9A-Fa-fxX:,]++| (?! )|-(?=[0-9]|$))*+(?:(?: {2}|\||>).*)?)?|\*"
                         rb"|[0-9A-Fa-f]{4,16}(?: {1,2}(?:%s)|   [!-~])*(?: {1,3}[a-z0-9]{0,3})?" % _NAMES, re.S)


def _groups(fields: list[bytes]) -> dict[str, bytes] | None:
    be, le = [], []
    for f in fields:
        if len(f) % 2:
            return None
        b = bytes.fromhex(f.decode("ascii"))
        be.append(b)
        le.append(b[::-1])
    big = b"".join(be)
    return {"xb": big, "xl": big if all(len(f) == 2 for f in fields) else b"".join(le)}


#: An octal field's width (zero-padded, as od and hexdump print it) -> its size in bytes.
_OCTAL_SIZE = {3: 1, 6: 2}
_OCTAL = re.compile(rb"[0-7]+")
_BINARY = re.compile(rb"(?:[01]{8})+")
_PACK = {1: "B", 2: "H", 4: "I"}


def _words(values: list[int], size: int, key: str, out: dict[str, bytes]) -> None:
    """``values`` as words of ``size`` bytes, both byte orders (one reading for bytes)."""
    if size == 1:
        out[key] = bytes(values)
        return
    code = _PACK[size] * len(values)
    out[key + "b"] = struct.pack(">" + code, *values)
    out[key + "l"] = struct.pack("<" + code, *values)


def _numbers(fields: list[bytes], out: dict[str, bytes]) -> None:
    """Octal and decimal readings of a line's fields (od -b/-o/-d/-t o|d|uN,
    hexdump -b/-o/-d). Octal fields are zero-padded, so their width gives the
    size and an offset is told by its width, as for hex. Decimal fields are
    padded with spaces and signed or not, so every size their values fit is
    read, with the first field as an offset and as data (od -An). Words of 8
    bytes and octal words of 4 are not read (no trigger shows them)."""
    data = fields[1:] if len(fields) > 1 and len(fields[0]) != len(fields[1]) else fields
    size = _OCTAL_SIZE.get(len(data[0]))
    if size and all(len(f) == len(data[0]) for f in data) and _OCTAL.fullmatch(b"".join(data)):
        values = [int(f, 8) for f in data]
        if max(values) >> (8 * size) == 0:
            _words(values, size, "o", out)
    try:
        rest = [int(f) for f in fields[1:]]  # int() reads a decimal field and nothing else here
    except ValueError:
        return
    readings = [("e", rest)] if rest else []
    try:
        readings.append(("d", [int(fields[0]), *rest]))
    except ValueError:
        pass
    for key, values in readings:
        low, high = min(values), max(values)
        for size in (1, 2, 4):
            bits = 8 * size
            if low >= -(1 << (bits - 1)) and high >> bits == 0:
                _words([v & ((1 << bits) - 1) for v in values] if low < 0 else values, size, f"{key}{size}", out)


def decode_line(line: bytes) -> dict[str, bytes] | None:
    """The bytes a dump line shows, by reading (hex big- and little-endian per
    group, octal and decimal words of each size and byte order, binary);
    :data:`SQUEEZED` for a ``*`` line; None if ``line`` (without its ``\\n``)
    is no dump line. A run is read per reading: consecutive lines that have it."""
    if len(line) > LINE_MAX:
        return None
    line = line.rstrip(b"\r")
    if not line or b"\r" in line or b"\n" in line:
        return None
    if line == b"*":
        return SQUEEZED
    out: dict[str, bytes] = {}
    m = _XXD_I.fullmatch(line)
    if m is not None:
        items = m.group(1).replace(b" ", b"").split(b",")
        return {"xb": bytes(int(x[2:], 16) for x in items)}
    m = _XXD.fullmatch(line)
    if m is not None:
        groups = m.group(1).split(b" ")
        pad, last = m.group(2), m.group(3)
        if last is not None and len(pad) - 1 + len(last) == len(groups[-1]):
            groups.append(last)  # xxd -e: a partial last group, right-aligned in its column
        if _BINARY.fullmatch(b"".join(groups)):  # xxd -b
            bits = b"".join(groups)
            out["b"] = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
        out.update(_groups(groups) or {})
        return out or None
    m = _FIELDS.fullmatch(line)
    if m is not None:
        fields = m.group(1).split()
        if len(fields) > 1 and (len(fields[0]) % 2 or len(fields[0]) != len(fields[1])):
            out.update(_groups(fields[1:]) or {})
        else:
            out.update(_groups(fields) or {})
    m = _NUMBERS.fullmatch(line)
    if m is not None:
        _numbers(m.group(1).split(), out)
    m = _CHARS.fullmatch(line)
    if m is not None:
        out.update(_characters(m.group(1)))
    return out or None


def _characters(fields: bytes) -> dict[str, bytes]:
    """``od -c``/``hexdump -c`` (reading ``c``) and ``od -a`` (reading ``a``,
    7 bits a byte) fields; printable characters alone read both ways."""
    chars, c_only, a_only = bytearray(), False, False
    for f in _CHAR_FIELD.finditer(fields):
        char, space, esc, octal, name = f.groups()
        if char is not None:
            chars += char
        elif name is not None:
            if len(f.group(0)) != 4:
                return {}  # a name is right-aligned in four columns
            chars.append(_NAME[name])
            a_only = True
        elif space is not None:
            chars += b" "
            c_only = True
        elif esc is not None:
            chars.append(_ESCAPE[esc])
            c_only = True
        else:
            value = int(octal, 8)
            if value > 255:
                return {}
            chars.append(value)
            c_only = True
    if c_only and a_only:
        return {}
    data = bytes(chars)
    return {"c": data} if c_only else {"a": data} if a_only else {"c": data, "a": data}


def run_readings(decoded: list[dict[str, bytes]], longest: int) -> dict[str, list[tuple[int, list[bytes]]]]:
    """The readings of a run of dump lines (``decoded``: :func:`decode_line` of
    each): per reading, its pieces as ``(first line, the bytes of each line)``,
    a piece being consecutive lines that have that reading. A ``*`` line
    (repeated lines squeezed) reads as the line before it repeated to
    ``longest`` bytes or more: a pattern across the squeezed lines is found
    whatever their number."""
    out: dict[str, list[tuple[int, list[bytes]]]] = {}
    open_: dict[str, tuple[int, list[bytes]]] = {}
    for i, d in enumerate(decoded):
        if d is SQUEEZED:
            for _, parts in open_.values():
                parts.append(parts[-1] * -(-longest // len(parts[-1])))
            continue
        for k in [k for k in open_ if k not in d]:
            out.setdefault(k, []).append(open_.pop(k))
        for k, b in d.items():
            if k in open_:
                open_[k][1].append(b)
            else:
                open_[k] = (i, [b])
    for k, piece in open_.items():
        out.setdefault(k, []).append(piece)
    return out


#: The first bytes of what :data:`_MAY_BECOME` accepts (the empty string aside).
_MAY_START = frozenset(b" \t-*0123456789abcdefABCDEF")
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
#: The second bytes it accepts after a hex digit (a run's, or a gutter's first).
_MAY_SECOND = _HEX_DIGITS | frozenset(b"xX:, -|>")


def may_become(partial: bytes) -> bool:
    """Whether a partial last line (no ``\\n`` yet) is held: it may still become a dump line."""
    if not partial or len(partial) > LINE_MAX:
        return False
    partial = partial.rstrip(b"\r")
    if partial and partial[0] not in _MAY_START:
        return False  # most feeds' last line (text): no regex call
    if len(partial) > 1 and partial[1] not in _MAY_SECOND and partial[0] in _HEX_DIGITS:
        return False  # a token starting with a hex digit (a JWT's "ey", a repeated secret's head): neither
    return _MAY_BECOME.fullmatch(partial) is not None


#: A whole line that may be a dump line (a loose superset of :func:`decode_line`'s
#: layouts, ``*`` lines aside: they show no byte, so hold no trigger): blanks,
#: a hex digit (after a ``-``: a negative decimal field), then only hex digits,
#: spaces, ``:`` ``,`` ``x`` ``X`` ``-`` (offsets, groups, ``0x`` items,
#: decimal fields), ended by a gutter (anything after two spaces, ``|...|``,
#: ``>...<``) or not; or ``od -c``/``od -a`` fields after an offset. Ordinary
#: text rarely passes: its lines hold other bytes before any gutter (random
#: printable text: 1 line in 380, against 1 in 43 for the first field alone).
_CANDIDATE = (rb"(?:[ \t]*-?[0-9A-Fa-f][-0-9A-Fa-f :xX,]*(?: {2}.*|\|.*\||>.*<)?|" + _CHARS.pattern
              + rb")\r*$")
_CANDIDATE_AFTER_BREAK = re.compile(rb"\n" + _CANDIDATE, re.M)
_CANDIDATE_AT_START = re.compile(_CANDIDATE, re.M)
#: The ``od -c``/``od -a`` alternative of :data:`_CANDIDATE` for one line (no
#: ``\n``), ``fullmatch(buf, start, end)``: the native scan decides the other
#: one itself and asks this for the lines that start with 4-16 hex digits and a space.
_CHARS_LINE = re.compile(_CHARS.pattern + rb"\r*")


def _count(pending: dict[str, int] | None, decoded: dict[str, bytes], need: int) -> None:
    """Add a line's bytes to each reading still short of ``need`` (a window's
    walk, see :meth:`DumpFinder._spans`); a reading the line lacks ends there."""
    if pending is None:
        return
    for k in list(pending):
        pending[k] += len(decoded.get(k, b""))
        if k not in decoded or pending[k] >= need:
            del pending[k]


#: "Find the candidate lines yourself" (a caller that has not).
_SCAN: list = ["scan"]


class CandidateLines:
    """Starts of the lines of a buffer that may be dump lines (:data:`_CANDIDATE`),
    in one C-speed scan (Hyperscan, multi-line ``^``/``$``; else :mod:`re` from each line break);
    None when there are more than :attr:`LIMIT` per 64 KiB begun (a dump: scan it all).

    Text without such lines then costs this scan alone, not the trigger scan
    of a few thousand literals (and with pyahocorasick, ~50x less). The limit
    grows with the buffer: the pump feeds up to 1 MiB, where random printable
    text has ~60 candidate lines, and a limit of 32 sent the trigger scan over
    the whole MiB."""

    LIMIT = 32

    @staticmethod
    def line_starts(buf: bytes, ends: Iterable[int]) -> list[int]:
        """The start of each line a candidate match ends in, once, in order."""
        return sorted({buf.rfind(b"\n", 0, e) + 1 for e in ends})

    def __init__(self, hyperscan: bool):
        self._db = None
        if _native is not None:
            self.starts = self._native_starts  # one C pass (see _native.c); no database to build
        elif hyperscan:
            import pyperscan as ps

            self._db = ps.BlockDatabase(ps.Pattern(b"^" + _CANDIDATE, ps.Flag.MULTILINE))
            self._local = threading.local()
            self._go_on, self._stop = ps.Scan.Continue, ps.Scan.Terminate

    def _scanner(self) -> tuple:
        """This thread's ``(scanner, [limit, ends found...])`` (a scratch space each)."""
        go_on, stop = self._go_on, self._stop

        def report(add, _tag, _start, end):
            add(end)
            return stop if len(ends) > ends[0] else go_on

        ends: list[int] = [0]
        pair = self._local.pair = (self._db.build(ends.append, report), ends)
        return pair

    def _native_starts(self, buf: bytes) -> list[int] | None:
        return _native.candidate_lines(buf, self.LIMIT * (1 + len(buf) // 65536), _CHARS_LINE.fullmatch)

    def starts(self, buf: bytes) -> list[int] | None:
        limit = self.LIMIT * (1 + len(buf) // 65536)  # most candidate lines read one by one
        if self._db is None:
            out = [0] if _CANDIDATE_AT_START.match(buf) else []
            for m in _CANDIDATE_AFTER_BREAK.finditer(buf):
                out.append(m.start() + 1)
                if len(out) > limit:
                    return None
            return out
        scanner, ends = getattr(self._local, "pair", None) or self._scanner()
        ends[0] = limit + 1
        if scanner.scan(buf) == self._stop:
            out = None
        elif len(ends) == 1:
            return []  # (the common case: no candidate line, nothing to sort or clear)
        else:
            out = self.line_starts(buf, ends[1:])
        del ends[1:]
        return out


class DumpFinder:
    """Occurrences of patterns in the dump lines of a scan buffer, and the hold.

    The scan buffer starts at a line start, or with the ``\\n`` that ends an
    emitted line, or inside a line already longer than :data:`LINE_MAX`
    (:meth:`sync` keeps it so); the first piece of the buffer is then read
    as a line, exactly as the whole stream would read it. Text without a
    trigger costs one engine scan for the triggers.
    """

    CAP = 40

    def __init__(self, patterns: set[bytes], engine: type):
        from . import matcher as _matcher

        # The patterns cut to their LAST CAP bytes, the rest compared on a hit
        # (as the views do, see views.Viewed): secrets share headers (every
        # JWT a log shows shares a JWT secret's first 40 bytes), not tails.
        self._full: dict[bytes, list[bytes]] = {}
        for p in patterns:
            self._full.setdefault(p[-self.CAP :], []).append(p)
        self._m = _matcher.build(self._full, engine, hold=False)
        self._proper = _matcher.PrefixIndex({p[:-1] for p in patterns if len(p) > 1}, engine)
        self._proper.maxlen += 1
        self._longest = max(map(len, patterns))
        self._triggers = _matcher.build(triggers(patterns), engine, hold=False)
        #: The candidate lines' scan (shared with :class:`.views.Gates`).
        self.candidates = CandidateLines(engine is _matcher.HyperscanMatcher)
        if _native is not None:
            self.sync = _native_sync  # (called on every feed)

    def scan(self, buf: bytes, final: bool, found: list[tuple[int, int]], lines=_SCAN) -> int:
        """Add the occurrences in ``buf`` to ``found``; return the hold (0 when final).
        ``lines``: :meth:`CandidateLines.starts` of ``buf`` when the caller has them."""
        n = len(buf)
        last = buf.rfind(b"\n")
        limit = n if final else last + 1  # complete lines end before limit
        if limit > 0 and lines != []:
            # A partial last line that may become a dump line is a candidate (its start is
            # limit): no occurrence ends before limit there, so its trigger scan is skipped
            # (the Hyperscan scan of a few dozen bytes over a cold database, ~10 us: on 8 % of
            # the 4 KiB feeds of a log whose lines start with a date, cut inside it).
            # (Only the last line can start there: lines are in order.)
            spanned = lines[:-1] if lines is not _SCAN and lines and lines[-1] >= limit else lines
            if spanned != []:
                self._spans(buf, limit, final, found, spanned)
        return 0 if final else self._hold(buf, last, lines)

    def _line(self, buf: bytes, start: int, limit: int) -> tuple[int, int]:
        """``(start, end)`` of the line at ``start`` (end: its ``\\n`` or ``limit``)."""
        e = buf.find(b"\n", start, limit)
        return start, (limit if e < 0 else e)

    def _spans(self, buf: bytes, limit: int, final: bool, found: list[tuple[int, int]], lines=_SCAN) -> None:
        """Occurrences in the dump lines around the lines holding a trigger.

        Each marked line is read with a *window* of its run: lines back and
        forth until every reading it has holds ``longest - 1`` bytes on each
        side, or that reading's piece ends (a ``*`` line stands for ``longest``
        bytes; a window never starts on one). An occurrence touching the
        marked line lies inside its window in its reading, so reading the
        windows (overlapping ones merged) finds what reading the whole run
        finds, without decoding every line of a long dump."""
        hits = sorted(s for s, e in self._trigger_spans(buf, lines) if e <= limit)
        if not hits:
            return
        marked = sorted({buf.rfind(b"\n", 0, s) + 1 for s in hits})  # lines holding a trigger
        lines: dict[int, tuple[int, dict[str, bytes] | None]] = {}  # start -> (end, decoded)

        def line(start: int) -> tuple[int, dict[str, bytes] | None]:
            got = lines.get(start)
            if got is None:
                e = buf.find(b"\n", start, limit)
                e = limit if e < 0 else e
                got = lines[start] = (e, decode_line(buf[start:e]))
            return got

        need = self._longest - 1
        windows: list[list[int]] = []  # [first line start, last line start]
        for m in marked:
            d = line(m)[1]
            if d is None:
                continue
            first = last = m
            if d is SQUEEZED:  # (a trigger holds bytes; a '*' line shows none) the whole run
                pending_back = pending_fwd = None
            else:
                pending_back, pending_fwd = dict.fromkeys(d, 0), dict.fromkeys(d, 0)
            star = False
            while first > 0 and (pending_back is None or pending_back or star):
                p = buf.rfind(b"\n", 0, first - 1) + 1
                dp = line(p)[1]
                if dp is None:
                    break
                first = p
                if dp is SQUEEZED:
                    # It stands for longest bytes of every reading open there,
                    # those of the line it repeats: read from that line on.
                    star = pending_back is not None
                    if star:
                        pending_back = {}
                    continue
                if star:
                    break
                _count(pending_back, dp, need)
            while pending_fwd is None or pending_fwd:
                e = line(last)[0]
                if e + 1 >= limit:
                    break
                dn = line(e + 1)[1]
                if dn is None:
                    break
                last = e + 1
                if dn is SQUEEZED:
                    if pending_fwd is not None:
                        pending_fwd = {}
                    continue
                _count(pending_fwd, dn, need)
            windows.append([first, last])
        merged: list[list[int]] = []
        for first, last in sorted(windows):
            if merged and first <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        is_marked = set(marked)
        for first, last in merged:
            run, a = [], first
            while True:
                e, d = line(a)
                raw = buf[a:e]
                run.append((a, a + len(raw.rstrip(b"\r")), d, a in is_marked))
                if a >= last:
                    break
                a = e + 1
            self._run_hits(run, found)

    def _trigger_spans(self, buf: bytes, starts=_SCAN) -> list[tuple[int, int]]:
        """The triggers in the candidate lines of ``buf`` (each with its line
        break): every dump line is one, so the triggers in dump lines are
        those of a scan of the whole buffer. Few candidates: only they are
        scanned, joined by NUL bytes (no trigger holds one); many (a dump):
        the whole buffer."""
        if starts is _SCAN:
            starts = self.candidates.starts(buf)
        if starts is None:
            return self._triggers.spans(buf)
        if not starts:
            return []
        pieces, at, where, j = [], [], [], 0
        for s in starts:
            if pieces and s == where[-1] + len(pieces[-1]):
                e = buf.find(b"\n", s) + 1 or len(buf)
                pieces[-1] += buf[s:e]  # the next line of the same window
                continue
            e = buf.find(b"\n", s) + 1 or len(buf)
            if pieces:
                j += len(pieces[-1]) + 1
            pieces.append(buf[s:e])
            at.append(j)
            where.append(s)
        out = []
        for s, e in self._triggers.spans(b"\0".join(pieces)):
            k = bisect_right(at, s) - 1
            out.append((s - at[k] + where[k], e - at[k] + where[k]))
        return out

    def _run_hits(self, lines, found: list[tuple[int, int]]) -> None:
        seen = set()
        for first, parts in (piece for pieces in run_readings([d for _, _, d, _ in lines], self._longest).values()
                             for piece in pieces):
            data = b"".join(parts)
            if (first, data) in seen:
                continue  # the same bytes by another reading (one-byte groups)
            seen.add((first, data))
            ends = list(accumulate(len(x) for x in parts))
            for s, e in self._m.spans(data):
                for p in self._full.get(data[s:e], ()):  # the patterns ending with the hit
                    u = e - len(p)
                    if u < 0 or not data.startswith(p, u):
                        continue
                    a, b = first + bisect_right(ends, u), first + bisect_right(ends, e - 1)
                    if any(lines[k][3] for k in range(a, b + 1)):
                        found.append((lines[a][0], lines[b][1]))

    def _hold(self, buf: bytes, last: int, lines=_SCAN) -> int:
        n = len(buf)
        pending = buf[last + 1 :]
        held = len(pending) if may_become(pending) else 0
        if last < 0 or (pending and not held):
            return held
        if lines is not None and lines is not _SCAN:
            # Every line decode_line reads as bytes is a candidate (and a '*'
            # line reads as the line before it): a last line that is neither
            # ends no run, so nothing more is held. Saves its decode_line
            # (~2.5 us), on most terminal reads (they end with a line break).
            s = buf.rfind(b"\n", 0, last) + 1
            if s not in lines and buf[s:last].rstrip(b"\r") != b"*":
                return held
        # The last run may continue: its lines from the end, enough bytes back
        # in every reading the last line has (a squeezed line: its line before).
        starts, decoded, need = [], [], self._proper.maxlen
        totals: dict[str, int] | None = None  # bytes so far of each reading the last line has
        squeezed, e = 0, last
        while True:
            s = buf.rfind(b"\n", 0, e) + 1
            d = decode_line(buf[s:e])
            if d is None:
                break
            starts.append(s)
            decoded.append(d)
            if d is SQUEEZED:
                squeezed += 1
            else:
                if totals is None:
                    totals = dict.fromkeys(d, 0)
                for k in list(totals):
                    if k in d:
                        totals[k] += len(d[k]) * (1 + squeezed * -(-self._longest // len(d[k])))
                    else:
                        del totals[k]  # this reading starts after this line
                squeezed = 0
                if all(t >= need for t in totals.values()):
                    break
            if s == 0:
                break
            e = s - 1
        if not starts:
            return held
        starts.reverse()
        decoded.reverse()
        for first, parts in (pieces[-1] for pieces in run_readings(decoded, self._longest).values()):
            if first + len(parts) != len(decoded):
                continue  # a reading the last line has not
            h = self._proper.hold(b"".join(parts))
            if h:
                i = len(parts) - 1  # the line holding the h-th byte from the end
                while h > len(parts[i]):
                    h -= len(parts[i])
                    i -= 1
                held = max(held, n - starts[first + i])
        return held

    @staticmethod
    def sync(buf: bytes, i: int) -> int:
        """Keep the ``\\n`` before the line holding ``i`` (a line start is known
        then), or, inside a line already longer than LINE_MAX, LINE_MAX + 1
        bytes of it (it stays too long to be a dump line). A ``*`` line reads
        as the line before it: that one is kept too."""
        j = buf.rfind(b"\n", max(0, i - LINE_MAX - 1), i)
        if j < 0:
            return 0 if i <= LINE_MAX + 1 else i - LINE_MAX - 1
        while True:
            e = buf.find(b"\n", j + 1)
            if buf[j + 1 : len(buf) if e < 0 else e].rstrip(b"\r") != b"*":
                return j
            k = buf.rfind(b"\n", max(0, j - LINE_MAX - 1), j)
            if k < 0:
                return 0 if j <= LINE_MAX + 1 else j
            j = k


def _native_sync(buf: bytes, i: int, _sync=getattr(_native, "dump_sync", None), _max=LINE_MAX) -> int:
    """:meth:`DumpFinder.sync` in C."""
    return _sync(buf, i, _max)
