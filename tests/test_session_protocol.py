"""The session's identity rules in one place (paddedcell/session/protocol.py, issue 18).

``bind`` is what both the channel and the daemon ask before acting for a caller
inside an agent session; ``SESSION_ROUTES`` is the one list of routes such a
caller may use; ``EXIT_STATUS`` the one exit code <-> HTTP status table.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest
import trio

from paddedcell import exits
from paddedcell.session.protocol import (EXIT_STATUS, SESSION_ROUTES, Refusal, bind,
                                         exit_for_status, status_for_exit)
from supervisor_helpers import make_settings


@dataclass(frozen=True)
class S:
    agent_id: str | None = "a1"
    agent_workspace: str | None = "/ws/a1"
    session_key: str | None = "agent:a1:main"


A1 = S()
JOB_OPERATOR = {"rollback": "/r", "log": "/l", "restartCmd": "touch /x"}

#: (session, method, path, body) -> the bound body, or the refusal's exit code.
CASES = [
    # exec: the session's agent, workspace and conversation, whatever the body says
    (A1, "POST", "/exec", {"command": "ls"},
     {"command": "ls", "agentId": "a1", "agentWorkspace": "/ws/a1", "sessionKey": "agent:a1:main"}),
    (A1, "POST", "/exec", {"command": "ls", "agentId": "a1", "sessionKey": "other"},
     {"command": "ls", "agentId": "a1", "agentWorkspace": "/ws/a1", "sessionKey": "other"}),
    (A1, "POST", "/exec", {"command": "ls", "agentId": "victim"}, exits.FORBIDDEN),
    (A1, "POST", "/exec", {"command": "ls", "agentWorkspace": "/ws/victim"}, exits.FORBIDDEN),
    (A1, "POST", "/exec", ["ls"], exits.USAGE),
    (S(agent_id=None), "POST", "/exec", {"command": "ls"}, exits.FORBIDDEN),
    (None, "POST", "/exec", {"command": "ls"}, exits.FORBIDDEN),
    # process: the agent only (a conversation filter stays the caller's choice)
    (A1, "POST", "/process", {"action": "list"}, {"action": "list", "agentId": "a1"}),
    (A1, "POST", "/process", {"action": "list", "agentId": "victim"}, exits.FORBIDDEN),
    (S(agent_id=None), "POST", "/process", {"action": "list"}, exits.FORBIDDEN),
    # restart routes: the requester is the session's agent; the job's commands the operator's
    (A1, "POST", "/restart-cancel", {"requesterAgentId": "a1"},
     {"requesterAgentId": "a1", "requesterSessionKey": "agent:a1:main"}),
    (A1, "POST", "/restart-cancel", {"requesterAgentId": "victim"}, exits.FORBIDDEN),
    (A1, "POST", "/query-restart", {"job": JOB_OPERATOR}, exits.FORBIDDEN),
    (A1, "POST", "/query-restart", {"job": {"rollback": "/r", "log": "/l"}},
     {"job": {"rollback": "/r", "log": "/l", "session": {
         "workspace": "/ws/a1", "uid": os.getuid(), "gid": os.getgid()}},
      "requesterAgentId": "a1", "requesterSessionKey": "agent:a1:main"}),
    # ... whatever the agent says its job's confinement is
    (A1, "POST", "/query-restart", {"job": {"log": "/l", "session": {"workspace": "/", "uid": 0}}},
     {"job": {"log": "/l", "session": {"workspace": "/ws/a1", "uid": os.getuid(),
                                       "gid": os.getgid()}},
      "requesterAgentId": "a1", "requesterSessionKey": "agent:a1:main"}),
    (A1, "POST", "/query-restart", "not an object", exits.USAGE),
    (None, "POST", "/query-restart", {}, exits.FORBIDDEN),
    # open routes: nothing to bind, any caller
    (A1, "GET", "/healthz", {}, {}),
    (None, "GET", "/agents", {}, {}),
    # everything else is not an agent's
    (A1, "POST", "/workflow/open", {"agentId": "a1", "workflow": "w"}, exits.FORBIDDEN),
    (A1, "POST", "/vault/check-leak", {"text": "guess"}, exits.FORBIDDEN),
    (A1, "POST", "/restart-result", {}, exits.FORBIDDEN),
    (A1, "GET", "/notifications", {}, exits.FORBIDDEN),
]


@pytest.mark.parametrize("session, method, path, body, expected", CASES)
def test_bind_acts_as_the_sessions_agent_only(session, method, path, body, expected):
    if isinstance(expected, int):
        with pytest.raises(Refusal) as refused:
            bind(session, method, path, body)
        assert refused.value.exit_code == expected
        assert refused.value.status == status_for_exit(expected)
        assert "\n" not in refused.value.message
    else:
        before = repr(body)
        assert bind(session, method, path, body) == expected
        assert repr(body) == before  # the caller's body is not changed in place


def test_exit_codes_and_statuses_convert_through_one_table():
    for code, status in EXIT_STATUS:
        assert exit_for_status(status) == code and status_for_exit(code) == status
    assert exit_for_status(409) == exits.USAGE  # refused: nothing ran
    assert exit_for_status(423) == exits.USAGE
    assert exit_for_status(500) == exits.ERROR
    assert exit_for_status(None) == exits.ERROR
    assert status_for_exit(exits.NO_SUCH_KEY) is None


@pytest.mark.parametrize("refusal", [
    Refusal("the restart command already started", status=409),
    Refusal("not yours", exits.FORBIDDEN),
    Refusal("no such key", exits.NO_SUCH_KEY),
    Refusal("daemon unreachable", exits.ERROR),
])
def test_a_refusal_crosses_the_channel_with_its_exit_code_and_status(refusal):
    back = Refusal.from_answer(refusal.answer())
    assert (back.message, back.exit_code, back.status) == (
        refusal.message, refusal.exit_code, refusal.status)


def test_a_malformed_channel_answer_is_still_one_refusal():
    for answer in ({"ok": False}, {"ok": False, "exit": True, "status": "x", "error": 5}):
        refusal = Refusal.from_answer(answer)
        assert refusal.exit_code == exits.ERROR and refusal.status is None


async def _daemon_router(tmp_path, nursery):
    from paddedcell.daemon.app import DaemonContext, build_router

    settings = make_settings(tmp_path / "home", daemon__hygiene_check_seconds=3600,
                             supervisor__sandbox="none")
    ctx = DaemonContext(settings, nursery)
    return ctx, build_router(ctx, time.time())


async def test_the_route_allow_list_names_real_routes_and_the_client_agrees(tmp_path):
    from paddedcell.daemon.client import DaemonClient

    async with trio.open_nursery() as nursery:
        _ctx, router = await _daemon_router(tmp_path, nursery)
        routes = set(router.routes)
        # No stale entry: every route a session may use is one the daemon serves ...
        assert set(SESSION_ROUTES) <= routes
        # ... and bind refuses every other one, whatever the caller's session.
        for method, path in routes - set(SESSION_ROUTES):
            with pytest.raises(Refusal):
                bind(A1, method, path, {})
        # The daemon client goes through the channel for the "daemon" op's routes only
        # (exec and process have ops of their own).
        for key, route in SESSION_ROUTES.items():
            assert DaemonClient._channel_route(*key) == (route.op == "daemon")
            assert route.op in ("exec", "process", "daemon")
        nursery.cancel_scope.cancel()


async def test_the_daemon_forwards_its_sessions_requests_in_process(tmp_path):
    # No socket is bound here at all: an answer proves the daemon did not call itself.
    async with trio.open_nursery() as nursery:
        ctx, _router = await _daemon_router(tmp_path, nursery)
        forward = ctx.services["supervisor"].forward
        ws = tmp_path / "ws"
        ws.mkdir()
        body = bind(S(agent_workspace=str(ws)), "POST", "/exec",
                    {"command": "echo in-process", "awaitResults": True})
        result = await forward("POST", "/exec", body)
        assert result["details"]["status"] == "completed"
        assert "in-process" in result["content"][0]["text"]
        health = await forward("GET", "/healthz", {})
        assert health["ok"] is True
        # A domain error keeps its status; a bad body is refused like at the socket's edge.
        with pytest.raises(Refusal) as refused:
            await forward("POST", "/process", bind(A1, "POST", "/process", {"action": "bogus"}))
        assert refused.value.status == 400 and "process action" in refused.value.message
        with pytest.raises(Refusal) as refused:
            await forward("POST", "/exec", dict(body, timeoutSeconds=float("nan")))
        assert refused.value.status == 400 and refused.value.exit_code == exits.USAGE
        nursery.cancel_scope.cancel()
