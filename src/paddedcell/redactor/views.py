"""Pattern forms: a secret spread over separators, found through *views*.

Four forms are not one literal each but a family with a separator allowed
between characters:

* ``space`` (switch ``crlf``): a secret with a line break, a tab or a run of
  spaces, printed with ANY run of whitespace where it has whitespace (``\\r\\r\\n``
  from a PTY, spaces from ``echo $KEY``, mixed runs): tokens joined by ``\\s+``;
* ``wrap`` (switch ``wrapped``; encodings from ``base64``/``hex``): base64 (every
  alignment, both alphabets) and hex of a secret with any ``\\r``/``\\n`` between
  any two of its characters (``base64 -w 17``, ``xxd -p -c 7``, ``base64
  app.env`` with ``DB_PASSWORD=<secret>`` wrapped mid-line);
* ``percent`` (switch ``url``): each byte of the secret literal or ``%XX``,
  each independently, either hex case;
* ``csi`` (switch ``csi``): SGR/CSI escape sequences (``ESC [ params
  intermediates final``, at most 31 bytes) anywhere inside the secret
  (``grep --color=always``, raw terminal bytes in ``paddedcell redact``).

Design: views, not regexes
--------------------------
Each family is a *view* of the stream: a tokenizer (one regular expression,
scanned leftmost and non-overlapping, as ``re.sub`` does) replaces each
separator token — a whitespace run by one space, ``\\r``/``\\n`` by nothing,
``%XX`` by its byte, a CSI sequence by nothing — and keeps the position of
each view byte in the raw stream. The existing literal matcher (Hyperscan or
pyahocorasick) runs over the view with the family's literal patterns (the
secret with its whitespace collapsed, its encodings, the secret itself), and
each view occurrence masks the raw bytes from its first view byte's token to
its last one's: escapes and line breaks inside a secret are masked with it, in
one mask. The literal core (engines, prefix index, exactness, the oracle's
literal part) stays as it is and both engines get the forms for free. The previous design
note proposed Hyperscan regexes with ``SOM_LEFTMOST``; rejected because the
hold-back needs "longest suffix that is a prefix of the language", which
Hyperscan cannot answer without a second, prefix-closed database of nested
optional groups as deep as the secret (4 KiB PEM keys), and the portable
engine would have had no equivalent but Python ``re`` per position.

The definition (what the oracle implements independently, byte by byte):
tokenize the whole stream from its first byte; an occurrence is an
occurrence of a family pattern in the view; it masks raw ``[start of its
first byte's token, end of its last byte's token)``. Consequences, stated
once: a ``%XX`` of the secret's own text is decoded (``ab%41cd`` printed
literally is the literal, not this form); an occurrence cannot begin inside
a token (``%4`` followed by ``1…`` decodes the ``1`` into ``A``).

Exact across chunking
---------------------
The redactor scans ``held tail + new data`` with no state. Two facts make a
view of that buffer agree with the view of the whole stream:

* *Resynchronisation*: tokenizing from a byte inside a token agrees with the
  whole stream's tokenization from the end of that token on (a ``%XX`` token
  holds no ``%`` after its first byte, a CSI sequence no ESC; a whitespace
  run's tail is still one space, and no pattern starts with a space). So
  :meth:`Viewed.sync` moves the buffer start back to the start of the token
  holding the cut (at most 30 bytes; those bytes are already emitted, and
  every occurrence they belong to is complete and already masked).
* *Incomplete tokens*: ``%``, ``%4``, ``ESC``, ``ESC[1;3`` at the end may
  still become a token. The view is taken over the complete part only; the
  incomplete token is held (and read as literal bytes at end of stream).

Costs (measured, see the issue 9 and 21 notes): the line-break view shares its
one scan with the literals (:class:`ThroughLineBreaks`), so a buffer costs one
``bytes.replace`` more than before; the ``%XX`` and CSI views cost a
transform and a scan each, the CSI view only on buffers holding an ESC, the
``%XX`` view only over windows around its *triggers* (``%XX`` tokens of a
secret byte inside three view-consecutive bytes of a secret, two at the
buffer's end; on buffers holding ``%``) and over the last few dozen bytes for
the hold only when a trigger is near the end. The triggers and the dump
view's candidate lines are found by raw scans (:class:`Gates`), so a feed
costs the literals' engine scan, the candidate lines' (with a dump view),
the ``%XX`` tokens' on a buffer holding ``%`` and the hold's short one. Each view is one step
of :meth:`Viewed.scan_keep` (a feed's one call: the scan, its hold and
:meth:`Viewed.sync` of the cut) behind its gate (see :meth:`Viewed._steps_for`). Only memchr-speed checks (``in`` of one
byte) come before a Hyperscan scan: ``re`` and ``bytes.find`` of two bytes or
more run at ~1 ns a byte here, a pyperscan scan at ~0.2-0.4 and ~1 us a call.
The exact hold for a line break inside an encoded form means a line that
ends in a character that starts some encoded form keeps that character
*and its newline* until the next byte (8 % of the lines of a token-heavy
log with 50 secrets): ``redactor.forms_off = wrapped`` gives that latency back.

Minimal hold-back: for each view, the raw bytes from the first token of the
longest view suffix that is a proper prefix of a view pattern,
and at least the incomplete token at the end; the redactor holds the largest
of these and the literal hold. Tested against the oracle after every byte.
"""

from __future__ import annotations

import re
import struct
import threading
from bisect import bisect_right
from functools import partial
from operator import sub
from typing import Iterable

from . import dumps as _dumps, matcher as _matcher
from .holds import _ORDER, _Grams
from .dumps import _CHARS_LINE, PAIR_LIMIT, CandidateLines, DumpFinder, _native
from .variants import Variants, base32_inner_forms, base64_inner_forms, _URLSAFE

#: The line-break view's deletion in C (:mod:`._native`), or None.
_strip_breaks = getattr(_native, "strip_breaks", None)
#: The last byte before an offset that is no line break, in C (:mod:`._native`), or None.
_last_not_break = getattr(_native, "last_not_break", None)
#: Whitespace as ``bytes.split()`` sees it.
WS = b" \t\n\r\x0b\x0c"
#: A CSI sequence: ESC [ parameter bytes, intermediate bytes, final byte; at most 31 bytes.
CSI = rb"\x1b\[[0-?]{0,24}[ -/]{0,4}[@-~]"
_HEX = frozenset(b"0123456789abcdefABCDEF")
#: First bytes of a partial line that :func:`.dumps.may_become` turns away at once.
_NO_DUMP_LINE = frozenset(range(256)) - _dumps._MAY_START - {13}
_may_become = _dumps.may_become


def _partial_may_become(buf: bytes, start: int) -> bool:
    """:func:`.dumps.may_become` of the last line ``buf[start:]`` (``start < len(buf)``): a
    line starting with a byte no dump line starts with is turned away at once (no slice, no frame)."""
    return buf[start] not in _NO_DUMP_LINE and _may_become(buf[start:])


