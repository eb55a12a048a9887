"""``paddedcell mcp``: PaddedCell's exec as a stdio MCP server, for any agent that speaks MCP.

Claude Code, Codex CLI, Cursor, Cline and Goose take tools over the Model Context
Protocol. This server gives them ``pcexec`` and ``pcprocess`` (OpenClaw's ``exec`` and
``process``, secrets resolved from ``$(pass_mgr get KEY)`` and masked as ``######``),
``list_keys`` (key names only) and the ``paddedcell`` skill as a prompt. It is a client of
the daemon, like the OpenClaw plugin: the secret flow (resolve, refuse, redact) happens
there and nowhere else; this process only translates.

Which server library, weighed:

- *Hand-written JSON-RPC.* Small today, but the protocol moved twice in a year (the
  2025-11-25 handshake, the 2026-07-28 per-request envelope that SDK 2.x serves beside
  it); version negotiation, cancellation, progress tokens and the two eras are the SDK's
  job and its tests'. Not this.
- *FastMCP* (``MCPServer`` in SDK 2.x). Tools are Python functions whose schemas it
  derives and whose arguments it validates and converts. Our input schemas must be
  OpenClaw's, byte for byte, from the one file the plugin is generated from
  (:mod:`paddedcell.agent_text`), unknown fields accepted and ignored as exec does; and
  our results are already in their final shape. FastMCP would stand between both.
- *The low-level* ``mcp.server.lowlevel.Server``. Tools are declared as data (our JSON
  schemas verbatim), ``tools/call`` receives the raw arguments and returns a
  ``CallToolResult`` we build; progress and cancellation come from the SDK's dispatcher.

So we use the low-level server. One thing it cannot do is start fast: ``import mcp``
takes about 0.9 s on a 2-core machine (pydantic models, starlette), and Codex gives a
server that is not marked ``required`` about one second to answer ``initialize`` before
running the turn without it, silently. So this module is a front that imports nothing
heavy: it takes the stdio wire, answers ``initialize`` and the first ``tools/list`` (or a
2026-07-28 client's ``server/discover`` probe: Claude Code falls back to ``initialize``
when the probe is slow, and the SDK, which saw the probe first, then refuses every
un-enveloped request) from a table at once, and imports the SDK meanwhile. Each
pre-answered request is then replayed into the SDK, which builds its session state from it as usual; its own answer
is compared with ours (a difference is logged to stderr) and dropped. Everything else
the SDK answers. ``tests/e2e/test_mcp_server.py`` checks that the table and the SDK agree
for every protocol version, and ``benchmarks/mcp.py`` measures the start-up.

Stdio hygiene: the wire is moved to private descriptors and fd 0/1 point at
``/dev/null``/stderr, so nothing this process or a library prints can corrupt the
protocol; the daemon, when this server starts it, detaches from our stdio.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from typing import Any

from .. import __version__

SERVER_NAME = "paddedcell"
# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS of the SDK we pin (checked by the tests).
HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# mcp_types.version.MODERN_PROTOCOL_VERSIONS: no handshake; a client (Claude Code) probes
# with ``server/discover`` first and falls back to ``initialize`` when that is slow.
MODERN_PROTOCOL_VERSIONS = ("2026-07-28",)
ENVELOPE = "io.modelcontextprotocol/"
IMPORT_AFTER_SECONDS = 1.0
CAPABILITIES = {"prompts": {"listChanged": False}, "tools": {"listChanged": False}}


def instructions() -> str:
    from ..agent_text import secret_workflow

    return ("PaddedCell runs shell commands whose output cannot show your secrets.\n"
            + secret_workflow())


# Results are objects with a status; everything else depends on the status and the
# action (docs/design.md §4.1, §4.2). Clients validate structuredContent against these.
DETAILS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "string"}, "error": {"type": "string"}},
    "required": ["status"],
}
LIST_KEYS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "string"}, "error": {"type": "string"},
                   "keys": {"type": "array", "items": {"type": "string"}}},
    "required": ["status"],
}


def tool_list() -> list[dict[str, Any]]:
    """The tools as ``tools/list`` shows them (wire form; the SDK validates the same dicts)."""
    from .. import agent_text

    return [
        {"name": "pcexec",
         "description": f"{agent_text.description('pcexec')}\n\n{agent_text.secret_workflow()}",
         "inputSchema": agent_text.parameters("pcexec"), "outputSchema": DETAILS_SCHEMA},
        {"name": "pcprocess", "description": agent_text.description("pcprocess"),
         "inputSchema": agent_text.parameters("pcprocess"), "outputSchema": DETAILS_SCHEMA},
        {"name": "list_keys",
         "description": "The names of the secrets you may use as $(pass_mgr get KEY) in pcexec "
                        "(names only; values are never shown).",
         "inputSchema": {"type": "object", "properties": {}}, "outputSchema": LIST_KEYS_SCHEMA,
         "annotations": {"readOnlyHint": True}},
    ]


def initialize_result(params: Any) -> dict[str, Any] | None:
    """Our answer to ``initialize``, or None when the SDK must judge the request."""
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    client = params.get("clientInfo")
    if not (isinstance(requested, str) and isinstance(params.get("capabilities"), dict)
            and isinstance(client, dict) and isinstance(client.get("name"), str)
            and isinstance(client.get("version"), str)):
        return None
    version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else HANDSHAKE_PROTOCOL_VERSIONS[-1]
    return {"protocolVersion": version, "capabilities": CAPABILITIES,
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
            "instructions": instructions()}


def discover_result(params: Any) -> dict[str, Any] | None:
    """Our answer to a 2026-07-28 ``server/discover`` probe, or None for the SDK to judge."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not (isinstance(meta, dict) and meta.get(ENVELOPE + "protocolVersion") in MODERN_PROTOCOL_VERSIONS
            and isinstance(meta.get(ENVELOPE + "clientCapabilities"), dict)
            and isinstance(meta.get(ENVELOPE + "clientInfo"), dict)):
        return None
    return {"cacheScope": "private", "capabilities": CAPABILITIES, "instructions": instructions(),
            "resultType": "complete", "supportedVersions": list(MODERN_PROTOCOL_VERSIONS), "ttlMs": 0,
            "_meta": {ENVELOPE + "serverInfo": {"name": SERVER_NAME, "version": __version__}}}


