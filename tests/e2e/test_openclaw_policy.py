"""(e) The host's exec policy applies to pcexec (the gateway has tools.exec.mode=deny).

Agent `denier` inherits deny: pcexec is blocked with the reason. Agent `asker`
overrides the mode to `ask` (allowlist + on-miss): its pcexec call needs an
approval through OpenClaw's plugin approval flow; a CLI turn has nobody to ask,
so nothing runs. Agent `main` overrides to full (the other scenarios).
"""

from __future__ import annotations

import json

from fake_model import ToolCall


def last_tool_result(model, case: str) -> str:
    for message in reversed(model.requests_for(case)[-1]["messages"]):
        if message.get("role") == "tool":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    raise AssertionError(f"no tool result reached the model in case {case}")


def test_e_exec_mode_deny_blocks_pcexec(stack):
    marker = stack.workspace / "e-ran"
    model = stack.model.model
    model.script("e", [ToolCall("pcexec", {"command": f"touch {marker}"})])
    stack.gateway.agent("case-e", "[case:e] touch a file", agent="denier")
    assert not marker.exists()
    result = last_tool_result(model, "e")
    assert "security=deny" in result, result


def test_ask_mode_needs_an_approval_and_unanswered_means_not_run(stack):
    marker = stack.workspace / "ask-ran"
    model = stack.model.model
    model.script("ask", [ToolCall("pcexec", {"command": f"touch {marker}"})])
    stack.gateway.agent("case-ask", "[case:ask] touch a file", agent="asker")
    assert not marker.exists()
    result = last_tool_result(model, "ask")
    assert "security=deny" not in result, result
    # OpenClaw's plugin approval flow answered: a CLI turn has nobody to ask.
    assert "Plugin approval" in result, result


def test_ask_mode_asks_about_a_10_kb_command(stack):
    # Issue 18: the approval description (reason + command) went over OpenClaw's 512
    # characters for any command longer than ~424, and the gateway rejected the request
    # instead of asking. Now the command is cut with an ellipsis and the approval is asked
    # for, like a short one's (unanswered in a CLI turn: nothing runs).
    marker = stack.workspace / "ask-long-ran"
    model = stack.model.model
    command = f"touch {marker}; : " + "x" * 10_000
    model.script("ask-long", [ToolCall("pcexec", {"command": command})])
    stack.gateway.agent("case-ask-long", "[case:ask-long] touch a file", agent="asker")
    assert not marker.exists()
    result = last_tool_result(model, "ask-long")
    # Asked (and, in a CLI turn, unanswered), not refused for its length.
    assert "must not have more than" not in result and "512 characters" not in result, result
    assert "security=deny" not in result and "Plugin approval" in result, result
