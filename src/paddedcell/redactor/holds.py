"""The hold: the longest suffix of a buffer that is a prefix of some pattern.

A streaming redactor keeps that many trailing bytes back (they may still
start an occurrence); :class:`PrefixIndex` answers it exactly, for every
buffer and pattern set, in a few C calls per buffer (issue 21: it was half
of a 4 KiB feed's cost). ``engine`` is a matcher class of :mod:`.matcher`
(which imports this module), used for the heads scan.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from bisect import bisect_left
from functools import partial
from typing import Iterable

#: Bytes frequent in text, most frequent first: those a group of patterns
#: never holds end its tails (found from the end at memrchr speed).
COMMON_BYTES = b" etaoinsrhl\n\tdcumfpgwybvkxjqz.,:;=\"'()\r"
#: Line breaks: patterns holding one (forms wrapped at a column) get their own
#: heads group, so a line break still ends the other patterns' tails.
BREAKS = b"\r\n"
_PRINTABLE = frozenset(range(0x20, 0x7F))
#: Byte order of the grams' integers (they are cast from the patterns' bytes, see :meth:`_Grams.of`).
_ORDER = sys.byteorder

#: The redactor's C module (``_native.c``), or None: not built (no compiler at install) or
#: ``PADDEDCELL_NATIVE=0``; then every user runs its Python form. Loaded here, the lowest
#: module of the package; :mod:`.dumps` and :mod:`.views` take it from here.
_native = None
if os.environ.get("PADDEDCELL_NATIVE", "1") != "0":
    try:
        from . import _native
    except ImportError:
        _native = None
#: The gram filter's build in C (``_native.gram_bits``), or None.
_gram_bits = _native.gram_bits if _native is not None else None
#: The whole hold in C (``_native.prefix_table``/``prefix_hold``), or None.
_prefix_table = getattr(_native, "prefix_table", None)
_prefix_hold = getattr(_native, "prefix_hold", None)


class _Heads:
    """Where ``HEAD``-byte heads end in a buffer.

    On the fast engine, one pyperscan database of the heads, each ``\\xHH``
    escaped (NUL bytes), without start-of-match tracking (a head's start is
    its end less ``HEAD``), scanned with one scanner per thread (a scanner's
    scratch space is not shared) and a callback that appends the end: ~0.3 us
    for a 4 KiB window's worth, against ~1.2 through ``spans``, whose list of
    pairs, thread lookup and case confirmation a hold does not need. Other
    engines: their ``spans``.
    """

    __slots__ = ("_db", "_local", "_matcher")

    def __init__(self, heads: Iterable[bytes], engine: type):
        self._matcher = self._db = None
        if engine.name == "pyperscan":
            import pyperscan

            self._db = pyperscan.BlockDatabase(
                *(pyperscan.Pattern(b"".join([b"\\x%02x" % c for c in h])) for h in heads))
            self._local = threading.local()
        else:
            self._matcher = engine(heads)

    def ends(self, buf: bytes) -> list[int]:
        if self._db is None:
            return sorted(e for _, e in self._matcher.spans(buf))
        pair = getattr(self._local, "pair", None)
        if pair is None:
            import pyperscan

            found: list[int] = []
            go_on = pyperscan.Scan.Continue

            def on_match(add, _tag, _start, end):
                add(end)
                return go_on

            pair = self._local.pair = (self._db.build(found.append, on_match), found)
        scanner, found = pair
        scanner.scan(buf)
        if not found:
            return found
        ends = found.copy()  # in end order
        found.clear()
        return ends


class _Grams:
    """Whether 8 bytes are an 8-gram of some pattern: a bitmap of the grams'
    residues mod a prime (false positives only, a few per cent).

    A held tail of 8 bytes or more ends with a gram of its pattern, so a
    buffer whose last 8 bytes are none holds no such tail: the heads scans are
    skipped (on ordinary text most feeds; measured in situ, those scans cost
    6-25 us per 64 KiB feed and 6-14 per 4 KiB one at k = 10: the heads
    database is cold after the big scans; 2-3 us per 4 KiB feed at k = 1 000).

    Built in C (``_native.gram_bits``: one pass over every pattern's 8-byte
    windows, ~0.05 s for 18 M at k = 1 000), sized from the bits that pass
    sets (linear counting: the set fraction is the false positive rate): at
    most :attr:`FILL` of them, within :attr:`MAX_BITS`. Without the C module,
    in Python from each pattern's eight alignments cast to 64-bit integers
    (~0.3-0.7 us a pattern byte and a transient set of the distinct grams),
    up to :attr:`BUDGET` pattern bytes."""

    __slots__ = ("_bits", "_prime")

    #: Most pattern bytes indexed in Python, without the C module (k = 100 secrets with every
    #: form: 1.8 M); beyond, no filter.
    BUDGET = 4_000_000
    #: Most bits of the bitmap set (its false positive rate on a random 8 bytes), C build.
    FILL = 0.06
    #: Largest bitmap, C build (32 MiB: ~10 % set at k = 10 000 secrets, ~30 M distinct grams).
    MAX_BITS = 1 << 28

    def __init__(self, bits: bytes, prime: int):
        self._bits, self._prime = bits, prime

    @staticmethod
    def prime_below(size: int) -> int:
        """The largest prime below ``size`` (a power of two, 2^10 or more)."""
        prime = size - 1
        while any(prime % d == 0 for d in range(3, int(prime**0.5) + 1, 2)):
            prime -= 2
        return prime

    @classmethod
    def python_bits(cls, grams: Iterable[int], prime: int) -> bytes:
        """The bitmap of these grams (64-bit integers) mod ``prime``: what ``_native.gram_bits`` returns."""
        bits = bytearray((prime + 7) >> 3)
        for g in grams:
            r = g % prime
            bits[r >> 3] |= 1 << (r & 7)
        return bytes(bits)

    @classmethod
    def of(cls, patterns: list[bytes]) -> "_Grams | None":
        """The filter of these patterns' 8-grams, or None (no C module, past :attr:`BUDGET`)."""
        if _gram_bits is not None:
            windows = sum(len(p) - 7 for p in patterns if len(p) >= 8)
            # A first pass sized from the windows (an upper bound of the distinct grams, often
            # 6x: fragments and forms repeat a secret's), at most 2^24 bits; a second, larger one
            # when too many bits are set, sized from the distinct grams that count implies.
            size = 1 << max(10, min(24, (16 * windows).bit_length()))
            while True:
                prime = cls.prime_below(size)
                bits, count = _gram_bits(patterns, prime)
                if count <= cls.FILL * prime or size >= cls.MAX_BITS:
                    return cls(bits, prime)
                distinct = -prime * math.log(1 - count / prime) if count < prime else 16 * windows
                size = min(cls.MAX_BITS, 1 << max(size.bit_length(), math.ceil(distinct / cls.FILL).bit_length()))
        if sum(len(p) for p in patterns) > cls.BUDGET:
            return None
        grams: set[int] = set()
        for p in patterns:
            view = memoryview(p)
            for a in range(8):  # the grams at a, a + 8, ...: one 64-bit integer each
                n = (len(p) - a) // 8 * 8
                if n:
                    grams.update(view[a : a + n].cast("Q"))
        prime = cls.prime_below(1 << max(10, min(24, (16 * len(grams)).bit_length())))
        return cls(cls.python_bits(grams, prime), prime)

    def holds(self, last: bytes) -> bool:
        """Whether ``last`` (8 bytes) may be a gram of some pattern."""
        r = int.from_bytes(last, _ORDER) % self._prime
        return self._bits[r >> 3] >> (r & 7) & 1 == 1


