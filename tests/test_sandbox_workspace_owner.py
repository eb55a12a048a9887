"""A root daemon gives away nothing it did not create (issue 19, supervisor/sandbox_plan.py).

It used to chown the whole workspace it was given, files inside too, to the agent's uid:
a config naming a shared directory, or a path a hostile agent got accepted, handed that
tree to the agent. Now a workspace the agent's uid cannot write is refused with one
line saying what to do, and every owner stays as it was.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from paddedcell.supervisor import sandbox
from supervisor_helpers import Daemon, needs_sandbox

pytestmark = [needs_sandbox(), pytest.mark.skipif(
    not sandbox.host_root(), reason="only a root daemon runs agents as their own uids")]

NOBODY = 65534


def _owners(top: Path) -> dict[str, tuple[int, int]]:
    found = {".": (top.lstat().st_uid, top.lstat().st_gid)}
    for path in top.rglob("*"):  # rglob does not follow the symlink to /etc
        st = path.lstat()
        found[str(path.relative_to(top))] = (st.st_uid, st.st_gid)
    return found


def test_a_workspace_the_agent_cannot_write_is_refused_and_keeps_every_owner():
    top = Path(tempfile.mkdtemp(prefix="pc-wsowner-", dir="/tmp"))
    home, shared = top / "home", top / "shared"
    home.mkdir(mode=0o700)
    shared.mkdir(mode=0o755)  # root's, as a config naming /srv or /etc would give
    (shared / "theirs.txt").write_text("another user's file\n")
    os.chown(shared / "theirs.txt", NOBODY, NOBODY)
    (shared / "sub").mkdir()
    (shared / "sub" / "root.txt").write_text("root's\n")
    (shared / "etc").symlink_to("/etc")
    before = _owners(shared)
    etc_before = {p: (os.lstat(p).st_uid, os.lstat(p).st_gid) for p in ("/etc", "/etc/passwd")}
    daemon = Daemon(home)
    try:
        def run(ws: Path, command: str) -> str:
            result = daemon.call("/exec", {"command": command, "agentId": "a1",
                                           "agentWorkspace": str(ws), "awaitResults": True,
                                           "timeoutSeconds": 30})
            return result["content"][0]["text"]

        out = run(shared, "touch pwned; echo ran")
        assert "ran" not in out and not (shared / "pwned").exists(), out
        fix = re.search(r"chown (\d+):(\d+) (\S+?);", out)
        assert fix and fix.group(3) == str(shared), out  # one line that says what to do
        assert _owners(shared) == before
        assert {p: (os.lstat(p).st_uid, os.lstat(p).st_gid) for p in etc_before} == etc_before

        # Prepared as the error says, a workspace of its own works, and stays the agent's.
        own = top / "own"
        own.mkdir(mode=0o700)
        subprocess.run(["chown", f"{fix.group(1)}:{fix.group(2)}", str(own)], check=True)
        out = run(own, "touch made && id -u && echo ok")
        assert "ok" in out and fix.group(1) in out, out
        assert (own / "made").stat().st_uid == int(fix.group(1))
        assert run(own, "echo again >> made && cat made").strip().endswith("again")
    finally:
        daemon.stop()
        shutil.rmtree(top, ignore_errors=True)
