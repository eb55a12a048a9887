"""Find every occurrence of a fixed set of byte patterns, and the live tail.

A matcher answers two questions about a buffer, both exactly:

* ``spans(buf)``: every ``(start, end)`` where some pattern occurs, overlapping
  and self-overlapping occurrences included (masking needs the union of all of
  them, not leftmost-longest: see research/redaction.md §8.1);
* ``hold(buf)``: the length of the longest suffix of ``buf`` that is a prefix of
  some pattern, i.e. how many trailing bytes may still start an occurrence.

Engines
-------
* :class:`HyperscanMatcher` — Intel's Hyperscan through the ``pyperscan``
  binding (0.4, Rust, MIT/Apache-2.0; abi3 wheels for x86-64, aarch64 and
  macOS), block mode, every pattern a literal with ``HS_FLAG_SOM_LEFTMOST``.
  Chosen on evidence (issue 9, measured on this machine at 64 KiB reads, no
  match, k = 10 … 10 000): 1.5–3.4 GB/s on random text and 0.6–3.9 GB/s on
  a log full of JWTs and API keys that share prefixes with the secrets,
  where the numpy sampler it replaces fell to under 1 MB/s (every token was
  verified against every secret sharing its gram, in Python). Its literal
  matcher (FDR/Teddy plus a confirm table in C) is linear in the input
  whatever the data: no input makes Python touch a candidate, only a real
  occurrence calls back. Block mode over ``held tail + new data`` is exact
  across chunking without stream state; the tail is at most the longest
  pattern. pyperscan replaced the ``hyperscan`` 0.9.1 binding (issue 21,
  same Hyperscan, measured side by side on the redactor's own pattern sets):
  equal per 64 KiB, 1.3–1.8x faster per 4 KiB scan (0.3–0.6 us per call
  against 1.2–2.7), its scan releases the GIL, and it has wheels where
  ``hyperscan`` 0.9.1 has none (Linux aarch64).
* :class:`AhoMatcher` — pyahocorasick (part of the project's charter), the exact
  portable engine where Hyperscan is missing (it needs x86-64 with SSSE3 and
  has no wheel for every platform). 20–500 MB/s; an Aho–Corasick automaton is
  linear in input plus occurrences, also on adversarial text.
* :class:`FindMatcher` — one ``bytes.find`` scan per pattern: the reference the
  others are tested against (and fine for a handful of patterns).

:func:`build` uses :data:`ENGINE`, decided once at import (one log line):
Hyperscan when it imports and runs, else pyahocorasick;
``PADDEDCELL_REDACTOR_ENGINE=portable`` forces the portable one.

Hyperscan takes each expression as a C string, so a NUL byte would end it
early (pyperscan refuses it); every pattern is therefore given as a regex with
each byte outside ``[0-9A-Za-z]`` written ``\\xHH`` (Hyperscan still recognises
a pure literal, at the same speed and build time).

Why block mode and not stream mode (which would not rescan the held tail):
the hold itself (the longest suffix that is a pattern prefix) is what a feed
pays for, and stream mode cannot answer it; the rescanned tail is a few bytes
(see :class:`PrefixIndex`). pyperscan's scan releases the GIL, so a scan in
a worker thread runs beside the event loop.

What a redactor builds (:class:`Matcher`, via :func:`build`): one engine over
the literals (secrets and their forms; on Hyperscan a very large set's long
literals by :class:`SampledMatcher` in C), :class:`FragmentFinder` for the
fragment windows (sampled unique grams, same engine; literals and grams share
one database while small), and :class:`PrefixIndex` for ``hold``. A secret
added mid-stream gets its own :class:`Matcher`, searched beside the first
(:class:`Union`).

Every engine is exact; tests run the redactor over each of them against the
naive oracle.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
from functools import partial
from typing import Iterable

import ahocorasick

from .holds import PrefixIndex, _native

log = logging.getLogger("paddedcell.redactor")


class _Engine:
    """Shared ``hold``: a :class:`PrefixIndex` over the patterns, built on first use."""

    name = "?"
    patterns: list[bytes]
    _prefix: PrefixIndex | None = None
    #: ``sync`` also when nothing is held (a line view must know where lines start).
    sync_always = False

    def hold(self, buf: bytes) -> int:
        if self._prefix is None:
            self._prefix = PrefixIndex(self.patterns, type(self))
        return self._prefix.hold(buf)

    def find(self, buf: bytes, final: bool = False) -> list[tuple[int, int]]:
        """``spans``, told whether the stream ends with ``buf`` (see :mod:`.views`:
        a pattern form's incomplete escape at the end is read as text then)."""
        return self.spans(buf)

    def sync(self, buf: bytes, i: int) -> int:
        """Where the next scan buffer must start so that it holds offset ``i``
        (before ``i`` only when a view's token straddles it, see :mod:`.views`)."""
        return i

    def scan(self, buf: bytes, final: bool = False) -> tuple[int, list[tuple[int, int]]]:
        """``(hold, find)`` in one call (0 held at the end of the stream): a
        view computes its transform of ``buf`` once for both."""
        return (0 if final else self.hold(buf)), self.find(buf, final)

    def scan_keep(self, buf: bytes, final: bool = False) -> tuple[int, list[tuple[int, int]], int]:
        """``(hold, found, keep)``: :meth:`scan`, and where the next scan buffer
        starts: :meth:`sync` of the cut (``len(buf) - hold``) when something is
        held or :attr:`sync_always`, else the cut (a feed's calls in one)."""
        hold, found = self.scan(buf, final)
        i = len(buf) - hold
        return hold, found, (self.sync(buf, i) if hold or self.sync_always else i)


class FindMatcher(_Engine):
    """One ``bytes.find`` pass per pattern: the reference, and fine for a few patterns."""

    name = "find"

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        found = []
        for p in self.patterns:
            i = buf.find(p)
            m = len(p)
            while i >= 0:
                found.append((i, i + m))
                i = buf.find(p, i + 1)  # i + 1: occurrences may overlap
        return found


class AhoMatcher(_Engine):
    """pyahocorasick over the buffer decoded as latin-1 (a 1:1 byte map).

    The PyPI wheel is a unicode build that refuses bytes; latin-1 maps each
    byte to one code point, so indices are byte offsets.
    """

    name = "pyahocorasick"

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted(set(patterns))
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


#: Bytes that escape forms and number lists write (``\\``, ``%``, ``&``, NUL, ``,``)
#: and a token (base64, hex, a JWT) does not: a buffer without them is scanned
#: for the patterns without them (see :class:`HyperscanMatcher`; its ``spans``
#: tests these five bytes inline).
ESCAPE_BYTES = b"\\%&\0,"
_ESCAPE_SET = frozenset(ESCAPE_BYTES)
_WORD = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_ESCAPED = [bytes([c]) if c in _WORD else b"\\x%02x" % c for c in range(256)]


def _as_regex(pattern: bytes) -> bytes:
    """A literal as a Hyperscan regex that survives NUL bytes (see module docstring):
    quoted whole (``\\Q…\\E``) unless it holds a NUL or ``\\E``, else byte by byte."""
    if b"\0" not in pattern and b"\\E" not in pattern:
        return b"\\Q" + pattern + b"\\E"
    return b"".join([_ESCAPED[c] for c in pattern])


#: Byte classes of the gated literal groups (see :class:`HyperscanMatcher`), in the
#: order a literal is given to one: the numbers and escapes of the number forms (hex,
#: octal and decimal lists, ``\xNN``, ``\uNNNN``, ``%XX``, ``&#NN;``, ``0xNN, ``),
#: base32 and base32hex upper case, base32 lower case, base64 (both alphabets).
GATE_CLASSES = (
    b"0123456789ABCDEFabcdefxXuU\\%&#;:, .-",
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ=",
    b"0123456789abcdefghijklmnopqrstuvwxyz=",
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/=-_",
)
#: A literal is gated by a class when it holds a run of this many bytes of it ...
GATE_RUN = 24
#: ... in a group of its own with a run of this many (see :meth:`HyperscanMatcher._groups`).
GATE_LONG = 100
#: The C test of the gates (``_native.class_runs``), or None.
_class_runs = getattr(_native, "class_runs", None) if _native is not None else None


def longest_run(pattern: bytes, allowed: frozenset[int]) -> int:
    """The most bytes of ``allowed`` in a row in ``pattern``."""
    best = run = 0
    for c in pattern:
        if c in allowed:
            run += 1
            if run > best:
                best = run
        else:
            run = 0
    return best


class ClassGates:
    """Which literal groups a buffer can hold: group ``j`` is possible only if
    the buffer has a run of ``runs[j]`` bytes of class ``j`` (every literal of
    the group holds such a run). One C pass (``_native.class_runs``, a load
    every ``runs[j]``-th byte where the class is rare), or ``re`` without it.
    A gate whose ``parents[j]`` (a gate without a parent, of a class that holds
    this one's, with a run no longer; or -1) is closed is closed too: those are
    tested in a second pass, only when one of their parents is open."""

    __slots__ = ("runs", "classes", "parents", "_first", "_second", "_children", "_res", "test")

    def __init__(self, classes: list[bytes], runs: list[int], parents: list[int] | None = None):
        self.classes, self.runs = classes, runs
        self.parents = parents = list(parents) if parents is not None else [-1] * len(classes)
        table = bytearray(256)
        for j, cls in enumerate(classes):
            for c in cls:
                table[c] |= 1 << j

        def spec(level: bool) -> bytes:
            asked = [n if (parents[j] >= 0) == level else 0 for j, n in enumerate(runs)]
            return bytes(table) + struct.pack("8i", *(asked + [0] * (8 - len(asked))))

        self._first, self._second = spec(False), spec(True)
        #: ``(parent bit, child bit)`` of each second-level gate.
        self._children = [(1 << parents[j], 1 << j) for j in range(len(runs)) if parents[j] >= 0]
        self._res = [re.compile(b"[" + b"".join(b"\\x%02x" % c for c in sorted(set(cls))) + b"]{%d}" % n)
                     for cls, n in zip(classes, runs)]
        self.test = self._native_test if _class_runs is not None else self.python_test

    @staticmethod
    def parents_of(classes: list[bytes], runs: list[int]) -> list[int]:
        """Each gate's parent: a gate no other one implies, whose class holds this one's
        and whose run is no longer (closed, it closes this one: a run of base32's
        alphabet is one of base64's), or -1."""
        sets = [frozenset(c) for c in classes]

        def implied_by(j: int) -> list[int]:
            return [p for p in range(len(sets)) if p != j and sets[j] <= sets[p] and runs[p] <= runs[j]
                    and (sets[p], runs[p]) != (sets[j], runs[j]) or p < j and (sets[p], runs[p]) == (sets[j], runs[j])]

        roots = [j for j in range(len(sets)) if not implied_by(j)]
        return [-1 if j in roots else next((p for p in implied_by(j) if p in roots), -1) for j in range(len(sets))]

    def _native_test(self, buf: bytes) -> int:
        mask = _class_runs(self._first, buf)
        if mask and self._children:
            wanted = 0
            for parent, child in self._children:
                if mask & parent:
                    wanted |= child
            if wanted:
                mask |= _class_runs(self._second, buf) & wanted
        return mask

    def python_test(self, buf: bytes) -> int:
        """:attr:`test` without the C module (and its reference in the tests)."""
        mask = 0
        for second in (False, True):  # the gates without a parent (the parents), then the others
            for j, expr in enumerate(self._res):
                parent = self.parents[j]
                if (parent >= 0) == second and (parent < 0 or mask >> parent & 1) and expr.search(buf) is not None:
                    mask |= 1 << j
        return mask


class HyperscanMatcher(_Engine):
    """Hyperscan block mode over literal patterns, leftmost start of match on,
    through the ``pyperscan`` binding.

    Each occurrence of a literal has one end, so Hyperscan's one report per
    (pattern, end) is every occurrence, overlapping ones included, and
    ``SOM_LEFTMOST`` gives its start. The database is built once (cached by
    the redactor per secret set) and scanned with one pyperscan scanner per
    thread: a scanner owns a scratch space, which two concurrent scans must
    not share, and its scan runs without the GIL.

    Patterns equal but for ASCII case (a secret's hex in both cases, %2f and
    %2F, base32 upper and lower) are one ``CASELESS`` expression: fewer
    patterns to compile and scan; a hit of one is kept only if its bytes are
    one of the patterns (a slice and a set lookup, on hits only), so the
    matcher stays exact.

    A large set gets a second database of the patterns that hold none of the
    escape and list bytes (:data:`ESCAPE_BYTES`: ``\\x..``, ``%XX``, ``&#..;``,
    UTF-16's NULs, numbers joined by commas, and the base85 and uuencode
    forms that hold one by chance: 44 % of the patterns at k = 1 000), scanned
    instead of the whole one on a buffer that holds none of those bytes: no
    pattern left out can occur in it, so the hits are the same. FDR
    (Hyperscan's literal matcher) pays per literal on text of the patterns'
    alphabet (a token log: base64 and hex runs), also for literals that
    cannot occur there (measured at k = 1 000, 4 KiB feeds of the benchmark's
    token log: 220 MB/s with one database, 294 with the second).

    A very large set (:attr:`GATE_MIN` patterns: k = 10 000 secrets, 623 000
    literals in the line-break view's database) is split further, by the runs
    its literals need (:meth:`_groups`): a literal with a run of
    :data:`GATE_RUN` bytes of one of :data:`GATE_CLASSES` (the number forms'
    digits and escapes; base32 upper case; base32 lower case; base64) goes to
    that class's group (two: runs under :data:`GATE_LONG` bytes and longer
    ones), whose gate is the shortest such run; the others are the rest. Each
    group is a matcher of its own (with its own escape split); a buffer is
    scanned for the rest, and for a group only when it holds a run of the
    group's class at least as long as its gate (:class:`ClassGates`, one C
    pass a gate): no literal of a closed group can occur in it. Measured at
    k = 10 000, 4 KiB feeds: a token log opens the short base64 group alone
    (41 000 literals: its JWTs' segments are runs of 40-80), random text none
    (its runs are 10-22 bytes); their scans went from 20-24 us (the plain
    database) and 28-32 (the whole one) to 12-13 and 14-18, the gates included
    (3-4 us: the next thing to make cheaper).

    With the C module, a set of :attr:`SAMPLE_MIN` patterns goes further (and is
    not gated: the gates' groups were its long literals): its literals of
    :attr:`SAMPLE_STRIDE` + 7 bytes or more are found by :class:`SampledMatcher`
    (a look-up every 25th offset of the buffer), only the shorter ones by
    Hyperscan (gated as above if they are still that many). At k = 10 000 two
    sets qualify: the line-break view's 623 000 literals (all but 8 of 32 bytes
    or more; a table of 214 MiB) and the wrap view's 110 000 (44 MiB).
    Measured there, 4 KiB feeds: the line-break view's scan, warm, 15.7 / 21.9
    / 9.7 us (token log, random text, adversarial text; gates included)
    against 1.2 / 1.4 / 0.5; a whole feed in situ 22-26 / 32-34 / 14 us against
    12-15 / 16-18 / 9-14; the build 255 against 174 s, peak RSS equal (4.2 GiB:
    the tables replace the Hyperscan databases of those literals).
    """

    name = "pyperscan"
    #: Fold patterns equal but for ASCII case into one caseless expression.
    FOLD_CASE = True
    #: Build the database without the escape forms from this many patterns on
    #: (below it FDR is not yet filled: one scan of the whole is as fast) ...
    SPLIT_MIN = 20_000
    #: ... when it leaves out at least this share of them.
    SPLIT_SHARE = 0.2

    #: Give literal groups of their own, gated by byte-class runs, from this many patterns on.
    GATE_MIN = 200_000
    #: ... a group of at least this many (a smaller one stays with the rest).
    GATE_GROUP_MIN = 5_000

    #: Find the literals of at least ``SAMPLE_STRIDE + 7`` bytes by sampled grams in C
    #: (:class:`SampledMatcher`) from this many patterns on, Hyperscan the others ...
    SAMPLE_MIN = 100_000
    #: ... looking at every this-many-th offset (32 bytes: every form of a 20-byte secret).
    SAMPLE_STRIDE = 25
    _sampled: tuple | None = None

    def __init__(self, patterns: Iterable[bytes], gated: bool = True, split_share: float | None = None):
        import pyperscan

        self.patterns = sorted(set(patterns))
        self._local = threading.local()
        self._db = None
        if _lit_set is not None and len(self.patterns) >= self.SAMPLE_MIN:
            shortest = self.SAMPLE_STRIDE + 7
            long = [p for p in self.patterns if len(p) >= shortest]
            if long:
                #: ``(SampledMatcher of the long literals, HyperscanMatcher of the others)``.
                self._sampled = (SampledMatcher(long, self.SAMPLE_STRIDE),
                                 HyperscanMatcher([p for p in self.patterns if len(p) < shortest], gated, split_share))
                self._gated = self._confirm = self._long = None
                self.spans = self._sampled_spans  # (an instance attribute, as the gated one)
                return
        #: ``(gates, [(bit, matcher of a group)], matcher of the rest)`` or None (see the class docstring).
        self._gated = self._groups(split_share) if gated and len(self.patterns) >= self.GATE_MIN else None
        if self._gated is not None:
            self._confirm, self._long = None, None
            self.spans = self._gated_spans  # (an instance attribute: what a feed calls, no test a call)
            return
        compiled, long, self._confirm = self.expressions(self.patterns)
        self._long = FindMatcher(long) if long else None
        if not compiled:
            return
        self._db = pyperscan.BlockDatabase(*compiled)
        self._continue = pyperscan.Scan.Continue
        #: The database of the patterns without an escape byte, or None (see the class docstring).
        self._plain_db = None
        if len(self.patterns) >= self.SPLIT_MIN:
            plain = [p for p in self.patterns if _ESCAPE_SET.isdisjoint(p)]
            if len(plain) <= (1 - (self.SPLIT_SHARE if split_share is None else split_share)) * len(self.patterns):
                # (a caseless group's members are all plain or none: an escape byte has no case;
                # the too long ones are bytes.find's, whichever database is scanned)
                compiled_plain = self.expressions(plain)[0]
                if compiled_plain:
                    self._plain_db = pyperscan.BlockDatabase(*compiled_plain)

    #: The escape split's share inside a gated group (see :meth:`_groups`).
    GROUP_SPLIT_SHARE = 0.1

    def _groups(self, split_share: float | None):
        """Split the patterns into gated groups and the rest (see the class docstring), or None.

        A literal goes to the first class of :data:`GATE_CLASSES` it holds a run of
        :data:`GATE_RUN` bytes of, in the group of the long ones (a run of
        :data:`GATE_LONG` or more: a JWT's base64, which a log of tokens never
        holds) or of the others; a group's gate is its shortest such run."""
        sets = [frozenset(c) for c in GATE_CLASSES]
        members: dict[tuple[int, int], list[bytes]] = {}
        runs: dict[tuple[int, int], int] = {}
        rest: list[bytes] = []
        for p in self.patterns:
            for j, allowed in enumerate(sets):
                n = longest_run(p, allowed) if len(p) >= GATE_RUN else 0
                if n >= GATE_RUN:
                    key = (j, int(n >= GATE_LONG))
                    members.setdefault(key, []).append(p)
                    if runs.get(key, n) >= n:
                        runs[key] = n
                    break
            else:
                rest.append(p)
        for j in range(len(sets)):  # a small group of long ones joins the others, small others the rest
            if len(members.get((j, 1), ())) < self.GATE_GROUP_MIN and (j, 1) in members:
                members.setdefault((j, 0), []).extend(members.pop((j, 1)))
                runs[(j, 0)] = min(runs.get((j, 0), runs[(j, 1)]), runs.pop((j, 1)))
            if len(members.get((j, 0), ())) < self.GATE_GROUP_MIN and (j, 0) in members:
                rest += members.pop((j, 0))
        classes, needs, groups = [], [], []
        for key in sorted(members):
            classes.append(GATE_CLASSES[key[0]])
            needs.append(runs[key])
            groups.append((1 << (len(classes) - 1),
                           HyperscanMatcher(members[key], gated=False, split_share=self.GROUP_SPLIT_SHARE)))
        if not groups:
            return None
        share = self.GROUP_SPLIT_SHARE if split_share is None else split_share
        return (ClassGates(classes, needs, ClassGates.parents_of(classes, needs)), groups,
                HyperscanMatcher(rest, gated=False, split_share=share))

    @classmethod
    def expressions(cls, patterns: Iterable[bytes]) -> tuple[list, list[bytes], frozenset[bytes] | None]:
        """``(pyperscan patterns, those too long for Hyperscan, the set a hit
        must be in or None)`` for these literals."""
        import pyperscan

        groups: dict[bytes, list[bytes]] = {}
        if cls.FOLD_CASE:
            for p in patterns:
                groups.setdefault(p.lower(), []).append(p)
        else:
            groups = {p: [p] for p in patterns}
        som, caseless = pyperscan.Flag.SOM_LEFTMOST, pyperscan.Flag.CASELESS
        compiled, long, folded = [], [], False
        for key, members in groups.items():
            # Hyperscan refuses an expression longer than 16 000 characters (a
            # 4 KiB key's hex form, escaped): those few go to bytes.find instead
            # of sending the whole set to the slow portable engine.
            if len(members) == 1:
                regex = _as_regex(members[0])
                if len(regex) > cls.EXPRESSION_LIMIT:
                    long.append(members[0])
                else:
                    compiled.append(pyperscan.Pattern(regex, som))
                continue
            regex = _as_regex(key)
            if len(regex) > cls.EXPRESSION_LIMIT:
                long += members
            else:
                compiled.append(pyperscan.Pattern(regex, som, caseless))
                folded = True
        return compiled, long, (frozenset(p for m in groups.values() for p in m) if folded else None)

    #: Longest expression given to Hyperscan (its limit is 16 000).
    EXPRESSION_LIMIT = 15_000

    def _scanner(self):
        """This thread's ``(scanner, list its matches are appended to, scanner of
        the plain database or None)``: both scanners append to the one list."""
        found: list[tuple[int, int]] = []
        go_on = self._continue

        def on_match(add, _tag, start, end):
            add((start, end))
            return go_on

        plain = self._plain_db.build(found.append, on_match) if self._plain_db is not None else None
        scanners = self._local.scanners = (self._db.build(found.append, on_match), found, plain)
        return scanners

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        try:  # (on every feed: an attribute and a truth test, no getattr or clear() call on no hit)
            scanner, acc, plain = self._local.scanners
        except AttributeError:
            if self._db is None:
                return self._long.spans(buf) if self._long is not None and buf else []
            scanner, acc, plain = self._scanner()
        if not buf:
            return []
        if acc:
            acc.clear()  # left over only if a scan was interrupted
        # ESCAPE_BYTES, as ints (``in`` is a memchr each, no TypeError first)
        if plain is not None and 92 not in buf and 37 not in buf and 38 not in buf and 0 not in buf \
                and 44 not in buf:
            plain.scan(buf)
        else:
            scanner.scan(buf)
        if not acc:
            found = []
        else:
            if self._confirm is None:
                found = acc.copy()
            else:  # a caseless hit counts if it is one of the patterns
                confirm = self._confirm
                found = [(s, e) for s, e in acc if buf[s:e] in confirm]
            acc.clear()
        if self._long is not None:
            found += self._long.spans(buf)
        return found

    def _sampled_spans(self, buf: bytes) -> list[tuple[int, int]]:
        """:meth:`spans` of a set with its long literals apart: both matchers' (each a new list)."""
        sampled, short = self._sampled
        found = short.spans(buf)
        hits = sampled.spans(buf)
        if hits:
            found += hits
        return found

    def _gated_spans(self, buf: bytes) -> list[tuple[int, int]]:
        """:meth:`spans` of a gated set: the rest's, and each group's whose gate the buffer passes."""
        gates, groups, rest = self._gated
        found = rest.spans(buf)
        if not buf:
            return found
        mask = gates.test(buf)
        if mask:
            for bit, group in groups:
                if mask & bit:
                    found += group.spans(buf)
        return found


#: The gram table in C (``_native.gram_set``/``gram_find``), or None.
_gram_set = getattr(_native, "gram_set", None) if _native is not None else None
#: The long literals' sampled table in C (``_native.lit_set``/``lit_find``), or None.
_lit_set = getattr(_native, "lit_set", None) if _native is not None else None


class GramMatcher(_Engine):
    """Every occurrence of a set of 8-byte grams at offsets ``0, stride, 2 * stride``
    ... of a buffer (a dense :class:`FragmentFinder`'s): one C pass
    (``_native.gram_find``) that reads those 8 bytes as an integer and looks it up
    in a blocked Bloom filter (16 bits a gram or more, two set in one word: ~0.7 %
    of other grams pass at k = 10 000, by its density) and an open-addressed table of
    the grams, exact. The look-ups go in batches (hash all and ask for their filter
    words, test them, probe the passes): the cache misses of a batch overlap. Measured at k = 10 000 secrets
    (4 KiB feeds): Hyperscan's scan of the 75 000 sparse grams 16.4 us on the token
    log, 6.4 on random text, 7.7 on the adversarial one; this, over the 365 000 dense
    grams at stride 5, 2.0-4.0, 2.5-3.0, 1.6 warm, ~2-4 more in situ (its filter
    and table are cold after the literal scans)."""

    name = "grams"

    def __init__(self, grams: Iterable[bytes], stride: int = 1):
        self.patterns = sorted(set(grams))
        self._table = _gram_set(self.patterns)
        #: ``spans(buf)``: the C call itself, at offsets 0, stride, 2 * stride ...
        self.spans = partial(_native.gram_find, self._table, stride)


class SampledMatcher(_Engine):
    """Every occurrence of a set of literals of at least ``stride + 7`` bytes, by
    sampled grams: one C pass (``_native.lit_find``) that reads the 8 bytes at
    offsets ``0, stride, 2 * stride`` ... of the buffer, looks them up in a blocked
    Bloom filter (three bits a gram in one word; in batches, as :class:`GramMatcher`)
    then a bucket of ``(literal, offset, tag)`` entries (each
    literal's grams at its offsets ``a .. a + stride - 1``, ``a`` its anchor: where
    its grams are rarest among all the literals, ``_native.lit_set``), and
    compares the whole literal where an entry puts it.

    Exact: an occurrence at ``s`` of a literal of ``L >= stride + 7`` bytes covers
    the offsets ``s + a .. s + a + stride - 1`` (``a <= L - stride - 7``), exactly
    one of which, ``i``, is sampled; the gram there lies inside the occurrence
    (``i + 8 <= s + a + stride + 7 <= s + L``) and is the literal's gram at offset
    ``i - s``, an entry of its bucket. Each occurrence is reported once (by that
    ``i`` alone), and only after its bytes compared equal; the anchor only makes
    it cheaper (a JWT's shared header would put thousands of literals in a bucket)."""

    name = "sampled"

    def __init__(self, literals: Iterable[bytes], stride: int):
        self.patterns = sorted(set(literals))
        self._literals = tuple(self.patterns)
        self._table = _lit_set(self._literals, stride)
        #: ``spans(buf)``: the C call itself.
        self.spans = partial(_native.lit_find, self._table, self._literals)


class FragmentFinder:
    """Every occurrence of a distinctive window of a secret, found by sampling.

    A secret of ``n`` bytes has up to ``n - width + 1`` windows (~30 for an
    API key): registering them all made Hyperscan's build take most of a
    minute at 10 000 secrets. Instead, each window ``[i, i + width)`` holds a
    whole ``GRAM``-byte gram at a multiple of ``step = width - GRAM + 1``;
    grams at those offsets are registered (one in ``step``), so any window
    occurrence contains a registered gram occurrence. A gram is registered
    only if it occurs once in all the secrets: then a hit names one secret
    and one alignment, and verifying it is O(1) bisections, never a loop over
    secrets sharing a prefix. A window none of whose grams is unique becomes
    a literal of its own (:attr:`literals`).

    A large set (:attr:`NATIVE_MIN` window starts, scanned apart from the
    literals) is *dense* instead: every gram of each window's first ``step``
    offsets is registered (a window with one that is not unique is a literal),
    and the buffer is looked up at every ``step``-th offset only, in C
    (:class:`GramMatcher`): an occurrence of a window at ``p`` covers the
    offsets ``p .. p + step - 1``, one of which is sampled, and the gram there is
    one of that window's. Hyperscan would scan every offset for a few grams a
    secret; this looks at a fifth of them for five times as many.

    A hit aligns the secret on the buffer; the maximal run of bytes that
    agree with it there is found by bisection with slice compares (C speed),
    and the distinctive windows inside that run are the occurrences. A hit
    inside a run already extended for its alignment is skipped (one
    alignment can hold several runs, split by bytes that disagree).
    """

    GRAM = 8
    #: Look the grams up in C (:class:`GramMatcher`, :attr:`dense`) from this many window
    #: starts on (k = 10 000 secrets: ~370 000; below MERGE_LIMIT the grams share the literals' scan).
    NATIVE_MIN = 100_000

    def __init__(self, windows: dict[bytes, list[int]], width: int, engine: type | None):
        g, self.width = self.GRAM, width
        step = width - g + 1
        counts: dict[bytes, int] = {}
        for secret in windows:
            for j in range(len(secret) - g + 1):
                gram = secret[j : j + g]
                counts[gram] = counts.get(gram, 0) + 1
        self._secrets: list[bytes] = []
        self._runs: list[list[tuple[int, int]]] = []  # runs of consecutive window starts
        self._where: dict[bytes, tuple[int, int]] = {}
        self.literals: set[bytes] = set()
        #: Every gram of each window's first ``step`` registered, the buffer looked up
        #: at every ``step``-th offset in C (see :class:`GramMatcher`), or one gram a window.
        self.dense = dense = (engine is not None and _gram_set is not None and g == 8
                              and sum(len(starts) for starts in windows.values()) >= self.NATIVE_MIN)
        for secret, starts in windows.items():
            index = len(self._secrets)
            chosen: set[int] = set()
            for i in starts:
                span = range(i, i + step)
                if dense:
                    if all(counts[secret[j : j + g]] == 1 for j in span):
                        for j in span:
                            if j not in chosen:
                                chosen.add(j)
                                self._where[secret[j : j + g]] = (index, j)
                    else:
                        self.literals.add(secret[i : i + width])
                    continue
                if any(j in chosen for j in span):
                    continue
                aligned = i + (-i) % step
                for j in (aligned, *span):
                    if counts[secret[j : j + g]] == 1:
                        chosen.add(j)
                        self._where[secret[j : j + g]] = (index, j)
                        break
                else:
                    self.literals.add(secret[i : i + width])
            runs: list[tuple[int, int]] = []
            for i in starts:
                if runs and i == runs[-1][1] + 1:
                    runs[-1] = (runs[-1][0], i)
                else:
                    runs.append((i, i))
            self._secrets.append(secret)
            self._runs.append(runs)
        # engine=None: the caller scans for the grams itself (see Matcher). Many grams
        # are looked up in C (GramMatcher) whatever the engine.
        if not self._where or engine is None:
            self._grams = None
        elif dense:
            self._grams = GramMatcher(self._where, step)
        else:
            self._grams = engine(self._where)

    def spans(self, buf: bytes, hits: Iterable[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
        """Window occurrences, from gram ``hits`` in ``buf`` (scanned here if not given)."""
        if hits is None:
            if self._grams is None:
                return []
            hits = self._grams.spans(buf)
        found = []
        seen: dict[tuple[int, int], list[tuple[int, int]]] = {}  # alignment -> runs extended
        g, width, n = self.GRAM, self.width, len(buf)
        for u, e in hits:
            index, j = self._where[buf[u:e]]
            base = u - j
            runs_here = seen.get((index, base))
            if runs_here is not None and any(a <= j and j + g <= b for a, b in runs_here):
                continue  # inside a run of this alignment already extended
            secret = self._secrets[index]
            # Smallest x with buf[base+x : base+u'] equal to the secret's bytes there.
            lo, hi = max(0, -base), j
            while lo < hi:
                mid = (lo + hi) // 2
                if buf[base + mid : u] == secret[mid:j]:
                    hi = mid
                else:
                    lo = mid + 1
            x0 = lo
            lo, hi = j + g, min(len(secret), n - base)
            while lo < hi:  # largest y with agreement up to it
                mid = (lo + hi + 1) // 2
                if buf[e : base + mid] == secret[j + g : mid]:
                    lo = mid
                else:
                    hi = mid - 1
            seen.setdefault((index, base), []).append((x0, lo))
            last = lo - width  # last window start inside [x0, lo)
            for first_start, last_start in self._runs[index]:
                a, b = max(first_start, x0), min(last_start, last)
                if a <= b:
                    found.append((base + a, base + b + width))
        return found


class Matcher(_Engine):
    """Literals plus fragment windows by sampling, on one engine.

    Up to ``MERGE_LIMIT`` patterns, literals and grams share one database:
    one pass over the data instead of two (measured at k = 10: 3.8 GB/s
    either alone or merged; at k = 1 000, 70 000 patterns, merged against
    apart: random text 311 against 262 MB/s per 4 KiB feed, 704 against 565
    per 64 KiB; a token log 4-20 % faster; a line of the secrets' shared
    prefix, repeated, 5-8 % slower per 64 KiB, faster per 4 KiB). Beyond it they are scanned apart: Hyperscan
    slowed down more than twofold on a token-heavy log with 155 000 merged
    short literals (104 MB/s against 157 for the two scans).
    """

    MERGE_LIMIT = 100_000

    def __init__(self, literals: Iterable[bytes], windows: dict[bytes, list[int]], width: int, engine: type,
                 hold: bool = True, triggers: dict[str, set[bytes]] | None = None):
        literals = set(literals)
        probe = FragmentFinder(windows, width, None)
        literals |= probe.literals
        grams = set(probe._where)
        merged = len(literals) + len(grams) <= self.MERGE_LIMIT
        self.fragments = probe if merged else FragmentFinder(windows, width, engine)
        if not merged:
            literals |= self.fragments.literals  # (a dense finder's: windows with a gram not unique)
        self._merged = merged and bool(grams)
        self._gram_set = grams
        self._gram_also_literal = grams & literals  # an 8-byte secret that is also a gram
        #: Other families' trigger literals (a view's, see .views), scanned in
        #: the same database: their hits are sorted out by the bytes they match
        #: and never counted as occurrences, nor in the hold.
        self.triggers = {name: frozenset(t) for name, t in (triggers or {}).items() if t}
        every_trigger = frozenset().union(*self.triggers.values()) if self.triggers else frozenset()
        self._trigger_only = every_trigger - literals - (grams if merged else set())
        self.literal = engine((literals | grams if merged else literals) | every_trigger)
        self._literal_set = literals
        self.name = engine.name
        windows_bytes = {s[i : i + width] for s, starts in windows.items() for i in starts}
        self.patterns = sorted(literals | windows_bytes)
        # The hold's index, built now unless ``hold`` is False (a matcher for
        # spans alone: a view's, the dump triggers), then on a first hold.
        self._prefix: PrefixIndex | None = None
        self._index_engine = engine
        if hold:
            self._index()

    def _index(self) -> PrefixIndex:
        self._prefix = index = PrefixIndex(self.patterns, self._index_engine)
        return index

    def hold(self, buf: bytes) -> int:
        return (self._prefix or self._index()).hold(buf)

    def scan(self, buf: bytes, final: bool = False) -> tuple[int, list[tuple[int, int]]]:
        found = self.spans(buf)
        return (0 if final else (self._prefix or self._index()).hold(buf)), found

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        found = self.literal.spans(buf)
        if not found and self.fragments._grams is None:
            return found  # (most buffers: no hit, no grams scanned apart)
        return self._parts(buf, found)[0]

    def scan_parts(self, buf: bytes) -> tuple[list[tuple[int, int]], dict[str, list[tuple[int, int]]]]:
        """``(spans, trigger hits by family)`` in one engine scan."""
        return self._parts(buf, self.literal.spans(buf))

    def _parts(self, buf: bytes, found: list[tuple[int, int]]
               ) -> tuple[list[tuple[int, int]], dict[str, list[tuple[int, int]]]]:
        """:meth:`scan_parts` from the literal engine's hits ``found``."""
        parts = self.split_triggers(buf, found) if found and self.triggers else _NO_PARTS
        if parts:
            only = self._trigger_only
            found = [(u, e) for u, e in found if buf[u:e] not in only]
        if self._merged:
            g, grams, both = FragmentFinder.GRAM, self._gram_set, self._gram_also_literal
            hits = [(u, e) for u, e in found if e - u == g and buf[u:e] in grams]
            if hits:
                found = [(u, e) for u, e in found if not (e - u == g and buf[u:e] in grams)
                         or buf[u:e] in both]
                found += self.fragments.spans(buf, hits)
        elif self.fragments._grams is not None:
            found += self.fragments.spans(buf)
        return found, parts

    def split_triggers(self, buf: bytes, hits: list[tuple[int, int]]) -> dict[str, list[tuple[int, int]]]:
        """The hits that are some family's triggers, by family (empty: none)."""
        parts: dict[str, list[tuple[int, int]]] = {}
        for name, members in self.triggers.items():
            mine = [(u, e) for u, e in hits if buf[u:e] in members]
            if mine:
                parts[name] = mine
        return parts


#: No trigger hit (shared, never changed).
_NO_PARTS: dict[str, list[tuple[int, int]]] = {}


class Union(_Engine):
    """Two matchers searched together: a redactor's secrets and those added to
    it mid-stream. Spans are both sets; the held tail is the longer of the
    two (the longest suffix that is a prefix of a pattern of either)."""

    def __init__(self, first: _Engine, second: _Engine):
        self.parts = (first, second)
        self.name = second.name
        self.sync_always = first.sync_always or second.sync_always

    @property
    def patterns(self) -> list[bytes]:
        return sorted(set(self.parts[0].patterns) | set(self.parts[1].patterns))

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        return self.parts[0].spans(buf) + self.parts[1].spans(buf)

    def hold(self, buf: bytes) -> int:
        return max(self.parts[0].hold(buf), self.parts[1].hold(buf))

    def find(self, buf: bytes, final: bool = False) -> list[tuple[int, int]]:
        return self.parts[0].find(buf, final) + self.parts[1].find(buf, final)

    def scan(self, buf: bytes, final: bool = False) -> tuple[int, list[tuple[int, int]]]:
        h0, f0 = self.parts[0].scan(buf, final)
        h1, f1 = self.parts[1].scan(buf, final)
        return max(h0, h1), f0 + f1

    def sync(self, buf: bytes, i: int) -> int:
        j = min(self.parts[0].sync(buf, i), self.parts[1].sync(buf, i))
        while j < i:  # one part moved back: the other may need to from there
            i, j = j, min(self.parts[0].sync(buf, j), self.parts[1].sync(buf, j))
        return j


def _hyperscan_problem() -> str | None:
    """Why Hyperscan (pyperscan) cannot be used here, or None. It is an
    optional dependency (a platform without its wheel, a CPU without SSSE3):
    pyahocorasick takes over."""
    try:
        probe = HyperscanMatcher([b"probe\x00"])
        if probe.spans(b"a probe\x00") != [(2, 8)]:
            return "wrong answer from the probe scan"
    except Exception as exc:  # ImportError, an unsupported CPU, a broken build
        return str(exc) or type(exc).__name__
    return None


#: None when the fast engine works in this process, else why not.
HYPERSCAN_PROBLEM = _hyperscan_problem()


def _choose_engine() -> type[_Engine]:
    if os.environ.get("PADDEDCELL_REDACTOR_ENGINE", "").lower() in ("portable", "pyahocorasick"):
        log.info("redactor engine: pyahocorasick (forced by PADDEDCELL_REDACTOR_ENGINE)")
        return AhoMatcher
    if HYPERSCAN_PROBLEM is not None:
        log.info("redactor engine: pyahocorasick (portable; pyperscan unavailable: %s)", HYPERSCAN_PROBLEM)
        return AhoMatcher
    log.info("redactor engine: pyperscan (Hyperscan)")
    return HyperscanMatcher


#: The engine :func:`build` uses, decided once per process.
ENGINE: type[_Engine] = _choose_engine()

#: Every engine that works here, for tests that check they agree.
ENGINES = (FindMatcher, AhoMatcher) + ((HyperscanMatcher,) if HYPERSCAN_PROBLEM is None else ())


def build(
    patterns: Iterable[bytes],
    engine: type[_Engine] | None = None,
    windows: dict[bytes, list[int]] | None = None,
    width: int = 12,
    hold: bool = True,
) -> _Engine:
    """An exact matcher for these literals (and fragment windows), on
    :data:`ENGINE` unless told otherwise; ``hold=False`` for one whose
    ``spans`` alone are used (its hold index is then built only if asked)."""
    patterns = set(patterns)
    cls = engine or ENGINE
    try:
        return Matcher(patterns, windows or {}, width, cls, hold)
    except Exception as exc:  # e.g. Hyperscan refuses a pattern too large
        if cls is AhoMatcher:
            raise
        log.warning("redactor engine %s refused this secret set (%s); using pyahocorasick", cls.name, exc)
        return Matcher(patterns, windows or {}, width, AhoMatcher, hold)
