"""A masking pipe's own reader thread (supervisor/readahead.py ``read_pipe``), the filter
slots it shares with terminals (``FilterSlots``), and how a session stops it."""

from __future__ import annotations

import os
import threading
import time

import pytest
import trio

from paddedcell.supervisor import LaunchSpec, Supervisor
from paddedcell.supervisor import session as session_module
from paddedcell.supervisor.readahead import FilterSlots, Handoff, read_pipe

from supervisor_helpers import (ReaderPipe, assert_buffer_edges_mask_exactly,
                                assert_every_cut_masks_exactly, make_settings, py, run_reader)

SECRET = "pipe-reader-secret-Hq3vX9mWb2"
#: A flood that masks nothing (a line of secrets back to back costs the redactor ~0.25 s
#: a 512 KiB batch: a flood of them is too slow to reach a size in a test).
FLOOD = f"yes 'a line of output and then {SECRET[:8]}'"


async def read_parts(parts: list[bytes], filter_batch, buffer_size: int = 4096,
                     batches: int = 3) -> tuple[list[bytes], int]:
    """``read_pipe`` over ``parts`` (:func:`supervisor_helpers.run_reader`)."""
    def make_reader(show):
        handoff = Handoff(show, 1 << 20, wake_at=1 << 20)
        return lambda fd, stop, filt: read_pipe(fd, stop, FilterSlots(1, buffer_size), filt,
                                                handoff, batches)
    return await run_reader(parts, filter_batch, make_reader)


async def test_a_secret_split_at_every_byte_across_pipe_batches_is_masked_exactly():
    await assert_every_cut_masks_exactly(read_parts, SECRET)


async def test_pipe_batches_larger_than_the_slots_buffer_still_mask_exactly():
    # Across turns too (3 batches a turn).
    await assert_buffer_edges_mask_exactly(read_parts, SECRET, repeat=3)


async def test_the_pipe_reader_stops_reading_while_the_loop_lags():
    # Back-pressure: while the loop cannot show what was handed over, the thread reads no
    # more than the hand-off's limit plus one buffer, whatever the writer has ready.
    limit, size = 64 * 1024, 16 * 1024
    read = [0]

    def counting(view):
        read[0] += len(view)
        return bytes(view)

    pipe = ReaderPipe()
    os.set_blocking(pipe.w, False)
    written = 0
    try:
        async with trio.open_nursery() as nursery:
            handoff = Handoff(lambda data: None, limit)
            nursery.start_soon(trio.to_thread.run_sync, read_pipe, pipe.r, pipe.stop,
                               FilterSlots(1, size), counting, handoff, 4)
            first = written = os.write(pipe.w, b"z" * 4096)
            while not read[0]:
                await trio.sleep(0.01)
            # The loop is busy (no hand-off can run) while the writer fills the pipe.
            deadline = time.monotonic() + 1.0
            while True:
                try:
                    written += os.write(pipe.w, b"z" * 65536)
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
            assert limit < read[0] <= first + limit + size
            assert written - read[0] >= 4096  # the pipe held more: the reader had stopped
            os.eventfd_write(pipe.stop, 1)
    finally:
        pipe.close()


def test_slots_are_handed_over_first_come_first_served():
    # A holder that gives its slot up and asks again at once gets it only after the
    # thread that waited (a plain semaphore let it take the slot straight back).
    slots = FilterSlots(1, 16)
    order: list[str] = []
    slots.acquire()
    waiter = threading.Thread(target=lambda: (slots.acquire(), order.append("waiter"),
                                              slots.release()))
    waiter.start()
    deadline = time.monotonic() + 10
    while not slots.wanted:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    slots.release()
    slots.acquire()
    order.append("holder")
    slots.release()
    waiter.join(10)
    assert order == ["waiter", "holder"]
    assert not slots.wanted


def test_a_slots_buffer_is_reused_not_made_per_holder():
    slots = FilterSlots(2, 1024)
    with slots.batch() as first:
        with slots.batch() as second:
            assert len(first) == len(second) == 1024 and first.obj is not second.obj
    for _ in range(5):
        with slots.batch() as again:
            assert again.obj in (first.obj, second.obj)
    assert slots.made == 2


