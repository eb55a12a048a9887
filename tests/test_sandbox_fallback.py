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


# Issue 17: the probe is the sandbox itself, so "auto" falls back exactly when a command
# would fail, whoever runs it (the suite's unprivileged pass runs these as an ordinary user).

def _pcexec_with_user_namespaces_off(tmp_path, *command, sandbox="auto"):
    """``pcexec`` in a user namespace whose ``user.max_user_namespaces`` is 0: the host
    gives no namespaces, as on a hardened or containerised host."""
    import shutil
    import subprocess

    from supervisor_helpers import BIN, base_env

    if not shutil.which("unshare"):
        pytest.skip("util-linux unshare is not installed")
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws),
                   PADDEDCELL_SUPERVISOR_SANDBOX=sandbox)
    script = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    return subprocess.run(["unshare", "-Ur", "sh", "-c", script, "sh", str(BIN / "pcexec"), "--",
                           *command], env=env, capture_output=True, text=True, timeout=60,
                          cwd=str(ws))


def test_auto_falls_back_for_real_when_the_host_refuses_namespaces(tmp_path):
    done = _pcexec_with_user_namespaces_off(tmp_path, "echo hello")
    assert (done.returncode, done.stdout) == (0, "hello\n"), done.stderr
    assert done.stderr.count("sandbox: unavailable") == 1, done.stderr


def test_namespaces_profile_refuses_for_real_in_one_line(tmp_path):
    done = _pcexec_with_user_namespaces_off(tmp_path, "echo hello", sandbox="namespaces")
    assert done.returncode != 0 and "hello" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_probe_and_a_command_agree(tmp_path, monkeypatch):
    """Whoever runs the suite (root or not, namespaces or not), the probe's answer is
    what a command under the strict profile gets."""
    import subprocess

    from supervisor_helpers import BIN, base_env

    monkeypatch.setattr(sandbox, "_AVAILABLE", None)
    ok, why = sandbox.available()
    ws = tmp_path / "ws"
    ws.mkdir()
    done = subprocess.run([str(BIN / "pcexec"), "--", "echo hello"], capture_output=True,
                          text=True, timeout=60, cwd=str(ws),
                          env=base_env(tmp_path / "home", AGENT_ID="a1", AGENT_WORKSPACE=str(ws),
                                       PADDEDCELL_SUPERVISOR_SANDBOX="namespaces"))
    assert (done.returncode == 0 and done.stdout == "hello\n") == ok, (why, done.stderr)
