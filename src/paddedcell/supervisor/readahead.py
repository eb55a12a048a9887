"""Hand-offs from a reader thread to the event loop; the threads of masking terminals and pipes.

A PTY read returns at most one line-discipline buffer (~4 KiB), and a terminal
holds only ~64 KiB before its writer blocks. Waiting for an event-loop turn at
every read (epoll, a task step: tens of µs of Python) or a thread round trip per
batch makes a masking reader slower than the command. So a PTY stream that masks
secrets gets a thread of its own (:func:`read_terminal`) that reads what is ready
until EAGAIN, filters it in one call, hands the result to the loop and blocks in
``poll`` (the GIL is free meanwhile) until the terminal is readable again. No
timer ever waits for more data: a batch is what the terminal held, and it grows
while the filter is busy (the terminal's buffer fills meanwhile, the command
keeps writing). Without a secret the work per read is trivial and the loop reads:
a second thread costs more there (GIL hand-offs) than it saves.

A read of a PTY master whose flip buffers hold data waits in the kernel for the
kworker to move the next ~4 KiB into the line discipline (``tty_buffer_flush_work``),
non-blocking or not: EAGAIN comes only when the command itself is behind. Session
14, in-process 64 MiB ``cat``: 33 EAGAINs in 16,556 reads on a quiet machine, 100-535
in ~4,200 reads of 16 MiB with two other processes busy. So reading until EAGAIN
rarely costs a wait while the command outruns us; a wait costs ~40 µs of CPU in
Trio (``wait_readable``) against ~14 µs in ``poll``, which counts only on a loaded
machine. A read's own cost is the kernel's (it copies in 64-byte steps through the
line discipline): the raw loop spends ~0.25 CPU s on 22,218 reads of 64 MiB.

:class:`Handoff` shows a thread's output on the loop in order with one wake-up
for whatever piled up since the last one (not one per batch); a pipe's worker
wakes the loop only per ``wake_at`` bytes and before it gives its slot up (each wake-up
takes the GIL from the worker: 128 MiB, 10 secrets, 12 alternated rounds, per
batch 0.68 GB/s and 0.197 CPU s, per two batches 0.74 and 0.175). The thread
waits once ``limit`` bytes are unshown (back-pressure when the loop lags).

A pipe that masks secrets gets a thread of its own too (:func:`read_pipe`): holding
one of the shared filter slots (:class:`FilterSlots`, which also own the 512 KiB
batch buffers: memory per slot, not per stream), it reads what is ready into the
slot's buffer, filters it and hands it over, batch after batch, while the enlarged
pipe is the read-ahead (the command refills it meanwhile). Until session 16 the
limiter's worker read and filtered up to 8 batches a turn and went back to the
loop (``to_thread`` and ``wait_readable`` at every turn: 156 turns and ~0.1 s of
wall a 512 MiB run outside the turns; the loop's thread 0.038-0.041 CPU s, 0.028
with the reader thread). Session 17, full ``--only-pipes`` (512 MiB, 10 secrets),
alternated pairs main/branch: 1.31/1.32, 1.30/1.44, 1.26/1.42, 1.11/1.44 GB/s and
pump path 1.56/1.50, 1.55/1.41, 1.52/1.44, 1.85/1.34x the redactor alone (on 56f72df; with
the guard's scans in C, 49a144b, medians of 8 pairs 1.36/1.41 GB/s and 1.56/1.44x). A helper
thread that read the next batch into a second buffer meanwhile cost more (an
eventfd, a thread hand-off and GIL waits a batch) than it saved once the filter ran
at ~1 GB/s (session 10, 128 MiB, 10 secrets, 7 rounds: 0.50 GB/s and 0.30 CPU s with
it at a 256 KiB pipe, 0.63 GB/s and 0.22 CPU s without it at 512 KiB).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import threading
from collections import deque
from typing import Callable, ContextManager, Iterator

import trio

from .buffers import BY_REFERENCE


class Handoff:
    """Bytes a worker thread made, shown on the loop by ``show`` in the order put.

    The loop is woken once ``wake_at`` bytes are queued (0: at every put), and at
    ``flush``: a worker that hands over batch after batch wakes it per few batches,
    not per batch, and flushes when its turn ends."""

    def __init__(self, show: Callable[[bytes], None], limit: int, *, wake_at: int = 0):
        self._show = show
        self.limit = limit
        self.wake_at = wake_at
        self._token = trio.lowlevel.current_trio_token()
        self._items: list[bytes] = []
        self._size = 0
        self._scheduled = False
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)

    def put(self, data: bytes) -> bool:
        """From the worker: queue ``data``; False once the loop is gone (stop)."""
        if not data:
            return True
        with self._lock:
            self._items.append(data)
            self._size += len(data)
            schedule = not self._scheduled and self._size >= self.wake_at
            self._scheduled |= schedule
        if schedule and not self._schedule():
            return False
        with self._lock:
            while self._size > self.limit and self._scheduled:
                self._room.wait()
        return True

    def flush(self) -> bool:
        """From the worker: have the loop show what is queued; False once it is gone."""
        with self._lock:
            schedule = not self._scheduled and self._size > 0
            self._scheduled |= schedule
        return self._schedule() if schedule else True

    def wait_shown(self) -> bool:
        """From the worker: flush, then wait until the loop showed everything queued
        (a thread gives up its filter slot only then: what is unshown stays bounded per
        slot, not per stream); False once the loop is gone."""
        if not self.flush():
            return False
        with self._lock:
            while self._size and self._scheduled:
                self._room.wait()
        return True

    def _schedule(self) -> bool:
        try:
            self._token.run_sync_soon(self._drain)
        except trio.RunFinishedError:
            return False
        return True

    def _drain(self) -> None:
        """On the loop: show everything queued so far, in order (large pieces as they
        are: joining them would copy what the output buffer holds by reference)."""
        with self._lock:
            items, self._items, self._size = self._items, [], 0
            self._scheduled = False
            self._room.notify_all()
        if len(items) > 1 and all(len(item) < BY_REFERENCE for item in items):
            items = [b"".join(items)]
        for item in items:
            self._show(item)


class FilterSlots:
    """``count`` slots, held by reader threads while they read and filter (few threads
    hold the GIL at once, the event loop's among them), handed over first come, first
    served, and the pipes' batch buffers: one per slot held, made when first needed and
    reused, so a flood of streams holds ``count`` buffers, not one each.

    A holder gives its slot up between batches once another thread waits
    (:attr:`wanted`); a plain semaphore would let it take the slot straight back."""

    def __init__(self, count: int, batch_size: int):
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._free = count
        self._waiters: deque[threading.Lock] = deque()
        self._buffers: list[memoryview] = []
        #: Batch buffers made so far (never more than ``count``).
        self.made = 0

    @property
    def wanted(self) -> bool:
        """A thread waits for a slot."""
        return bool(self._waiters)

    def acquire(self) -> None:
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append(gate)
        gate.acquire()  # released by release(): the slot was handed to us

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._free += 1

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    @contextlib.contextmanager
    def batch(self) -> Iterator[memoryview]:
        """Hold a slot and a batch buffer (``batch_size`` bytes) with it."""
        with self:
            with self._lock:
                buffer = self._buffers.pop() if self._buffers else None
                if buffer is None:
                    self.made += 1
            if buffer is None:
                buffer = memoryview(bytearray(self.batch_size))
            try:
                yield buffer
            finally:
                with self._lock:
                    self._buffers.append(buffer)


def read_ready(fd: int, buffer: memoryview) -> tuple[int, bool, bool]:
    """Read what ``fd`` has ready into ``buffer`` (until EAGAIN or full): ``(bytes read,
    eof, drained)``; eof at the end of the stream (EOF, or EIO on a PTY: every holder of
    the terminal is gone), drained when a read found nothing more (EAGAIN)."""
    got = 0
    while got < len(buffer):
        try:
            n = os.readv(fd, [buffer[got:]])
        except BlockingIOError:
            return got, False, True
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            n = 0
        if not n:
            return got, True, False
        got += n
    return got, False, False


def read_terminal(fd: int, stop_fd: int, buffer: memoryview,
                  filter_batch: Callable[[memoryview], bytes], handoff: Handoff,
                  slot: ContextManager = contextlib.nullcontext()) -> None:
    """In the stream's own thread: read what is ready (until EAGAIN, up to
    ``len(buffer)``) and filter it in one call, both inside ``slot`` (a shared
    semaphore: few threads hold the GIL at once, the event loop's among them), hand
    it over, wait in ``poll``; until the end of the stream (EOF, or EIO: every
    holder of the terminal is gone) or until ``stop_fd`` (an eventfd) is written."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(stop_fd, select.POLLIN)
    while True:
        shown = b""
        with slot:
            got, eof, _ = read_ready(fd, buffer)
            if got:
                shown = filter_batch(buffer[:got])
        if got and not handoff.put(shown):
            return
        if eof:
            return
        # Full buffer: more may be ready at once, but look at stop_fd without waiting.
        for ready, _ in poller.poll(0 if got == len(buffer) else None):  # GIL free meanwhile
            if ready == stop_fd:
                return


def read_pipe(fd: int, stop_fd: int, slots: FilterSlots,
              filter_batch: Callable[[memoryview], bytes], handoff: Handoff,
              batches: int) -> None:
    """In the stream's own thread: holding a slot and its buffer, read what is ready
    (up to a buffer), filter it and hand it over, batch after batch
    (:func:`read_batches`, ``batches`` at a time), while the pipe has more and no other
    thread waits for the slot; then wait until the loop showed it all, give the slot
    up, and wait in ``poll`` (the GIL is free meanwhile) once the pipe was drained;
    until the end of the stream or until ``stop_fd`` (an eventfd) is written. No event
    loop turn per read or per batch: the loop only shows what was handed over."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(stop_fd, select.POLLIN)
    stopper = select.poll()
    stopper.register(stop_fd, select.POLLIN)

    def use(view: memoryview) -> bool:
        return handoff.put(filter_batch(view))

    while True:
        with slots.batch() as buffer:
            while True:
                eof, drained = read_batches(fd, buffer, use, batches)
                if eof or drained or slots.wanted or stopper.poll(0):
                    break
            # Nothing unshown once the slot is given up: in flight per slot, not per stream.
            if not handoff.wait_shown():
                return
        if eof:
            return
        for ready, _ in poller.poll(None if drained else 0):  # GIL free meanwhile
            if ready == stop_fd:
                return


def read_batches(fd: int, buffer: memoryview, use: Callable[[memoryview], bool],
                 batches: int) -> tuple[bool, bool]:
    """In a worker thread: read what ``fd`` has ready into ``buffer`` and ``use`` it, up
    to ``batches`` times, in order. Returns ``(eof, drained)``: drained when a read found
    nothing more (stop early when ``use`` returns False: ``(True, False)``)."""
    for _ in range(batches):
        got, eof, drained = read_ready(fd, buffer)
        if got and not use(buffer[:got]):
            return True, False
        if eof or drained or not got:
            return eof, drained
    return False, False
