"""``paddedcell process ACTION [SESSION_ID]``: OpenClaw's ``process`` tool from a shell.

Talks to the daemon (started on demand). Prints the result text, or the whole
result JSON with ``--json``; exits 1 when the result says ``failed``.
"""

from __future__ import annotations

import json
import os
import sys

import click

from .. import config

ACTIONS = ("list", "poll", "log", "write", "send-keys", "submit", "paste", "kill", "clear",
           "remove")


@click.command("process", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("action", type=click.Choice(ACTIONS))
@click.argument("session_id", required=False)
@click.option("--data", help="write: text to send.")
@click.option("--eof", is_flag=True, help="write: close stdin afterwards (PTY: send EOF).")
@click.option("--key", "keys", multiple=True, help="send-keys: a key name (Enter, C-c, Up, ...); repeatable.")
@click.option("--hex", "hex_bytes", multiple=True, help="send-keys: a byte in hex (1b, 0x03); repeatable.")
@click.option("--literal", help="send-keys: literal text sent first.")
@click.option("--text", help="paste: the text.")
@click.option("--bracketed/--no-bracketed", default=True, show_default=True,
              help="paste: wrap in bracketed-paste markers.")
@click.option("--offset", type=int, help="log: first line (0-based).")
@click.option("--limit", type=int, help="log: number of lines (default: the last 200).")
@click.option("--timeout", "timeout_ms", type=int, help="poll: wait up to this many ms for output (≤ 30000).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result JSON.")
@click.option("--agent-id", help="Agent identity (default: $AGENT_ID).")
def process(action, session_id, data, eof, keys, hex_bytes, literal, text, bracketed, offset,
            limit, timeout_ms, as_json, agent_id) -> None:
    """List and drive background sessions started by pcexec."""
    from ..daemon.client import DaemonError, ensure_daemon
    from ..execspec.results import ToolResult

    from ..session.client import in_session, request
    from ..session.protocol import Refusal, process_answer_within

    inside = in_session()
    # Inside a session the session's agent is the only one (docs/design.md §1): AGENT_ID is not
    # consulted, and an explicit --agent-id for another agent is refused (exit 5).
    agent = agent_id if inside else (agent_id or os.environ.get("AGENT_ID"))
    if not agent and not inside:
        raise click.UsageError("sessions belong to an agent: set AGENT_ID or pass --agent-id")
    body: dict = {"action": action}
    if agent:
        body["agentId"] = agent
    optional = {"sessionId": session_id, "data": data, "literal": literal, "text": text,
                "offset": offset, "limit": limit, "timeout": timeout_ms,
                "keys": list(keys) or None, "hex": list(hex_bytes) or None}
    body.update({k: v for k, v in optional.items() if v is not None})
    if eof:
        body["eof"] = True
    if action == "paste":
        body["bracketed"] = bracketed
    if inside:
        try:
            result = request("process", timeout=process_answer_within(body), body=body)["result"]
        except Refusal as exc:
            click.echo(f"paddedcell process: {exc.message}", err=True)
            sys.exit(exc.exit_code)
        answer = ToolResult.from_json(result, "process")
        click.echo(json.dumps(result, ensure_ascii=False) if as_json else answer.text)
        sys.exit(answer.exit_code)
    try:
        client = ensure_daemon(config.load())
        result = client.call("POST", "/process", body, timeout=process_answer_within(body))
    except DaemonError as exc:
        click.echo(f"paddedcell process: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    answer = ToolResult.from_json(result, "process")
    click.echo(json.dumps(result, ensure_ascii=False) if as_json else answer.text)
    sys.exit(answer.exit_code)
