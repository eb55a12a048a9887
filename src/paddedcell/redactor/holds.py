"""The hold: the longest suffix of a buffer that is a prefix of some pattern.

A streaming redactor keeps that many trailing bytes back (they may still
start an occurrence); :class:`PrefixIndex` answers it exactly. Moved here
from :mod:`.matcher` (issue 21), which imports it from here; ``engine`` (a
matcher class of :mod:`.matcher`, for the heads scan) is now required, as
every caller gave it: the default (``FindMatcher``) would be an import circle.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from typing import Iterable


def _text_weights() -> list[tuple[int, int]]:
    """How often bytes occur in ordinary text (a rough guess; only the order
    matters), as ``(weight, mask of the bytes of that weight)``: what a byte
    class costs the hold, whose tail runs back over bytes of one class.
    Spaces and lower-case letters are the dear ones."""
    weight = [1] * 256
    for group, w in ((b" ", 150), (b"etaoinshr", 60), (b"bcdfgjklmpquvwxyz", 20), (b"\n.,-_/:;='\"()", 8),
                     (b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", 3)):
        for c in group:
            weight[c] = w
    return [(w, sum(1 << c for c in range(256) if weight[c] == w)) for w in set(weight)]


_WEIGHT_LEVELS = _text_weights()
#: Groups of bytes a class either touches or not (each byte's group number):
#: patterns are first pooled by the groups they touch (at most 128 pools:
#: number lists, hex, base64 …).
_GROUP_OF = bytes(next((i for i, g in enumerate((
    b" ", b"abcdef", b"ghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"0123456789", b",")) if c in g), 6)
    for c in range(256))


def alphabet_classes(patterns: Iterable[bytes], limit: int) -> tuple[bytes, ...]:
    """At most ``limit`` byte sets, each pattern's bytes all inside one of them.

    Patterns are pooled by the byte groups they touch (:data:`_GROUP_OF`), then
    pools are merged, two at a time, where the union weighs least more in
    text (:func:`_text_weights`) than the heavier of the two, until ``limit``
    are left: forms of letters merge with each other, number lists (digits,
    space, comma) with each other, and text's spaces and letters end a held
    tail's class run within a few bytes.
    """
    pools: dict[frozenset[int], set[int]] = {}
    for p in patterns:
        pools.setdefault(frozenset(p.translate(_GROUP_OF)), set()).update(p)
    masks = {i: sum(1 << c for c in pool) for i, pool in enumerate(pools.values())}
    weights = {i: _weight(m) for i, m in masks.items()}
    pairs = []  # (cost, i, j): a heap, entries of merged pools skipped when popped

    def offer(i: int, j: int) -> None:
        heapq.heappush(pairs, (_weight(masks[i] | masks[j]) - max(weights[i], weights[j]), i, j))

    for i in masks:
        for j in masks:
            if i < j:
                offer(i, j)
    fresh = len(masks)
    while len(masks) > max(1, limit):
        _, i, j = heapq.heappop(pairs)
        if i not in masks or j not in masks:
            continue
        merged = masks.pop(i) | masks.pop(j)
        del weights[i], weights[j]
        masks[fresh], weights[fresh] = merged, _weight(merged)
        for other in masks:
            if other != fresh:
                offer(other, fresh)
        fresh += 1
    return tuple(bytes(c for c in range(256) if m >> c & 1) for m in masks.values())


def _weight(mask: int) -> int:
    """Text weight of a byte set given as a 256-bit mask."""
    return sum(w * (mask & level).bit_count() for w, level in _WEIGHT_LEVELS)


class PrefixIndex:
    """Longest suffix of a buffer that is a prefix of some pattern.

    Sorted patterns answer "is ``t`` a prefix of some pattern" with one
    bisection: every pattern starting with ``t`` sorts at or right after ``t``.
    That needs no memory beyond the pattern list, unlike a trie of every
    prefix (tens of millions of nodes at 10 000 secrets with their forms and
    fragments).

    Where the tail can start: after the last byte that no pattern holds,
    and, when that leaves a tail long enough for the heads scan, after the
    last byte outside some pattern's byte class (:func:`alphabet_classes`):
    a held tail is a prefix of one pattern, so its bytes are all in that
    pattern's class.

    Which tails to bisect: a tail of ``HEAD`` bytes or more can only be a
    prefix of a pattern whose first ``HEAD`` bytes it starts with, so a second
    matcher of the same engine over those heads, scanned across the last
    ``maxlen`` bytes, yields the only candidates, in C (a Python loop over
    every position of a 600-byte window cost more than the scan itself:
    every byte of a token-heavy log starts some 4-gram of some secret). The
    ``HEAD - 1`` shortest tails are bisected directly. Candidates are tried
    longest first, and the first that is a prefix is the answer.
    """

    __slots__ = ("_sorted", "_first", "_alphabet", "_classes", "_heads", "_direct", "_prefixes", "_head4",
                 "_short3", "maxlen")

    HEAD = 8
    #: Largest set of short prefixes kept (entries): ~25 MiB.
    PREFIX_SET_LIMIT = 250_000
    #: Most byte classes bounding a long tail (see :func:`alphabet_classes`).
    CLASSES = 8

    def __init__(self, patterns: Iterable[bytes], engine: type, direct: int = HEAD):
        self._sorted = sorted(set(patterns))
        first = bytearray(256)
        for p in self._sorted:
            first[p[0]] = 1
        self._first = bytes(first)
        classes = alphabet_classes(self._sorted, self.CLASSES)
        #: Every byte some pattern holds: a held tail holds no other.
        self._alphabet = bytes(sorted(set(b"".join(classes))))
        #: Byte classes each holding one pattern's bytes whole: a held tail,
        #: a prefix of one pattern, lies in one class.
        self._classes = classes or (b"",)
        self.maxlen = max((len(p) for p in self._sorted), default=0)
        # Tails shorter than ``direct`` are bisected directly; fragment windows
        # (short and ~30 per secret) then need no heads of their own.
        self._direct = direct = max(direct, self.HEAD)
        heads = {p[: self.HEAD] for p in self._sorted if len(p) >= direct}
        self._heads = engine(heads) if heads else None
        # Few patterns: every prefix shorter than ``direct`` in a set (one hash
        # per short tail instead of a bisection; ~3x faster on 4 KiB reads).
        self._prefixes = None
        if len(self._sorted) * (direct - 1) <= self.PREFIX_SET_LIMIT:
            self._prefixes = {p[:k] for p in self._sorted for k in range(1, min(len(p), direct - 1) + 1)}
            self._head4 = self._short3 = frozenset()
        else:  # many patterns: a 4-byte head filter before each bisection
            self._head4 = {p[:4] for p in self._sorted if len(p) >= 4}
            self._short3 = {p[:k] for p in self._sorted for k in range(1, min(len(p), 3) + 1)}

    def hold(self, buf: bytes) -> int:
        n = len(buf)
        if not n:
            return 0
        # The tail starts after the last byte that no pattern holds (C speed:
        # in text, a space or punctuation a few bytes from the end); when the
        # last ``direct`` bytes are all such bytes, after the last byte outside
        # some pattern's class (a union of classes takes in, say, the space of
        # decimal lists and the letters of the secrets). rstrip costs a memchr
        # per byte it strips, so only the short window and the class runs.
        direct = self._direct
        lo = n - direct
        if lo > 0:
            kept = len(buf[lo:].rstrip(self._alphabet))
            if kept:
                lo = max(lo + kept, n - self.maxlen + 1)
            else:
                lo = max(0, n - self.maxlen + 1)
                window = buf[lo:]
                lo += min([len(window.rstrip(c)) for c in self._classes])
        else:
            lo = max(0, n - self.maxlen + 1)
            lo += len(buf[lo:].rstrip(self._alphabet))
        if lo >= n:
            return 0
        short = max(lo, n - direct + 1)  # tails from here on are shorter than direct
        if self._heads is not None and short - lo > 0:
            window = buf[lo:]
            starts = sorted({s for s, _ in self._heads.spans(window) if lo + s < short})
            for s in starts:
                if self._is_prefix(buf, lo + s):
                    return n - lo - s
        prefixes, first = self._prefixes, self._first
        if prefixes is not None:
            for i in range(short, n):
                if first[buf[i]] and buf[i:] in prefixes:
                    return n - i
            return 0
        head4, short3 = self._head4, self._short3
        for i in range(short, n - 3):
            if first[buf[i]] and buf[i : i + 4] in head4 and self._is_prefix(buf, i):
                return n - i
        for i in range(max(short, n - 3), n):
            if first[buf[i]] and buf[i:] in short3:
                return n - i
        return 0

    def _is_prefix(self, buf: bytes, i: int) -> bool:
        """Is ``buf[i:]`` a prefix of some pattern?"""
        tail = buf[i:]
        ordered = self._sorted
        j = bisect_left(ordered, tail)
        return j < len(ordered) and ordered[j].startswith(tail)
