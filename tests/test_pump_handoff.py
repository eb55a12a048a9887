"""A masking pipe's pump: the worker's hand-off to the loop, and what a session shows."""

from __future__ import annotations

import pytest
import trio

from paddedcell.redactor.filters import new_filter
from paddedcell.supervisor import LaunchSpec, Supervisor
from paddedcell.supervisor.buffers import BY_REFERENCE
from paddedcell.supervisor.readahead import Handoff

from supervisor_helpers import make_settings, py

SECRET = "pump-secret-Zq81xWvT5kLm"


async def test_the_loop_wakes_once_wake_at_bytes_are_queued_and_at_flush():
    shown: list[bytes] = []
    handoff = Handoff(shown.append, 1 << 20, wake_at=10)
    # A thread's puts and its return reach the loop in order (one entry queue): what a
    # put scheduled has run when the thread's call returns here.
    await trio.to_thread.run_sync(handoff.put, b"abc")
    assert shown == []
    await trio.to_thread.run_sync(handoff.put, b"defghijk")
    assert shown == [b"abcdefghijk"]  # small pieces: one show
    await trio.to_thread.run_sync(handoff.put, b"x")
    assert shown == [b"abcdefghijk"]
    await trio.to_thread.run_sync(handoff.flush)
    assert shown == [b"abcdefghijk", b"x"]
    await trio.to_thread.run_sync(handoff.flush)  # nothing queued: nothing shown
    assert len(shown) == 2


async def test_large_pieces_are_shown_as_they_are():
    shown: list[bytes] = []
    handoff = Handoff(shown.append, 1 << 20, wake_at=1 << 20)
    big = [bytes([65 + i]) * BY_REFERENCE for i in range(2)]

    def work() -> None:
        for piece in (big[0], b"tiny", big[1]):
            handoff.put(piece)
        handoff.flush()

    await trio.to_thread.run_sync(work)
    assert shown == [big[0], b"tiny", big[1]]
    assert shown[0] is big[0] and shown[2] is big[1]  # not joined: no copy


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path / "home", supervisor__sandbox="none",
                         supervisor__drain_seconds=0.5)


async def test_a_masking_pipe_shows_exactly_the_one_shot_redaction(settings, nursery):
    # Secrets back to back for 2 MiB (4 batches or more): wherever the worker's batches and hand-offs end,
    # the cut falls inside or next to a secret; live output and the buffer's tail are
    # the redactor's one-shot output.
    line = (SECRET + "|x\n").encode()
    count = (2 << 20) // len(line)
    live: list[bytes] = []
    sup = Supervisor(settings, nursery)
    code = f"import os\nb = {line!r} * 4096\nfor _ in range({count} // 4096): os.write(1, b)"
    session = sup.start(LaunchSpec(command=py(code), secrets=[SECRET], timeout_seconds=60,
                                   on_output=lambda stream, data: live.append(data)))
    with trio.fail_after(60):
        await session.done.wait()
    one_shot = new_filter([SECRET], settings)
    expected = one_shot.feed(line * (count // 4096 * 4096)) + one_shot.flush()
    assert b"".join(live) == expected
    assert session.buffer.end == len(expected)
    assert session.buffer.held() == expected[session.buffer.start:]
    assert len(session.buffer) >= settings["supervisor.session_buffer_floor_bytes"]


async def test_a_quiet_masking_pipe_shows_each_line_before_the_next(settings, nursery, tmp_path):
    # The worker flushes its hand-off when its turn ends: output below the wake-up
    # size is shown at once, not held until more comes (the writer waits for it).
    go = tmp_path / "go"
    live: list[bytes] = []
    sup = Supervisor(settings, nursery)
    code = ("import os, sys, time\n"
            f"print('first {SECRET}', flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
            "print('second', flush=True)")
    session = sup.start(LaunchSpec(command=py(code), secrets=[SECRET], timeout_seconds=30,
                                   on_output=lambda stream, data: live.append(data)))
    with trio.fail_after(10):
        while b"first" not in b"".join(live):
            await trio.sleep(0.01)
    assert SECRET.encode() not in b"".join(live)
    go.touch()
    with trio.fail_after(20):
        await session.done.wait()
    text = b"".join(live)
    assert text.endswith(b"second\n") and SECRET.encode() not in text
