"""The supervisor's pump sanitizes and redacts off the event loop: every
sanitizer and redactor call of a flooding session with a secret runs in a
worker thread, never in a task step of the loop, so the daemon's routes run
meanwhile; without a secret, plain ASCII needs no work and stays on the loop.
Checked by thread identity and a trio instrument, not timed."""

from __future__ import annotations

import sys
import threading

import pytest
import trio

from paddedcell.execspec.ansi import OutputSanitizer
from paddedcell.redactor import StreamRedactor
from paddedcell.supervisor import LaunchSpec, Supervisor

from supervisor_helpers import make_settings

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
    source = tmp_path / "out.txt"
    source.write_text(text)
    writer = tmp_path / "write.py"
    writer.write_text("import os, sys\ndata = open(sys.argv[1], 'rb').read()\ni = 0\n"
                      "while i < len(data):\n    i += os.write(1, data[i:i + 12_345])\n")
    shown = []
    s = await run_counted(tmp_path, WorkPerStep(), LaunchSpec(
        command=f"{sys.executable} {writer} {source}", secrets=[SECRET], timeout_seconds=60,
        on_output=lambda stream, data: shown.append(data)))
    assert s.outcome.exit_code == 0
    expected = StreamRedactor([SECRET])
    want = expected.feed(text.encode()) + expected.flush()
    assert b"".join(shown) == want  # more than the ring holds: every emitted byte
    assert want.count(b"######") == 7 and SECRET.encode() not in want
