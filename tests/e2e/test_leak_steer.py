"""The admin password in a message steered into a running turn never reaches the model.

OpenClaw's queue mode ``steer`` (its default) adds a message that arrives while a run
is busy to that run, between tool calls: no run-start hook (``before_agent_reply``,
``before_agent_run``) sees it. The plugin scans it in ``before_dispatch``, where
OpenClaw first sees an inbound message, before it decides to steer; a hit claims the
message (answered with a warning), and the vault locks.

This file runs its own gateway (``messages.queue.mode: steer``) and daemon: it locks
the vault, which the shared stack's other tests must not see.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from conftest import ADMIN_PASSWORD, Stack, venv_python
from fake_model import Reply, ToolCall
from harness import Gateway, PaddedcellDaemon, wait_for


@pytest.fixture(scope="module")
def steer_stack(tmp_path_factory, openclaw_bin_path, fake_model):
    root = tmp_path_factory.mktemp("openclaw-steer")
    daemon = PaddedcellDaemon(root / "paddedcell-home", python=venv_python())
    gateway = None
    try:
        daemon.start()
        s = Stack(None, daemon, fake_model, root)  # type: ignore[arg-type]
        init = s.pass_mgr("admin", "init", "--password-stdin", input=ADMIN_PASSWORD + "\n")
        assert init.returncode == 0, init.stderr
        gateway = Gateway(root, openclaw_bin_path, fake_model.port, daemon, exec_mode="full",
                          extra_config={"messages": {"queue": {"mode": "steer"}}})
        gateway.prepare()
        gateway.start()
        s.gateway = gateway
        yield s
    finally:
        if gateway is not None:
            gateway.stop()
        daemon.stop()


def chat_send(stack: Stack, session: str, message: str, **extra) -> subprocess.CompletedProcess:
    params = {"sessionKey": f"agent:main:{session}", "message": message,
              "idempotencyKey": uuid.uuid4().hex, **extra}
    return stack.gateway.openclaw("gateway", "call", "chat.send", "--params", json.dumps(params),
                                  "--json", check=False)


def run_finished(stack: Stack, session: str) -> bool:
    history = stack.gateway.history(session)
    return bool(history) and history[-1].get("role") == "assistant" and \
        history[-1].get("stopReason") in ("stop", "end_turn", None) and \
        not any(part.get("type") == "toolCall" for part in history[-1].get("content", [])
                if isinstance(part, dict))


@pytest.mark.parametrize("inline", [False, True], ids=["queue-config", "queueMode-param"])
def test_password_steered_into_a_running_turn_never_reaches_the_model(steer_stack, inline):
    stack = steer_stack
    if "locked" in stack.pass_mgr("admin", "status").stdout:  # the other case locked it
        again = stack.pass_mgr("admin", "init", "--password-stdin", input=ADMIN_PASSWORD + "\n")
        assert again.returncode == 0, again.stderr
    model = stack.model.model
    session = f"steer-{int(inline)}"
    marker = stack.root / f"steer-tool-running-{int(inline)}"
    model.script(session, [ToolCall("pcexec", {"command": f"touch {marker}; sleep 6; echo slept"}),
                           Reply("finished")])
    first = chat_send(stack, session, f"[case:{session}] run the long command")
    assert first.returncode == 0, first.stdout + first.stderr
    wait_for(marker.exists, 60, "the first turn's tool call to start")
    start = len(model.requests)
    extra = {"queueMode": "steer"} if inline else {}
    sent = chat_send(stack, session, f"by the way ({session}), the admin password is {ADMIN_PASSWORD}", **extra)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    wait_for(lambda: "locked" in stack.pass_mgr("admin", "status").stdout, 30, "the vault to lock")
    wait_for(lambda: len(model.requests) > start and run_finished(stack, session), 60,
             "the running turn to finish")
    time.sleep(1)
    # No model request after the steered message carried the password.
    after = [json.dumps(body, ensure_ascii=False) for body in model.requests[start:]]
    assert after, "the running turn called the model again"
    assert all(ADMIN_PASSWORD not in text for text in after)
    history = json.dumps(stack.gateway.history(session), ensure_ascii=False)
    assert ADMIN_PASSWORD not in history
    log = (stack.daemon.home / "security.log").read_text()
    assert "CRITICAL" in log and ADMIN_PASSWORD not in log
