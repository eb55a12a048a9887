"""The MCP tools on the SDK's low-level server, each a translation of one daemon call.

Result shapes (what each client shows its model, see shared/research/mcp-clients.md):
``content`` is one text item, exactly the text OpenClaw's exec would show;
``structuredContent`` is the exec ``details`` object, which Codex sends its model instead
of the text, so it is masked like the text (the daemon built both from redacted bytes)
and an error's reason is in it too. ``isError`` marks a call that did not do what was
asked: a ``failed`` status (a secret that cannot be resolved: nothing ran; a timeout; a
signal) or a refusal (HTTP 4xx from the daemon: nothing ran).

Progress: when the client sends a ``progressToken``, each running partial the daemon
streams (``POST /exec`` with ``stream: true``: OpenClaw's ``onUpdate`` result, built from
redacted bytes) becomes a progress notification whose message is its text, the tail. Cancellation: the SDK cancels the handler; we close the exec
stream's socket, and the daemon ends a foreground command's whole tree when its caller
leaves, as it does for the OpenClaw plugin's aborted calls. Background runs outlive it.

The admin password: the daemon masks the agent's secrets, but the admin password is in
no agent's store. As the OpenClaw plugin does, a call's arguments and every result (text
and structured content, one ``POST /vault/check-leak`` each) are scanned; a hit locks the
vault, runs nothing (arguments) or masks each run as ``######`` (results). A result that
cannot be scanned is withheld.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
from typing import Any, Callable

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .. import __version__, agent_text, config
from ..daemon.client import DaemonClient, DaemonError, _UnixConnection, ensure_daemon
from ..session.protocol import answer_within
from . import SERVER_NAME, Front, instructions, tool_list

PROCESS_TIMEOUT_SECONDS = 45.0  # poll may wait 30 s (docs/design.md §4.2)


def tools() -> list[types.Tool]:
    return [types.Tool.model_validate(tool, by_name=False) for tool in tool_list()]


PROMPT = types.Prompt(name="paddedcell",
                      description="How to use secrets without seeing them: pcexec, "
                                  "$(pass_mgr get KEY), what ###### means.")


def _result(result: dict[str, Any]) -> types.CallToolResult:
    """A daemon result (``{content, details}``) as an MCP tool result."""
    details = result.get("details") if isinstance(result.get("details"), dict) else {}
    content = result.get("content") or []
    text = "".join(part.get("text", "") for part in content
                   if isinstance(part, dict) and part.get("type") == "text")
    failed = details.get("status") == "failed"
    if failed and "error" not in details:
        # Codex shows its model only the structured result: the reason must be there too.
        details = {**details, "error": text}
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=details, is_error=failed)


def _error(message: str, status: str) -> types.CallToolResult:
    """A call that did not run: the reason in the text and in the structured result."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                structured_content={"status": status, "error": message},
                                is_error=True)


def _refusal(exc: DaemonError) -> types.CallToolResult:
    refused = exc.status is not None and 400 <= exc.status < 500
    return _error(exc.message, "refused" if refused else "error")


MASK = "######"


