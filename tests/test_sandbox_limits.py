"""Limits by cgroup v2 where the host delegates it (docs/design.md §1): a session's own
cgroup gets ``pids.max``, ``memory.max`` (no swap) and ``cpu.max`` from the limit
settings, beside the rlimits. The rlimit-only case (an ordinary user without delegation)
is tests/test_sandbox_attacks.py's fork bomb and memory hog.
"""

from __future__ import annotations

import os
import secrets
import shlex
import sys
import time
from pathlib import Path

import pytest

from paddedcell.supervisor import procs, sandbox
from supervisor_helpers import Daemon


def test_limit_settings_become_cgroup_files():
    files = procs.limit_files(("pids", "memory", "cpu"), processes=64,
                              memory_bytes=128 << 20, cpu_percent=50)
    assert files == {"pids.max": "64", "memory.max": str(128 << 20), "memory.swap.max": "0",
                     "cpu.max": "50000 100000"}
    # A controller the host does not offer, or a limit set to 0, writes nothing.
    assert procs.limit_files(("pids",), processes=0, memory_bytes=1 << 30,
                             cpu_percent=0) == {}


def test_the_supervisor_moves_into_a_leaf_to_hand_the_controllers_down(tmp_path):
    """cgroup v2 enables no controller for the children of a cgroup with processes of its
    own: the supervisor moves into a leaf, then turns them on for its session cgroups."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("\n")
    assert procs.enable_limit_controllers(tmp_path) == ("pids", "memory", "cpu")
    assert (tmp_path / procs.SUPERVISOR_LEAF / "cgroup.procs").read_text() == str(os.getpid())
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+pids +memory +cpu"
    (tmp_path / "cgroup.controllers").write_text("io\n")
    assert procs.enable_limit_controllers(tmp_path) == ()
    assert procs.enable_limit_controllers(None) == ()


CGROUP_ROOT = Path("/sys/fs/cgroup")


def _v2_controllers() -> list[str]:
    try:
        return (CGROUP_ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        return []


@pytest.mark.skipif(not sandbox.host_root() or not {"pids", "memory"} <= set(_v2_controllers()),
                    reason="needs root and a cgroup v2 hierarchy at /sys/fs/cgroup offering the "
                           "pids and memory controllers (a hybrid host binds them to cgroup v1)")
def test_a_fork_bomb_and_a_memory_hog_meet_the_session_cgroup(tmp_path):
    """Under a daemon in a delegated cgroup: the bomb meets pids.max, a hog spread over
    processes that each stay under RLIMIT_DATA meets memory.max (the kernel kills inside
    the session), and the daemon and another session carry on."""
    top = CGROUP_ROOT / f"paddedcell-test-{secrets.token_hex(4)}"
    top.mkdir()
    try:
        for parent in (CGROUP_ROOT, top):
            (parent / "cgroup.subtree_control").write_text("+pids +memory")
        (top / "daemon").mkdir()
        home, ws, wv = tmp_path / "home", tmp_path / "ws-a1", tmp_path / "ws-b"
        for d in (home, ws, wv):
            d.mkdir(mode=0o700)
        # The daemon starts in top/daemon (it inherits this process's cgroup for a moment).
        mine = "/" + Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1].lstrip("/")
        (top / "daemon" / "cgroup.procs").write_text(str(os.getpid()))
        try:
            daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX_PROCESSES="64",
                            PADDEDCELL_SUPERVISOR_SANDBOX_MEMORY_BYTES=str(128 << 20))
        finally:
            (CGROUP_ROOT / mine.lstrip("/") / "cgroup.procs").write_text(str(os.getpid()))
        try:
            bomb = daemon.call("/exec", {"command": "b(){ b | b & }; b; sleep 30",
                                         "agentId": "a1", "agentWorkspace": str(ws),
                                         "background": True})["details"]["sessionId"]
            time.sleep(3)
            sessions = [p for p in (top / "daemon").iterdir()
                        if p.is_dir() and p.name != procs.SUPERVISOR_LEAF]
            assert len(sessions) == 1, sessions
            assert (sessions[0] / "pids.max").read_text().strip() == "64"
            events = dict(line.split() for line in (sessions[0] / "pids.events").read_text()
                          .splitlines())
            assert int(events["max"]) > 0, events  # the bomb met the limit
            # Three processes of 100 MiB: each under RLIMIT_DATA (128 MiB), together over
            # memory.max (128 MiB): the kernel kills inside this session only.
            hog = ("import os\nfor _ in range(3):\n    if os.fork() == 0:\n"
                   "        b = b'x' * (100 << 20)\n        import time; time.sleep(5)\n"
                   "        os._exit(0)\nkilled = sum(os.WIFSIGNALED(os.wait()[1]) for _ in range(3))\n"
                   "print('HOG-KILLED', killed)\n")
            out = daemon.call("/exec", {"command": f"{shlex.quote(sys.executable)} -c "
                                                   f"{shlex.quote(hog)}",
                                        "agentId": "a1", "agentWorkspace": str(ws),
                                        "awaitResults": True, "timeoutSeconds": 60}
                              )["content"][0]["text"]
            assert "HOG-KILLED" in out and int(out.split("HOG-KILLED")[1].split()[0]) >= 1, out
            assert daemon.client.healthy()
            other = daemon.call("/exec", {"command": "echo other-alive", "agentId": "b",
                                          "agentWorkspace": str(wv), "awaitResults": True})
            assert "other-alive" in other["content"][0]["text"]
            daemon.call("/process", {"action": "kill", "sessionId": bomb, "agentId": "a1"})
        finally:
            daemon.stop()
    finally:
        deadline = time.monotonic() + 10
        for path in sorted(top.rglob("*"), key=lambda p: -len(p.parts)) + [top]:
            while path.is_dir():
                try:
                    path.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
