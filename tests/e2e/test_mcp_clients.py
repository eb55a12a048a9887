"""Real MCP clients against `paddedcell mcp` (issue 14), installed by scripts/mcp-clients-env.sh.

(a) The official TypeScript SDK client lists the tools and calls them: a secret comes
    back as ######, an unknown key runs nothing and is isError, a background run polled
    and logged through pcprocess is masked. Its callTool also validates every
    structuredContent against the tool's outputSchema.
(b) Codex CLI, offline against a scripted fake Responses-API model, given
    `paddedcell mcp` in its config.toml: the model calls pcexec with
    `$(pass_mgr get db)`, and its next request carries ###### and never the secret;
    for an unknown key it carries the vault's reason (Codex shows its model the
    structured result, so the reason must be there).
(c) Claude Code, offline against a scripted fake Messages-API model, given
    `paddedcell mcp` with --mcp-config: the same two cases (Claude Code shows its model
    the structured result on success and the text, flagged is_error, on an error).
Not skipped when the clients are missing: the fixture installs them and fails with the
reason if it cannot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_messages import FakeMessages  # noqa: E402
from fake_responses import FakeResponses  # noqa: E402
from mcp_stack import REPO, SECRET, start_stack  # noqa: E402

ENV_SCRIPT = REPO / "scripts" / "mcp-clients-env.sh"


@pytest.fixture(scope="module")
def clients() -> dict[str, str]:
    """PATH and PADDEDCELL_MCP_CLIENTS from scripts/mcp-clients-env.sh (installing when absent)."""
    try:
        out = subprocess.run(["bash", str(ENV_SCRIPT)], check=True, capture_output=True, text=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"{ENV_SCRIPT} failed (exit {exc.returncode}): {exc.stderr.strip()[-2000:]}", pytrace=False)
    env: dict[str, str] = {}
    for line in out.stdout.strip().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value.strip('"').replace("$PATH", os.environ.get("PATH", ""))
    assert {"PATH", "PADDEDCELL_MCP_CLIENTS"} <= set(env), out.stdout
    return env


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = start_stack(tmp_path_factory.mktemp("mcp-clients"))
    yield s
    s.daemon.stop()


def test_typescript_sdk_client(stack, clients):
    marker = stack.workspace / "sdk-unknown-key-ran"
    config = {"command": stack.paddedcell, "args": stack.server_command()[1:], "env": stack.server_env(),
              "marker": str(marker)}
    proc = subprocess.run(["node", str(REPO / "tests" / "e2e" / "mcp_sdk_client.mjs"), json.dumps(config)],
                          env={**os.environ, **clients}, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert SECRET not in proc.stdout

    assert out["server"]["name"] == "paddedcell"
    assert {tool["name"] for tool in out["tools"]} == {"pcexec", "pcprocess", "list_keys"}

    assert out["secret"]["isError"] is False
    assert out["secret"]["content"] == [{"type": "text", "text": "db=######"}]
    assert out["secret"]["structuredContent"]["aggregated"] == "db=######"

    assert not marker.exists(), "a command with an unresolvable secret must not run"
    assert out["unknown"]["isError"] is True
    assert "nosuchkey" in out["unknown"]["content"][0]["text"]
    assert "nosuchkey" in out["unknown"]["structuredContent"]["error"]

    assert out["started"]["structuredContent"]["status"] == "running"
    assert out["polls"][-1]["structuredContent"]["status"] == "completed"
    polled = "".join(p["content"][0]["text"] for p in out["polls"])
    assert "finish ######" in polled or "finish ######" in out["log"]["content"][0]["text"]
    assert "begin ######\nfinish ######" in out["log"]["content"][0]["text"]

    assert out["keys"]["structuredContent"]["keys"] == ["db"]
    assert "$(pass_mgr get KEY)" in out["prompt"]["messages"][0]["content"]["text"]


def run_codex(stack, clients, model: FakeResponses, prompt: str) -> subprocess.CompletedProcess:
    home = Path(tempfile.mkdtemp(prefix="codex-home-", dir=stack.root))
    codex_home = home / ".codex"
    codex_home.mkdir()
    server_env = ", ".join(f'{k} = {json.dumps(v)}' for k, v in stack.server_env().items())
    (codex_home / "config.toml").write_text(f"""
model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:{model.port}/v1"
wire_api = "responses"

[mcp_servers.paddedcell]
command = {json.dumps(stack.paddedcell)}
args = {json.dumps(stack.server_command()[1:])}
env = {{ {server_env} }}
required = true
default_tools_approval_mode = "approve"
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(clients, HOME=str(home), CODEX_HOME=str(codex_home), NO_COLOR="1")
    return subprocess.run(["codex", "exec", "--skip-git-repo-check", prompt], cwd=stack.workspace, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)


