"""Issue 19, played again by a hostile agent inside a default session (root daemon or not).

The agent owns its workspace, so it may make what the daemon later writes there a
symbolic link: the daemon, outside the sandbox and as itself, must not follow it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from supervisor_helpers import Daemon, give_workspace, init_vault, needs_sandbox

pytestmark = needs_sandbox()


def test_a_store_directory_linked_elsewhere_is_refused():
    """A new agent (no store yet) links ``.paddedcell`` to a directory it cannot write
    (the sandbox does not even show it) and generates a value: the daemon used to create
    ``secrets/a1`` and the store there, as itself (as root: in ``/etc``). Now one line
    says to remove the link, and once removed the store is made in the workspace."""
    top = Path(tempfile.mkdtemp(prefix="pc-rt19-", dir="/tmp"))
    try:
        top.chmod(0o711)  # the agent's uid reaches its workspace by path
        home, ws, elsewhere = top / "home", top / "ws", top / "elsewhere"
        home.mkdir(mode=0o700)
        ws.mkdir(mode=0o700)
        elsewhere.mkdir(mode=0o755)
        init_vault(home)
        give_workspace(home, "a1", ws)
        with Daemon(home) as daemon:
            def run(command: str) -> str:
                return daemon.call("/exec", {"command": command, "agentId": "a1",
                                             "agentWorkspace": str(ws), "awaitResults": True,
                                             "timeoutSeconds": 60})["content"][0]["text"]

            out = run(f"ln -s {elsewhere} .paddedcell && pass_mgr generate k1 2>&1; echo rc=$?")
            assert "rc=0" not in out and "symbolic link" in out, out
            assert list(elsewhere.iterdir()) == []
            out = run("rm .paddedcell && pass_mgr generate k1 2>&1; echo rc=$?")
            assert "rc=0" in out, out
        assert (ws / ".paddedcell" / "secrets" / "a1").is_dir() and not (ws / ".paddedcell").is_symlink()
    finally:
        shutil.rmtree(top, ignore_errors=True)
