"""A root daemon gives an agent only a workspace that is plainly its own (issue 19,
supervisor/sandbox_plan.py).

It used to chown any workspace it was given, files inside too, to the agent's uid: a
config naming a shared directory, or a path a hostile agent got accepted, handed that tree
to the agent. Now a workspace with another user's file in it, or in a system tree, is
refused with one line saying what to do, and every owner stays as it was; root's own fresh
directory (``mkdir ws``, the demo, OpenClaw run as root) is handed over with no step.
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


def test_roots_own_workspace_is_handed_over_without_following_links_or_hard_links():
    """A first-time root user's workspace (root made it and everything in it) just works:
    the tree becomes the agent's, but a symlink to /etc is chowned as a link (/etc keeps
    its owner), a file with a second name elsewhere keeps root, and the store stays root's."""
    top = Path(tempfile.mkdtemp(prefix="pc-wsgive-", dir="/tmp"))
    home, ws = top / "home", top / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o755)
    (ws / "notes.txt").write_text("root's notes\n")
    (ws / "sub").mkdir()
    (ws / "etc").symlink_to("/etc")
    (top / "elsewhere").write_text("another name\n")
    os.link(top / "elsewhere", ws / "linked")
    etc_before = {p: (os.lstat(p).st_uid, os.lstat(p).st_gid) for p in ("/etc", "/etc/passwd")}
    daemon = Daemon(home)
    try:
        result = daemon.call("/exec", {"command": "echo more >> notes.txt && touch sub/new && id -u",
                                       "agentId": "a1", "agentWorkspace": str(ws),
                                       "awaitResults": True, "timeoutSeconds": 30})
        out = result["content"][0]["text"]
        uid = ws.stat().st_uid
        assert uid != 0 and str(uid) in out, out
        assert (ws / "notes.txt").read_text().endswith("more\n")
        assert (ws / "sub" / "new").stat().st_uid == uid
        assert (ws / "etc").lstat().st_uid == uid
        assert {p: (os.lstat(p).st_uid, os.lstat(p).st_gid) for p in etc_before} == etc_before
        assert (top / "elsewhere").stat().st_uid == 0
    finally:
        daemon.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_a_workspace_in_a_system_tree_is_never_handed_over():
    """Root's own directory under /run (a system tree) is refused, owners unchanged."""
    top = Path(tempfile.mkdtemp(prefix="pc-wssys-", dir="/tmp"))
    ws = Path(tempfile.mkdtemp(prefix="pc-wssys-", dir="/run"))
    home = top / "home"
    home.mkdir(mode=0o700)
    ws.chmod(0o755)
    (ws / "root.txt").write_text("root's\n")
    daemon = Daemon(home)
    try:
        result = daemon.call("/exec", {"command": "touch pwned; echo ran", "agentId": "a1",
                                       "agentWorkspace": str(ws), "awaitResults": True,
                                       "timeoutSeconds": 30})
        out = result["content"][0]["text"]
        assert "ran" not in out and "chown" in out and not (ws / "pwned").exists(), out
        assert ws.stat().st_uid == 0 and (ws / "root.txt").stat().st_uid == 0
    finally:
        daemon.stop()
        shutil.rmtree(top, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
