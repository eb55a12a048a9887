"""Find every occurrence of a fixed set of byte patterns, and the live tail.

A matcher answers two questions about a buffer, both exactly:

* ``spans(buf)``: every ``(start, end)`` where some pattern occurs, overlapping
  and self-overlapping occurrences included (masking needs the union of all of
  them, not leftmost-longest: see research/redaction.md §8.1);
* ``hold(buf)``: the length of the longest suffix of ``buf`` that is a prefix of
  some pattern, i.e. how many trailing bytes may still start an occurrence.

Engines (chosen by :func:`build`):

* :class:`FindMatcher` — one ``bytes.find`` scan per pattern (CPython's
  fastsearch, ~5 GB/s on a 64 KiB read here). Unbeatable for one pattern and
  free to build.
* :class:`SampledMatcher` — many patterns, all at least 8 bytes long
  (Wu–Manber sampling, vectorised with numpy). Its cost per byte does not
  grow with the number of patterns.
* :class:`AhoMatcher` — pyahocorasick (~20–40 MB/s), only for *many short*
  secrets (under 8 bytes), which sampling cannot cover.
* :class:`CompositeMatcher` — splits a pattern set by length across the
  above, so a short secret slows down only its own scan.

Every engine is exact; tests check them against each other and against the
naive oracle. ``hold`` is shared (:class:`PrefixIndex`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Iterable

import ahocorasick
import numpy as np


class PrefixIndex:
    """Longest suffix of a buffer that is a prefix of some pattern.

    Sorted patterns answer "is ``t`` a prefix of some pattern" with one
    bisection: every pattern starting with ``t`` sorts at or right after ``t``.
    That needs no memory beyond the pattern list, unlike a trie of every
    prefix (millions of nodes at 10 000 secrets with variants). A set of the
    patterns' first four bytes rejects almost every candidate tail before the
    bisection.
    """

    __slots__ = ("_sorted", "_first", "_first_re", "_sparse", "_head4", "_short", "maxlen")

    #: Tails longer than this are searched for candidate starts with a regex
    #: (C speed) instead of a Python loop: a 4 KiB PEM key hex-encoded is an
    #: 8 KiB pattern, and every feed looks at that many trailing bytes.
    LOOP_LIMIT = 256

    def __init__(self, patterns: Iterable[bytes]):
        self._sorted = sorted(set(patterns))
        first = bytearray(256)
        for p in self._sorted:
            first[p[0]] = 1
        self._first = bytes(first)
        starts = b"".join(re.escape(bytes([c])) for c in range(256) if first[c])
        self._first_re = re.compile(b"[" + starts + b"]") if starts else None
        # With few distinct first bytes, most tail positions cannot start a
        # pattern and the regex skips them in C; with many, a loop is cheaper.
        self._sparse = sum(first) <= 16
        self._head4 = {p[:4] for p in self._sorted if len(p) >= 4}
        self._short = {p[:k] for p in self._sorted for k in range(1, min(len(p), 3) + 1)}
        self.maxlen = max((len(p) for p in self._sorted), default=0)

    def hold(self, buf: bytes) -> int:
        n = len(buf)
        lo = max(0, n - self.maxlen + 1)
        if self._first_re is None:
            return 0
        if self._sparse or n - lo > self.LOOP_LIMIT:
            for m in self._first_re.finditer(buf, lo):
                if self._is_prefix(buf, m.start()):
                    return n - m.start()
            return 0
        # Dense first bytes and a short tail: the 4-byte head set is the filter.
        head4 = self._head4
        for i in range(lo, n - 3):
            if buf[i : i + 4] in head4 and self._is_prefix(buf, i):
                return n - i
        short = self._short
        for i in range(max(lo, n - 3), n):
            if buf[i:] in short:
                return n - i
        return 0

    def _is_prefix(self, buf: bytes, i: int) -> bool:
        """Is ``buf[i:]`` a prefix of some pattern?"""
        tail = buf[i:]
        if len(tail) < 4:
            return tail in self._short
        if tail[:4] not in self._head4:
            return False
        ordered = self._sorted
        j = bisect_left(ordered, tail)
        return j < len(ordered) and ordered[j].startswith(tail)


class _Engine:
    """Shared ``hold``: a :class:`PrefixIndex` over the patterns, built on first use
    (engines inside a :class:`CompositeMatcher` never need their own)."""

    patterns: list[bytes]
    _prefix: PrefixIndex | None = None

    def hold(self, buf: bytes) -> int:
        if self._prefix is None:
            self._prefix = PrefixIndex(self.patterns)
        return self._prefix.hold(buf)


class FindMatcher(_Engine):
    """One ``bytes.find`` pass per pattern: fastest for few patterns."""

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))
        self.maxlen = max(map(len, self.patterns), default=0)

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        return _find_all(self.patterns, buf)


class AhoMatcher(_Engine):
    """pyahocorasick over the buffer decoded as latin-1 (a 1:1 byte map).

    The PyPI wheel is a unicode build that refuses bytes; latin-1 maps each
    byte to one code point, so indices are byte offsets.
    """

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))
        self.maxlen = max(map(len, self.patterns), default=0)
        automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
        for p in self.patterns:
            automaton.add_word(p.decode("latin-1"))
        if self.patterns:
            automaton.make_automaton()
        self._automaton = automaton

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        if not self.patterns:
            return []
        return [(end + 1 - m, end + 1) for end, m in self._automaton.iter(buf.decode("latin-1"))]


class SampledMatcher(_Engine):
    """Wu–Manber style sampling for many patterns that are all long.

    Every pattern has at least ``m`` bytes. Read one ``q``-byte gram at buffer
    offsets ``0, s, 2s, ...`` with ``s = m - q + 1``: an occurrence starting at
    ``a`` contains exactly one sampled offset ``p`` in ``[a, a + s)``, and the
    gram there lies inside the pattern (``p - a + q <= m``). So registering
    each pattern's grams at offsets ``0 .. s-1`` and looking every sampled
    gram up finds every occurrence; a slice comparison then verifies it.

    The lookup is vectorised with numpy: a strided view reads the grams
    without copying, a multiplicative hash indexes two bitmaps, survivors are
    checked exactly against the sorted grams, and only true gram hits reach
    Python. The cost per byte is about 1/s of a scan, and does not grow with
    the number of patterns.
    """

    MIN_LENGTH = 8

    def __init__(self, patterns: Iterable[bytes]):
        pats = sorted(set(patterns))
        if not pats or min(map(len, pats)) < self.MIN_LENGTH:
            raise ValueError(f"sampling needs patterns of at least {self.MIN_LENGTH} bytes")
        self.patterns = pats
        self.maxlen = max(map(len, pats))
        m = min(map(len, pats))
        q = 8 if m >= 16 else 4
        # Any step up to m - q + 1 is exact; capping it keeps the gram table
        # small when every pattern is huge (PEM keys) at no cost in speed.
        s = min(m - q + 1, MAX_STEP)
        self._q, self._s, self._dtype = q, s, np.dtype("<u8" if q == 8 else "<u4")
        joined = b"".join(p[:m] for p in pats)
        count = len(pats)
        grams = np.ndarray((count, s), dtype=self._dtype, buffer=joined, strides=(m, 1))
        grams = grams.astype(np.uint64).ravel()
        # Two tables indexed by two bit fields of one multiplicative hash (the
        # top ``bits1`` bits, then the next ``bits2``). The first is a byte per
        # entry (one gather per gram: ~3x faster than testing a bit, in the same
        # memory as a bitmap with 3 more bits), 2**-(EXTRA_BITS_1 - 3) full, so
        # a clean 64 KiB read has few survivors; the second, a bitmap, thins
        # those before the exact check. Bigger tables would filter more but
        # cost page faults at build time, and the supervisor builds two
        # redactors per command.
        grams_bits = int(count * s).bit_length()
        bits1 = min(23, max(13, grams_bits + EXTRA_BITS_1 - 3))
        bits2 = min(26, max(12, grams_bits + EXTRA_BITS_2))
        self._shift1 = np.uint64(64 - bits1)
        self._shift2 = np.uint64(64 - bits1 - bits2)
        self._field = np.uint64((1 << bits2) - 1)
        h = grams * self._MULT
        self._table1 = np.zeros(1 << bits1, np.bool_)
        self._table1[(h >> self._shift1).view(np.int64)] = True
        self._table2 = _bitmap(bits2, ((h >> self._shift2) & self._field).view(np.int64))
        self._find_work = FIND_WORK
        order = np.argsort(grams, kind="stable")
        self._sorted_grams = grams[order]
        # Entry t of the sorted table is pattern order[t] // s at offset order[t] % s.
        self._entries = order

    _MULT = np.uint64(0x9E3779B97F4A7C15)  # odd; 2**64 / golden ratio

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        n, q, s = len(buf), self._q, self._s
        if n < q + s - 1:
            return []  # shorter than the shortest pattern
        if n * len(self.patterns) <= self._find_work:
            return _find_all(self.patterns, buf)  # numpy's fixed cost would dominate
        count = (n - q) // s + 1
        grams = np.ndarray((count,), dtype=self._dtype, buffer=buf, strides=(s,))
        if q == 4:
            grams = grams.astype(np.uint64)
        h = grams * self._MULT
        first = self._table1.take((h >> self._shift1).view(np.int64))
        if not first.any():
            return []
        hit = first.nonzero()[0]  # on a bool array: ~8x faster than on uint8
        second = _probe(self._table2, ((h[hit] >> self._shift2) & self._field).view(np.int64))
        hit = hit[second.view(bool)]
        if not hit.size:
            return []
        grams = grams[hit]
        table = self._sorted_grams
        lo = table.searchsorted(grams, "left")
        lo[lo == len(table)] = 0
        real = table[lo] == grams
        if not real.any():
            return []
        found = []
        hi = table.searchsorted(grams[real], "right").tolist()
        entries, pats = self._entries, self.patterns
        for sample, a, b in zip(hit[real].tolist(), lo[real].tolist(), hi):
            p = sample * s
            for entry in entries[a:b].tolist():
                index, offset = divmod(entry, s)
                start = p - offset
                pat = pats[index]
                if start >= 0 and buf.startswith(pat, start):
                    found.append((start, start + len(pat)))
        return found


def _bitmap(bits: int, index: np.ndarray) -> np.ndarray:
    """A ``2**bits``-bit table with the bits at ``index`` set."""
    table = np.zeros(1 << (bits - 3), np.uint8)
    low = index & 7
    for bit in range(8):
        # Plain fancy assignment (duplicates write the same value): much
        # faster than np.bitwise_or.at.
        at = index[low == bit] >> 3
        table[at] |= np.uint8(1 << bit)
    return table


def _probe(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """1 where the bit ``index`` is set in ``table``, else 0 (uint8)."""
    return (table[index >> 3] >> (index & 7).astype(np.uint8)) & 1


def _find_all(patterns: list[bytes], buf: bytes) -> list[tuple[int, int]]:
    """Every occurrence of every pattern, overlapping ones included."""
    found = []
    for p in patterns:
        i = buf.find(p)
        if i < 0:
            continue
        m = len(p)
        while i >= 0:
            found.append((i, i + m))
            i = buf.find(p, i + 1)
    return found


class CompositeMatcher(_Engine):
    """Each pattern goes to the engine that suits its length; spans are the union.

    Patterns shorter than ``SampledMatcher.MIN_LENGTH`` (short secrets) go to
    ``bytes.find`` when few and to pyahocorasick when many: a short secret
    costs a slower scan of its own but does not slow the others down. Long
    patterns are sampled in two length bands, so one 8-byte secret does not
    shrink the sampling step of 40-byte ones.
    """

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))
        self.maxlen = max(map(len, self.patterns), default=0)
        self._prefix = PrefixIndex(self.patterns)
        short = [p for p in self.patterns if len(p) < SampledMatcher.MIN_LENGTH]
        medium = [p for p in self.patterns if SampledMatcher.MIN_LENGTH <= len(p) < LONG_LENGTH]
        long = [p for p in self.patterns if len(p) >= LONG_LENGTH]
        self.engines = []
        if short:
            self.engines.append(FindMatcher(short) if len(short) <= FIND_LIMIT else AhoMatcher(short))
        for band in (medium, long):
            if band:
                self.engines.append(FindMatcher(band) if len(band) <= FIND_LIMIT_LONG else SampledMatcher(band))

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        if len(self.engines) == 1:
            return self.engines[0].spans(buf)
        found = []
        for engine in self.engines:
            found += engine.spans(buf)
        return found


#: Short patterns use ``bytes.find`` up to this many, pyahocorasick beyond.
FIND_LIMIT = 8
#: Long patterns use ``bytes.find`` up to this many, sampling beyond.
FIND_LIMIT_LONG = 1
#: Below this many (buffer bytes x patterns), ``bytes.find`` per pattern beats
#: the ~10 us fixed cost of the vectorised sampler (e.g. 4 KiB reads, k = 1).
FIND_WORK = 32 * 1024
#: Sizes of the sampler's two bitmaps, in bits above the gram count's bit length.
EXTRA_BITS_1 = 10
EXTRA_BITS_2 = 6
#: Largest sampling step (grams registered per pattern).
MAX_STEP = 64
#: Patterns at least this long are sampled with 8-byte grams.
LONG_LENGTH = 16

#: Every engine, for tests that check they agree.
ENGINES = (FindMatcher, AhoMatcher, SampledMatcher, CompositeMatcher)


def build(patterns: Iterable[bytes]):
    """The fastest exact engine for this pattern set."""
    patterns = sorted(set(patterns))
    if len(patterns) <= FIND_LIMIT_LONG or (
        len(patterns) <= FIND_LIMIT and all(len(p) < SampledMatcher.MIN_LENGTH for p in patterns)
    ):
        return FindMatcher(patterns)
    return CompositeMatcher(patterns)
