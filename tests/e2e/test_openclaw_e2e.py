"""PaddedCell inside a real OpenClaw 2026.9.6 gateway, driven by a scripted model.

Scenarios (issue 6): (a) a secret used through pcexec reaches neither the model
nor the transcript; (b) an unknown key runs nothing and the vault's message
reaches the model; (c) safe_restart ends with "restart 结束了，我们继续" in the
working session; (d) the admin password in a user message locks the vault.
Exec policy deny (e) is in test_openclaw_policy.py (its own gateway).
"""

from __future__ import annotations

import json
import time

from conftest import ADMIN_PASSWORD, SECRET
from fake_model import Reply, ToolCall
from harness import SetupError, wait_for


def tool_messages(body: dict) -> list[str]:
    out = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            content = message.get("content")
            out.append(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
    return out


def user_texts(messages: list[dict]) -> list[str]:
    """The text of every user message (a transcript or a model request)."""
    out = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        out.append(content if isinstance(content, str) else "")
    return out


def test_plugin_loads_clean(stack):
    proc = stack.gateway.openclaw("plugins", "inspect", "paddedcell", "--runtime", "--json")
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    plugin = report.get("plugin", report)
    assert plugin.get("status") == "loaded", plugin.get("status")
    assert not plugin.get("error")
    assert set(plugin.get("toolNames", [])) >= {"pcexec", "pcprocess", "safe_restart", "focus_workflow"}
    diagnostics = [d for d in report.get("diagnostics", []) if d.get("level") in ("error", "warn")]
    assert diagnostics == []


def test_a_secret_is_masked_for_the_model_and_the_transcript(stack):
    model = stack.model.model
    model.script("a", [ToolCall("pcexec", {"command": 'echo "db=$(pass_mgr get db)"'})])
    stack.gateway.agent("case-a", "[case:a] print the db password")

    requests = model.requests_for("a")
    assert len(requests) == 2, "one request for the tool call, one after its result"
    # The plugin's skill is offered to the model.
    assert "<name>paddedcell</name>" in requests[0]["messages"][0]["content"]
    after = requests[1]
    results = tool_messages(after)
    assert results and "db=######" in results[-1]
    assert SECRET not in json.dumps(after, ensure_ascii=False)

    transcript = json.dumps(stack.gateway.history("case-a"), ensure_ascii=False)
    assert "db=######" in transcript
    assert SECRET not in transcript


def test_b_unknown_key_runs_nothing_and_the_model_hears_why(stack):
    marker = stack.workspace / "b-ran"
    model = stack.model.model
    model.script("b", [ToolCall("pcexec", {"command": f"touch {marker}; echo $(pass_mgr get nosuchkey)"})])
    stack.gateway.agent("case-b", "[case:b] use the missing key")

    assert not marker.exists(), "a command with an unresolvable secret must not run at all"
    results = tool_messages(model.requests_for("b")[-1])
    assert results and "nosuchkey" in results[-1]
    assert "no secret named" in results[-1]


def test_focus_workflow_answers_other_sessions_busy_without_the_model(stack):
    model = stack.model.model
    model.script("focus-open", [ToolCall("focus_workflow", {"action": "open", "workflow": "release"})])
    model.script("focus-close", [ToolCall("focus_workflow", {"action": "close", "workflow": "release"})])
    stack.gateway.agent("case-focus", "[case:focus-open] focus on the release")
    try:
        before = len(model.requests)
        answer = stack.gateway.agent("case-other", "[case:other] are you free?")
        texts = [p.get("text") for p in answer["result"]["payloads"]]
        assert texts == ["在忙，无法应答"], texts
        assert len(model.requests) == before, "the model must not be called for a rejected run"
        # The session that opened the workflow is still served.
        stack.gateway.agent("case-focus", "[case:focus-close] done, close it")
    finally:
        stack.daemon.run_cli(stack.daemon.python, "-c",
                             "from paddedcell.daemon.client import DaemonClient;"
                             "DaemonClient().call('POST','/workflow/close',{'agentId':'main'})")
    assert any("closed" in text for text in tool_messages(model.requests_for("focus-close")[-1]))


def test_c_safe_restart_resumes_the_working_session(stack):
    (stack.workspace / "rollback.sh").write_text("#!/bin/sh\necho rolled back\n")
    (stack.workspace / "rollback.sh").chmod(0o755)
    model = stack.model.model
    model.script("c", [ToolCall("safe_restart", {"rollback": "rollback.sh", "log": "restart.log"})])
    readies = stack.gateway.output().count("gateway ready")
    stack.gateway.agent("case-c", "[case:c] restart the gateway when everyone is idle")

    results = tool_messages(model.requests_for("c")[-1])
    assert results and "Restart scheduled" in results[-1]

    def resumed() -> bool:
        try:
            history = stack.gateway.history("case-c")
        except SetupError:  # the gateway is restarting
            return False
        return any("restart 结束了，我们继续" in text for text in user_texts(history))
    wait_for(resumed, 180, "the restart notification in the working session", interval=2)
    # The gateway really restarted (in process: same PID) before the session was told.
    assert stack.gateway.output().count("gateway ready") > readies
    assert stack.gateway.proc.poll() is None
    job_log = (stack.workspace / "restart.log").read_text()
    assert "rolled back" not in job_log, job_log
    # Delivered as a turn of that session: the model was asked to continue.
    assert any("restart 结束了，我们继续" in text for body in model.requests for text in user_texts(body["messages"]))
    # Acknowledged: nothing left for the next gateway to deliver twice.
    pending = stack.daemon.run_cli(stack.daemon.python, "-c",
                                   "from paddedcell.daemon.client import DaemonClient;"
                                   "import json;print(json.dumps(DaemonClient().call('GET','/notifications')))")
    assert json.loads(pending.stdout)["notifications"] == []


def test_d_admin_password_in_a_user_message_locks_the_vault(stack):
    before = stack.pass_mgr("admin", "status")
    assert "ready" in before.stdout + before.stderr
    model = stack.model.model
    start = len(model.requests)
    stack.gateway.agent("case-d", f"[case:d] the admin password is {ADMIN_PASSWORD}, set things up")

    status = stack.pass_mgr("admin", "status")
    assert "locked" in (status.stdout + status.stderr), status
    assert all(ADMIN_PASSWORD not in json.dumps(body, ensure_ascii=False) for body in model.requests[start:])
    time.sleep(0.5)
    transcript = json.dumps(stack.gateway.history("case-d"), ensure_ascii=False)
    assert ADMIN_PASSWORD not in transcript
    log = (stack.daemon.home / "security.log").read_text()
    assert "CRITICAL" in log and ADMIN_PASSWORD not in log


def test_admin_password_in_a_core_tool_result_never_reaches_the_model(stack):
    # Runs after (d): the vault is locked, and the daemon still recognises the password.
    notes = stack.workspace / "notes.txt"
    notes.write_text(f"admin: {ADMIN_PASSWORD}\n")
    model = stack.model.model
    model.script("f", [ToolCall("read", {"path": str(notes)})])
    stack.gateway.agent("case-f", "[case:f] read my notes")
    requests = model.requests_for("f")
    assert len(requests) == 2
    assert ADMIN_PASSWORD not in json.dumps(requests[1], ensure_ascii=False)
    assert "admin: ######" in "\n".join(tool_messages(requests[1]))
    transcript = json.dumps(stack.gateway.history("case-f"), ensure_ascii=False)
    assert ADMIN_PASSWORD not in transcript


def test_admin_password_in_the_model_reply_is_masked_in_the_transcript(stack):
    # Runs after (d): the vault is locked, and the daemon still recognises the password.
    stack.model.model.script("g", [Reply(f"Sure: the admin password is {ADMIN_PASSWORD} .")])
    stack.gateway.agent("case-g", "[case:g] what is the admin password?")
    # Only the word is masked. (The reply an `openclaw agent` caller gets back is not
    # rewritable by a plugin in 2026.9.6; channel deliveries are, by message_sending.)
    history = stack.gateway.history("case-g")
    assert ADMIN_PASSWORD not in json.dumps(history, ensure_ascii=False)
    assert any(m.get("role") == "assistant" and "the admin password is ######" in json.dumps(m, ensure_ascii=False)
               for m in history)
