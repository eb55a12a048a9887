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

:class:`Handoff` shows a thread's output on the loop in order with one wake-up
for whatever piled up since the last one (not one per batch); the thread waits
once ``limit`` bytes are unshown (back-pressure when the loop lags).

A pipe that masks secrets is read ahead (:func:`read_batches`): while a limiter
worker filters one batch, a thread of Trio's cache reads the next into a second
buffer, waiting in ``poll`` for more until the filter is done; read, filter and
append overlap instead of taking turns. (That thread sanitizing too cost more GIL
hand-offs than it saved.)
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import threading
from functools import partial
from typing import Callable, ContextManager

import trio


class Handoff:
    """Bytes a worker thread made, shown on the loop by ``show`` in the order put."""

    def __init__(self, show: Callable[[bytes], None], limit: int):
        self._show = show
        self.limit = limit
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
            schedule, self._scheduled = not self._scheduled, True
        if schedule:
            try:
                self._token.run_sync_soon(self._drain)
            except trio.RunFinishedError:
                return False
        with self._lock:
            while self._size > self.limit and self._scheduled:
                self._room.wait()
        return True

    def _drain(self) -> None:
        """On the loop: show everything queued so far (one append, one write)."""
        with self._lock:
            items, self._items, self._size = self._items, [], 0
            self._scheduled = False
            self._room.notify()
        if items:
            self._show(items[0] if len(items) == 1 else b"".join(items))


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


def _read_until_woken(fd: int, buffer: memoryview, wake: int) -> tuple[int, bool, bool]:
    """In a helper thread: read into ``buffer`` until it is full, the stream ends, or
    ``wake`` (an eventfd) is written and nothing more is ready, waiting in ``poll``
    (the GIL free) meanwhile; ``(bytes read, eof, drained)``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(wake, select.POLLIN)
    got, woken = 0, False
    while True:
        n, eof, drained = read_ready(fd, buffer[got:])
        got += n
        if eof or got == len(buffer) or woken:
            return got, eof, drained
        woken = any(ready == wake for ready, _ in poller.poll())


class _Reading:
    """One :func:`_read_until_woken` in a thread of Trio's cache (``start_thread_soon``:
    callable from a worker thread, no event-loop round trip)."""

    def __init__(self, *args):
        self._done = threading.Event()
        self._outcome = None
        trio.lowlevel.start_thread_soon(partial(_read_until_woken, *args), self._deliver)

    def _deliver(self, result) -> None:
        """``result``: the read's ``outcome.Outcome``."""
        self._outcome = result
        self._done.set()

    def result(self) -> tuple[int, bool, bool]:
        self._done.wait()
        return self._outcome.unwrap()


def read_batches(fd: int, buffers: tuple[memoryview, memoryview],
                 use: Callable[[memoryview], bool], batches: int) -> tuple[bool, bool]:
    """In a worker thread: read what ``fd`` has ready into one of ``buffers`` and ``use``
    it, up to ``batches`` times, in order; while ``use`` works on one batch a helper
    thread reads the next into the other buffer (waiting for data until ``use`` is
    done, never on a timer). Returns ``(eof, drained)``: drained when nothing arrived
    while the last batch was used (stop when ``use`` returns False)."""
    this, other = buffers
    got, eof, drained = read_ready(fd, this)
    if not got:
        return eof, drained
    try:
        wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    except OSError:  # no descriptor left (EMFILE: a flood at the file limit): no read-ahead
        # This batch alone, as before the read-ahead; the caller reads on while not drained.
        return (eof, drained) if use(this[:got]) else (True, False)
    try:
        for left in range(batches - 1, -1, -1):
            ahead = _Reading(fd, other, wake) if left and not eof else None
            try:
                going = use(this[:got])
            finally:
                if ahead is not None:
                    os.eventfd_write(wake, 1)
                    got, eof, drained = ahead.result()
                    with contextlib.suppress(BlockingIOError):
                        os.eventfd_read(wake)  # not seen if the read ended first
            if not going:
                return True, False
            if ahead is None or not got:
                return eof, drained
            this, other = other, this
        return eof, drained
    finally:
        os.close(wake)