def _strings(value: Any) -> list[str]:
    """Every string leaf of a JSON value, in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _replace_strings(value: Any, replacements: Any) -> Any:
    """``value`` with its string leaves taken, in order, from ``replacements``."""
    if isinstance(value, str):
        return next(replacements)
    if isinstance(value, dict):
        return {key: _replace_strings(item, replacements) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_strings(item, replacements) for item in value]
    return value


def _mask_joined(strings: list[str], spans: Any) -> list[str]:
    """Mask, in each string, the parts of ``spans`` (UTF-16 ``[start, end)`` runs into the
    strings joined by newlines, as ``/vault/check-leak`` answers). Spans that do not make
    sense (unsorted, overlapping, off a character boundary) mask every non-empty string
    whole, as the OpenClaw plugin does."""
    joined = "\n".join(strings)
    # UTF-16 offset -> code-point offset, for every boundary of the joined text.
    to_cp = {}
    units = 0
    for index, char in enumerate(joined):
        to_cp[units] = index
        units += 2 if ord(char) > 0xFFFF else 1
    to_cp[units] = len(joined)
    runs: list[tuple[int, int]] = []
    valid = isinstance(spans, list) and bool(spans)
    for span in spans if valid else []:
        # Sorted, disjoint, non-empty runs on character boundaries, as the route promises.
        if not (isinstance(span, list) and len(span) == 2 and span[0] in to_cp and span[1] in to_cp
                and span[0] < span[1] and (not runs or to_cp[span[0]] >= runs[-1][1])):
            valid = False
            break
        runs.append((to_cp[span[0]], to_cp[span[1]]))
    if not valid:
        return [MASK if s else s for s in strings]
    out, offset = [], 0
    for string in strings:
        start, end = offset, offset + len(string)
        pieces, cursor = [], start
        for run_start, run_end in runs:
            lo, hi = max(run_start, start), min(run_end, end)
            if lo >= hi:
                continue
            pieces.append(joined[cursor:lo] + MASK)
            cursor = hi
        pieces.append(joined[cursor:end])
        out.append("".join(pieces))
        offset = end + 1
    return out


class ExecStream:
    """One ``POST /exec`` with ``stream: true`` on its own connection, closable from
    another thread at any time: closing it is how a cancelled call tells the daemon to
    stop (before the request, nothing is sent; after, the daemon sees its caller leave)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._closed = False
        self._conn: _UnixConnection | None = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sock = self._conn.sock if self._conn is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def run(self, body: dict[str, Any], on_update: Callable[[dict[str, Any]], None],
            timeout: float) -> dict[str, Any]:
        try:
            with self._lock:
                if self._closed:
                    raise DaemonError("cancelled")
                self._conn = _UnixConnection(self.path, timeout)
                self._conn.connect()
            self._conn.request("POST", "/exec", body=json.dumps(body).encode("utf-8"),
                               headers={"content-type": "application/json"})
            response = self._conn.getresponse()
            if response.status >= 400:
                raw = response.read()
                try:
                    message = json.loads(raw).get("error")
                except (ValueError, AttributeError):
                    message = None
                raise DaemonError(message or f"HTTP {response.status}", response.status)
            last: dict[str, Any] | None = None
            for line in response:
                if not line.strip():
                    continue
                item = json.loads(line)
                if isinstance(item.get("update"), dict):
                    on_update(item["update"])
                elif "result" in item:
                    last = item["result"]
            if last is None:
                raise DaemonError("the paddedcell daemon ended the exec stream without a result; "
                                  "see PADDEDCELL_HOME/daemon.log")
            return last
        except (ConnectionRefusedError, FileNotFoundError):
            raise DaemonError(f"paddedcell daemon is not running (nothing listens on {self.path}); "
                              f"start it with: paddedcell serve") from None
        except TimeoutError:
            raise DaemonError("the paddedcell daemon did not answer POST /exec in time") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if self._closed:
                raise DaemonError("cancelled") from None
            raise DaemonError(f"lost the paddedcell daemon during POST /exec ({exc})") from None
        finally:
            if self._conn is not None:
                self._conn.close()


