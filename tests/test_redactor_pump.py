"""The supervisor's pump sanitizes and redacts off the event loop: every
sanitizer and redactor call of a flooding session with a secret runs in a
worker thread, never in a task step of the loop, so the daemon's routes run
meanwhile; without a secret, plain ASCII needs no work and stays on the loop.
Checked by thread identity and a trio instrument, not timed."""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from functools import partial

import pytest
import trio

from paddedcell.execspec.ansi import OutputSanitizer
from paddedcell.redactor import StreamRedactor
from paddedcell.supervisor import LaunchSpec, Supervisor

from supervisor_helpers import (assert_buffer_edges_mask_exactly, assert_every_cut_masks_exactly,
                                make_settings, run_reader)

SECRET = "pump-secret-Zq8xv2NmP4tR7yWb"


class WorkPerStep(trio.abc.Instrument):
    """Bytes the sanitizer and the redactor got on the loop thread during a task step."""

    def __init__(self):
        self.on_loop = 0
        self.in_workers = 0
        self.loop_thread = None

    def before_task_step(self, task):
        self.loop_thread = threading.get_ident()

    def count(self, n: int) -> None:
        if threading.get_ident() == self.loop_thread:
            self.on_loop += n
        else:
            self.in_workers += n


def counted(monkeypatch, counter: WorkPerStep, cls, name: str = "feed") -> None:
    original = getattr(cls, name)

    def counting(self, data):
        counter.count(len(data))
        return original(self, data)

    monkeypatch.setattr(cls, name, counting)


async def run_counted(tmp_path, counter: WorkPerStep, spec: LaunchSpec):
    """Run ``spec`` to its end with ``counter`` watching the loop's task steps."""
    settings = make_settings(tmp_path / "home", supervisor__sandbox="none")
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            s = Supervisor(settings, nursery).start(spec)
            with trio.fail_after(60):
                await s.done.wait()
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(counter)
    return s


async def run_writer(tmp_path, text: str, piece: int, pty: bool = False):
    """A session (secret SECRET) whose command writes ``text`` in ``piece``-byte writes;
    ``(session, every piece of output shown)``."""
    source = tmp_path / "out.txt"
    source.write_text(text)
    writer = tmp_path / "write.py"
    writer.write_text("import os, sys\ndata = open(sys.argv[1], 'rb').read()\ni = 0\n"
                      f"while i < len(data):\n    i += os.write(1, data[i:i + {piece}])\n")
    shown: list[bytes] = []
    s = await run_counted(tmp_path, WorkPerStep(), LaunchSpec(
        command=f"{sys.executable} {writer} {source}", secrets=[SECRET], timeout_seconds=60,
        pty=pty, on_output=lambda stream, data: shown.append(data)))
    return s, shown


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
async def test_a_flood_is_sanitized_and_redacted_in_worker_threads(tmp_path, monkeypatch, pty):
    counter = WorkPerStep()
    counted(monkeypatch, counter, OutputSanitizer)
    counted(monkeypatch, counter, StreamRedactor)
    size = 3_000_000
    command = f"head -c {size} /dev/zero | tr '\\0' a; printf ' {SECRET} '"
    s = await run_counted(tmp_path, counter, LaunchSpec(command=command, secrets=[SECRET], pty=pty,
                                                         timeout_seconds=60))
    assert s.outcome.exit_code == 0
    tail = s.buffer.tail(200)
    assert SECRET.encode() not in s.buffer.held() and tail.rstrip().endswith(b"######"), tail
    assert counter.in_workers >= 2 * size  # sanitizer and redactor both saw the flood
    # The loop only flushes at the end of the stream (the held tail, a few bytes).
    assert counter.on_loop <= 2 * len(SECRET) + 64


async def test_plain_ascii_without_secrets_stays_on_the_loop(tmp_path, monkeypatch):
    counter = WorkPerStep()
    counted(monkeypatch, counter, OutputSanitizer)
    s = await run_counted(tmp_path, counter, LaunchSpec(
        command="head -c 1000000 /dev/zero | tr '\\0' a; printf 'é'", timeout_seconds=60))
    assert s.buffer.end == 1_000_002
    assert counter.on_loop >= 1_000_000 - 64 * 1024  # ASCII reads: no thread round trip
    assert counter.in_workers >= 2  # the read holding "é" went to a worker


