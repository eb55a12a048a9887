"""Issue 10 in a real gateway: agent B's pcprocess can neither see nor drive agent A's
background session (sessions belong to the agent, and the conversation, that started them).
"""

from __future__ import annotations

import json
import re

from fake_model import ToolCall


def tool_results(model, case: str) -> list[str]:
    out = []
    for message in model.requests_for(case)[-1]["messages"]:
        if message.get("role") == "tool":
            content = message.get("content")
            out.append(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
    return out


def test_another_agents_pcprocess_cannot_see_or_drive_a_session(stack):
    stack.ensure_unlocked()  # a leak case before this one
    model = stack.model.model
    model.script("id-a", [ToolCall("pcexec", {"command": "echo started-by-main; sleep 120",
                                              "background": True})])
    stack.gateway.agent("case-id-a", "[case:id-a] start the long job")
    started = tool_results(model, "id-a")[-1]
    found = re.search(r"session ([A-Za-z0-9_-]{16,})", started)
    assert found, started
    sid = found.group(1)

    # Agent `asker` (another agent, another conversation) tries everything on it.
    model.script("id-b", [ToolCall("pcprocess", {"action": "list"}),
                          ToolCall("pcprocess", {"action": "log", "sessionId": sid}),
                          ToolCall("pcprocess", {"action": "write", "sessionId": sid,
                                                 "data": "hello\n"}),
                          ToolCall("pcprocess", {"action": "kill", "sessionId": sid})])
    stack.gateway.agent("case-id-b", "[case:id-b] look at the jobs", agent="asker")
    results = tool_results(model, "id-b")
    assert len(results) == 4, results
    assert all("started-by-main" not in r for r in results), results
    assert sid not in results[0], results[0]
    for result in results[1:]:
        assert re.search(r"No (active )?session found", result), result

    # Still running for its owner, untouched, who then ends it.
    model.script("id-a2", [ToolCall("pcprocess", {"action": "poll", "sessionId": sid}),
                           ToolCall("pcprocess", {"action": "log", "sessionId": sid}),
                           ToolCall("pcprocess", {"action": "kill", "sessionId": sid})])
    stack.gateway.agent("case-id-a", "[case:id-a2] how is the job?")
    polled, logged = tool_results(model, "id-a2")[-3:-1]
    assert "still running" in polled.lower(), polled
    assert "hello" not in logged, logged  # B's write never reached it