def tool_outputs(body: dict) -> list[str]:
    return [item.get("output") if isinstance(item.get("output"), str) else json.dumps(item.get("output"))
            for item in body.get("input", []) if item.get("type") == "function_call_output"]


def test_codex_shows_its_model_the_masked_result_and_never_the_secret(stack, clients):
    with FakeResponses() as model:
        model.script("secret", [{"namespace": "mcp__paddedcell", "name": "pcexec",
                                 "arguments": {"command": 'echo "db=$(pass_mgr get db)"'}}])
        proc = run_codex(stack, clients, model, "[case:secret] print the db password")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        requests = model.requests_for("secret")
        assert len(requests) == 2, "one request for the tool call, one after its result"
        namespaces = [t for t in requests[0].get("tools", []) if t.get("name") == "mcp__paddedcell"]
        assert namespaces and {t["name"] for t in namespaces[0]["tools"]} >= {"pcexec", "pcprocess"}
        outputs = tool_outputs(requests[1])
        assert outputs and "db=######" in outputs[-1], outputs
        for body in requests:
            assert SECRET not in json.dumps(body, ensure_ascii=False)
        assert SECRET not in proc.stdout + proc.stderr


def test_codex_hears_why_an_unknown_key_ran_nothing(stack, clients):
    marker = stack.workspace / "codex-unknown-key-ran"
    with FakeResponses() as model:
        model.script("unknown", [{"namespace": "mcp__paddedcell", "name": "pcexec",
                                  "arguments": {"command": f"touch {marker}; echo $(pass_mgr get nosuchkey)"}}])
        proc = run_codex(stack, clients, model, "[case:unknown] use the missing key")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert not marker.exists(), "a command with an unresolvable secret must not run"
        outputs = tool_outputs(model.requests_for("unknown")[-1])
        assert outputs and "no secret named 'nosuchkey'" in outputs[-1], outputs


def run_claude(stack, clients, model: FakeMessages, prompt: str) -> subprocess.CompletedProcess:
    home = Path(tempfile.mkdtemp(prefix="claude-home-", dir=stack.root))
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"paddedcell": {
        "type": "stdio", "command": stack.paddedcell, "args": stack.server_command()[1:],
        "env": stack.server_env()}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(clients, HOME=str(home), ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model.port}",
               ANTHROPIC_API_KEY="sk-ant-fake-local", ENABLE_TOOL_SEARCH="false", DISABLE_TELEMETRY="1",
               DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", MCP_TIMEOUT="30000",
               NO_COLOR="1")
    return subprocess.run(["claude", "-p", prompt, "--mcp-config", str(config), "--strict-mcp-config",
                           "--allowedTools", "mcp__paddedcell__pcexec", "--output-format", "json"],
                          cwd=stack.workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=180)


def tool_results(body: dict) -> list[dict]:
    return [block for message in body.get("messages", []) if isinstance(message.get("content"), list)
            for block in message["content"] if isinstance(block, dict) and block.get("type") == "tool_result"]


def test_claude_code_shows_its_model_the_masked_result_and_never_the_secret(stack, clients):
    with FakeMessages() as model:
        model.script("secret", [{"name": "mcp__paddedcell__pcexec",
                                 "input": {"command": 'echo "db=$(pass_mgr get db)"'}}])
        proc = run_claude(stack, clients, model, "[case:secret] print the db password")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        requests = model.requests_for("secret")
        assert len(requests) == 2, "one request for the tool call, one after its result"
        assert "mcp__paddedcell__pcexec" in {tool.get("name") for tool in requests[0]["tools"]}
        results = tool_results(requests[1])
        assert results and "db=######" in json.dumps(results[-1]), results
        for body in model.requests:
            assert SECRET not in json.dumps(body, ensure_ascii=False)
        assert SECRET not in proc.stdout + proc.stderr


def test_claude_code_hears_why_an_unknown_key_ran_nothing(stack, clients):
    marker = stack.workspace / "claude-unknown-key-ran"
    with FakeMessages() as model:
        model.script("unknown", [{"name": "mcp__paddedcell__pcexec",
                                  "input": {"command": f"touch {marker}; echo $(pass_mgr get nosuchkey)"}}])
        proc = run_claude(stack, clients, model, "[case:unknown] use the missing key")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert not marker.exists(), "a command with an unresolvable secret must not run"
        results = tool_results(model.requests_for("unknown")[-1])
        assert results and results[-1].get("is_error") is True, results
        assert "no secret named 'nosuchkey'" in json.dumps(results[-1]), results
