"""Where the host has no namespaces, "auto" runs commands unsandboxed and says so once;
"namespaces" refuses to run them (supervisor/sandbox.py, docs/design.md §1)."""

from __future__ import annotations

import logging
import os

import pytest
import trio

from paddedcell.supervisor import LaunchSpec, Supervisor
from paddedcell.supervisor import sandbox
from paddedcell.supervisor.spawn import SpawnError

from supervisor_helpers import make_settings


@pytest.fixture
def no_namespaces(monkeypatch):
    monkeypatch.setattr(sandbox, "_AVAILABLE", (False, "user namespaces are off (test)"))
    monkeypatch.setattr(sandbox, "_WARNED", False)


async def test_auto_without_namespaces_runs_unsandboxed_and_says_so_once(
        tmp_path, no_namespaces, caplog, nursery):
    home = tmp_path / "home"
    settings = make_settings(home, supervisor__sandbox="auto")
    (home / "marker").write_text("visible-home")
    caplog.set_level(logging.WARNING, logger="paddedcell.supervisor")
    sup = Supervisor(settings, nursery, base_env={"PATH": os.environ["PATH"]})
    assert any("sandbox: unavailable" in r.getMessage() for r in caplog.records)  # at start
    for _ in range(2):
        session = sup.start(LaunchSpec(command=f"cat {home}/marker", agent_id="a"))
        with trio.fail_after(20):
            await session.done.wait()
        assert "visible-home" in session.text()[0]
    lines = [r.getMessage() for r in caplog.records if "sandbox: unavailable" in r.getMessage()]
    assert len(lines) == 1 and "user namespaces are off (test)" in lines[0]
    assert "PADDEDCELL_HOME" in lines[0] and 'supervisor.sandbox = "none"' in lines[0]


async def test_namespaces_profile_refuses_without_namespaces(tmp_path, no_namespaces, nursery):
    settings = make_settings(tmp_path / "home", supervisor__sandbox="namespaces")
    sup = Supervisor(settings, nursery)
    with pytest.raises(SpawnError, match="not available on this host"):
        sup.start(LaunchSpec(command="true", agent_id="a"))