class Tools:
    """The tool calls of one MCP connection, bound to one agent identity.

    Each call runs in one worker thread, start to end (admin-password scan of the
    arguments, the daemon call, the scan of the result), on a kept-alive daemon
    connection from a small pool; only ``pcexec``'s stream has a connection of its own,
    so that cancelling can close it. Fewer thread hops and connects keep the MCP layer's
    cost per call at a few milliseconds (``benchmarks/mcp.py``).
    """

    def __init__(self, agent_id: str, agent_workspace: str, session_key: str):
        self.identity = {"agentId": agent_id, "agentWorkspace": agent_workspace,
                         "sessionKey": session_key}
        self.settings = config.load()
        self.socket_path = DaemonClient(self.settings).path
        self._lock = threading.Lock()
        self._daemon_ready = False
        self._idle: list[DaemonClient] = []

    def ensure_daemon(self) -> None:
        """Start the daemon if it is not running (once, and again after it was lost)."""
        with self._lock:
            if not self._daemon_ready:
                ensure_daemon(self.settings).close()
                self._daemon_ready = True

    def _client(self) -> DaemonClient:
        self.ensure_daemon()
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return DaemonClient(self.settings)

    def _release(self, client: DaemonClient) -> None:
        with self._lock:
            if len(self._idle) < 4:
                self._idle.append(client)
                return
        client.close()

    async def call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        name = params.name
        if name not in ("pcexec", "pcprocess", "list_keys"):
            return _error(f"unknown tool {name!r}; this server has pcexec, pcprocess and list_keys",
                          "refused")
        if name == "pcexec" and not (isinstance(arguments.get("command"), str)
                                     and arguments["command"].strip()):
            return _error("Provide a command to start.", "refused")
        # Made before the worker starts, so a cancellation at any point can close it.
        stream = ExecStream(self.socket_path) if name == "pcexec" else None
        updates = 0

        def on_update(update: dict[str, Any]) -> None:
            # OpenClaw's running partial (exec_update): its text is the warnings and the tail.
            nonlocal updates
            tail = "".join(part.get("text", "") for part in update.get("content") or []
                           if isinstance(part, dict) and part.get("type") == "text")
            if not tail:
                return
            updates += 1
            try:
                anyio.from_thread.run(ctx.session.report_progress, float(updates), None, tail)
            except Exception:  # the call was cancelled or the client left: the tail is dropped
                pass

        try:
            return await anyio.to_thread.run_sync(self._run, name, arguments, on_update, stream,
                                                  abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            if stream is not None:
                stream.close()  # the daemon ends a foreground command whose caller left
            raise

    def _run(self, name: str, arguments: dict[str, Any], on_update: Callable[[dict[str, Any]], None],
             stream: "ExecStream | None") -> types.CallToolResult:
        source = f"mcp:{name}:{self.identity['agentId']}"
        client = None
        reusable = False
        try:
            client = self._client()
            # The admin password in a call's arguments: the daemon locks the vault, nothing runs.
            if _leak(client, json.dumps(arguments, ensure_ascii=False), f"{source}:arguments"):
                result = _error("the admin password appeared in this tool call; PaddedCell locked the "
                                "vault and ran nothing. A human must run: pass_mgr admin init", "refused")
            else:
                if stream is not None:
                    body = {**arguments, **self.identity, "stream": True}
                    result = _result(stream.run(body, on_update, answer_within(body, self.settings)))
                elif name == "pcprocess":
                    body = {**arguments, "agentId": self.identity["agentId"],
                            "sessionKey": self.identity["sessionKey"]}
                    result = _result(client.call("POST", "/process", body,
                                                 timeout=PROCESS_TIMEOUT_SECONDS))
                else:
                    result = self._list_keys(client)
                result = _scrub(client, result, f"{source}:result")
            reusable = True
            return result
        except DaemonError as exc:
            if exc.status is None:  # not reachable: start it again on the next call
                with self._lock:
                    self._daemon_ready = False
            else:
                reusable = True  # an error answer, read in full: the connection is fine
            # A refusal names the request, whose arguments were scanned above; no output ran.
            return _refusal(exc)
        finally:
            if client is not None:
                if reusable:
                    self._release(client)
                else:
                    client.close()

    def _list_keys(self, client: DaemonClient) -> types.CallToolResult:
        """``pass_mgr list`` run as this agent, through the daemon like any pcexec."""
        body = {"command": "pass_mgr list", "awaitResults": True, "timeoutSeconds": 30, **self.identity}
        result = client.call("POST", "/exec", body, timeout=answer_within(body, self.settings))
        details = result.get("details") or {}
        if details.get("status") != "completed" or details.get("exitCode") not in (0, None):
            return _result({**result, "details": {**details, "status": "failed"}})
        keys = [line.strip() for line in str(details.get("aggregated", "")).splitlines() if line.strip()]
        text = "\n".join(keys) if keys else "(no keys)"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content={"status": "completed", "keys": keys})


