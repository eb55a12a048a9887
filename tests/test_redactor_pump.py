"""The supervisor's pump redacts in bounded slices: no task step of a flooding
session sanitizes or redacts more than a slice, whatever the read size, so
every other task (the daemon's routes) runs between two slices. Counted in
bytes per task step with a trio instrument, not timed."""

from __future__ import annotations

import pytest
import trio

from paddedcell.execspec.ansi import OutputSanitizer
from paddedcell.redactor import StreamRedactor
from paddedcell.supervisor import LaunchSpec, Supervisor
from paddedcell.supervisor import session as session_module

from supervisor_helpers import make_settings

SECRET = "pump-secret-Zq8xv2NmP4tR7yWb"


class BytesPerStep(trio.abc.Instrument):
    """The most bytes the sanitizer and the redactor got during one task step."""

    def __init__(self):
        self.sanitized = self.redacted = 0
        self.max_sanitized = self.max_redacted = 0
        self.steps_with_work = 0
        self._at = (0, 0)

    def before_task_step(self, task):
        self._at = (self.sanitized, self.redacted)

    def after_task_step(self, task):
        s, r = self.sanitized - self._at[0], self.redacted - self._at[1]
        self.max_sanitized = max(self.max_sanitized, s)
        self.max_redacted = max(self.max_redacted, r)
        self.steps_with_work += bool(s or r)


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
async def test_a_flood_is_sanitized_and_redacted_in_bounded_slices(tmp_path, monkeypatch, pty):
    counter = BytesPerStep()
    sanitize, redact = OutputSanitizer.feed, StreamRedactor.feed

    def counting_sanitize(self, data):
        counter.sanitized += len(data)
        return sanitize(self, data)

    def counting_redact(self, data):
        counter.redacted += len(data)
        return redact(self, data)

    monkeypatch.setattr(OutputSanitizer, "feed", counting_sanitize)
    monkeypatch.setattr(StreamRedactor, "feed", counting_redact)
    settings = make_settings(tmp_path / "home", supervisor__sandbox="none")
    size = 3_000_000
    command = f"head -c {size} /dev/zero | tr '\\0' a; printf ' {SECRET} '"
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            sup = Supervisor(settings, nursery)
            s = sup.start(LaunchSpec(command=command, secrets=[SECRET], pty=pty, timeout_seconds=60))
            with trio.fail_after(60):
                await s.done.wait()
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert s.outcome.exit_code == 0
    tail = s.buffer.tail(200)
    assert SECRET.encode() not in s.buffer.held() and tail.rstrip().endswith(b"######"), tail
    assert counter.sanitized >= size  # the flood went through the counted path
    assert counter.max_sanitized <= session_module.WORK_SLICE
    assert counter.max_redacted <= session_module.REDACT_BATCH + session_module.WORK_SLICE
    # Many steps, not a few big ones: every other task could run between them.
    assert counter.steps_with_work >= size // (session_module.REDACT_BATCH + session_module.WORK_SLICE)
