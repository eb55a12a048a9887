"""The admin password in a message steered into a running turn never reaches the model.

OpenClaw's queue mode ``steer`` (its default) adds a message that arrives while a run
is busy to that run, between tool calls: no run-start hook (``before_agent_reply``,
``before_agent_run``) sees it. A ``chat.send`` message is persisted first (the plugin's
``before_message_write`` masks it and the vault locks), then dispatched: the plugin's
``before_dispatch`` recognises the masked copy and claims the message, so the running
turn never gets it. With ``chat.send``'s own ``queueMode: "steer"`` OpenClaw injects the
message before any dispatch hook; there only the masked copy reaches the model.

This file runs its own gateway (``messages.queue.mode: steer``) and daemon: it locks
the vault, which the shared stack's other tests must not see.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from conftest import ADMIN_PASSWORD, Stack, running_stack, venv_python
from fake_model import Reply, ToolCall
from harness import PaddedcellDaemon, wait_for


@pytest.fixture(scope="module")
def steer_stack(tmp_path_factory, openclaw_bin_path, fake_model):
    root = tmp_path_factory.mktemp("openclaw-steer")
    daemon = PaddedcellDaemon(root / "paddedcell-home", python=venv_python())
    with running_stack(root, openclaw_bin_path, fake_model, daemon, exec_mode="full",
                       extra_config={"messages": {"queue": {"mode": "steer"}}},
                       load_plugin_by_path=True) as s:
        yield s


def chat_send(stack: Stack, session: str, message: str, **extra) -> subprocess.CompletedProcess:
    params = {"sessionKey": f"agent:main:{session}", "message": message,
              "idempotencyKey": uuid.uuid4().hex, **extra}
    return stack.gateway.openclaw("gateway", "call", "chat.send", "--params", json.dumps(params),
                                  "--json", check=False)


@pytest.mark.parametrize("inline", [False, True], ids=["queue-config", "queueMode-param"])
def test_password_steered_into_a_running_turn_never_reaches_the_model(steer_stack, inline):
    stack = steer_stack
    stack.ensure_unlocked()  # the other case locked it
    model = stack.model.model
    session = f"steer-{int(inline)}"
    marker = stack.workspace / f"steer-tool-running-{int(inline)}"
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
    # The running turn's tool sleeps 6 s: give it that, then wait until the model calls stop.
    # (When the message is claimed mid-run, OpenClaw 2026.9.6 ends the running turn with
    # "The agent run failed before producing a reply."; otherwise it calls the model again.)
    time.sleep(8)
    settled = [len(model.requests)]

    def quiet() -> bool:
        now = len(model.requests)
        done, settled[0] = now == settled[0], now
        return done
    wait_for(quiet, 60, "the model calls to stop", interval=3)
    # No model request after the steered message carried the password.
    after = [json.dumps(body, ensure_ascii=False) for body in model.requests[start:]]
    assert all(ADMIN_PASSWORD not in text for text in after)
    if not inline:
        # Claimed at dispatch: the model never sees the message, not even masked (OpenClaw
        # hands before_dispatch the copy its transcript hook already masked).
        assert all(f"by the way ({session})" not in text for text in after)
    history = json.dumps(stack.gateway.history(session), ensure_ascii=False)
    assert ADMIN_PASSWORD not in history
    log = (stack.daemon.home / "security.log").read_text()
    assert "CRITICAL" in log and ADMIN_PASSWORD not in log
