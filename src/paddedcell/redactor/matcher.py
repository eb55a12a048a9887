"""Find every occurrence of a fixed set of byte patterns, and the live tail.

A matcher answers two questions about a buffer, both exactly:

* ``spans(buf)``: every ``(start, end)`` where some pattern occurs, overlapping
  and self-overlapping occurrences included (masking needs the union of all of
  them, not leftmost-longest: see research/redaction.md §8.1);
* ``hold(buf)``: the length of the longest suffix of ``buf`` that is a prefix of
  some pattern, i.e. how many trailing bytes may still start an occurrence.

Engines (chosen by :func:`build`):

* :class:`FindMatcher` — one ``bytes.find`` scan per pattern. CPython's
  two-way search runs at several GB/s, so for a handful of patterns nothing
  written in Python beats it, and it costs nothing to build.
* :class:`SampledMatcher` — for many patterns, all long (Wu–Manber style).
  Every pattern is at least ``m`` bytes, so any occurrence contains one of the
  ``q``-grams starting at buffer offsets ``0, s, 2s, ...`` (``s = m - q + 1``)
  at a pattern offset below ``s``. We look those sampled grams up in a set of
  the patterns' grams, then verify candidates with a slice comparison.
* :class:`AhoMatcher` — pyahocorasick, the fallback when some pattern is too
  short for sampling (a short secret forces this slower path).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterable

import ahocorasick


class PrefixIndex:
    """Longest suffix of a buffer that is a prefix of some pattern.

    Sorted patterns answer "is ``t`` a prefix of some pattern" with one
    bisection: every pattern starting with ``t`` sorts at or right after ``t``.
    That needs no memory beyond the pattern list, unlike a trie of every
    prefix (millions of nodes at 10 000 secrets with variants).
    """

    __slots__ = ("_sorted", "_first", "maxlen")

    def __init__(self, patterns: Iterable[bytes]):
        self._sorted = sorted(set(patterns))
        first = bytearray(256)
        for p in self._sorted:
            first[p[0]] = 1
        self._first = bytes(first)
        self.maxlen = max((len(p) for p in self._sorted), default=0)

    def hold(self, buf: bytes) -> int:
        n = len(buf)
        first, ordered = self._first, self._sorted
        for i in range(max(0, n - self.maxlen + 1), n):
            if first[buf[i]]:
                tail = buf[i:]
                j = bisect_left(ordered, tail)
                if j < len(ordered) and ordered[j].startswith(tail):
                    return n - i
        return 0


class FindMatcher:
    """One ``bytes.find`` pass per pattern: fastest for few patterns."""

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))
        self._prefix = PrefixIndex(self.patterns)
        self.maxlen = self._prefix.maxlen

    def hold(self, buf: bytes) -> int:
        return self._prefix.hold(buf)

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        found = []
        for p in self.patterns:
            i = buf.find(p)
            if i < 0:
                continue
            m = len(p)
            while i >= 0:
                found.append((i, i + m))
                i = buf.find(p, i + 1)
        return found


class AhoMatcher:
    """pyahocorasick over the buffer decoded as latin-1 (a 1:1 byte map).

    The PyPI wheel is a unicode build that refuses bytes; latin-1 maps each
    byte to one code point, so indices are byte offsets.
    """

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))
        self._prefix = PrefixIndex(self.patterns)
        self.maxlen = self._prefix.maxlen
        automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
        for p in self.patterns:
            automaton.add_word(p.decode("latin-1"))
        if self.patterns:
            automaton.make_automaton()
        self._automaton = automaton

    def hold(self, buf: bytes) -> int:
        return self._prefix.hold(buf)

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        if not self.patterns:
            return []
        return [(end + 1 - m, end + 1) for end, m in self._automaton.iter(buf.decode("latin-1"))]


#: At most this many patterns use the per-pattern ``bytes.find`` engine.
FIND_LIMIT = 8


def build(patterns: Iterable[bytes]):
    """The fastest exact engine for this pattern set."""
    patterns = sorted(set(patterns))
    if len(patterns) <= FIND_LIMIT:
        return FindMatcher(patterns)
    return AhoMatcher(patterns)

#: Every engine, for tests that check they agree.
ENGINES = (FindMatcher, AhoMatcher)
