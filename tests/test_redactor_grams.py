"""The C gram look-ups in batches (issue 21): ``_native.gram_find`` and ``lit_find``
test the filter for a batch of sampled offsets first, then probe the passes
together (their cache misses overlap). These tests put hits at every sampled
offset, at none, and at the edges of the batches, and hold both functions to
their definitions: every sampled gram (in order), every literal occurrence once.
Skipped where the C module was not built or is switched off (PADDEDCELL_NATIVE=0)."""

from __future__ import annotations

import random

import pytest

from paddedcell.redactor import matcher

native = pytest.importorskip("paddedcell.redactor._native")

needs_native = pytest.mark.skipif(matcher._lit_set is None or matcher._gram_set is None,
                                  reason="PADDEDCELL_NATIVE=0")
#: More than two C batches (gram_find's 512 look-ups, lit_find's 256): the tests cross batch edges.
LOOKUPS = 512 * 2 + 7


def occurrences(literals, buf: bytes) -> list[tuple[int, int]]:
    """The definition: every (start, end) where one of the literals occurs."""
    return sorted((s, s + len(p)) for p in set(literals) for s in range(len(buf) - len(p) + 1)
                  if buf.startswith(p, s))


@needs_native
@pytest.mark.parametrize("stride", [1, 5, 8])
@pytest.mark.parametrize("pattern", ["every", "none", "edges", "random"])
def test_gram_find_in_batches(stride, pattern):
    """Every sampled offset whose 8 bytes are a gram, in order, whichever of the
    look-ups of a batch pass (all, none, only the first and last of each batch)."""
    rng = random.Random(stride)
    buf = rng.randbytes(stride * LOOKUPS + 7)
    sampled = list(range(0, len(buf) - 7, stride))
    chosen = {"every": sampled, "none": [],
              "edges": [i for j, i in enumerate(sampled) if j % 256 in (0, 255)],
              "random": [i for i in sampled if rng.random() < 0.3]}[pattern]
    grams = {buf[i : i + 8] for i in chosen} | {rng.randbytes(8) for _ in range(1000)}
    found = matcher.GramMatcher(grams, stride).spans(buf)
    assert found == [(i, i + 8) for i in sampled if buf[i : i + 8] in grams]
    if pattern == "every":
        assert len(found) == len(sampled)


@needs_native
@pytest.mark.parametrize("stride", [1, 3, 25])
def test_lit_find_with_a_hit_at_every_sampled_offset(stride):
    """A literal repeated back to back (and others sharing its grams): at every
    sampled offset a filter pass and a bucket with entries, several batches of them;
    every occurrence found once."""
    rng = random.Random(stride)
    unit = bytes(rng.choice(b"ab") for _ in range(stride + 7))
    literals = tuple(sorted({unit, unit * 2, unit[1:] + unit[:1], (unit * 3)[: stride + 9]}))
    buf = unit * (LOOKUPS * stride // len(unit) + 2)
    found = native.lit_find(native.lit_set(literals, stride), literals, buf)
    assert sorted(found) == occurrences(literals, buf)
    assert len(found) == len(set(found))


@needs_native
@pytest.mark.parametrize("stride", [2, 25])
def test_lit_find_across_batch_edges(stride):
    """Literals placed so that their sampled gram falls on each offset of a batch
    (the first, the last, every one between) of a buffer many batches long:
    each found once, nothing else."""
    rng = random.Random(100 + stride)
    literals = tuple(sorted({rng.randbytes(rng.randrange(stride + 7, stride + 40)) for _ in range(64)}))
    parts, n = [], 0
    while n < stride * LOOKUPS * 3:
        p = rng.choice(literals) if rng.random() < 0.7 else rng.randbytes(rng.randrange(1, 3 * stride + 1))
        parts.append(p)
        n += len(p)
    buf = b"".join(parts)
    found = native.lit_find(native.lit_set(literals, stride), literals, buf)
    assert sorted(found) == occurrences(literals, buf)
    assert len(found) == len(set(found))