class _Group:
    """Heads of one group of patterns: their scanner (None: looked up, the
    group's patterns are short), each head's longest pattern, the longest of
    them, the bytes that end a tail of the group, and every byte it holds
    (None when that is every printable byte: no gate)."""

    __slots__ = ("heads", "longest", "reach", "stops", "alphabet")

    def __init__(self, heads, longest: dict[bytes, int], reach: int, stops: bytes, alphabet: bytes):
        self.heads, self.longest, self.reach, self.stops, self.alphabet = heads, longest, reach, stops, alphabet


class PrefixIndex:
    """Longest suffix of a buffer, shorter than the longest pattern, that is a
    prefix of some pattern.

    Sorted patterns answer "is ``t`` a prefix of some pattern" with one
    bisection: every pattern starting with ``t`` sorts at or right after ``t``.
    That needs no memory beyond the pattern list, unlike a trie of every
    prefix (tens of millions of nodes at 10 000 secrets with their forms and
    fragments). What makes a hold cheap is asking it rarely:

    * Tails of ``HEAD`` bytes or more start with some pattern's first ``HEAD``
      bytes: one scan of the window that can hold such a tail, over those
      heads (:class:`_Heads`), yields the only candidates (no Python loop over
      positions: every byte of a token-heavy log starts some 4-gram of some
      secret). Per group of patterns (with a line break or not, with a space
      or not: a space then ends the others' tails, a token's tail is cut at
      its start, where the window's start is looked up; fragment windows,
      :attr:`SHORT_REACH`, apart): skipped when one of the last 8
      bytes is outside the group's bytes; the window is the last ``reach``
      bytes (its longest pattern), cut after the last byte the group never
      holds among :data:`COMMON_BYTES` (``rfind``: a line break, a space...).
      A head whose patterns are all shorter than the tail it would start is
      skipped; the others are bisected, longest tail first. The window's own
      start (a line start, most held long tails) is looked up before any scan.
    * Shorter tails (7 bytes at most) walk back from the end through one dict
      of the substrings of up to 3 bytes that end within a pattern's first 7
      (a tail ending otherwise extends to nothing held: random text stops
      after 1-3 lookups), then the 4-byte prefixes; a 5- to 7-byte tail whose
      first 4 bytes are a prefix is bisected.

    Memory: the sorted patterns, a head per pattern of 8 bytes or more (in the
    heads matcher and a dict of their longest pattern), and the short dict
    (under 10 entries per pattern; ~110 000 at 1 000 secrets).

    With the C module (and a gram filter), :meth:`hold` is one C call
    (``_native.prefix_hold``) over a table built once (``prefix_table``), which
    answers the same definition by other steps: a tail of 8 bytes or more is
    a run of the patterns' bytes whose 8-byte windows all pass the gram filter
    (walked back from the end) and that starts with a head (a Bloom filter);
    a tail of 3-7 bytes is in a Bloom filter of those prefixes; each candidate,
    longest first, is confirmed by a lower bound in the sorted patterns (from
    the range of its first two bytes; the last pattern that confirmed one is
    asked first). Measured in situ (4 KiB feeds of the token log, k = 1 000):
    the hold cost 4.1 us a feed in Python, where a dict lookup or a bisection
    step is a cache miss after the Hyperscan scan, and 0.7 in C, whose filter
    blocks are fetched together. The table costs 24 bytes a pattern (its
    pointer, length and first 8 bytes), a 256 KiB range table, and the
    filters (2 bytes a distinct prefix of 3-7 bytes and a head). The Python steps above stay the
    form without the C module (``PADDEDCELL_NATIVE=0``), and the tests hold
    each to the other.
    """

    __slots__ = ("_sorted", "_groups", "_short", "_pairs", "_grams", "_bits", "_prime", "_witness", "_table", "maxlen")

    HEAD = 8
    #: Most bytes each group's tail is cut at (one ``rfind`` each per hold).
    STOPS = 2
    #: Patterns this long or shorter (fragment windows) have their own group,
    #: whose heads are looked up at the few places a tail can start (no scan):
    #: a held tail of a secret holds the heads of ~30 of its windows, each a
    #: callback if scanned with the long patterns' heads (and skipped there:
    #: too short for it), and 32 000 window heads at 1 000 secrets cost ~2 s
    #: to compile.
    SHORT_REACH = 15

    def __init__(self, patterns: Iterable[bytes], engine: type):
        self._sorted = ordered = sorted(set(patterns))
        self._witness = b""
        self.maxlen = max((len(p) for p in ordered), default=0)
        head = self.HEAD
        parts: dict[tuple[bool, bool, bool], list[bytes]] = {}
        for p in ordered:
            if len(p) >= head:
                key = (any(c in p for c in BREAKS), b" " in p, len(p) <= self.SHORT_REACH)
                parts.setdefault(key, []).append(p)
        self._groups: list[_Group] = []
        for _, members in sorted(parts.items()):
            longest: dict[bytes, int] = {}
            alphabet: set[int] = set()
            for p in members:
                alphabet.update(p)
                h = p[:head]
                if longest.get(h, 0) < len(p):
                    longest[h] = len(p)
            stops = bytes(c for c in COMMON_BYTES if c not in alphabet)[: self.STOPS]
            reach = max(longest.values())
            scanned = _Heads(longest, engine) if reach > self.SHORT_REACH else None
            # A group holding every printable byte is not gated by its bytes (text always passes).
            gate = None if alphabet.issuperset(_PRINTABLE) else bytes(sorted(alphabet))
            self._groups.append(_Group(scanned, longest, reach, stops, gate))
        grouped = [p for p in ordered if len(p) >= head]
        self._grams = _Grams.of(grouped) if grouped and head == 8 else None
        #: The gram filter's bitmap and prime, read by :meth:`hold` itself (no call).
        self._bits, self._prime = (self._grams._bits, self._grams._prime) if self._grams is not None else (None, 1)
        # Short tails: each key a substring of up to 3 bytes ending within a
        # pattern's first 7 (value 0), or a prefix of up to 4 bytes (value 1).
        short: dict[bytes, int] = {}
        for p in ordered:
            q = p[: head - 1]
            for j in range(1, len(q) + 1):
                for k in range(max(0, j - 3), j):
                    short.setdefault(q[k:j], 0)
            for k in range(1, min(len(p), 4) + 1):
                short[p[:k]] = 1
        self._short = short
        self._pairs = self._pair_holds(short) if self.maxlen >= 4 else None
        #: The C form of :meth:`hold` (see :meth:`hold_function`), or None: no C module, or no gram filter.
        self._table = (_prefix_table(ordered, self._bits, self._prime)
                       if _prefix_table is not None and self._bits is not None and head == 8 and ordered[0] else None)

    def hold_function(self):
        """:meth:`hold` as one callable for a feed's hot path: the C call itself
        when there is one (no Python frame), with ``maxlen`` as it is now."""
        if self._table is None:
            return self.hold
        return partial(_prefix_hold, self._table, self.maxlen)

    @staticmethod
    def _pair_holds(short: dict[bytes, int]) -> bytes:
        """:meth:`_short_hold` of a buffer ending with the bytes ``a``, ``b`` but
        with no key of 3 bytes, at offset ``a << 8 | b`` (it needs no more than
        those two: its first steps, one table lookup for most feeds)."""
        table = bytearray(65536)
        for key, value in short.items():
            if len(key) == 1 and value:
                table[key[0] :: 256] = b"\x01" * 256  # a 1-byte prefix, whatever comes before it
        for key, value in short.items():
            if len(key) == 2:
                table[key[0] << 8 | key[1]] = 2 if value else short.get(key[1:], 0)
        return bytes(table)

    def hold(self, buf: bytes) -> int:
        if self._table is not None:
            return _prefix_hold(self._table, self.maxlen, buf)
        bits = self._bits
        if bits is not None and (len(buf) < 8 or not bits[(r := int.from_bytes(buf[-8:], _ORDER) % self._prime) >> 3]
                                 >> (r & 7) & 1):
            # Most feeds: the last 8 bytes are no gram of a pattern (_Grams.holds, inline: one
            # call less), so no tail of HEAD bytes or more is held; a shorter one ends with a
            # key of the short dict, and one whose last 3 bytes are none is 2 bytes at most.
            short = self._short
            if len(buf) >= 3 and buf[-3:] not in short and self._pairs is not None:
                return self._pairs[buf[-2] << 8 | buf[-1]]
            one = short.get(buf[-1:])
            if one is None:
                return 0
            if short.get(buf[-2:]) is None and self.maxlen > 2:
                return one  # (_short_hold's first two steps: most held tails are one byte)
            return self._short_hold(buf, min(len(buf), self.maxlen - 1, self.HEAD - 1))
        return self._long_hold(buf)

    def _long_hold(self, buf: bytes) -> int:
        """:meth:`hold` when a tail of ``HEAD`` bytes or more may be held."""
        n = len(buf)
        best = 0
        top = self.maxlen - 1  # read here: a caller may raise maxlen (views count a whole p[:-1])
        head = self.HEAD
        last = buf[-head:]
        groups = self._groups if n >= head else ()  # (here: no gram filter, or the last 8 bytes pass it)
        for g in groups:
            if g.alphabet is not None and last.rstrip(g.alphabet):
                continue  # a byte among the last 8 no pattern of the group holds
            lo = n - min(g.reach, top)
            if lo < 0:
                lo = 0
            for c in g.stops:
                j = buf.rfind(c, lo) + 1
                if j > lo:
                    lo = j
            m = n - lo
            if m > best and m >= head:
                window = buf[lo:] if lo else buf
                longest = g.longest
                if g.heads is None:  # few places (the short group): a dict lookup each
                    ends = range(head, m + 1)
                elif m <= longest.get(window[:head], 0) and self._is_prefix(window, 0):
                    # The window's start (after a stop byte: a line start...) first,
                    # the longest tail: most held long tails start there (a token
                    # at a line's start cut by the read), and the heads scan of
                    # a few dozen bytes costs ~1.5-3 us (its database is cold).
                    best = m
                    continue
                else:
                    ends = g.heads.ends(window)
                if ends:
                    for e in ends:  # longest tail first
                        s = e - head
                        if m - s <= best:
                            break
                        if m - s <= longest.get(window[s:e], 0) and self._is_prefix(window, s):
                            best = m - s
                            break
        if best:
            return best
        return self._short_hold(buf, min(n, top, self.HEAD - 1))

    def may_contain(self, eight: bytes) -> bool:
        """Whether ``eight`` (8 bytes) may lie inside some pattern: False only
        when no held tail can contain them (True without a gram filter)."""
        return self._grams is None or self._grams.holds(eight)

    def short_hold(self, tail: bytes) -> int:
        """The longest held suffix of ``tail`` of at most 7 bytes (exact only when
        no longer suffix is held: see :meth:`may_contain` of its last 8 bytes)."""
        if self._table is not None:  # the C hold told tails of 8 bytes or more are not asked
            return _prefix_hold(self._table, min(self.maxlen, self.HEAD), tail)
        return self._short_hold(tail, min(len(tail), self.maxlen - 1, self.HEAD - 1))

    def _short_hold(self, buf: bytes, top: int) -> int:
        """The hold when no tail of ``HEAD`` bytes or more is held: the
        longest held tail of at most ``top`` bytes."""
        short = self._short
        one = short.get(buf[-1:]) if top >= 1 else None  # b"" is no key either
        if one is None:
            return 0
        two = short.get(buf[-2:]) if top >= 2 else None
        if two is None:
            return one
        three = short.get(buf[-3:]) if top >= 3 else None
        if three is None:
            return 2 if two else one
        n = len(buf)
        for k in range(top, 4, -1):
            if short.get(buf[-k : 4 - k]) and self._is_prefix(buf, n - k):
                return k
        if top >= 4 and short.get(buf[-4:]):
            return 4
        return 3 if three else 2 if two else one

    def _is_prefix(self, buf: bytes, i: int) -> bool:
        """Is ``buf[i:]`` a prefix of some pattern?

        The pattern that last answered yes is asked first: a stream cut
        inside the same token again and again (a log's shared JWT header, a
        line repeated) is held by it, one compare instead of a bisection's
        ~17 (~2 us at k = 1 000: the sorted patterns are cold after the big
        scans). Any pattern is a witness, whichever thread stored it."""
        tail = buf[i:]
        if self._witness.startswith(tail):
            return True
        ordered = self._sorted
        j = bisect_left(ordered, tail)
        if j < len(ordered) and ordered[j].startswith(tail):
            self._witness = ordered[j]
            return True
        return False
