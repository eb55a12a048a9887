"""Where the host has no namespaces: "auto" runs each agent as its own uid under a root
daemon, and otherwise refuses agent commands with one line saying how to fix it (said
once at start too); "namespaces" refuses; "none" is the explicit opt-out (docs/design.md §1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from paddedcell.supervisor import LaunchSpec, Supervisor
from paddedcell.supervisor import sandbox
from paddedcell.supervisor.spawn import SandboxUnavailable, SpawnError

from supervisor_helpers import make_settings

WHY = "user namespaces are off (test)"


@pytest.fixture
def no_namespaces(monkeypatch):
    monkeypatch.setattr(sandbox, "_AVAILABLE", {True: (False, WHY), False: (False, WHY)})


@pytest.fixture
def ordinary_user(monkeypatch):
    """The daemon's checks see an ordinary user (root cannot be one in-process)."""
    monkeypatch.setattr(sandbox, "host_root", lambda: False)


async def test_auto_without_namespaces_refuses_agent_commands_for_an_ordinary_user(
        tmp_path, no_namespaces, ordinary_user, nursery):
    home = tmp_path / "home"
    settings = make_settings(home, supervisor__sandbox="auto")
    sup = Supervisor(settings, nursery, base_env={"PATH": os.environ["PATH"]})
    for _ in range(2):
        with pytest.raises(SandboxUnavailable) as refused:
            sup.start(LaunchSpec(command=f"touch {tmp_path}/ran", agent_id="a"))
        message = str(refused.value)
        assert "\n" not in message and "paddedcell doctor" in message
        assert 'supervisor.sandbox = "none"' in message and WHY in message
    assert not (tmp_path / "ran").exists()


async def test_none_is_the_explicit_opt_out(tmp_path, no_namespaces, ordinary_user, nursery):
    home = tmp_path / "home"
    settings = make_settings(home, supervisor__sandbox="none")
    (home / "marker").write_text("visible-home")
    sup = Supervisor(settings, nursery, base_env={"PATH": os.environ["PATH"]})
    session = sup.start(LaunchSpec(command=f"cat {home}/marker", agent_id="a"))
    with trio.fail_after(20):
        await session.done.wait()
    assert "visible-home" in session.text()[0]


async def test_namespaces_profile_refuses_without_namespaces(tmp_path, no_namespaces, nursery):
    settings = make_settings(tmp_path / "home", supervisor__sandbox="namespaces")
    sup = Supervisor(settings, nursery)
    with pytest.raises(SpawnError, match="no namespaces"):
        sup.start(LaunchSpec(command="true", agent_id="a"))


@pytest.mark.skipif(not sandbox.host_root(),
                    reason="switching to an agent's uid needs a root daemon")
async def test_auto_without_namespaces_under_root_runs_each_agent_as_its_own_uid(
        tmp_path, no_namespaces, nursery):
    home, ws = tmp_path / "home", tmp_path / "ws"
    settings = make_settings(home, supervisor__sandbox="auto")
    home.chmod(0o700)
    ws.mkdir()
    ws.chmod(0o777)  # both agents' (the daemon gives no directory away)
    (home / "marker").write_text("visible-home")
    (home / "marker").chmod(0o600)
    # The agents' uids run pass_mgr from where it is installed: the standalone one, in a
    # checkout they can reach (else agent commands are refused, test_sandbox_user_mode).
    dist = Path(__file__).parents[1] / "dist" / "pass_mgr"
    if not os.access(dist / "pass_mgr", os.X_OK):
        pytest.skip("dist/pass_mgr is not built (make binary)")
    closed = [p for p in (dist, *dist.parents) if not os.stat(p).st_mode & 0o001]
    if closed:
        pytest.skip(f"{closed[0]} is closed to the agents' uids")
    sup = Supervisor(settings, nursery, base_env={"PATH": f"{dist}:/usr/bin:/bin"})
    uids = []
    for agent in ("a", "b", "a"):
        session = sup.start(LaunchSpec(command=f"id -u; cat {home}/marker; touch own",
                                       agent_id=agent, agent_workspace=str(ws), cwd=str(ws)))
        with trio.fail_after(20):
            await session.done.wait()
        out = session.text()[0]
        assert "visible-home" not in out, out
        uids.append(int(out.split()[0]))
    assert uids[0] == uids[2] != uids[1] and 0 not in uids
    assert (ws / "own").stat().st_uid in uids


