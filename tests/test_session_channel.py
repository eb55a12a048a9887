"""What crosses a session's channel keeps its meaning (issue 18).

Inside an agent session the daemon's answers reach ``safe-restart`` and the
daemon client through the session's channel when the sandbox hides the
daemon's socket, and straight from the socket without the sandbox; either way
a refusal keeps its HTTP status. ``safe-restart``'s Ctrl-C path waits for the
409 "the restart command already started / belongs to another agent": through
the channel it used to arrive as exit 1 with no status, so it re-raised.
"""

from __future__ import annotations

import shlex
import sys
import time

import pytest

from paddedcell.supervisor import sandbox
from supervisor_helpers import Daemon, give_workspace, init_vault

ADMIN = "admin-pw-for-tests-1"

CANCEL = """
import os, sys, time
from paddedcell.cli.safe_restart import Session
from paddedcell.daemon.client import DaemonClient, DaemonError
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
s = Session(DaemonClient(), "a1", "agent:a1:main", {"rollback": "/bin/true", "log": sys.argv[2]})
try:
    print("CANCELLED", s.cancel("Ctrl-C"))
except DaemonError as exc:
    print("REFUSED", exc.status, exc.exit_code, exc.message)
"""


@pytest.mark.parametrize("profile", ["none", "auto"])
def test_a_409_reaches_safe_restart_inside_a_session(tmp_path, profile):
    if profile == "auto" and not sandbox.available()[0]:
        pytest.skip("no unprivileged user namespaces here: " + sandbox.available()[1])
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    init_vault(home, ADMIN)
    give_workspace(home, "a1", ws, supervisor__sandbox=profile)
    # In the agent's workspace: the sandbox shows the session nothing else of tmp_path.
    script, go = ws / "cancel.py", ws / "go"
    script.write_text(CANCEL)
    daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX=profile)
    try:
        command = " ".join(shlex.quote(str(a)) for a in
                           (sys.executable, script, go, ws / "restart.log"))
        sid = daemon.call("/exec", {"command": command, "agentId": "a1",
                                    "agentWorkspace": str(ws), "background": True}
                          )["details"]["sessionId"]
        # The operator's restart is pending; a1 may not cancel it: 409.
        daemon.call("/query-restart", {"requesterAgentId": "operator",
                                       "requesterSessionKey": "op:1"})
        go.write_text("")
        text = ""
        deadline = time.monotonic() + 60
        while "REFUSED" not in text and "CANCELLED" not in text:
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
            text = daemon.call("/process", {"action": "log", "sessionId": sid,
                                            "agentId": "a1"})["content"][0]["text"]
        assert "REFUSED 409 2 the pending restart belongs to agent operator" in text, text
    finally:
        daemon.stop()
