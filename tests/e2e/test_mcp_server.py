"""`paddedcell mcp` over raw stdio JSON-RPC against a real daemon (issue 14).

The real-client tests (TypeScript SDK, Codex) are in test_mcp_clients.py; these pin
the protocol details: the front's table against the SDK, masking in text, structured
content and progress, nothing run for an unresolvable key, cancellation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mcp_stack import AGENT, SECRET, McpProcess, start_stack, visible  # noqa: E402

from paddedcell import mcp as front_module  # noqa: E402


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = start_stack(tmp_path_factory.mktemp("mcp"))
    yield s
    s.daemon.stop()


@pytest.fixture
def server(stack):
    proc = McpProcess(stack.server_command(), stack.server_env())
    proc.initialize()
    yield proc
    proc.close()


def test_the_front_table_matches_the_sdk_for_every_protocol_version(stack):
    import mcp_types.version

    assert front_module.HANDSHAKE_PROTOCOL_VERSIONS == mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS
    for version in (*front_module.HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01"):
        proc = McpProcess(stack.server_command(), stack.server_env())
        answer = proc.initialize(version)
        expected = version if version != "1999-01-01" else front_module.HANDSHAKE_PROTOCOL_VERSIONS[-1]
        assert answer["result"]["protocolVersion"] == expected
        listed, _ = proc.request("tools/list")
        # Served by the SDK now (the front answers only the first tools/list).
        again, _ = proc.request("tools/list")
        assert listed["result"] == again["result"]
        assert proc.close() == 0
        err = proc.stderr()
        assert "answered a request differently" not in err, err


def test_a_discover_probe_is_answered_like_the_sdk_and_the_modern_era_serves(stack):
    import mcp_types.version

    assert front_module.MODERN_PROTOCOL_VERSIONS == mcp_types.version.MODERN_PROTOCOL_VERSIONS
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}
    proc = McpProcess(stack.server_command(), stack.server_env())
    found, _ = proc.request("server/discover", {"_meta": envelope})
    assert found["result"]["supportedVersions"] == ["2026-07-28"]
    result = proc.call("pcexec", {"command": "echo $(pass_mgr get db)"}, _meta=envelope)
    assert result["content"][0]["text"] == "######"
    # An initialize after the probe is the SDK's to refuse: the front answered the probe.
    late, _ = proc.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                          "clientInfo": {"name": "pytest", "version": "1"}})
    assert "error" in late
    assert proc.close() == 0
    err = proc.stderr()
    assert "answered a request differently" not in err, err


def test_a_differing_sdk_answer_is_reported_and_dropped(capsys):
    sent = []

    class Wire:
        def send(self, message):
            sent.append(message)

    front = front_module.Front.__new__(front_module.Front)
    front.wire, front.answered = Wire(), {7: {"protocolVersion": "2025-06-18"}}
    front.outgoing(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"protocolVersion": "2025-11-25"}}))
    assert sent == [] and "answered a request differently" in capsys.readouterr().err
    front.outgoing(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {}}))
    assert len(sent) == 1, "only the first answer to a pre-answered id is dropped"


def test_tools_schemas_and_prompt(server):
    from paddedcell import agent_text

    listed, _ = server.request("tools/list")
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert set(tools) == {"pcexec", "pcprocess", "list_keys"}
    assert tools["pcexec"]["inputSchema"] == agent_text.parameters("pcexec")
    assert tools["pcprocess"]["inputSchema"] == agent_text.parameters("pcprocess")
    assert agent_text.secret_workflow() in tools["pcexec"]["description"]
    for tool in tools.values():
        assert tool["outputSchema"]["required"] == ["status"]
    prompts, _ = server.request("prompts/list")
    assert [p["name"] for p in prompts["result"]["prompts"]] == ["paddedcell"]
    prompt, _ = server.request("prompts/get", {"name": "paddedcell"})
    assert "$(pass_mgr get KEY)" in prompt["result"]["messages"][0]["content"]["text"]


def test_a_secret_is_masked_in_text_and_structured_content(server):
    result = server.call("pcexec", {"command": 'echo "db=$(pass_mgr get db)"; printf %s "$(pass_mgr get db)" | base64'})
    assert result["isError"] is False
    assert result["content"][0]["text"].startswith("db=######")
    assert result["structuredContent"]["status"] == "completed"
    assert result["structuredContent"]["aggregated"].startswith("db=######")
    assert SECRET not in visible(result)
    import base64
    assert base64.b64encode(SECRET.encode()).decode() not in visible(result)


def test_an_unknown_key_runs_nothing_and_says_why_in_both_forms(server, stack):
    control, marker = stack.workspace / "known-key-ran", stack.workspace / "unknown-key-ran"
    server.call("pcexec", {"command": f"touch {control}; echo $(pass_mgr get db)"})
    assert control.exists(), "the marker test needs a place a command can write"
    result = server.call("pcexec", {"command": f"touch {marker}; echo $(pass_mgr get nosuchkey)"})
    assert not marker.exists()
    assert result["isError"] is True
    assert "no secret named 'nosuchkey'" in result["content"][0]["text"]
    assert result["structuredContent"]["failureKind"] == "secret-resolution"
    assert "no secret named 'nosuchkey'" in result["structuredContent"]["error"]


def test_a_refusal_is_an_error_with_its_reason(server, stack):
    marker = stack.workspace / "refused-ran"
    result = server.call("pcexec", {"command": f"touch {marker}; pass_mgr set {AGENT} /tmp k v adminpw"})
    assert not marker.exists()
    assert result["isError"] is True
    assert result["structuredContent"]["status"] == "refused"
    assert result["structuredContent"]["error"] == result["content"][0]["text"]
    assert "pass_mgr set" in result["content"][0]["text"]


def test_unknown_fields_are_ignored_like_openclaws_exec(server):
    # The schemas have no additionalProperties: false, and the daemon ignores unknown
    # fields, as OpenClaw's exec and process do.
    result = server.call("pcexec", {"command": "echo fine", "someFutureField": {"x": 1}})
    assert result["isError"] is False and result["content"][0]["text"] == "fine"
    listed = server.call("pcprocess", {"action": "list", "someFutureField": True})
    assert listed["isError"] is False


def test_progress_carries_redacted_tails(server):
    answer, notes = server.request("tools/call", {
        "name": "pcexec", "_meta": {"progressToken": "tok-1"},
        "arguments": {"command": "for i in 1 2 3 4 5 6; do echo $(pass_mgr get db) $i; sleep 0.3; done"}})
    progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
    # The redactor may hold back the last bytes of a live stream (a secret could be
    # starting there), so the tail lags a little: the first line shows in a later update.
    assert progress, "no progress notification for a 1.8 s command"
    assert all(p["progressToken"] == "tok-1" for p in progress)
    assert any("###### 1" in p["message"] for p in progress)
    assert SECRET not in json.dumps(notes) + visible(answer)
    assert [p["progress"] for p in progress] == sorted({p["progress"] for p in progress})


def wait_for_beat(beat: Path) -> None:
    """Until a command's heartbeat file has something in it (10 s at most)."""
    deadline = time.monotonic() + 10
    while not (beat.exists() and beat.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert beat.exists(), "the command did not start"


def settled_size(beat: Path) -> int:
    """The heartbeat file's size once two reads 0.5 s apart agree (10 s at most), 0.5 s
    before the caller reads it again: a command still beating makes it grow by then."""
    deadline = time.monotonic() + 10
    size = -1
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if beat.stat().st_size == size:
            break
        size = beat.stat().st_size
    time.sleep(0.5)
    return size


def test_cancellation_kills_the_commands_tree(server, stack):
    # A child of the command appends to a heartbeat file; after the cancellation the file
    # must stop growing. (Pids are no use: commands may run in a PID namespace.)
    beat, late = stack.workspace / "cancel-beat", stack.workspace / "cancel-late"
    server.send({"id": 9001, "method": "tools/call", "params": {"name": "pcexec", "arguments": {
        "command": f"(while :; do echo x >> {beat}; sleep 0.05; done) & sleep 30; touch {late}"}}})
    wait_for_beat(beat)
    server.send({"method": "notifications/cancelled", "params": {"requestId": 9001, "reason": "test"}})
    size = settled_size(beat)
    assert beat.stat().st_size == size, "the cancelled command's child still runs"
    assert not late.exists()
    # The connection still serves; the cancelled request got no answer.
    after = server.call("pcexec", {"command": "echo after"})
    assert after["content"][0]["text"] == "after"


def test_a_background_run_is_polled_and_logged_masked(server):
    started = server.call("pcexec", {"command": "echo start $(pass_mgr get db); sleep 0.5; echo end $(pass_mgr get db)",
                                     "background": True})
    assert started["structuredContent"]["status"] == "running"
    session = started["structuredContent"]["sessionId"]
    deadline = time.monotonic() + 20
    polled = {"structuredContent": {"status": "running"}}
    seen = []
    while polled["structuredContent"]["status"] == "running" and time.monotonic() < deadline:
        polled = server.call("pcprocess", {"action": "poll", "sessionId": session, "timeout": 2000})
        seen.append(polled)
    assert polled["structuredContent"]["status"] == "completed", polled
    assert "start ######" in "".join(p["content"][0]["text"] for p in seen)
    logged = server.call("pcprocess", {"action": "log", "sessionId": session})
    assert "end ######" in logged["content"][0]["text"]
    assert SECRET not in visible(seen) + visible(logged)
    missing = server.call("pcprocess", {"action": "poll", "sessionId": "nope"})
    assert "nope" in missing["content"][0]["text"]


def test_list_keys_gives_names_only(server):
    result = server.call("list_keys", {})
    assert result["structuredContent"] == {"status": "completed", "keys": ["db"]}
    assert SECRET not in visible(result)


def test_no_identity_is_a_usage_error(stack):
    env = {k: v for k, v in stack.server_env().items()}
    proc = subprocess.run([stack.paddedcell, "mcp"], env=env, input=b"", capture_output=True, timeout=30)
    assert proc.returncode == 2
    assert b"--agent-id ID --agent-workspace DIR" in proc.stderr


def test_identity_from_the_environment(stack):
    env = {**stack.server_env(), "AGENT_ID": AGENT, "AGENT_WORKSPACE": str(stack.workspace)}
    proc = McpProcess([stack.paddedcell, "mcp"], env)
    try:
        proc.initialize()
        assert proc.call("list_keys", {})["structuredContent"]["keys"] == ["db"]
    finally:
        proc.close()


@pytest.fixture
def own_stack(tmp_path_factory):
    """A stack of its own: these tests lock its vault. A short root: the daemon's socket
    lies under it, and a test's name in the path took it past a unix socket's 107 bytes."""
    s = start_stack(tmp_path_factory.mktemp("own"))
    yield s
    s.daemon.stop()


def test_the_admin_password_in_output_is_masked_everywhere_and_locks_the_vault(own_stack):
    from mcp_stack import ADMIN_PASSWORD

    leaked = own_stack.workspace / "found.txt"
    leaked.write_text(f"old notes: {ADMIN_PASSWORD} 😀{ADMIN_PASSWORD}\n")
    proc = McpProcess(own_stack.server_command(), own_stack.server_env())
    try:
        proc.initialize()
        result = proc.call("pcexec", {"command": f"cat {leaked}"})
        assert ADMIN_PASSWORD not in visible(result)
        assert result["content"][0]["text"] == "old notes: ###### 😀######"
        assert result["structuredContent"]["aggregated"].startswith("old notes: ###### 😀######")
        after = proc.call("pcexec", {"command": "echo $(pass_mgr get db)"})
        assert after["isError"] is True and "lock" in after["content"][0]["text"].lower(), after
    finally:
        proc.close()


def test_the_admin_password_in_a_call_runs_nothing_and_locks_the_vault(own_stack):
    from mcp_stack import ADMIN_PASSWORD

    marker = own_stack.workspace / "admin-call-ran"
    proc = McpProcess(own_stack.server_command(), own_stack.server_env())
    try:
        proc.initialize()
        result = proc.call("pcexec", {"command": f"touch {marker}; echo {ADMIN_PASSWORD}"})
        assert not marker.exists()
        assert result["isError"] is True and result["structuredContent"]["status"] == "refused"
        assert ADMIN_PASSWORD not in visible(result)
        after = proc.call("pcexec", {"command": "echo $(pass_mgr get db)"})
        assert after["isError"] is True and "lock" in after["content"][0]["text"].lower(), after
    finally:
        proc.close()


def test_the_model_cannot_choose_another_identity(server, stack):
    from mcp_stack import ADMIN_PASSWORD

    victim_ws = stack.root / "victim-workspace"
    victim_ws.mkdir(exist_ok=True)
    put = stack.daemon.run_cli(str(Path(stack.python).parent / "pass_mgr"), "set", "victim", str(victim_ws),
                               "vk", "victim-secret-Zz91", ADMIN_PASSWORD)
    assert put.returncode == 0, put.stderr
    marker = victim_ws / "victim-ran"
    result = server.call("pcexec", {"command": f"touch {marker}; echo $(pass_mgr get vk)",
                                    "agentId": "victim", "agentWorkspace": str(victim_ws),
                                    "sessionKey": "victim:main"})
    assert not marker.exists()
    assert result["isError"] is True
    assert f"for agent {AGENT}" in result["content"][0]["text"]
    assert "victim-secret-Zz91" not in visible(result)


def test_a_later_server_process_reaches_an_earlier_background_run(stack):
    # Codex starts a server per run; the background session belongs to the agent, not the process.
    first = McpProcess(stack.server_command(), stack.server_env())
    first.initialize()
    started = first.call("pcexec", {"command": "sleep 1; echo late $(pass_mgr get db)", "background": True})
    assert first.close() == 0
    session = started["structuredContent"]["sessionId"]
    second = McpProcess(stack.server_command(), stack.server_env())
    try:
        second.initialize()
        deadline = time.monotonic() + 20
        polled = {"structuredContent": {"status": "running"}}
        while polled["structuredContent"]["status"] == "running" and time.monotonic() < deadline:
            polled = second.call("pcprocess", {"action": "poll", "sessionId": session, "timeout": 2000})
        assert polled["structuredContent"]["status"] == "completed", polled
        logged = second.call("pcprocess", {"action": "log", "sessionId": session})
        assert "late ######" in logged["content"][0]["text"]
    finally:
        second.close()


def test_stray_stdout_cannot_reach_the_wire(server):
    # fd 1 points at stderr while serving: a library's print cannot corrupt the protocol.
    pid = server.proc.pid
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2")
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"


def test_a_client_that_leaves_ends_its_foreground_command(stack):
    beat = stack.workspace / "leave-beat"
    proc = McpProcess(stack.server_command(), stack.server_env())
    proc.initialize()
    proc.send({"id": 77, "method": "tools/call", "params": {"name": "pcexec", "arguments": {
        "command": f"(while :; do echo x >> {beat}; sleep 0.05; done) & sleep 30"}}})
    wait_for_beat(beat)
    assert proc.close() == 0  # stdin closed: the client is gone
    size = settled_size(beat)
    assert beat.stat().st_size == size, "the command outlived the client that started it"


@pytest.mark.parametrize("strings, spans, expected", [
    (["ab PW cd", "x", "PW"], [[3, 5], [11, 13]], ["ab ###### cd", "x", "######"]),
    (["😀PW", "PW"], [[2, 4]], ["😀######", "PW"]),            # UTF-16 offsets past an astral char
    (["aPW", "Wb"], [[1, 5]], ["a######", "######b"]),          # a run across two strings
    (["a", "", "b"], "nonsense", ["######", "", "######"]),     # spans that make no sense: mask all
    (["abc"], [[1, 99]], ["######"]),                             # out of range: mask all
    (["abcdefgh"], [[1, 5], [3, 7]], ["######"]),                 # overlapping: mask all
    (["abcdefgh"], [[5, 7], [1, 3]], ["######"]),                 # unsorted: mask all
    (["😀x"], [[1, 3]], ["######"]),                              # inside a surrogate pair: mask all
])
def test_mask_joined(strings, spans, expected):
    from paddedcell.mcp.server import _mask_joined

    assert _mask_joined(strings, spans) == expected