def _all_in(allowed: bytes):
    """``test(buf, start)``: whether every byte of ``buf[start:]`` is one of ``allowed``
    (in C when built: one table lookup a byte, no slice; ``rstrip`` is a memchr a byte)."""
    if _native is not None and hasattr(_native, "all_in"):
        return partial(_native.all_in, _bitset(allowed, 256))
    return lambda buf, start: not buf[start:].rstrip(allowed)
_WS = frozenset(WS)


class View:
    """One family: its tokenizer, what a token becomes, and how far back a
    tokenization started inside a token can be wrong (``reach``)."""

    name = "?"
    token: re.Pattern
    reach = 1  # bytes after a window start before its tokenization is the stream's
    needs_sync = False

    def relevant(self, buf: bytes) -> bool:
        """False when the view equals ``buf`` and its patterns are literals already."""
        raise NotImplementedError

    def replace(self, m: re.Match) -> bytes:
        raise NotImplementedError

    def view(self, part: bytes) -> bytes:
        return self.token.sub(self.replace, part)

    def incomplete(self, buf: bytes) -> int:
        """Length of the tail of ``buf`` that may still become a token."""
        return 0

    def layout(self, buf: bytes, a: int, b: int) -> tuple[list[tuple[int, int, int, int]], list[int], int]:
        """Tokens of ``buf[a:b]`` as ``(raw start, raw end, view start, view length)``,
        their view starts, and the view's length."""
        tokens, starts, v, prev = [], [], 0, a
        for m in self.token.finditer(buf, a, b):
            s, e = m.span()
            v += s - prev
            n = len(self.replace(m))
            tokens.append((s, e, v, n))
            starts.append(v)
            v += n
            prev = e
        return tokens, starts, v + (b - prev)


def _to_raw(tokens, starts, a: int, k: int) -> tuple[int, int]:
    """Raw ``[start, end)`` of view byte ``k`` (of a layout starting at raw ``a``)."""
    j = bisect_right(starts, k) - 1  # the last token that starts at or before k
    if j < 0:
        return a + k, a + k + 1
    s, e, vs, n = tokens[j]
    if k < vs + n:
        return s, e
    r = e + (k - vs - n)
    return r, r + 1


class SpaceView(View):
    name = "space"
    token = re.compile(rb"[ \t\n\r\x0b\x0c]+")
    _other = re.compile(rb"[\t\n\r\x0b\x0c]| {2}")

    def relevant(self, buf):
        return self._other.search(buf) is not None

    def replace(self, m):
        return b" "

    def view(self, part):
        """``token.sub(b" ", part)`` at C speed: ``re`` tries its class at every
        byte (~30 ns: 2 ms per 64 KiB, paid by every feed with a line break
        once a secret holds whitespace); ``split`` takes the same runs
        (ASCII whitespace is :data:`WS`), only the ends need their space back."""
        words = part.split()
        if not words:
            return b" " if part else b""
        out = b" ".join(words)
        if part[0] in _WS:
            out = b" " + out
        return out + b" " if part[-1] in _WS else out


class WrapView(View):
    name = "wrap"
    token = re.compile(rb"[\r\n]")

    def relevant(self, buf):
        return b"\n" in buf or b"\r" in buf

    def replace(self, m):
        return b""

    def view(self, part):
        if _strip_breaks is not None:
            return _strip_breaks(part)  # both in one C pass (_native.c: blocks compressed at the CPU's SIMD level)
        if part.count(b"\n", 0, 128) > 8:  # dense (`yes ''`): replace() pays per break; count() is ~1 ns a byte
            return part.translate(None, b"\r\n")
        part = part.replace(b"\n", b"")  # memchr-fast; translate() is 4x slower here
        return part.replace(b"\r", b"") if b"\r" in part else part


class PercentView(View):
    name = "percent"
    token = re.compile(rb"%[0-9A-Fa-f]{2}")
    reach = 3
    needs_sync = True
    lead = b"%"

    _decoded = {b"%" + bytes((a, b)): bytes((int(bytes((a, b)), 16),)) for a in _HEX for b in _HEX}

    def relevant(self, buf):
        return b"%" in buf and self.token.search(buf) is not None  # "100%" alone: no view

    def replace(self, m):
        return self._decoded[m.group()]

    def view(self, part):
        decoded = self._decoded
        return self.token.sub(lambda m: decoded[m.group()], part)

    def incomplete(self, buf):
        if buf[-1:] == b"%":
            return 1
        if buf[-2:-1] == b"%" and buf[-1] in _HEX:
            return 2
        return 0


class CsiView(View):
    name = "csi"
    token = re.compile(CSI)
    _prefix = re.compile(rb"\x1b(?:\[[0-?]{0,24}[ -/]{0,4})?")
    reach = 31
    needs_sync = True
    lead = b"\x1b"

    def relevant(self, buf):
        return b"\x1b" in buf

    def replace(self, m):
        return b""

    def view(self, part):
        return self.token.sub(b"", part)

    def incomplete(self, buf):
        n = len(buf)
        i = buf.rfind(b"\x1b", max(0, n - 30))
        if i >= 0 and self._prefix.fullmatch(buf, i):
            return n - i
        return 0


VIEWS = {"space": SpaceView(), "wrap": WrapView(), "percent": PercentView(), "csi": CsiView()}


def view_patterns(
    secrets: Iterable[bytes], variants: Variants, variant_min_length: int = 8
) -> dict[str, set[bytes]]:
    """Each view family's literal patterns (only families that have some).

    Every pattern is also one of the literal forms (the secret, its
    ``echo $KEY`` form, its base64/hex forms): a buffer without the family's
    separator needs no view (see :meth:`View.relevant`).
    """
    out: dict[str, set[bytes]] = {}
    for s in set(secrets):
        if len(s) < variant_min_length:
            continue
        if variants.crlf and (b"\n" in s or b"  " in s or b"\t" in s):
            collapsed = b" ".join(s.split())
            if b" " in collapsed and len(collapsed) >= 8:
                out.setdefault("space", set()).add(collapsed)
        if variants.wrapped:
            if variants.base64:
                for inner in base64_inner_forms(s):
                    if inner:
                        out.setdefault("wrap", set()).update((inner, inner.translate(_URLSAFE)))
            if variants.hex:
                out.setdefault("wrap", set()).update((s.hex().encode(), s.hex().upper().encode()))
            if variants.base32:
                out.setdefault("wrap", set()).update(f for f in base32_inner_forms(s) if f)
        if variants.folded and b"\n" not in s and b"\r" not in s:
            out.setdefault("wrap", set()).add(s)
        if variants.url:
            out.setdefault("percent", set()).add(s)
        if variants.csi:
            out.setdefault("csi", set()).add(s)
        if variants.hexdump:
            out.setdefault("dump", set()).add(s)
    if "dump" in out and len({p[i:i + 2] for p in out["dump"] for i in range(len(p) - 1)}) > PAIR_LIMIT:
        del out["dump"]  # too many triggers to build (see dumps.PAIR_LIMIT)
    return out


