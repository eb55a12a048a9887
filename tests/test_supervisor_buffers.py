"""Ring buffers and the global budget: pure, so tested as plain functions."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from paddedcell.supervisor.buffers import (BudgetExhausted, BufferBudget, OutputBuffer,
                                           complete_utf8_end, decode_tail)


def test_offsets_are_absolute_after_eviction():
    budget = BufferBudget(1000)
    buf = OutputBuffer(10, budget, floor=10)
    buf.append(b"0123456789")
    buf.append(b"abcde")
    assert (buf.start, buf.end) == (5, 15)
    assert buf.read(0) == b"56789abcde"
    assert buf.read(12) == b"cde"
    assert buf.read(7, 9) == b"78"
    assert buf.read(20) == b""


def test_chunk_bigger_than_capacity_keeps_its_tail():
    buf = OutputBuffer(4, BufferBudget(100), floor=4)
    buf.append(b"ab")
    buf.append(b"0123456789")
    assert buf.read(0) == b"6789"
    assert (buf.start, buf.end) == (8, 12)


def test_growth_stops_at_the_budget_and_evicts_instead():
    budget = BufferBudget(150)
    a = OutputBuffer(100, budget, floor=50)
    b = OutputBuffer(100, budget, floor=50)
    a.append(b"x" * 100)  # grows to 100: budget now full
    assert budget.used == 150
    b.append(b"y" * 100)  # cannot grow: keeps its newest 50 bytes
    assert len(b) == 50 and b.start == 50
    assert budget.used <= budget.total


def test_admission_fails_when_no_floor_is_left():
    budget = BufferBudget(100)
    OutputBuffer(1000, budget, floor=60)
    with pytest.raises(BudgetExhausted, match="global_buffer_bytes"):
        OutputBuffer(1000, budget, floor=60)


def test_release_returns_everything_once():
    budget = BufferBudget(100)
    buf = OutputBuffer(80, budget, floor=20)
    buf.append(b"z" * 70)
    buf.release()
    buf.release()
    assert budget.used == 0
    buf.append(b"more")  # ignored after release
    assert len(buf) == 0


@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(1, 200), st.integers(1, 400))
def test_budget_never_exceeded_and_tail_is_exact(chunks, capacity, total):
    budget = BufferBudget(total)
    try:
        buf = OutputBuffer(capacity, budget, floor=min(capacity, 16))
    except BudgetExhausted:
        assert total < min(capacity, 16)
        return
    everything = b""
    for chunk in chunks:
        buf.append(chunk)
        everything += chunk
        assert budget.used <= budget.total
        assert len(buf) <= buf.reserved <= capacity
        assert buf.end == len(everything)
        assert buf.read(0) == everything[buf.start:]


def test_decode_tail_drops_a_cut_character():
    data = "héllo wörld".encode()
    text, cut = decode_tail(data[2:], 100, complete=False)
    assert text == "llo wörld" and cut
    assert decode_tail(data, 5, complete=True) == ("wörld", True)
    assert decode_tail(data, 100, complete=True) == ("héllo wörld", False)


@pytest.mark.parametrize("text", ["abc", "é", "日本", "🙂x", "a🙂"])
def test_complete_utf8_end(text):
    data = text.encode()
    for cut in range(len(data) + 1):
        prefix = data[:cut]
        end = complete_utf8_end(prefix)
        prefix[:end].decode()  # never ends inside a character
        assert end >= cut - 3


def test_growth_leaves_the_protected_part_and_gives_back_when_short():
    budget = BufferBudget(1000)
    a = OutputBuffer(800, budget, floor=100)
    budget.protected = 300  # floors of sessions that may still come
    a.append(b"a" * 800)
    assert a.reserved == 700 and budget.free == 300
    b = OutputBuffer(800, budget, floor=100)  # admission may use the protected part
    budget.protected = 300  # still short by 100: ``a`` gives back on its next append
    a.append(b"\n")
    assert budget.free >= budget.protected and a.reserved == 600
    assert a.read(a.start) == (b"a" * 800 + b"\n")[-600:]
    assert budget.used == a.reserved + b.reserved <= budget.total


def test_large_evictions_keep_the_newest_bytes():
    import random
    rng = random.Random(3)
    budget = BufferBudget(1 << 20)
    buf = OutputBuffer(64 << 10, budget, floor=64 << 10)
    everything = bytearray()
    for _ in range(40):
        chunk = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(1, 30000)))
        buf.append(chunk)
        everything += chunk
        assert buf.held() == bytes(everything[buf.start:])


def test_large_appends_are_held_by_reference():
    from paddedcell.supervisor.buffers import BY_REFERENCE
    buf = OutputBuffer(4 * BY_REFERENCE, BufferBudget(1 << 20), floor=BY_REFERENCE)
    chunk = bytes(range(256)) * (BY_REFERENCE // 256)
    buf.append(b"small")
    buf.append(chunk)
    assert buf.tail(len(chunk)) is chunk  # no copy in, none out
    assert buf.held() == b"small" + chunk


@given(st.lists(st.binary(max_size=90), max_size=60), st.integers(1, 300), st.integers(1, 120))
def test_pieces_evict_whole_yet_keep_the_floor(chunks, capacity, floor):
    """With tiny piece thresholds: whole pieces go first, never below the floor, and
    what is held is always the exact tail, within the reservation."""
    from unittest import mock
    from paddedcell.supervisor import buffers
    with mock.patch.object(buffers, "BY_REFERENCE", 8), mock.patch.object(buffers, "OPEN_PIECE", 24):
        budget = BufferBudget(10_000)
        buf = OutputBuffer(capacity, budget, floor=floor)
        everything = b""
        for chunk in chunks:
            buf.append(chunk)
            everything += chunk
            assert sum(len(p) for p in buf._pieces) == len(buf) <= buf.reserved
            assert len(buf) >= min(buf.floor, len(everything))
            assert buf.end == len(everything)
            assert buf.read(0) == everything[buf.start:]
            lo, hi = max(0, len(everything) - 40), max(0, len(everything) - 3)
            assert buf.read(lo, hi) == everything[max(lo, buf.start):hi]
