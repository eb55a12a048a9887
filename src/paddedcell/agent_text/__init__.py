"""What an agent is told about PaddedCell: tool schemas, descriptions and the skill.

One source for every agent surface. ``tool_schemas.json`` holds the parameter
schemas and descriptions of the agent tools; ``SKILL.md`` is the skill. The
OpenClaw plugin cannot import Python, and a plugin installed on its own cannot
reach into ``src/``, so its two copies are generated from these files:

    python -m paddedcell.agent_text --write    # openclaw-plugin/lib/schemas.js + skills/paddedcell/SKILL.md
    python -m paddedcell.agent_text --check    # exit 1 when a copy has drifted

(``tests/test_agent_text.py`` runs the check, so an edit made to a copy fails the
suite.) ``paddedcell mcp`` reads the same files as package data.

Imports only ``json``: the MCP server's first answer waits on this module.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMAS_FILE = HERE / "tool_schemas.json"
SKILL_FILE = HERE / "SKILL.md"

# Sections of the skill about OpenClaw-only tools, left out where those tools do not exist.
OPENCLAW_ONLY_SECTIONS = ("## Restarting the gateway: `safe_restart`", "## Focus workflows")


@lru_cache(maxsize=1)
def tool_schemas() -> dict[str, Any]:
    """``{"tools": {name: {"description"?, "parameters"}}}`` (a shared object: do not mutate)."""
    return json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))


def parameters(tool: str) -> dict[str, Any]:
    return tool_schemas()["tools"][tool]["parameters"]


def description(tool: str) -> str:
    return tool_schemas()["tools"][tool]["description"]


@lru_cache(maxsize=1)
def skill_markdown() -> str:
    return SKILL_FILE.read_text(encoding="utf-8")


def _sections(markdown: str) -> list[str]:
    """The skill body (front matter dropped) split before each ``## `` heading."""
    body = markdown
    if body.startswith("---\n"):
        body = body[body.index("\n---\n", 4) + 5:]
    parts: list[str] = []
    for line in body.splitlines(keepends=True):
        if line.startswith("## ") or not parts:
            parts.append(line)
        else:
            parts[-1] += line
    return parts


def secret_workflow() -> str:
    """The skill's "In short" bullets: the few lines every tool description carries."""
    for part in _sections(skill_markdown()):
        if part.startswith("## In short"):
            return part.split("\n", 1)[1].strip()
    raise LookupError(f"{SKILL_FILE} has no '## In short' section")


def skill_without_openclaw_tools() -> str:
    """The skill for agents outside OpenClaw (no safe_restart or focus_workflow tools)."""
    kept = [part for part in _sections(skill_markdown())
            if not part.startswith(OPENCLAW_ONLY_SECTIONS)]
    return "".join(kept).strip() + "\n"


# --- the OpenClaw plugin's generated copies -----------------------------------------

REPO = HERE.parents[2]
PLUGIN_SCHEMAS_JS = REPO / "openclaw-plugin" / "lib" / "schemas.js"
PLUGIN_SKILL_MD = REPO / "openclaw-plugin" / "skills" / "paddedcell" / "SKILL.md"

_JS_EXPORTS = (
    ("EXEC_PARAMETERS", "pcexec", "parameters"),
    ("PROCESS_PARAMETERS", "pcprocess", "parameters"),
    ("SAFE_RESTART_PARAMETERS", "safe_restart", "parameters"),
    ("WORKFLOW_PARAMETERS", "focus_workflow", "parameters"),
    ("PCEXEC_DESCRIPTION", "pcexec", "description"),
    ("PCPROCESS_DESCRIPTION", "pcprocess", "description"),
)


def render_schemas_js() -> str:
    lines = [
        "// GENERATED from src/paddedcell/agent_text/tool_schemas.json by",
        "// `python -m paddedcell.agent_text --write`; edit that file, not this one",
        "// (tests/test_agent_text.py fails when the two differ).",
        "// pcexec and pcprocess copy OpenClaw 2026.9.6's own `exec` and `process` schemas",
        "// (dist/bash-tools.schemas-*.mjs) field for field, so a model that knows exec knows",
        "// pcexec; like exec they accept and ignore unknown fields.",
        "",
    ]
    for name, tool, key in _JS_EXPORTS:
        value = json.dumps(tool_schemas()["tools"][tool][key], indent=2, ensure_ascii=False)
        lines.append(f"export const {name} = {value};")
        lines.append("")
    lines.append("export const PROCESS_ACTIONS = PROCESS_PARAMETERS.properties.action.enum;")
    return "\n".join(lines) + "\n"


def generated_copies() -> dict[Path, str]:
    return {PLUGIN_SCHEMAS_JS: render_schemas_js(), PLUGIN_SKILL_MD: skill_markdown()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["--write"], ["--check"]):
        print("usage: python -m paddedcell.agent_text --write | --check", file=sys.stderr)
        return 2
    stale = [path for path, text in generated_copies().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args == ["--check"]:
        for path in stale:
            print(f"{path} differs from src/paddedcell/agent_text; run: "
                  f"python -m paddedcell.agent_text --write", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated_copies().items():
        if path in stale:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0
