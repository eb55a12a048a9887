"""The hold: the longest suffix of a buffer that is a prefix of some pattern.

A streaming redactor keeps that many trailing bytes back (they may still
start an occurrence); :class:`PrefixIndex` answers it exactly, for every
buffer and pattern set, in a few C calls per buffer (issue 21: it was half
of a 4 KiB feed's cost). ``engine`` is a matcher class of :mod:`.matcher`
(which imports this module), used for the heads scan.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterable

#: Bytes frequent in text, most frequent first: those a group of patterns
#: never holds end its tails (found from the end at memrchr speed).
COMMON_BYTES = b" etaoinsrhl\n\tdcumfpgwybvkxjqz.,:;=\"'()\r"
#: Line breaks: patterns holding one (forms wrapped at a column) get their own
#: heads group, so a line break still ends the other patterns' tails.
BREAKS = b"\r\n"


class _Group:
    """Heads of one group of patterns: the heads matcher, each head's longest
    pattern, the longest tail it can start, and the bytes that end such a tail."""

    __slots__ = ("heads", "longest", "reach", "stops")

    def __init__(self, heads, longest: dict[bytes, int], reach: int, stops: bytes):
        self.heads, self.longest, self.reach, self.stops = heads, longest, reach, stops


class PrefixIndex:
    """Longest suffix of a buffer, shorter than the longest pattern, that is a
    prefix of some pattern.

    Sorted patterns answer "is ``t`` a prefix of some pattern" with one
    bisection: every pattern starting with ``t`` sorts at or right after ``t``.
    That needs no memory beyond the pattern list, unlike a trie of every
    prefix (tens of millions of nodes at 10 000 secrets with their forms and
    fragments). What makes a hold cheap is asking it rarely:

    * Tails of ``HEAD`` bytes or more start with some pattern's first ``HEAD``
      bytes: one scan of the window that can hold such a tail, by a matcher of
      the same engine over those heads, yields the only candidates (no Python
      loop over positions: every byte of a token-heavy log starts some 4-gram
      of some secret). The window is the last ``reach`` bytes (the longest
      pattern), cut after the last byte the group's patterns never hold among
      :data:`COMMON_BYTES` (``rfind``: a line break, a space...). A head whose
      patterns are all shorter than the tail it would start is skipped; the
      others are bisected, longest tail first.
    * Shorter tails (7 bytes at most) walk back from the end through one dict
      of the substrings of up to 3 bytes that end within a pattern's first 7
      (a tail ending otherwise extends to nothing held: random text stops
      after 1-3 lookups), then the 4-byte prefixes; a 5- to 7-byte tail whose
      first 4 bytes are a prefix is bisected.

    Memory: the sorted patterns, a head per pattern of 8 bytes or more (in the
    heads matcher and a dict of their longest pattern), and the short dict
    (under 10 entries per pattern; ~110 000 at 1 000 secrets).
    """

    __slots__ = ("_sorted", "_groups", "_short", "maxlen")

    HEAD = 8
    #: Most bytes each group's tail is cut at (one ``rfind`` each per hold).
    STOPS = 2

    def __init__(self, patterns: Iterable[bytes], engine: type):
        self._sorted = ordered = sorted(set(patterns))
        self.maxlen = maxlen = max((len(p) for p in ordered), default=0)
        head = self.HEAD
        parts: dict[bool, list[bytes]] = {}
        for p in ordered:
            if len(p) >= head:
                parts.setdefault(any(c in p for c in BREAKS), []).append(p)
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
            self._groups.append(_Group(engine(longest), longest, max(longest.values()), stops))
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

    def hold(self, buf: bytes) -> int:
        n = len(buf)
        best = 0
        top = self.maxlen - 1  # read here: a caller may raise maxlen (views count a whole p[:-1])
        for g in self._groups:
            lo = n - min(g.reach, top)
            if lo < 0:
                lo = 0
            for c in g.stops:
                j = buf.rfind(c, lo) + 1
                if j > lo:
                    lo = j
            m = n - lo
            if m > best and m >= 8:
                window = buf[lo:] if lo else buf
                hits = g.heads.spans(window)
                if hits:
                    longest = g.longest
                    for s in sorted([s for s, e in hits if m - s <= longest[window[s:e]]]):
                        if m - s <= best:
                            break
                        if self._is_prefix(window, s):
                            best = m - s
                            break
        if best:
            return best
        return self._short_hold(buf, min(n, top, self.HEAD - 1))

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
        """Is ``buf[i:]`` a prefix of some pattern?"""
        tail = buf[i:]
        ordered = self._sorted
        j = bisect_left(ordered, tail)
        return j < len(ordered) and ordered[j].startswith(tail)
