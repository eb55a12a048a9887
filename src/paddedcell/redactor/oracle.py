"""A slow, obviously correct redactor: the reference for tests and benchmarks.

It checks every pattern at every offset of the whole input, marks covered
bytes, and replaces each maximal covered run with the mask. No streaming, no
cleverness; quadratic and fine for test inputs.
"""

from __future__ import annotations

from typing import Iterable

from .variants import Variants, pattern_set


def patterns_for(
    secrets: Iterable[str | bytes],
    variants: bool | Variants = True,
    variant_min_length: int = 8,
    fragment_min: int = 12,
    mask: bytes = b"######",
) -> set[bytes]:
    """Every byte string the redactor must mask for these secrets."""
    raw = [s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s) for s in secrets]
    return pattern_set(raw, Variants.coerce(variants), variant_min_length, fragment_min, mask)


def covered(data: bytes, patterns: Iterable[bytes]) -> list[bool]:
    """Which bytes of ``data`` lie inside some occurrence of some pattern."""
    cover = [False] * len(data)
    for p in patterns:
        i = data.find(p)
        while i >= 0:
            cover[i : i + len(p)] = [True] * len(p)
            i = data.find(p, i + 1)  # i + 1, not i + len(p): occurrences may overlap
    return cover


def naive_redact(data: bytes, patterns: Iterable[bytes], mask: bytes = b"######") -> bytes:
    """One mask per maximal run of covered bytes (runs of touching occurrences join)."""
    patterns = [p for p in set(patterns) if p]
    cover = covered(data, patterns)
    # Touching occurrences join into one run: e.g. "ab"+"cd" in "abcd" is one
    # run; covered() already makes those bytes contiguous.
    out = bytearray()
    i = 0
    while i < len(data):
        if cover[i]:
            out += mask
            while i < len(data) and cover[i]:
                i += 1
        else:
            out.append(data[i])
            i += 1
    return bytes(out)


def naive_held(stream: bytes, patterns: Iterable[bytes]) -> int:
    """How many trailing bytes an exact, minimal streaming redactor must withhold.

    The longest tail that is a proper prefix of a pattern may still become an
    occurrence; bytes before it are decided, and so are bytes after it that a
    complete occurrence covers (they are masked whatever follows).
    """
    patterns = [p for p in set(patterns) if p]
    n = len(stream)
    tail = 0
    for length in range(n, 0, -1):
        t = stream[n - length :]
        if any(len(p) > length and p.startswith(t) for p in patterns):
            tail = length
            break
    decided = n - tail
    spans = [
        (i, i + len(p))
        for p in patterns
        for i in range(n - len(p) + 1)
        if stream[i : i + len(p)] == p
    ]
    grew = True
    while grew:
        grew = False
        for s, t in spans:
            if s <= decided < t:
                decided = t
                grew = True
    return n - decided