def _bitset(values: Iterable[int], size: int) -> bytes:
    """A set of ints below ``size`` as a bitmap (bit ``v & 7`` of byte ``v >> 3``), for :mod:`._native`."""
    out = bytearray(size // 8)
    for v in values:
        out[v >> 3] |= 1 << (v & 7)
    return bytes(out)


def _token_edge(view: View, buf: bytes, i: int, forward: bool = False) -> int:
    """``i``, or the start (end, ``forward``) of the token of ``view`` holding it:
    a window cut there is tokenized as the whole stream is (tokens are local)."""
    for m in view.token.finditer(buf, max(0, i - view.reach), min(len(buf), i + view.reach)):
        s, e = m.span()
        if s < i < e:
            return e if forward else s
        if s >= i:
            break
    return i


_NOT_BREAK = re.compile(rb"[^\r\n]")


def _raw_offsets(buf: bytes, positions: list[int]) -> dict[int, int]:
    """Raw offset of each view byte in ``positions`` (the view: ``buf`` less
    its ``\r``/``\n``), counted forward from one answer to the next with
    C-speed ``count``: a few hits cost a few counts, not a split of the buffer."""
    out: dict[int, int] = {}
    cr, n = b"\r" in buf, len(buf)
    v0 = r0 = 0  # view offset v0 is raw offset r0 (or r0 is the end)
    for v in sorted(set(positions)):
        d = v - v0
        r = r0 + d
        c = buf.count(b"\n", r0, r) + (buf.count(b"\r", r0, r) if cr else 0)
        while r - r0 - c < d:  # breaks in [r0, r): view byte v lies further on
            nr = r0 + d + c
            c += buf.count(b"\n", r, nr) + (buf.count(b"\r", r, nr) if cr else 0)
            r = nr
        if r < n and buf[r] in (10, 13):  # a break is no view byte: the next non-break is
            m = _NOT_BREAK.search(buf, r)
            r = m.start() if m else n
        out[v] = r
        v0, r0 = v, r
    return out


def _start_of_last(buf: bytes, n: int, h: int) -> int:
    """Raw offset of the ``h``-th byte from the end of the line-break view of
    ``buf[:n]`` (``buf`` less its ``\r``/``\n``): widened back by what is
    missing, breaks counted at C speed, no layout of the tail."""
    p = n - h
    while True:
        k = n - p - buf.count(b"\n", p, n) - buf.count(b"\r", p, n)  # view bytes in [p, n)
        if k >= h:
            break
        if p <= 0:
            raise AssertionError("view hold longer than the view")
        p = max(0, p - (h - k))
    while buf[p] in (10, 13):  # k == h: the first view byte at or after p
        p += 1
    return p


def _has_break(p: bytes) -> bool:
    return b"\n" in p or b"\r" in p


class ThroughLineBreaks(_matcher._Engine):
    """The literal matcher and the line-break view in ONE scan of the view.

    Scanning the raw buffer for the literals and the CR/LF-deleted view for
    the encoded forms cost two Hyperscan passes; instead every literal
    without a line break (and every fragment window without one) is searched
    in the view together with the encoded forms. A view hit maps back to raw
    bytes; an encoded form may span line breaks, any other literal only if
    its raw span is as long as it is (no break inside), and a fragment gram
    hit is confirmed on the raw bytes as before. Literals and windows that
    hold a line break themselves (a multi-line secret's forms) get a small
    raw matcher of their own, searched only where the buffer has a line break.
    The hold is on raw bytes, as for any literal. The layout (positions of
    the line breaks) is built only when there is a hit.
    """

    #: A multi-line literal is looked for by its longest piece without a line
    #: break (cut to this many bytes) in the one scan, then compared whole.
    PIECE = 32
    #: ... if that piece has at least this many bytes; else by a raw scan.
    PIECE_MIN = 8

    def __init__(self, literals: set[bytes], windows: dict[bytes, list[int]], width: int,
                 wrap: set[bytes], engine: type):
        redundant = {p for p in literals if _has_break(p) and p[:1] not in b"\r\n" and p[-1:] not in b"\r\n"
                     and p.replace(b"\r", b"").replace(b"\n", b"") in wrap}  # fixed-column wrapped forms
        plain = {p for p in literals if not _has_break(p)}
        broken = {p for p in literals if _has_break(p)} - redundant
        w_plain: dict[bytes, list[int]] = {}
        w_broken: dict[bytes, list[int]] = {}
        for secret, starts in windows.items():
            for i in starts:
                (w_broken if _has_break(secret[i : i + width]) else w_plain).setdefault(secret, []).append(i)
        # Multi-line literals with a long piece between breaks: found through
        # that piece in the view scan (it holds no break, so the view shows it
        # where the raw bytes do), compared whole on the raw bytes.
        self._pieces: dict[bytes, list[tuple[bytes, int]]] = {}
        scanned_raw = set()
        for p in broken:
            at, piece = max(((m.start(), m.group()) for m in re.finditer(rb"[^\r\n]+", p)),
                            key=lambda x: len(x[1]), default=(0, b""))
            if len(piece) >= self.PIECE_MIN:
                self._pieces.setdefault(piece[: self.PIECE], []).append((p, at))
            else:
                scanned_raw.add(p)
        self.view_matcher = _matcher.Matcher(plain | wrap, w_plain, width, engine, hold=False,
                                             triggers={"broken": set(self._pieces)})
        #: Every multi-line literal and window (their patterns, for the hold).
        self.raw_matcher = (_matcher.Matcher(broken, w_broken, width, engine, hold=False)
                            if (broken or w_broken) else None)
        #: For spans: those not found through a piece, scanned on the raw bytes.
        self._raw_scan = (_matcher.Matcher(scanned_raw, w_broken, width, engine, hold=False)
                          if (scanned_raw or w_broken) else None)
        self._wrap = frozenset(wrap)
        every = set(self.view_matcher.patterns) | redundant
        if self.raw_matcher is not None:
            every |= set(self.raw_matcher.patterns)
        self.patterns = sorted(every)
        self.name = engine.name
        # One index for the hold over both (one call a feed, not two); the
        # fixed-column wrapped forms are held through the line-break view.
        held = set(self.view_matcher.patterns)
        if self.raw_matcher is not None:
            held |= set(self.raw_matcher.patterns)
        self._prefix = _matcher.PrefixIndex(held, engine)
        self._view = _strip_breaks or VIEWS["wrap"].view  # (the C deletion itself: no Python frame a feed)
        self._literal_spans = self.view_matcher.literal.spans
        #: Fragment grams in a database of their own (many patterns), scanned on the raw bytes.
        self._grams_apart = not self.view_matcher._merged and self.view_matcher.fragments._grams is not None

    def __getattr__(self, name):  # the view matcher's parts (literal, fragments, ...), for tests
        if name == "view_matcher":
            raise AttributeError(name)
        return getattr(self.view_matcher, name)

    def hold(self, buf: bytes) -> int:
        return self._prefix.hold(buf)

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        """One engine scan of the view (of the buffer itself when it holds no
        line break: then no multi-line literal occurs either)."""
        vm = self.view_matcher
        if 10 not in buf and 13 not in buf:  # (b"\n" in buf tries it as an int first: a TypeError a call)
            return vm.spans(buf)
        seen = self._view(buf)
        found = self._literal_spans(seen)
        if not found:
            out = vm.fragments.spans(buf) if self._grams_apart else []
            if self._raw_scan is not None:
                out += self._raw_scan.spans(buf)
            return out
        return self._view_found(buf, seen, found)

    def _view_found(self, buf: bytes, seen: bytes, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """:meth:`spans` of a buffer with a line break, from the hits ``found``
        (some) of the view scan of ``seen``, its view."""
        vm = self.view_matcher
        parts = vm.split_triggers(seen, found) if vm.triggers else _matcher._NO_PARTS
        if parts:
            only = vm._trigger_only
            found = [(u, e) for u, e in found if seen[u:e] not in only]
        grams: list[tuple[int, int]] = []
        if vm._merged:
            g, gram_set, both = _matcher.FragmentFinder.GRAM, vm._gram_set, vm._gram_also_literal
            rest = []
            for u, e in found:
                if e - u == g and seen[u:e] in gram_set:
                    grams.append((u, e))
                    if seen[u:e] in both:
                        rest.append((u, e))
                else:
                    rest.append((u, e))
            found = rest
        out: list[tuple[int, int]] = []
        every = found + grams
        for hits in parts.values():
            every += hits
        raw = _raw_offsets(buf, [u for u, _ in every] + [e - 1 for _, e in every])
        wrap = self._wrap
        for u, e in found:
            s, t = raw[u], raw[e - 1] + 1
            if t - s == e - u or seen[u:e] in wrap:
                out.append((s, t))
        if grams:
            hits = []
            for u, e in grams:
                s, t = raw[u], raw[e - 1] + 1
                if t - s == e - u:
                    hits.append((s, t))
            if hits:
                out += vm.fragments.spans(buf, hits)
        for u, e in parts.get("broken", ()):
            s, t = raw[u], raw[e - 1] + 1
            if t - s == e - u:  # a piece holds no break: one the view shows across a deleted break is none
                for p, i in self._pieces[buf[s:t]]:
                    if s >= i and buf.startswith(p, s - i):
                        out.append((s - i, s - i + len(p)))
        if self._grams_apart:
            out += vm.fragments.spans(buf)  # grams scanned apart: on the raw bytes
        if self._raw_scan is not None:
            out += self._raw_scan.spans(buf)
        return out


class PercentGate:
    """Where the ``%XX`` view can match: the ``%XX`` tokens that are *triggers*.

    A token is one when the byte it shows, with the view bytes around it
    (a ``%HH`` is always a token: a token holds no ``%`` after its first
    byte), makes three consecutive bytes of a pattern; for a token among the
    last two view bytes of the buffer, two. Exact: an occurrence with a
    token holds three consecutive pattern bytes around each of its tokens
    (patterns have 8 bytes or more; for shorter ones the width is their
    length), so each of its tokens is a trigger, and :meth:`Viewed._percent_scan`
    views the trigger clusters widened by the longest pattern; the hold
    needs a trigger in a held view suffix of two bytes or more that holds a
    token (a proper prefix of a pattern at the end), which pairs at the end
    and triples elsewhere give. One without a token is the secret itself, a
    literal the base finds.

    Found in two scans: one small regex (``%`` and the pattern bytes' hex,
    any case; only on a buffer holding ``%``) for the tokens, then one scan
    of the seven raw bytes around each token, joined, for the triples with
    that token as their one token (``xy%HH``, ``x%HHz``, ``%HHyz``, lower
    case; :attr:`_around`): a token with no other pattern byte's token
    within two view bytes has raw bytes there, so it is a trigger only if
    one of those matches (:meth:`_may_trigger`), and that is checked only
    for the few that do. Tokens with another such token that near, or near
    either end of the buffer, are checked one by one. Measured (64 KiB of
    random printable text, a ``%`` every 95 bytes, ~8 tokens of pattern
    bytes): checking each token in Python cost 2-4 us a token on this
    machine, more than the regex scan (12-17 us); the joined windows cost
    one slice a token and a scan of ~60 bytes. Literals of the triples with
    ``%HH`` for any of their bytes over the whole buffer cost 45 us (a few
    thousand short literals), twice the regex. Above :data:`AROUND_LIMIT`
    literals (k above ~110 of the benchmark's secrets) every token is checked in Python.

    In C (``_native.percent_hits``), a set of :attr:`GRAMS_FROM` patterns or
    more, all of 8 bytes or more, adds an 8-gram check: a trigger is also
    inside eight view-consecutive bytes whose 8-gram is a pattern's (a
    bitmap mod a prime, ~0.7 % set at k = 10 000), or has fewer than seven
    view bytes after it (a prefix may end the buffer there). Exact for the
    same reason: an occurrence of 8 bytes or more holds such a window around
    each of its tokens. Measured (k = 10 000, random text, 4 KiB feeds):
    feeds with a trigger 131 -> 5 of 512, 16.6 -> 14.6 us a feed; sets
    below GRAMS_FROM (k <= 1 000 secrets) are as before."""

    #: Most literals of :attr:`_around` (3 per triple; ~1.4 s to build 14 000).
    AROUND_LIMIT = 16_000
    #: Fewest patterns (all of 8 bytes or more) for the C gate's 8-gram check.
    GRAMS_FROM = 2_000
    #: Largest 8-gram bitmap of that check (16 MiB: ~0.8 % set at k = 10 000 secrets).
    GRAM_BITS = 1 << 27

    def __init__(self, patterns: Iterable[bytes], engine: type):
        patterns = list(patterns)
        #: Consecutive pattern bytes a trigger shows (3, or the shortest pattern's length).
        self._width = min(3, *map(len, patterns))
        self._pairs = frozenset(p[i : i + 2] for p in patterns for i in range(len(p) - 1))
        self._triples = frozenset(p[i : i + 3] for p in patterns for i in range(len(p) - 2))
        tokens = b"%(?:" + b"|".join(sorted({b"%02x" % c for p in patterns for c in p})) + b")"
        #: The triples with one byte as its token, lower case, in one literal matcher (or None).
        self._around = None
        self._db = None
        if _native is not None:
            # One C pass does it all (_native.c): the tokens, and each one's
            # pair and triple checks, with the sets as tables.
            self.hits = self._native_hits
            self._tables = (_bitset({c for p in patterns for c in p}, 256),
                            _bitset({(p[i] << 8) | p[i + 1] for p in patterns for i in range(len(p) - 1)}, 65536),
                            struct.pack("=%dI" % len(self._triples),
                                        *sorted((t[0] << 16) | (t[1] << 8) | t[2] for t in self._triples)),
                            self._width)
            if len(patterns) >= self.GRAMS_FROM and min(map(len, patterns)) >= 8:
                # Big sets hold nearly every triple of their alphabet, and
                # random text with '%' makes a trigger in ~30 % of its 4 KiB
                # feeds (each views ~2 * reach bytes). An occurrence of 8
                # bytes or more also holds, around each of its tokens, eight
                # view-consecutive bytes that are one of its 8-grams (or the
                # token is among the last eight view bytes of the buffer: a
                # prefix of it may end there); the C gate checks the eight
                # windows around a token in a bitmap of the patterns' 8-grams
                # mod a prime (holds._Grams' filter, sparser: ~1 % set).
                windows = sum(len(p) - 7 for p in patterns)
                prime = _Grams.prime_below(min(self.GRAM_BITS, 1 << max(10, (64 * windows).bit_length())))
                self._tables += (_native.gram_bits(patterns, prime)[0], prime)
            return
        if self._width > 2 and 3 * len(self._triples) <= self.AROUND_LIMIT:
            self._around = engine({(t[:i] + b"%%%02x" % t[i] + t[i + 1 :]).lower()
                                   for t in self._triples for i in range(3)})
        if engine is _matcher.HyperscanMatcher:
            import pyperscan as ps

            self._db = ps.BlockDatabase(ps.Pattern(tokens, ps.Flag.CASELESS))  # 3 bytes: no start needed
            self._local = threading.local()
            self._go_on = ps.Scan.Continue
        else:
            self._re = re.compile(tokens, re.I)

    def _scanner(self) -> tuple:
        """This thread's ``(scanner, list its token ends are appended to)`` (a scratch space each)."""
        go_on = self._go_on

        def report(add, _tag, _start, end):
            add(end)
            return go_on

        ends: list[int] = []
        pair = self._local.pair = (self._db.build(ends.append, report), ends)
        return pair

    def _native_hits(self, buf: bytes) -> list[tuple[int, int]] | None:
        """:meth:`hits` in C (None when ``buf`` holds no ``%``)."""
        return _native.percent_hits(buf, *self._tables)

    def hits(self, buf: bytes) -> list[tuple[int, int]]:
        """The spans of the tokens that are triggers, in order (call only when ``buf`` holds a ``%``)."""
        if self._db is None:
            ends = [m.end() for m in self._re.finditer(buf)]
        else:
            scanner, found = getattr(self._local, "pair", None) or self._scanner()
            scanner.scan(buf)
            if not found:
                return []
            ends = found.copy()
            found.clear()
        if self._around is not None and len(ends) > 2:  # (fewer: a join and a scan cost more than their checks)
            ends = self._may_trigger(buf, ends)
        out: list[tuple[int, int]] = []
        decoded, pairs, triples, width, n = PercentView._decoded, self._pairs, self._triples, self._width, len(buf)
        for e in ends:  # each token checked
            s = e - 3
            if width > 1:
                # the view bytes beside it: a %HH is a token; else the raw byte
                c = decoded[buf[s:e]]
                before = decoded.get(buf[s - 3 : s]) if s >= 3 else None
                after = decoded.get(buf[e : e + 3])
                if not ((before or buf[s - 1 : s]) + c in pairs or c + (after or buf[e : e + 1]) in pairs):
                    continue
                if width > 2 and e < n - 3:
                    if s >= 4 and 37 not in (buf[s - 4], buf[s - 3], buf[e], buf[e + 1]):
                        # no other token within two view bytes ('%' is 37): they are the raw bytes
                        w = buf[s - 2 : s] + c + buf[e : e + 2]
                        if not (w[:3] in triples or w[1:4] in triples or w[2:] in triples):
                            continue
                    elif not self._in_triple(buf, s, e):
                        continue
            out.append((s, e))
        return out

    def _may_trigger(self, buf: bytes, ends: list[int]) -> list[int]:
        """The token ends (of ``ends``, sorted) that are left to check one by one:
        those near an end of the buffer or within two view bytes of another
        token (end to end 3 or 4 apart), and the lone ones whose seven raw
        bytes around hold a triple with them as its one token (:attr:`_around`)."""
        n, alone, out = len(buf), ends, []
        if ends[0] < 5 or ends[-1] > n - 4 or min(map(sub, ends[1:], ends)) <= 4:
            near = {x for a, b in zip(ends, ends[1:]) if b - a <= 4 for x in (a, b)}
            alone = [e for e in ends if 5 <= e <= n - 4 and e not in near]
            out = [e for e in ends if e < 5 or e > n - 4 or e in near]
        if alone:
            joined = b"\0".join([buf[e - 5 : e + 2] for e in alone]).lower()
            hits = self._around.spans(joined)
            if hits:
                out = sorted(set(out).union(alone[s // 8] for s, _ in hits))
        return out

    def _in_triple(self, buf: bytes, s: int, e: int) -> bool:
        """Whether the token ``buf[s:e]`` is in three view-consecutive bytes of a pattern."""
        decoded, n = PercentView._decoded, len(buf)
        before = after = b""
        at = s
        for _ in (0, 1):  # two view bytes before it: a %HH is a token, else a raw byte
            d = decoded.get(buf[at - 3 : at]) if at >= 3 else None
            if d is not None:
                before, at = d + before, at - 3
            elif at:
                before, at = buf[at - 1 : at] + before, at - 1
        at = e
        for _ in (0, 1):  # and two after it
            d = decoded.get(buf[at : at + 3])
            if d is not None:
                after, at = after + d, at + 3
            elif at < n:
                after, at = after + buf[at : at + 1], at + 1
        seen, i = before + decoded[buf[s:e]] + after, len(before)
        return any(seen[j : j + 3] in self._triples for j in range(max(0, i - 2), min(i, len(seen) - 3) + 1))


class Gates:
    """The views' gates: the dump view's candidate lines (:class:`.dumps.CandidateLines`,
    one multi-line regex scan) and the ``%XX`` view's triggers (:class:`PercentGate`,
    only on a buffer holding ``%``: a memchr), each its own raw scan. Measured
    (64 KiB): in one Hyperscan database with the trigger literals the
    candidate regex cost 44-68 us on random text against 18-27 apart, and the
    token-heavy log (no ``%``) paid the literals' 22 us there too. Scanned with
    the literals in the line-break view (session 6) the triggers slowed that
    scan by 14-18 us on text without ``%``, and their hits needed mapping back."""

    def __init__(self, lines: CandidateLines | None, percent: set[bytes], engine: type):
        self._lines = lines
        self._percent = PercentGate(percent, engine) if percent else None
        if _native is not None:
            self.scan = self._native_scan
            if lines is not None and hasattr(_native, "gates_for"):  # (one C call a feed, no frame)
                self.scan = partial(_native.gates_for, lines.LIMIT, _CHARS_LINE.fullmatch,
                                    None if self._percent is None else self._percent._tables)

    def _native_scan(self, buf: bytes) -> tuple[list[int] | None, list[tuple[int, int]] | None]:
        """:meth:`scan` with both gates in one C pass over ``buf`` (``_native.gates``: each
        64-byte block classified once for both; on every feed)."""
        lines, percent = self._lines, self._percent
        if lines is None:
            return [], None if percent is None else _native.percent_hits(buf, *percent._tables)
        return _native.gates(buf, lines.LIMIT * (1 + len(buf) // 65536), _CHARS_LINE.fullmatch,
                             None if percent is None else percent._tables)

    def scan(self, buf: bytes) -> tuple[list[int] | None, list[tuple[int, int]] | None]:
        """``(starts of the candidate lines, or None past CandidateLines.limit; %XX trigger
        hits, or None when the buffer holds no '%': then the %XX view has nothing to do)``."""
        lines = self._lines.starts(buf) if self._lines is not None else []
        hits = self._percent.hits(buf) if self._percent is not None and b"%" in buf else None
        return lines, hits


def build(literals: set[bytes], windows: dict[bytes, list[int]], width: int,
          families: dict[str, set[bytes]], engine: type) -> _matcher._Engine:
    """The matcher of a secret set with pattern forms (see the module docstring)."""
    def make(cls):
        if "wrap" in families:
            base = ThroughLineBreaks(set(literals), windows, width, families["wrap"], cls)
        else:
            base = _matcher.Matcher(set(literals), windows, width, cls)
        return Viewed(base, families, cls)

    try:
        return make(engine)
    except Exception as exc:  # e.g. Hyperscan refuses a pattern
        if engine is _matcher.AhoMatcher:
            raise
        _matcher.log.warning("redactor engine %s refused this secret set (%s); using pyahocorasick",
                             engine.name, exc)
        return make(_matcher.AhoMatcher)


class Viewed(_matcher._Engine):
    """A literal matcher plus one literal matcher per view family."""

    CAP = 40

    def __init__(self, base: _matcher._Engine, families: dict[str, set[bytes]], engine: type):
        self.base = base
        self.name = base.name
        families = dict(families)
        #: Hex dump layouts: a line view of its own (see .dumps).
        self._dump = DumpFinder(families.pop("dump"), engine) if "dump" in families else None
        self.sync_always = self._dump is not None
        # Each view scans for its patterns cut to their last CAP bytes and
        # confirms the rest with a slice compare: Hyperscan scans a few dozen
        # long literals (a JWT's hex form is 400 bytes) at half the speed of
        # the same literals cut to 40 (measured: 25 vs 12.6 us per 64 KiB).
        # The last bytes, not the first: secrets are a shared header and a
        # random body (every JWT in a log shares a secret's first 40 bytes,
        # every PKCS#8 key 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC'): cut to their
        # heads, a coloured token log made ~130 hits per 64 KiB in the CSI
        # view, each compared in Python (~900 us a feed).
        self.views = []
        self._full: list[dict[bytes, list[bytes]]] = []
        for name, pats in sorted(families.items()):
            full: dict[bytes, list[bytes]] = {}
            for p in pats:
                full.setdefault(p[-self.CAP :], []).append(p)
            self.views.append((VIEWS[name], _matcher.build(full, engine, hold=False)))
            self._full.append(full)
        # Hold: the longest view suffix that is a *proper* prefix of a view
        # pattern (a prefix of a pattern less its last byte). A complete
        # occurrence is masked by ``find``; counting it here (as the literal
        # index does, harmlessly, since a literal ends at the buffer's end)
        # would also hold the separators after it.
        self._proper = []
        for _, pats in sorted(families.items()):
            index = _matcher.PrefixIndex({p[:-1] for p in pats if len(p) > 1}, engine)
            index.maxlen += 1  # it looks at tails shorter than maxlen; a whole p[:-1] counts here
            self._proper.append(index)
        self.patterns = base.patterns
        self._wrap_in_base = isinstance(base, ThroughLineBreaks)
        #: Every byte of a line-break view pattern (an encoding's alphabet, a folded secret's bytes).
        self._wrap_bytes = bytes(sorted(set(b"".join(families.get("wrap", ())))))
        # The %XX view runs only around its triggers (see PercentGate),
        # the dump view only on candidate lines (see Gates).
        percent = families.get("percent", set())
        if percent:
            self._percent_reach = max(len(p) for p in percent) + PercentView.reach
        lines = self._dump.candidates if self._dump is not None else None
        self._gates = Gates(lines, percent, engine) if (percent or lines is not None) else None
        self._steps = self._steps_for()
        #: ``(view, its hold index)`` of the line-break view in the base's scan, or None.
        self._base_wrap = next(((v, proper) for (v, _), proper in zip(self.views, self._proper)
                           if v.name == "wrap" and self._wrap_in_base), None)
        #: The views whose tokens the scan buffer must not start inside.
        self._synced = [v for v, _ in self.views if v.needs_sync]
        #: ``(lead, reach)`` of each of them: a cut with no lead in the reach before it is no token's.
        self._sync_leads = tuple((v.lead, v.reach) for v in self._synced)
        #: Whether the base moves the buffer start itself (a Union of matchers).
        self._base_syncs = type(base).sync is not _matcher._Engine.sync
        #: What :meth:`scan_keep` reads on every feed (see :meth:`_hot_path`).
        self._hot = self._hot_path()

    def __getattr__(self, name):  # the literal matcher's parts (literal, fragments, ...)
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        return self.scan(buf, True)[1]

    def find(self, buf: bytes, final: bool = False) -> list[tuple[int, int]]:
        return self.scan(buf, final)[1]

    def hold(self, buf: bytes) -> int:
        return self.scan(buf, False)[0]

    def scan(self, buf: bytes, final: bool = False) -> tuple[int, list[tuple[int, int]]]:
        hold, found, _ = self.scan_keep(buf, final)
        return hold, found

    def _hot_path(self) -> tuple:
        """What :meth:`scan_keep` reads on every feed, in one tuple (one attribute
        lookup, not a dozen; bound methods of the parts, not of ``self``: no cycle).

        ``spans`` and ``hold`` are the base's own parts when it is a
        :class:`ThroughLineBreaks` (no delegating frame a feed); its view scan
        is called here when the buffer has a line break and the scan alone
        decides (no fragment grams or multi-line literals scanned apart)."""
        base = self.base
        view_scan = None
        if isinstance(base, ThroughLineBreaks):
            if not base._grams_apart and base._raw_scan is None:
                view_scan = (base._view, base._literal_spans, base._view_found)
            hold = base._prefix.hold_function()
        elif isinstance(base, _matcher.Matcher) and base._prefix is not None:
            hold = base._prefix.hold_function()
        else:
            hold = base.hold
        dump_sync = dump_max = None
        if self._dump is not None:
            dump_sync = self._dump.sync
            if dump_sync is _dumps._native_sync:  # the C function itself (one frame less a feed)
                dump_sync, dump_max = _native.dump_sync, _dumps.LINE_MAX
        wrap = None
        if self._base_wrap is not None:
            wrap = (*self._base_wrap, _all_in(self._wrap_bytes))
        #: ``dumps.may_become(buf[start:])`` of the last line, as ``(buf, start)``: in C when built.
        may_become = (partial(_native.dump_partial, _dumps.LINE_MAX, _may_become)
                      if _native is not None and hasattr(_native, "dump_partial") else _partial_may_become)
        return (base.spans, view_scan, hold, self._gates, self._dump, self._percent_args, self._steps, wrap,
                self._base_syncs, self._sync_leads, dump_sync, dump_max, may_become)

    def scan_keep(self, buf: bytes, final: bool = False) -> tuple[int, list[tuple[int, int]], int]:
        """``(hold, found, keep)``: :meth:`scan`, and :meth:`sync` of the cut
        (``len(buf) - hold``) when something is held or a line view must know
        where lines start (:attr:`sync_always`), else the cut: what a feed
        needs, in one call. The common steps' first tests are inline here
        (the line-break view's no-hit scan, :meth:`_wrap_hold`'s rejections,
        :meth:`sync`); each goes to its method when they do not decide."""
        (spans, view_scan, base_hold, gates, dump, percent_args, steps, wrap,
         base_syncs, sync_leads, dump_sync, dump_max, may_become) = self._hot
        if view_scan is not None and (10 in buf or 13 in buf):  # (a byte as an int: memchr, no TypeError first)
            seen = view_scan[0](buf)  # ThroughLineBreaks.spans, inline up to a hit
            found = view_scan[1](seen)
            if found:
                found = view_scan[2](buf, seen, found)
        else:
            found = spans(buf)  # the literals (in the line-break view): one scan
        best = 0 if final else base_hold(buf)
        n = len(buf)
        last = buf.rfind(b"\n")
        if gates is not None:  # the views' gates: one raw scan
            lines, percent = gates.scan(buf)
            # The dump view without a candidate line finds nothing, and holds
            # nothing when the last line is partial and cannot become a dump
            # line (see .dumps: then the last run is over): DumpFinder.scan's
            # answer, without its two frames (a line starting with a byte no
            # dump line starts with: not even may_become's).
            if dump is not None and (lines or lines is None or not final and (
                    last + 1 == n or may_become(buf, last + 1))):
                h = dump.scan(buf, final, found, lines)
                if h > best:
                    best = h
            # The buffer holds a '%': the view runs on a trigger or a '%' among the last 3 bytes
            # (a token may be incomplete there); else nothing to view, nothing held.
            if percent is not None and percent_args is not None and (
                    percent or (not final and buf.find(b"%", len(buf) - 3 if len(buf) > 3 else 0) >= 0)):
                h = Viewed._percent_step(self, *percent_args, buf, final, found, percent)
                if h > best:
                    best = h
        for step, lead, args in steps:
            if lead is None or lead in buf:
                h = step(self, *args, buf, final, found)
                if h > best:
                    best = h
        if wrap is not None and not final:  # the line-break view's spans are the base's
            # _wrap_hold's first two rejections, inline: no break, or a suffix
            # spanning the last one longer than any pattern or holding a byte
            # no pattern of the view holds.
            r = buf.rfind(b"\r", last + 1)
            if r > last:
                last = r
            if last >= 0 and n - last < wrap[1].maxlen and wrap[2](buf, last + 1):
                h = self._wrap_hold(wrap[0], wrap[1], buf, last)
                if h > best:
                    best = h
        i = n - best
        if best or dump_sync is not None:  # (sync_always: a dump view)
            # sync, inline
            if base_syncs:
                i = self.base.sync(buf, i)
            if 0 < i < n:
                for lead, reach in sync_leads:
                    if buf.find(lead, i - reach if i > reach else 0, i) >= 0:
                        i = self._resync(buf, i)
                        break
            if dump_sync is not None:
                i = dump_sync(buf, i) if dump_max is None else dump_sync(buf, i, dump_max)
        return best, found, i

    def _steps_for(self) -> list:
        """Per view: ``(step, lead, args)``; ``step(self, *args, buf, final, found)``
        returns the view's hold and runs only on a buffer holding ``lead`` (the
        first byte of every token of the view, found at memchr speed), then
        passes its own gate first: a view that cannot match in a buffer costs
        that gate alone. (Functions, not bound methods: no reference cycle.)
        The line-break view inside the base's scan has no step: only its hold
        (:meth:`_wrap_hold`, :attr:`_base_wrap`). The ``%XX`` view has none
        either: :meth:`scan_keep` calls :meth:`_percent_step` with
        :attr:`_percent_args` when the gates' scan saw a '%' (one memchr, not
        two; no call on a buffer without one)."""
        steps = []
        self._percent_args = None
        for (view, m), proper, full in zip(self.views, self._proper, self._full):
            if view.name == "wrap" and self._wrap_in_base:
                continue
            elif view.name == "percent":
                self._percent_args = (view, m, proper, full)
            else:
                lead = getattr(view, "lead", None)  # as an int: ``in`` is a memchr, no TypeError first
                steps.append((Viewed._view_step, lead[0] if lead else None, (view, m, proper, full)))
        return steps

    def _percent_step(self, view: View, m, proper, full, buf: bytes, final: bool,
                      found: list[tuple[int, int]], percent) -> int:
        """The %XX view of a buffer that holds a ``%``: its triggers are its gate
        (no regular expression over the whole buffer: ``re`` runs at ~1 ns a
        byte here, a Hyperscan scan of its tokens at ~0.15)."""
        if not percent and (final or buf.find(b"%", max(0, len(buf) - 3)) < 0):
            return 0  # no trigger, no token at the end: nothing to view, nothing held
        cut = 0 if final else view.incomplete(buf)
        if cut and not view.relevant(buf):  # no complete token: only an incomplete one at the end
            return cut + proper.hold(buf[: len(buf) - cut])
        return self._percent_scan(view, m, proper, full, buf, final, found, percent)

    def _view_step(self, view: View, m, proper, full, buf: bytes, final: bool,
                   found: list[tuple[int, int]]) -> int:
        """A view over the whole buffer (CSI when it holds an ESC, whitespace runs)."""
        size = len(buf)
        cut = 0 if final else view.incomplete(buf)
        n = size - cut
        if not view.relevant(buf):
            # The view is buf itself and its patterns are literals already
            # found; only an incomplete token at the end (and the view
            # prefix it may continue) is held.
            return cut + proper.hold(buf[:n]) if cut else 0
        seen = self._view_hits(view, m, full, buf, 0, n, found)
        lead = getattr(view, "lead", None)
        if final or (not cut and lead is not None and buf.find(lead, max(0, n - proper.maxlen - view.reach)) < 0):
            return 0  # no token in the tail: the held view suffix is raw bytes, in the base's hold
        h = proper.hold(seen)
        if h:
            cut = max(cut, size - self._tail_start(view, buf, n, h))
        return cut

    def _percent_scan(self, view: View, m, proper, full, buf: bytes, final: bool,
                      found: list[tuple[int, int]], percent) -> int:
        """The %XX view over the windows that can hold an occurrence; returns its hold.

        Each ``%XX`` token of an occurrence is a trigger (:class:`PercentGate`),
        and the occurrence lies within ``reach`` raw bytes of them: the
        windows are the trigger clusters widened by ``reach``. One without a token is the secret itself, a literal the
        base finds. The hold looks at the end alone (a proper prefix is
        shorter than ``reach`` raw bytes). Text without triggers costs the
        gate's scan (:class:`PercentGate`).
        """
        size, reach = len(buf), self._percent_reach
        windows: list[list[int]] = []
        for s, e in sorted(percent):
            if windows and s <= windows[-1][1] + reach:
                windows[-1][1] = max(windows[-1][1], e)
            else:
                windows.append([s, e])
        tail = max(0, size - 3 * reach)
        near = bool(windows) and windows[-1][1] + reach >= tail
        if near:
            tail = min(tail, windows.pop()[0] - reach)
        for s, e in windows:
            a, b = _token_edge(view, buf, max(0, s - reach)), _token_edge(view, buf, min(size, e + reach), True)
            self._view_hits(view, m, full, buf, a, b, found)
        cut = 0 if final else view.incomplete(buf)
        if not near and not cut:
            # No trigger near the end: no occurrence with a token there, and a
            # held view suffix of two bytes or more holding a token would hold
            # one (PercentGate: pairs at the end, triples before); so it is raw bytes (the base's hold), or one token alone,
            # the very last one, of a byte that starts a pattern.
            last = buf[size - 3 :]
            if not final and last[:1] == b"%" and view.token.fullmatch(last) and proper.hold(view._decoded[last]):
                return 3
            return 0
        a = _token_edge(view, buf, max(0, tail))
        n = size - cut
        if a < n and view.token.search(buf, a, n) is None:
            # No token at the end: the view there is the raw bytes, and its
            # occurrences are raw occurrences of a secret, which the base
            # finds (every secret is a literal). So is its hold, unless an
            # incomplete token ends the buffer: a proper prefix of a secret
            # ending the raw bytes is in the base's hold already.
            if not cut:
                return 0
            seen = buf[a:n]
        else:
            seen = self._view_hits(view, m, full, buf, a, n, found) if a < n else b""
        if final:
            return 0
        h = proper.hold(seen)
        if h:
            cut = max(cut, size - self._tail_start(view, buf, n, h))
        return cut

    @staticmethod
    def _view_hits(view: View, m, full, buf: bytes, a: int, b: int,
                   found: list[tuple[int, int]]) -> bytes:
        """Occurrences in the view of ``buf[a:b]`` (token-aligned ends), mapped
        to raw spans and added to ``found``; returns the view."""
        seen = view.view(buf[a:b])
        hits = []
        for s, e in m.spans(seen):
            for p in full[seen[s:e]]:  # the patterns ending with the hit (their last CAP bytes)
                if len(p) == e - s or (e >= len(p) and seen.startswith(p, e - len(p))):
                    hits.append((e - len(p), e))
        if hits:
            tokens, starts, _ = view.layout(buf, a, b)
            for s, e in hits:
                found.append((_to_raw(tokens, starts, a, s)[0], _to_raw(tokens, starts, a, e - 1)[1]))
        return seen

    def _wrap_hold(self, view: View, proper, buf: bytes, last: int | None = None) -> int:
        """The line-break view's hold from the view of a window at the end
        (the prefix index looks at the last ``maxlen`` view bytes only).
        ``last``: the last line break, when :meth:`scan_keep` has found it
        and made the two rejections below (no second look on every feed)."""
        size, width = len(buf), 2 * proper.maxlen + 64
        # Only a suffix that spans a line break needs the view: one that does
        # not is a raw suffix, and the base's raw hold covers the encoded
        # forms too. Spanning one needs encoding characters after the last
        # break and right before it.
        if last is None:
            last = buf.rfind(b"\n")
            last = max(last, buf.rfind(b"\r", last + 1))  # a \r after the last \n, if any
            if last < 0 or size - last >= proper.maxlen:
                return 0  # a suffix spanning the break is longer than the last line: held by no pattern
            if buf[last + 1 :].rstrip(self._wrap_bytes):
                return 0
        j, stop = last, max(-1, last - 8)
        while j > stop and buf[j] in b"\r\n":
            j -= 1
        if j == stop >= 0:  # a long run of breaks (`yes ''`): C speed, not a loop
            j = (_last_not_break(buf, j + 1) if _last_not_break is not None
                 else len(buf[: j + 1].rstrip(b"\r\n")) - 1)  # (rstrip: a memchr per byte, ~2 ns)
        if j < 0 or buf[j] not in self._wrap_bytes:
            return 0
        # A held suffix that spans the break holds the last line L and view
        # bytes before it. With 7 bytes of L or more it holds the 8 view bytes
        # across the break, which must lie in a pattern; with fewer, its last 8
        # view bytes must, or it is 7 bytes at most (the short hold of those 8).
        # Lines of an encoding's characters (a base64 dump, `yes <token>`) get
        # here on every feed; the view of 2 x the longest pattern and its hold
        # scan cost 7-10 us a 4 KiB feed.
        tail = size - last - 1
        if tail >= 7:
            bits = proper._bits  # (proper.may_contain, inline: two frames less, on every such feed)
            if bits is not None and not bits[(r := int.from_bytes(buf[j : j + 1] + buf[last + 1 : last + 8],
                                                                  _ORDER) % proper._prime) >> 3] >> (r & 7) & 1:
                return 0
        elif j >= 7 - tail:
            before = buf[j - 7 + tail : j + 1]
            if b"\n" not in before and b"\r" not in before:
                eight = before + buf[last + 1 :]
                if not proper.may_contain(eight):
                    h = proper.short_hold(eight)
                    return size - _start_of_last(buf, size, h) if h > tail else 0
        while True:
            a = max(0, size - width)
            seen = view.view(buf[a:])
            if a == 0 or len(seen) >= proper.maxlen + 1:
                break
            width *= 2
        h = proper.hold(seen)
        return size - _start_of_last(buf, size, h) if h else 0

    @staticmethod
    def _tail_start(view: View, buf: bytes, n: int, h: int) -> int:
        """Raw start of the ``h``-th view byte from the end of the view of ``buf[:n]``,
        laid out over a window at the end only."""
        if n >= h and not view.relevant(buf[max(0, n - h - view.reach) : n]):
            return n - h  # no token near the tail: the last h view bytes are the last h raw bytes
        width = 2 * h + 64
        while True:
            a = max(0, n - width)
            tokens, starts, length = view.layout(buf, a, n)
            k = length - h
            if k >= 0:
                s = _to_raw(tokens, starts, a, k)[0]
                if a == 0 or s >= a + view.reach:
                    return s
            if a == 0:
                raise AssertionError("view hold longer than the view")
            width *= 2

    def sync(self, buf: bytes, i: int) -> int:
        """The start of the token (of any view) that holds offset ``i``, or ``i``.
        Called on every feed (the dump view keeps a line start): most cuts have
        no view's lead in the reach before them, one ``find`` each, no loop."""
        if self._base_syncs:
            i = self.base.sync(buf, i)
        if 0 < i < len(buf):
            for lead, reach in self._sync_leads:
                if buf.find(lead, i - reach if i > reach else 0, i) >= 0:
                    i = self._resync(buf, i)
                    break
        if self._dump is not None:
            i = self._dump.sync(buf, i)  # a line break: inside no other view's token
        return i

    def _resync(self, buf: bytes, i: int) -> int:
        """:meth:`sync` when a token may straddle ``i``: repeated, since moving
        back for one view may land inside another's token."""
        n, moved = len(buf), True
        while moved:
            moved = False
            for view in self._synced:
                if i <= 0:
                    break
                reach = view.reach
                a = max(0, i - 2 * reach)
                b = min(n, i + reach)
                if buf.find(view.lead, a, b) < 0:
                    continue  # no token can start near i
                for m in view.token.finditer(buf, a, b):
                    s, e = m.span()
                    if s >= i:
                        break
                    if s < i < e and (a == 0 or s >= a + reach):
                        i, moved = s, True
                        break
        return i
