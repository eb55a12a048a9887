"""Hand-offs from a pump's worker thread to the event loop, and a terminal's reader.

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
wakes the loop only per ``wake_at`` bytes and when its turn ends (each wake-up
takes the GIL from the worker: 128 MiB, 10 secrets, 12 alternated rounds, per
batch 0.68 GB/s and 0.197 CPU s, per two batches 0.74 and 0.175). The thread
waits once ``limit`` bytes are unshown (back-pressure when the loop lags).

A pipe that masks secrets is read by its limiter worker (:func:`read_batches`):
what is ready, into one buffer, then used; the enlarged pipe is the read-ahead
(the command refills it while a batch is filtered). A helper thread that read the
next batch into a second buffer meanwhile cost more (an eventfd, a thread hand-off
and GIL waits a batch) than it saved once the filter ran at ~1 GB/s (session 10,
128 MiB, 10 secrets, 7 rounds: 0.50 GB/s and 0.30 CPU s with it at a 256 KiB pipe,
0.63 GB/s and 0.22 CPU s without it at 512 KiB).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import threading
from typing import Callable, ContextManager

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
            self._room.notify()
        if len(items) > 1 and all(len(item) < BY_REFERENCE for item in items):
            items = [b"".join(items)]
        for item in items:
            self._show(item)


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