# Issue 17: the probe is the sandbox itself, so a command gets exactly what the probe
# said, whoever runs it (the suite's unprivileged pass runs these as an ordinary user).

def _pcexec_with_user_namespaces_off(tmp_path, *command, sandbox="auto"):
    """``pcexec`` in a user namespace whose ``user.max_user_namespaces`` is 0: the host
    gives no namespaces, as on a hardened or containerised host (uid 0 in there is not
    the host's root: no agent uid to switch to)."""
    import shutil
    import subprocess

    from supervisor_helpers import BIN, base_env, give_workspace

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


def test_auto_refuses_for_real_in_one_line_when_the_host_refuses_namespaces(tmp_path):
    done = _pcexec_with_user_namespaces_off(tmp_path, "echo hello")
    assert done.returncode != 0 and "hello" not in done.stdout, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "paddedcell doctor" in lines[0], done.stderr
    (tmp_path / "x").mkdir()
    none = _pcexec_with_user_namespaces_off(tmp_path / "x", "echo hello", sandbox="none")
    assert (none.returncode, none.stdout) == (0, "hello\n"), none.stderr  # the opt-out


def test_namespaces_profile_refuses_for_real_in_one_line(tmp_path):
    done = _pcexec_with_user_namespaces_off(tmp_path, "echo hello", sandbox="namespaces")
    assert done.returncode != 0 and "hello" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_probe_and_a_command_agree(tmp_path, monkeypatch):
    """Whoever runs the suite (root or not, namespaces or not), the probe's answer is
    what a command under the strict profile gets."""
    import subprocess

    from supervisor_helpers import BIN, base_env, give_workspace

    monkeypatch.setattr(sandbox, "_AVAILABLE", {})
    ok, why = sandbox.available()
    ws = tmp_path / "ws"
    ws.mkdir()
    give_workspace(tmp_path / "home", "a1", ws)
    done = subprocess.run([str(BIN / "pcexec"), "--", "echo hello"], capture_output=True,
                          text=True, timeout=60, cwd=str(ws),
                          env=base_env(tmp_path / "home", AGENT_ID="a1", AGENT_WORKSPACE=str(ws),
                                       PADDEDCELL_SUPERVISOR_SANDBOX="namespaces"))
    assert (done.returncode == 0 and done.stdout == "hello\n") == ok, (why, done.stderr)


def _python(code: str, timeout: float):
    """``code`` in a fresh interpreter (a hang there fails the test, not the suite)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout)


def test_the_probe_does_not_hang_in_a_process_with_busy_threads(tmp_path):
    """pcexec hung about 1 run in 8: the probe forked through ctypes (GIL released) while
    a worker thread took the GIL, and the child waited for a thread it does not have."""
    code = (
        "import threading, sys\n"
        "from paddedcell.supervisor import sandbox\n"
        "stop = False\n"
        "def spin():\n"
        "    while not stop:\n"
        "        sum(range(200))\n"
        "threads = [threading.Thread(target=spin, daemon=True) for _ in range(3)]\n"
        "[t.start() for t in threads]\n"
        "for _ in range(60):\n"
        "    sandbox._AVAILABLE.clear()\n"
        "    sandbox.available()\n"
        "stop = True\n"
        "print('probed')\n")
    done = _python(code, 120)
    assert done.stdout == "probed\n", done.stderr


def test_a_stuck_probe_neither_hangs_its_caller_nor_holds_its_output(tmp_path):
    """Whatever makes a probe child stop (the GIL case above, or anything after it), the
    caller gets an answer within the probe's deadline and its stdout reaches EOF: the
    probe child holds none of the caller's fds and is killed with its group."""
    code = (
        "import time\n"
        "from paddedcell.supervisor import sandbox\n"
        "sandbox.PROBE_SECONDS = 1.0\n"
        "sandbox.enter = lambda plan: time.sleep(3600)\n"
        "print(sandbox.available(), flush=True)\n")
    done = _python(code, 30)
    assert "did not finish within 1 s" in done.stdout, (done.stdout, done.stderr)