async def test_streams_sharing_a_slot_take_turns_with_nothing_unshown_outside_it():
    # Three flooding pipes, one slot: each reader gives the slot up while the others wait,
    # and only once what it handed over was shown; so whenever one filters, the others
    # have nothing unshown (in flight per slot, not per stream), and all make progress.
    count, size, total = 3, 8192, 3 << 20
    slots = FilterSlots(1, size)
    pipes = [ReaderPipe() for _ in range(count)]
    handoffs: list[Handoff] = []
    shown = [0] * count
    unshown_elsewhere = []

    def filter_for(i):
        def run(view):
            unshown_elsewhere.append(sum(h._size for j, h in enumerate(handoffs) if j != i))
            return bytes(view)
        return run

    def show_for(i):
        def show(data):
            shown[i] += len(data)
        return show

    def write(i):
        chunk = b"w" * 65536
        for _ in range(total // len(chunk)):
            os.write(pipes[i].w, chunk)
        pipes[i].close_writer()

    try:
        async with trio.open_nursery() as nursery:
            handoffs.extend(Handoff(show_for(i), 4 * size, wake_at=2 * size) for i in range(count))
            for i in range(count):
                nursery.start_soon(trio.to_thread.run_sync, write, i)
            async with trio.open_nursery() as readers:
                for i in range(count):
                    readers.start_soon(trio.to_thread.run_sync, read_pipe, pipes[i].r,
                                       pipes[i].stop, slots, filter_for(i), handoffs[i], 2)
    finally:
        for pipe in pipes:
            pipe.close()
    assert shown == [total] * count
    assert slots.made == 1
    assert unshown_elsewhere and max(unshown_elsewhere) == 0


@pytest.mark.parametrize("flooding", [False, True])
async def test_the_stop_eventfd_ends_the_reader_while_the_pipe_stays_open(flooding):
    # A grandchild may keep the pipe open, quiet or writing for ever (here the filter
    # refills what it read: the pipe is never drained): the session's drain deadline
    # writes the eventfd and the thread returns.
    pipe = ReaderPipe()
    os.set_blocking(pipe.w, False)
    got = [0]
    refill = [flooding]

    def counting(view):
        got[0] += len(view)
        if refill[0]:
            os.write(pipe.w, bytes(view))
        return b""

    try:
        os.write(pipe.w, b"f" * 65536 if flooding else b"some output\n")
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def read():
                await trio.to_thread.run_sync(read_pipe, pipe.r, pipe.stop, FilterSlots(1, 4096),
                                              counting, Handoff(lambda d: None, 1 << 20), 2)
                done.set()

            nursery.start_soon(read)
            with trio.fail_after(10):
                while got[0] < (1 << 20 if flooding else 12):
                    await trio.sleep(0.01)
            assert not done.is_set()
            os.eventfd_write(pipe.stop, 1)
            with trio.move_on_after(10):
                await done.wait()
            stopped = done.is_set()
            refill[0] = False  # a reader that missed the stop ends too (no hung test)
            await done.wait()
            assert stopped
    finally:
        pipe.close()


# --- a session's pipe reader ------------------------------------------------------------


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path / "home", supervisor__sandbox="none",
                         supervisor__drain_seconds=0.5, supervisor__kill_grace_seconds=0.5)


@pytest.fixture
def readers(monkeypatch):
    """Pipe reader threads running now (a count, through the session's ``read_pipe``)."""
    running = [0]
    original = session_module.read_pipe

    def counted(*args):
        running[0] += 1
        try:
            return original(*args)
        finally:
            running[0] -= 1

    monkeypatch.setattr(session_module, "read_pipe", counted)
    return running


async def test_a_masking_pipe_is_read_by_its_own_thread_not_the_loop(settings, nursery, readers):
    seen = []
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command=f"echo {SECRET}; sleep 0.5; echo end", secrets=[SECRET],
                             timeout_seconds=30))
    with trio.fail_after(20):
        while not s.has_new_output():
            await trio.sleep(0.01)
        seen.append(readers[0])
        await s.done.wait()
    assert seen == [1] and readers[0] == 0
    assert s.text()[0] == "######\nend\n"


async def test_the_drain_deadline_ends_a_pipe_reader_a_grandchild_keeps_open(settings, nursery,
                                                                            readers):
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command=f"sleep 300 & echo {SECRET} parent-done", secrets=[SECRET],
                             timeout_seconds=0))
    try:
        with trio.fail_after(20):
            await s.done.wait()
        assert s.outcome.status == "completed" and s.text()[0] == "###### parent-done\n"
        assert readers[0] == 0
    finally:
        s.tree.signal(9)


async def test_a_flooding_masking_pipe_grandchild_past_the_drain_deadline(settings, nursery,
                                                                         readers):
    # The grandchild writes for ever: the reader never finds the pipe drained, and still
    # stops at the deadline.
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command=f"({FLOOD} &) ; echo parent-done", secrets=[SECRET],
                             timeout_seconds=0))
    try:
        with trio.fail_after(20):
            await s.done.wait()
        assert readers[0] == 0 and s.buffer.end > len("parent-done")
    finally:
        s.tree.signal(9)


@pytest.mark.parametrize("how", ["kill", "timeout"])
async def test_kill_and_timeout_end_a_flooding_pipe_reader(settings, nursery, readers, how):
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command=FLOOD, secrets=[SECRET],
                             timeout_seconds=1 if how == "timeout" else 0))
    with trio.fail_after(20):
        while s.buffer.end < 1 << 20:
            await trio.sleep(0.01)
        if how == "kill":
            await s.kill()
        await s.done.wait()
    assert s.outcome.status == ("killed" if how == "kill" else "failed")
    assert readers[0] == 0


async def test_stopping_the_supervisor_ends_flooding_pipe_readers(settings, readers):
    # The daemon shutting down cancels every session: their threads end with them.
    async with trio.open_nursery() as nursery:
        sup = Supervisor(settings, nursery)
        sessions = [sup.start(LaunchSpec(command=FLOOD, secrets=[SECRET],
                                         timeout_seconds=0)) for _ in range(3)]
        with trio.fail_after(20):
            while readers[0] < 3 or min(s.buffer.end for s in sessions) == 0:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert readers[0] == 0 and all(s.done.is_set() for s in sessions)


async def test_a_secret_added_mid_run_is_masked_by_the_pipe_reader(settings, nursery, tmp_path):
    # add_secrets (the channel's pass_mgr get) waits for the batch in progress; from then on
    # the reader's batches mask the new value too.
    go = tmp_path / "go"
    other = "an-earlier-secret-Kd72nPq"
    live: list[bytes] = []
    code = ("import os, sys, time\n"
            "print('x' * 300000, flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
            f"print('y' * 300000 + ' {SECRET} after', flush=True)")
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command=py(code), secrets=[other], timeout_seconds=30,
                             on_output=lambda stream, data: live.append(data)))
    with trio.fail_after(20):
        while len(b"".join(live)) < 300001:
            await trio.sleep(0.01)
        s.add_secrets([SECRET])
        go.touch()
        await s.done.wait()
    out = b"".join(live)
    assert s.outcome.exit_code == 0 and out.endswith(b"###### after\n")
    assert SECRET.encode() not in out