def _leak(client: DaemonClient, text: str, source: str) -> dict[str, Any] | None:
    """The daemon's ``/vault/check-leak`` answer when ``text`` holds the admin password."""
    answer = client.call("POST", "/vault/check-leak", {"text": text, "source": source})
    return answer if answer.get("leak") else None


def _scrub(client: DaemonClient, result: types.CallToolResult, source: str) -> types.CallToolResult:
    """``result`` with every run of the admin password masked, text and structured content
    alike (the daemon masks the agent's secrets; the admin password is not among them).

    All strings are sent as one text joined by newlines, as the OpenClaw plugin does, so a
    result costs one round trip; a hit's ``spans`` say which part of which string to mask.
    A scan that fails withholds the result (fail closed)."""
    texts = [part.text for part in result.content if isinstance(part, types.TextContent)]
    strings = texts + _strings(result.structured_content)
    try:
        hit = _leak(client, "\n".join(strings), source)
    except DaemonError as exc:
        return _error(f"the result was withheld: PaddedCell could not check it for the admin "
                      f"password ({exc.message})", "error")
    if hit is None:
        return result
    masked = _mask_joined(strings, hit.get("spans"))
    content = [types.TextContent(type="text", text=text) for text in masked[:len(texts)]]
    structured = _replace_strings(result.structured_content, iter(masked[len(texts):]))
    return types.CallToolResult(content=content, structured_content=structured, is_error=result.is_error)


def build_server(tool_calls: Tools) -> Server:
    listed = tools()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await tool_calls.call(ctx, params)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[PROMPT])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != PROMPT.name:
            raise ValueError(f"no prompt {params.name!r}; this server has {PROMPT.name!r}")
        text = agent_text.skill_without_openclaw_tools()
        return types.GetPromptResult(description=PROMPT.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])

    server: Server = Server(SERVER_NAME, version=__version__, instructions=instructions(),
                            on_list_tools=list_tools, on_call_tool=call_tool,
                            on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    # No tracing spans per message: nothing exports them here, and they cost per call.
    server.middleware = []
    return server


class _QueuedLines:
    """The front's queue as the async line iterator ``stdio_server`` reads."""

    def __init__(self, front: Front):
        self.front = front

    def __aiter__(self) -> "_QueuedLines":
        return self

    async def __anext__(self) -> str:
        line = self.front.lines.get_nowait() if not self.front.lines.empty() else \
            await anyio.to_thread.run_sync(self.front.lines.get, abandon_on_cancel=True)
        if line is None:
            raise StopAsyncIteration
        return line


class _FrontWriter:
    """What ``stdio_server`` writes to: the front's filter, then the wire."""

    def __init__(self, front: Front):
        self.front = front

    async def write(self, text: str) -> None:
        self.front.outgoing(text)

    async def flush(self) -> None:
        pass


def run(front: Front, *, agent_id: str, agent_workspace: str) -> int:
    # One session key per agent, not per server process: clients (Codex) start a server per
    # run, and a later run must still reach the background sessions of an earlier one.
    tool_calls = Tools(agent_id, agent_workspace, session_key=f"mcp:{agent_id}")
    server = build_server(tool_calls)

    async def main() -> None:
        async with stdio_server(stdin=_QueuedLines(front), stdout=_FrontWriter(front)) as (read, write):
            async with anyio.create_task_group() as tg:
                # Start (or find) the daemon now, so the first call does not wait for it.
                tg.start_soon(_warm_up, tool_calls)
                await server.run(read, write, server.create_initialization_options())
                tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return 130
    return 0


async def _warm_up(tool_calls: Tools) -> None:
    try:
        await anyio.to_thread.run_sync(tool_calls.ensure_daemon, abandon_on_cancel=True)
    except DaemonError as exc:
        print(f"paddedcell mcp: {exc.message}", file=sys.stderr)
