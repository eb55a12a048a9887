"""The one source of the agent tool schemas and the skill (src/paddedcell/agent_text)."""

from __future__ import annotations

import subprocess
import sys

from paddedcell import agent_text


def test_the_plugin_copies_are_generated_from_the_source():
    proc = subprocess.run([sys.executable, "-m", "paddedcell.agent_text", "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_check_names_a_drifted_copy(tmp_path, monkeypatch):
    drifted = tmp_path / "schemas.js"
    drifted.write_text(agent_text.render_schemas_js().replace('"command"', '"cmd"', 1))
    monkeypatch.setattr(agent_text, "PLUGIN_SCHEMAS_JS", drifted)
    monkeypatch.setattr(agent_text, "PLUGIN_SKILL_MD", tmp_path / "missing.md")
    assert agent_text.main(["--check"]) == 1
    assert agent_text.main(["--write"]) == 0
    assert drifted.read_text() == agent_text.render_schemas_js()
    assert (tmp_path / "missing.md").read_text() == agent_text.skill_markdown()


def test_exec_and_process_accept_unknown_fields_like_openclaw():
    for tool in ("pcexec", "pcprocess"):
        assert "additionalProperties" not in agent_text.parameters(tool)
    assert agent_text.parameters("pcexec")["required"] == ["command"]
    assert agent_text.parameters("pcprocess")["properties"]["action"]["enum"] == [
        "list", "poll", "log", "write", "send-keys", "submit", "paste", "kill", "clear", "remove"]


def test_the_secret_workflow_lines_come_from_the_skill():
    lines = agent_text.secret_workflow()
    for needle in ("$(pass_mgr get KEY)", "######", "pass_mgr list", "last step"):
        assert needle in lines
    assert lines in agent_text.skill_markdown()


def test_the_skill_outside_openclaw_drops_the_openclaw_only_tools():
    text = agent_text.skill_without_openclaw_tools()
    assert not text.startswith("---")
    assert "## What `######` means" in text and "## In short" in text
    assert "safe_restart`" not in text and "focus_workflow" not in text
