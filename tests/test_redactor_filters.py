"""One output filter interface and one factory (redactor/filters.py): every
stream's filter is a StreamRedactor, a Passthrough or the vault's LeakStream,
built by new_filter from the redactor.* settings; a Passthrough becomes a
redactor when a session learns a secret mid-run."""

from __future__ import annotations

import pytest
import trio

from paddedcell.redactor import OutputFilter, Passthrough, StreamRedactor, new_filter
from paddedcell.supervisor import LaunchSpec, Supervisor
from paddedcell.vault.leak import LeakDetector, LeakStream

from supervisor_helpers import make_settings

SECRET = "filter-secret-Zq8xv2NmP4tR7yWb"


def test_every_filter_plays_the_one_interface(tmp_path):
    settings = make_settings(tmp_path / "home")
    redactor = new_filter([SECRET], settings)
    empty = new_filter([], settings)
    leak = LeakStream(LeakDetector.create("admin-Password-1234"), redactor.fresh(), lambda: None)
    assert isinstance(redactor, StreamRedactor) and isinstance(empty, Passthrough)
    for f in (redactor, empty, leak):
        assert isinstance(f, OutputFilter)
        assert isinstance(f.fresh(), OutputFilter)


def test_the_factory_reads_the_settings(tmp_path):
    settings = make_settings(tmp_path / "home", redactor__mask="[gone]", redactor__forms_off="hex")
    f = new_filter([SECRET], settings)
    hexed = SECRET.encode().hex().encode()
    assert f.feed(b"a " + SECRET.encode() + b" " + hexed + b" z") + f.flush() == b"a [gone] " + hexed + b" z"
    g = new_filter([SECRET], settings, mask="**")  # an override, as paddedcell redact --mask does
    assert g.feed(SECRET.encode()) + g.flush() == b"**"


def test_a_passthrough_becomes_a_redactor_from_the_same_factory(tmp_path):
    settings = make_settings(tmp_path / "home", redactor__mask="[gone]")
    f = new_filter([], settings)
    other = f.fresh()
    assert f.idle and f.feed(SECRET.encode()) == SECRET.encode()
    f.add_secrets([SECRET])
    assert not f.idle and other.idle  # fresh streams are independent
    assert f.feed(b"x" + SECRET.encode() + b"y") + f.flush() == b"x[gone]y"
    with pytest.raises(ValueError, match="redactor factory"):
        Passthrough().add_secrets([SECRET])


async def test_a_session_without_secrets_masks_one_added_mid_run(tmp_path):
    settings = make_settings(tmp_path / "home", supervisor__sandbox="none")
    async with trio.open_nursery() as nursery:
        sup = Supervisor(settings, nursery)
        s = sup.start(LaunchSpec(command=f"echo before; sleep 0.5; echo {SECRET}; echo after",
                                 timeout_seconds=30))
        s.add_secrets([SECRET])
        with trio.fail_after(30):
            await s.done.wait()
        nursery.cancel_scope.cancel()
    out = s.buffer.held()
    assert SECRET.encode() not in out and b"######" in out and b"after" in out, out