class Wire:
    """The stdio wire on private descriptors; one writer at a time."""

    def __init__(self) -> None:
        self.reader = os.fdopen(os.dup(0), "rb")
        self._out = os.fdopen(os.dup(1), "wb")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any] | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False,
                                                                    separators=(",", ":"))
        with self._lock:
            self._out.write(text.encode("utf-8") + b"\n")
            self._out.flush()


class Front:
    """Answers ``initialize`` and ``tools/list`` before the SDK is loaded; queues every
    line for the SDK.

    ``answered`` maps the id of each pre-answered request to our answer, so the SDK's
    own answer to the replayed request can be compared and dropped.
    """

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.answered: dict[Any, dict[str, Any]] = {}
        # Set when the front has nothing more to answer: the SDK import may take the CPU.
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, name="mcp-stdin", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        # Until the SDK serves, the client's first request decides, as it does for the
        # SDK: ``initialize`` (then the first ``tools/list``) or ``server/discover``;
        # after any other request, or an answer the SDK must give, the front answers nothing.
        expect: tuple[str, ...] = ("initialize", "server/discover")
        try:
            for raw in self.wire.reader:
                line = raw.decode("utf-8", errors="replace")
                if expect:
                    outcome = self._answer(line, expect)
                    if outcome == "initialize":
                        expect = ("tools/list",)
                    elif outcome is not None:
                        expect = ()
                        self.done.set()
                self.lines.put(line)
        finally:
            self.done.set()
            self.lines.put(None)

    def _answer(self, line: str, expect: tuple[str, ...]) -> str | None:
        """None for a notification or junk; else the method we answered, or "sdk"."""
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or not isinstance(message.get("method"), str) \
                or "id" not in message:
            return None
        method, params = message["method"], message.get("params")
        if method not in expect or not isinstance(message["id"], (str, int)) or isinstance(message["id"], bool):
            return "sdk"
        if method == "initialize":
            result = initialize_result(params)
        elif method == "server/discover":
            result = discover_result(params)
        elif params is None or params == {}:
            result = {"tools": tool_list()}
        else:  # a cursor or _meta: the SDK judges it
            result = None
        if result is None:
            return "sdk"
        self.answered[message["id"]] = result
        self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return method

    def outgoing(self, line: str) -> None:
        """A line the SDK wants to send: dropped when it answers a pre-answered request."""
        if self.answered and line.startswith("{") and '"id"' in line:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and "method" not in message and message.get("id") in self.answered:
                ours = self.answered.pop(message["id"])
                if message.get("result") != ours:
                    print(f"paddedcell mcp: the SDK answered a request differently from the "
                          f"front's table (ours {json.dumps(ours)[:400]}, SDK "
                          f"{json.dumps(message)[:400]}); update paddedcell.mcp", file=sys.stderr)
                return
        self.wire.send(line.rstrip("\n"))


def serve(agent_id: str, agent_workspace: str) -> int:
    """Serve MCP on this process's stdio until the client closes it."""
    wire = Wire()
    front = Front(wire)
    front.start()
    # The SDK import (~0.9 s of CPU, holding the GIL for long stretches) would slow the
    # front's answers on a busy machine: it starts once they are sent, or after a second.
    front.done.wait(IMPORT_AFTER_SECONDS)
    from .server import run

    return run(front, agent_id=agent_id, agent_workspace=agent_workspace)