async def test_batches_read_by_the_workers_mask_exactly_what_the_redactor_masks(tmp_path):
    # Secrets at offsets that straddle reads and batches (REDACTED_BATCH, pipe sizes),
    # written in odd-sized pieces: the session's output is the redactor's output of the
    # same bytes, whatever the batches were.
    from paddedcell.supervisor.session import REDACTED_BATCH

    pieces, total = [], 0
    for i, gap in enumerate((REDACTED_BATCH - 7, 65_533, 262_139, REDACTED_BATCH + 3, 4_093,
                             1_000_003, 17)):
        pieces.append(f"x{i}" * (gap // 2))
        pieces.append(SECRET)
        total += gap
    text = "\n".join(pieces) + "\ntail\n"
    s, shown = await run_writer(tmp_path, text, 12_345)
    assert s.outcome.exit_code == 0
    expected = StreamRedactor([SECRET])
    want = expected.feed(text.encode()) + expected.flush()
    assert b"".join(shown) == want  # more than the ring holds: every emitted byte
    assert want.count(b"######") == 7 and SECRET.encode() not in want


# --- the terminal's reader thread and the hand-off (supervisor/readahead.py) -----------


async def read_in_batches(parts: list[bytes], filter_batch, limit: int = 1 << 20,
                          buffer_size: int = 4096) -> tuple[list[bytes], int]:
    """``read_terminal`` over ``parts`` (:func:`supervisor_helpers.run_reader`)."""
    from paddedcell.supervisor.readahead import Handoff, read_terminal

    def make_reader(show):
        handoff = Handoff(show, limit)
        return lambda fd, stop, filt: read_terminal(fd, stop, memoryview(bytearray(buffer_size)),
                                                    filt, handoff)
    return await run_reader(parts, filter_batch, make_reader)


async def test_a_secret_split_at_every_byte_across_terminal_batches_is_masked_exactly():
    await assert_every_cut_masks_exactly(read_in_batches, SECRET)


async def test_batches_larger_than_the_read_buffer_still_mask_exactly():
    await assert_buffer_edges_mask_exactly(read_in_batches, SECRET)


async def test_the_reader_stops_reading_while_the_loop_lags():
    # Back-pressure: while the loop cannot show what was handed over, the thread reads no
    # more than the hand-off's limit plus one buffer, whatever the writer has ready.
    from paddedcell.supervisor.readahead import Handoff, read_terminal

    limit, size = 64 * 1024, 16 * 1024
    read = [0]

    def counting(view):
        read[0] += len(view)
        return bytes(view)

    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    stop = os.eventfd(0)
    written = 0
    try:
        async with trio.open_nursery() as nursery:
            handoff = Handoff(lambda data: None, limit)
            nursery.start_soon(partial(trio.to_thread.run_sync, read_terminal, r, stop,
                                       memoryview(bytearray(size)), counting, handoff))
            first = written = os.write(w, b"z" * 4096)
            while not read[0]:  # the thread runs and read the first bytes (shown at once)
                await trio.sleep(0.01)
            # The loop is busy (no hand-off can run) while the writer fills the pipe again
            # and again: the reader must stop once ``limit`` is unshown.
            deadline = time.monotonic() + 1.0
            while True:
                try:
                    written += os.write(w, b"z" * 65536)
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
            os.eventfd_write(stop, 1)
            assert limit < read[0] <= first + limit + size
            assert written - read[0] >= 4096  # the pipe held more: the reader had stopped
    finally:
        os.close(r)
        os.close(w)
        os.close(stop)


# --- a masking pipe's batches (readahead.read_batches) --------------------------------


def unread(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` (FIONREAD)."""
    import fcntl
    import struct
    import termios

    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def read_all_batches(r: int, use, size: int) -> None:
    """``read_batches`` turns until the end of the stream, waiting while it is drained."""
    import select

    from paddedcell.supervisor.readahead import read_batches

    buffer = memoryview(bytearray(size))
    while True:
        eof, drained = read_batches(r, buffer, use, 3)
        if eof:
            return
        if drained:
            select.select([r], [], [])


async def test_pipe_batches_mask_exactly_what_the_redactor_masks():
    # A writer's odd pieces, secrets straddling the buffer's edges at many offsets: batch
    # after batch, in order, as one feed.
    size = 4096
    text = b"".join(b"y" * gap + SECRET.encode() for gap in range(size - 40, size + 40, 7)) * 3
    redactor = StreamRedactor([SECRET])
    shown: list[bytes] = []
    r, w = os.pipe()
    os.set_blocking(r, False)

    def write() -> None:
        for i in range(0, len(text), 1_111):
            os.write(w, text[i:i + 1_111])
        os.close(w)

    def use(view) -> bool:
        shown.append(redactor.feed(bytes(view)))
        return True

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, write)
            await trio.to_thread.run_sync(read_all_batches, r, use, size)
    finally:
        os.close(r)
    one_shot = StreamRedactor([SECRET])
    assert b"".join(shown) + redactor.flush() == one_shot.feed(text) + one_shot.flush()
    assert len(shown) >= len(text) // size


def test_read_batches_uses_what_is_ready_in_order_and_says_why_it_stopped():
    # Full buffers are used one after the other; a short read means the pipe is drained
    # (the caller waits for it); at most ``batches`` a call; ``use`` saying False stops.
    from paddedcell.supervisor.readahead import read_batches

    r, w = os.pipe()
    os.set_blocking(r, False)
    seen: list[bytes] = []
    buffer = memoryview(bytearray(4))
    try:
        os.write(w, b"0123456789")
        assert read_batches(r, buffer, lambda v: seen.append(bytes(v)) or True, 2) == (False, False)
        assert seen == [b"0123", b"4567"]
        assert read_batches(r, buffer, lambda v: seen.append(bytes(v)) or True, 8) == (False, True)
        assert seen == [b"0123", b"4567", b"89"]
        assert read_batches(r, buffer, lambda v: False, 8) == (False, True)  # nothing read
        os.write(w, b"x")
        assert read_batches(r, buffer, lambda v: False, 8) == (True, False)  # told to stop
        os.write(w, b"yz")
        os.close(w)
        w = None
        assert read_batches(r, buffer, lambda v: seen.append(bytes(v)) or True, 8) == (True, False)
        assert seen[-1] == b"yz"
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_pipes_are_enlarged_only_within_the_budget(monkeypatch):
    # Pipe pages count against the user's soft limit: past the budget a pipe keeps its
    # default size, and what a pump gave back can be had again.
    import fcntl

    from paddedcell.supervisor import session

    monkeypatch.setattr(session, "_pipe_bytes", 0)
    monkeypatch.setattr(session, "PIPE_BUDGET", 2 * session.PIPE_SIZE)
    pipes = [os.pipe() for _ in range(3)]
    try:
        got = [session._enlarge_pipe(r) for r, _ in pipes]
        assert got[:2] == [session.PIPE_SIZE, session.PIPE_SIZE] and got[2] == 0
        assert fcntl.fcntl(pipes[2][0], session.F_SETPIPE_SZ - 1) < session.PIPE_SIZE  # F_GETPIPE_SZ
        session._give_back_pipe(got[0])
        assert session._enlarge_pipe(pipes[2][0]) == session.PIPE_SIZE
        r, w = os.openpty()  # no pipe: nothing counted
        try:
            session._give_back_pipe(got[1])
            assert session._enlarge_pipe(r) == 0 and session._pipe_bytes == session.PIPE_SIZE
        finally:
            os.close(r)
            os.close(w)
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
async def test_a_session_masks_secrets_straddling_terminal_reads_as_the_redactor_does(tmp_path, pty):
    # Through the session: a writer's odd-sized pieces, secrets at offsets around the
    # terminal's and the reader's buffer sizes; no newline (a terminal would add \r).
    from paddedcell.supervisor.session import PTY_READ_AHEAD

    pieces = []
    for i, gap in enumerate((PTY_READ_AHEAD - 7, 4_093, 4_097, 65_533, PTY_READ_AHEAD + 3, 17)):
        pieces.append(f"x{i}" * (gap // 2))
        pieces.append(SECRET)
    text = " ".join(pieces) + " tail"
    s, shown = await run_writer(tmp_path, text, 1_111, pty=pty)
    assert s.outcome.exit_code == 0
    expected = StreamRedactor([SECRET])
    want = expected.feed(text.encode()) + expected.flush()
    assert b"".join(shown) == want
    assert want.count(b"######") == 6 and SECRET.encode() not in want


async def test_a_terminal_read_by_the_loop_switches_to_its_thread_when_secrets_arrive(tmp_path):
    # No secret at the start: the loop reads the PTY. A value handed over mid-run
    # (Session.add_secrets, as the channel does) is masked from then on, by the thread.
    settings = make_settings(tmp_path / "home", supervisor__sandbox="none")
    script = ("import sys\nprint('before', flush=True)\nsys.stdin.readline()\n"
              f"print('x' * 300000 + ' {SECRET} after', flush=True)\n")
    shown = []
    async with trio.open_nursery() as nursery:
        s = Supervisor(settings, nursery).start(LaunchSpec(
            command=f"{sys.executable} -c {shlex.quote(script)}", pty=True, timeout_seconds=60,
            on_output=lambda stream, data: shown.append(data)))
        with trio.fail_after(30):
            while b"before" not in b"".join(shown):
                await trio.sleep(0.01)
            s.add_secrets([SECRET])
            await s.write(b"go\n")
            await s.done.wait()
        nursery.cancel_scope.cancel()
    out = b"".join(shown)
    assert s.outcome.exit_code == 0 and out.rstrip().endswith(b"after"), out[-100:]
    assert SECRET.encode() not in out and b"###### after" in out


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_the_plain_test_is_its_definition_at_every_simd_level(level):
    # ``_native.plain_ascii`` (the sanitizer's test of the pump's read buffer) at each
    # level this CPU runs (AVX-512BW 256 bytes a step, AVX2 128, SSE2 64, scalar): a
    # byte >= 0x80 or an ESC at every position around each step's edges is found.
    native = pytest.importorskip("paddedcell.redactor._native")
    try:
        if native._set_simd(level) != level:
            pytest.skip(f"this CPU does not run level {level}")
        for n in (*range(0, 70), 127, 128, 129, 255, 256, 257, 383, 511, 512, 513, 700):
            base = bytes(32 + i % 95 for i in range(n))
            assert native.plain_ascii(memoryview(bytearray(base))), n
            edges = {0, n - 1, *(e + d for e in (63, 64, 127, 128, 255, 256, 511, 512) for d in (-1, 0, 1))}
            for at in sorted(a for a in edges if 0 <= a < n):
                for bad in (0x1B, 0x80, 0xFF):
                    data = base[:at] + bytes([bad]) + base[at + 1:]
                    assert native.plain_ascii(data) is False, (level, n, at, bad)
    finally:
        native._set_simd(9)
