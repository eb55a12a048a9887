"""(e) The host's exec policy applies to pcexec: a gateway with tools.exec.mode=deny.

A second agent, `asker`, overrides the mode to `ask` (allowlist + on-miss):
its pcexec call needs an approval, nobody is there to give it, so nothing runs.
"""

from __future__ import annotations

import json

from fake_model import ToolCall

EXEC_MODE = "deny"
GATEWAY_CONFIG = {"agents": {"list": [
    {"id": "main", "default": True},
    {"id": "asker", "tools": {"exec": {"mode": "ask"}}},
]}}
PLUGIN_CONFIG = {"approvalTimeoutMs": 3000}


def last_tool_result(model, case: str) -> str:
    for message in reversed(model.requests_for(case)[-1]["messages"]):
        if message.get("role") == "tool":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    raise AssertionError(f"no tool result reached the model in case {case}")


def test_e_exec_mode_deny_blocks_pcexec(stack):
    marker = stack.root / "e-ran"
    model = stack.model.model
    model.script("e", [ToolCall("pcexec", {"command": f"touch {marker}"})])
    stack.gateway.agent("case-e", "[case:e] touch a file")
    assert not marker.exists()
    result = last_tool_result(model, "e")
    assert "security=deny" in result, result


def test_ask_mode_needs_an_approval_and_unanswered_means_not_run(stack):
    marker = stack.root / "ask-ran"
    model = stack.model.model
    model.script("ask", [ToolCall("pcexec", {"command": f"touch {marker}"})])
    stack.gateway.agent("case-ask", "[case:ask] touch a file", agent="asker")
    assert not marker.exists()
    result = last_tool_result(model, "ask")
    assert "security=deny" not in result, result
    # OpenClaw's plugin approval flow answered: a CLI turn has nobody to ask.
    assert "Plugin approval" in result, result
