"""What the commands do, as a library: connect with the stored secrets, pair, chat,
decide approvals, report status. Front ends (``cli/remote.py``) pass an ``emit``
callback and an approval ``decide`` coroutine; nothing here prints.

Events handed to ``emit(kind, fields)`` (the CLI's NDJSON is exactly these):

- ``state``: ``{state: connected|reconnecting|pending|error, detail}``
- ``pending``: ``{requestId, command, remaining}`` (pairing)
- ``poll-error``: ``{message}`` (a pairing poll failed; shown, the wait goes on)
- ``session``: ``{key, how: resumed|created|reset|as-is}``
- ``delta``: ``{text}`` (new reply text), ``thinking``: ``{text}``
- ``tool``: ``{id, name, kind, phase, summary}``
- ``approval``: ``{id, type: exec|plugin, command|title, allowed, expiresIn}``,
  ``approval-decided``: ``{id, decision, by: operator|timeout|gateway}``
- ``final``: ``{text, runId}``, ``aborted``, ``error``: ``{message}``
- ``gap``: ``{missed}`` (sequence gap: events the gateway did not deliver)
"""

from __future__ import annotations

import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import trio

from . import protocol
from .connection import (ConnectionLost, ConnectRefused, Credentials, Gateway, RequestFailed,
                         open_gateway, run_connected)
from .errors import ChoiceError
from .protocol import RemoteError
from .store import Remote, RemoteStore

Emit = Callable[[str, dict[str, Any]], None]
#: ``decide(approval) -> decision`` (one of ``approval.allowed``); cancelled on timeout.
Decide = Callable[["Approval"], Awaitable[str]]

_TOKEN_REFUSED = ("AUTH_TOKEN_MISMATCH", "AUTH_DEVICE_TOKEN_MISMATCH")


@dataclass(frozen=True)
class Approval:
    """One approval request from the gateway (exec or plugin)."""

    id: str
    type: str  # "exec" | "plugin"
    text: str  # the command, or the plugin's title and description
    allowed: tuple[str, ...]
    agent_id: str | None = None
    session_key: str | None = None
    cwd: str | None = None

    @classmethod
    def from_event(cls, event: protocol.Event) -> Approval | None:
        if event.event not in ("exec.approval.requested", "plugin.approval.requested"):
            return None
        payload = event.payload if isinstance(event.payload, dict) else {}
        request = payload.get("request") if isinstance(payload.get("request"), dict) else payload
        approval_id = payload.get("id")
        if not isinstance(approval_id, str) or not approval_id:
            return None
        kind = "exec" if event.event.startswith("exec.") else "plugin"
        if kind == "exec":
            text = str(request.get("command") or request.get("commandText") or "")
        else:
            title, description = request.get("title") or "", request.get("description") or ""
            text = f"{title}: {description}" if title and description else str(title or description)
        allowed = request.get("allowedDecisions")
        decisions = tuple(d for d in allowed if d in DECISIONS) if isinstance(allowed, list) else ()
        if not decisions:
            decisions = ("allow-once", "deny") if kind == "plugin" else DECISIONS
        return cls(approval_id, kind, text, decisions, _text(request.get("agentId")),
                   _text(request.get("sessionKey")), _text(request.get("cwd")))

    @property
    def resolve_method(self) -> str:
        return "exec.approval.resolve" if self.type == "exec" else "plugin.approval.resolve"


DECISIONS = ("allow-once", "allow-always", "deny")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class RemoteClient:
    """One configured remote: its store row, secrets and the connects made for it."""

    def __init__(self, store: RemoteStore, remote: Remote, settings: Any, emit: Emit):
        self.store = store
        self.remote = remote
        self.settings = settings
        self.emit = emit
        self._gap_warned = False
        self._retrying = False
        self._filter = None

    # -- connecting ------------------------------------------------------------------

    def clean(self, text: str) -> str:
        """``text`` through a redactor of every configured remote's secrets: what the
        gateway said is stored for ``list`` only after this."""
        if self._filter is None:
            from ..redactor import new_filter
            self._filter = new_filter(self.store.all_secret_values(), self.settings)
        one = self._filter.fresh()
        return (one.feed(text.encode("utf-8")) + one.flush()).decode("utf-8", errors="replace")

    def _state(self, state: str, detail: str = "", **extra: Any) -> None:
        detail = self.clean(detail) if detail else detail
        stored = {"connected": "connected", "pending": "pending"}.get(state, "error")
        self.store.set_status(self.remote, stored, detail or None, request_id=extra.get("request_id"),
                              server_version=extra.get("server_version"),
                              protocol_version=extra.get("protocol_version"))
        if state == "connected":
            self._retrying = False
        elif self._retrying:
            return  # the reconnect loop says it, with its schedule (_loop_state)
        self.emit("state", {"state": state, "detail": detail})

    def _loop_state(self, state: str, detail: str) -> None:
        if state == "reconnecting":
            self._retrying = True
            self.emit("state", {"state": "reconnecting", "detail": detail})

    def _on_gap(self, missed: int) -> None:
        if not self._gap_warned:  # once per command: the gateway's seq counts events for others too
            self._gap_warned = True
            self.emit("gap", {"missed": missed})

    @asynccontextmanager
    async def connect(self, command: str) -> AsyncIterator[Gateway]:
        """An authenticated gateway; the stored device token first, the shared token or
        password when it is refused (once), the new device token saved on ``hello-ok``,
        the state persisted either way."""
        secrets = self.store.secrets(self.remote)
        attempts = [Credentials(secrets.identity, device_token=secrets.device_token,
                                password=secrets.password)] if secrets.device_token else []
        attempts.append(Credentials(secrets.identity, shared_token=secrets.shared_token,
                                    password=secrets.password))
        refused_token: ConnectRefused | None = None
        entered = False
        for credentials in attempts:
            try:
                async with open_gateway(self.remote.url, credentials, name=self.remote.name,
                                        command=command, settings=self.settings,
                                        allow_insecure=self.remote.allow_insecure,
                                        on_gap=self._on_gap) as gateway:
                    self._hello(gateway, secrets.device_token)
                    entered = True
                    yield gateway
                    return
            except ConnectionLost as exc:
                self._state("reconnecting", str(exc))
                raise
            except ConnectRefused as exc:
                if entered:
                    raise  # the caller's own error, not the connect's
                failure = exc.failure
                if credentials.device_token and failure.code in _TOKEN_REFUSED + ("AUTH_SCOPE_MISMATCH",):
                    # Revoked or rotated on the gateway: drop it and fall back once.
                    self.store.forget_device_token(self.remote)
                    refused_token = exc
                    continue
                if failure.kind == "pending":
                    detail = failure.message
                    if refused_token is not None:
                        detail = ("the gateway no longer accepts this device's token (revoked or rotated); "
                                  + failure.message)
                    self._state("pending", detail, request_id=failure.request_id)
                    raise ConnectRefused(protocol.ConnectFailure(
                        "pending", detail, failure.code, failure.request_id)) from None
                if refused_token is not None and failure.code in _TOKEN_REFUSED + ("AUTH_TOKEN_MISSING", "AUTH_REQUIRED"):
                    exc = refused_token
                message = _revoked_message(self.remote.name) if exc is refused_token else str(exc)
                self._state("error", message)
                raise ConnectRefused(protocol.ConnectFailure(
                    "error", message, exc.failure.code, retryable=exc.failure.retryable)) from None
            except RemoteError as exc:
                if not entered:
                    self._state("error", str(exc))
                raise
        raise RemoteError("unreachable")  # the last attempt always returns or raises

    def _hello(self, gateway: Gateway, stored_token: str | None) -> None:
        hello = gateway.hello
        if hello.device_token and hello.device_token != stored_token:
            self.store.save_device_token(self.remote, hello.device_token, hello.scopes)
        self._state("connected", f"gateway {hello.server_version}, protocol {hello.protocol}",
                    server_version=hello.server_version, protocol_version=hello.protocol)

    async def run(self, command: str, body: Callable[[Gateway], Awaitable[Any]]) -> Any:
        """``body`` on a connection that reconnects when lost (F-RAGENT-12)."""
        return await run_connected(lambda: self.connect(command), body, settings=self.settings,
                                   on_state=self._loop_state)

    # -- 05 / 06: test and handshake -------------------------------------------------

    async def handshake(self, command: str = "test") -> dict[str, Any]:
        async with self.connect(command) as gateway:
            hello = gateway.hello
            return {"state": "connected", "serverVersion": hello.server_version,
                    "protocol": hello.protocol, "scopes": list(hello.scopes),
                    "deviceToken": "reused" if hello.used_device_token else
                    ("issued" if hello.device_token else "none")}

    # -- 07: pairing -----------------------------------------------------------------

    async def pair(self, *, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
        """Poll the handshake every ``pairing_poll_seconds`` until approved or
        ``pairing_timeout_seconds`` pass; a countdown event every second."""
        timeout = float(self.settings["remote.pairing_timeout_seconds"])
        poll = float(self.settings["remote.pairing_poll_seconds"])
        deadline = clock() + timeout
        request_id: str | None = None
        while True:
            try:
                return await self.handshake("pair")
            except ConnectRefused as exc:
                if exc.failure.kind == "pending":
                    request_id = exc.failure.request_id or request_id
                elif exc.failure.retryable:
                    self.emit("poll-error", {"message": str(exc)})
                else:
                    raise  # a wrong token does not fix itself by waiting
            except RemoteError as exc:  # shown, not swallowed (the seed's catch {})
                self.emit("poll-error", {"message": str(exc)})
            next_poll = min(clock() + poll, deadline)
            polled = True  # the first event after a poll; the rest only move the clock
            while True:
                remaining = deadline - clock()
                self.emit("pending", {"requestId": request_id, "remaining": max(0.0, remaining),
                                      "command": f"openclaw devices approve {request_id or '<requestId>'}",
                                      "polled": polled})
                polled = False
                if remaining <= 0:
                    raise RemoteError(
                        f"not approved within {protocol.countdown(timeout)}; {self.remote.name} stays pending: "
                        f"on the gateway host run openclaw devices approve {request_id or '<requestId>'}, "
                        f"then: paddedcell remote pair {self.remote.name}")
                if clock() >= next_poll:
                    break
                await trio.sleep(min(1.0, next_poll - clock(), max(remaining, 0.01)))

    # -- 08: sessions ----------------------------------------------------------------

    async def resolve_session(self, gateway: Gateway, requested: str | None,
                              agent: str | None = None) -> str:
        """The seed's chain: resolve the key to resume; else create it; else reset it;
        else resolve once more; else use the key as it is (chat.send creates it). The key
        is put in one agent's store first, as OpenClaw's own CLI does: the agent ``agent``,
        or the one a key names, or the gateway's default (``agents.list``); a gateway with
        several agents and no default refuses unqualified keys, so we say to choose."""
        named = protocol.key_agent(requested)
        if named is not None:
            if agent and agent.strip().lower() != named:
                raise ChoiceError(f"--agent {agent} does not match the session key's agent {named}")
            target, main_key = named, "main"
        else:
            roster = await self._roster(gateway)
            target = protocol.choose_agent(roster, agent, remote=self.remote.name)
            main_key = roster.main_key if roster else "main"
        stored = self.remote.session_key
        if stored and target and protocol.key_agent(stored) not in (None, target):
            stored = None  # the last session belongs to another agent: start one for this one
        resume = requested or stored
        resume = protocol.agent_session_key(resume, target, main_key) if resume else None
        if resume:
            try:
                found = await gateway.call("sessions.resolve", {"key": resume})
                key = _session_key(found) or resume
                self.emit("session", {"key": key, "how": "resumed"})
                return key
            except RequestFailed:
                pass
        key = resume or protocol.agent_session_key(f"paddedcell-{uuid.uuid4().hex[:12]}", target)
        for method, params, how in (("sessions.create", {"key": key}, "created"),
                                    ("sessions.reset", {"key": key, "reason": "new"}, "reset"),
                                    ("sessions.resolve", {"key": key}, "resumed")):
            try:
                answer = await gateway.call(method, params)
            except RequestFailed:
                continue
            key = _session_key(answer) or key
            self.emit("session", {"key": key, "how": how})
            return key
        self.emit("session", {"key": key, "how": "as-is"})
        return key

    async def _roster(self, gateway: Gateway) -> protocol.AgentRoster | None:
        """The gateway's agents; None from a gateway without ``agents.list``."""
        try:
            return protocol.agent_roster(await gateway.call("agents.list", {}))
        except RequestFailed:
            return None

    # -- 09 / 10 / 11: chat ----------------------------------------------------------

    async def chat(self, message: str, *, session: str | None = None, agent: str | None = None,
                   attachments: list[str] = (), decide: Decide | None = None) -> dict[str, Any]:
        turn = _Turn(protocol.with_attachments(message, list(attachments)))

        async def body(gateway: Gateway) -> dict[str, Any]:
            if turn.session_key is None:
                turn.session_key = await self.resolve_session(gateway, session, agent)
                self.store.set_session_key(self.remote, turn.session_key)
            async with trio.open_nursery() as nursery:
                if not turn.sent:
                    answer = await gateway.call("chat.send", {
                        "sessionKey": turn.session_key, "message": turn.message,
                        "idempotencyKey": turn.idempotency_key})
                    turn.run_id = (answer or {}).get("runId") or turn.idempotency_key
                    turn.sent = True
                elif await self._finished_in_history(gateway, turn):
                    nursery.cancel_scope.cancel()
                    return turn.result()
                with trio.fail_after(float(self.settings["remote.chat_timeout_seconds"])):
                    while not turn.done:
                        event = await gateway.next_event()
                        approval = Approval.from_event(event)
                        if approval is not None:
                            nursery.start_soon(self._approve, gateway, approval, decide)
                            continue
                        self._chat_event(event, turn)
                if turn.done and not turn.reply.shown and turn.state == "final":
                    await self._finished_in_history(gateway, turn)
                nursery.cancel_scope.cancel()
            return turn.result()

        try:
            result = await self.run("chat", body)
        except trio.TooSlowError:
            raise RemoteError("no final reply within remote.chat_timeout_seconds; the run may still "
                              "be going: see paddedcell remote status") from None
        if turn.state == "error":
            raise RemoteError(f"the gateway reported an error: {turn.error}")
        return result

    def _chat_event(self, event: protocol.Event, turn: _Turn) -> None:
        payload = event.payload if isinstance(event.payload, dict) else {}
        if payload.get("runId") not in (None, turn.run_id) and event.event in ("chat", "agent"):
            return
        if event.event == "chat":
            state = payload.get("state")
            if state == "delta":
                new = turn.reply.feed(protocol.message_text(payload.get("message")),
                                      payload.get("deltaText") if isinstance(payload.get("deltaText"), str) else None)
                if new:
                    self.emit("delta", {"text": new})
            elif state == "final":
                text = protocol.message_text(payload.get("message"))
                rest = turn.reply.feed(text) if text else ""
                if not text and not turn.reply.shown and turn.assistant_text:
                    rest = turn.reply.feed(turn.assistant_text)
                if rest:
                    self.emit("delta", {"text": rest})
                turn.state, turn.done = "final", True
            elif state == "aborted":
                turn.state, turn.done = "aborted", True
            elif state == "error":
                turn.error = str(payload.get("errorMessage") or payload.get("error") or "unknown error")
                turn.state, turn.done = "error", True
        elif event.event == "agent":
            stream, data = payload.get("stream"), payload.get("data")
            data = data if isinstance(data, dict) else {}
            if stream in ("tool", "tool_call"):
                name = str(data.get("name") or data.get("title") or "Tool Call")
                phase = protocol.tool_phase(data.get("phase"), bool(data.get("isError")))
                self.emit("tool", {"id": data.get("toolCallId"), "name": name,
                                   "kind": protocol.tool_kind(name), "phase": phase,
                                   "summary": _tool_summary(data) if phase == "running" and
                                   data.get("phase") == "start" else ""})
            elif stream in ("thinking", "thought", "reasoning"):
                text = data.get("delta") or data.get("text")
                if isinstance(text, str) and text:
                    self.emit("thinking", {"text": text})
            elif stream == "assistant":
                text = data.get("text")
                if isinstance(text, str):
                    turn.assistant_text = text  # the seed's fallback when no chat delta came

    async def _finished_in_history(self, gateway: Gateway, turn: _Turn) -> bool:
        """The seed's history fallback: the last assistant message of this run, if any."""
        try:
            history = await gateway.call("chat.history", {"sessionKey": turn.session_key, "limit": 5})
        except RemoteError:
            return False
        messages = history.get("messages") if isinstance(history, dict) else None
        for item in reversed(messages or []):
            if not isinstance(item, dict) or item.get("role") != "assistant":
                continue
            run = item.get("runId") or (item.get("__openclaw") or {}).get("runId")
            if run not in (None, turn.run_id):
                continue
            text = protocol.message_text(item)
            if not text:
                continue
            rest = turn.reply.feed(text)
            if rest:
                self.emit("delta", {"text": rest})
            turn.state, turn.done = "final", True
            return True
        return False

    async def _approve(self, gateway: Gateway, approval: Approval, decide: Decide | None) -> None:
        """Ask, with the 70 s auto-reject, then send the decision back to the gateway
        (the seed's client never did)."""
        timeout = float(self.settings["remote.approval_timeout_seconds"])
        self.emit("approval", {"id": approval.id, "type": approval.type, "text": approval.text,
                               "allowed": list(approval.allowed), "agentId": approval.agent_id,
                               "sessionKey": approval.session_key, "expiresIn": timeout})
        decision, by = "deny", "timeout"
        if decide is not None:
            with trio.move_on_after(timeout):
                chosen = await decide(approval)
                if chosen in approval.allowed:
                    decision, by = chosen, "operator"
                else:
                    by = "operator"
        # Shielded: once decided, the answer goes out and is confirmed even if the turn
        # ends meanwhile (a denied command's run can finish before our resolve returns).
        with trio.CancelScope(shield=True):
            try:
                await gateway.call(approval.resolve_method, {"id": approval.id, "decision": decision})
            except RemoteError as exc:
                self.emit("approval-decided", {"id": approval.id, "decision": decision, "by": by,
                                               "error": str(exc)})
                return
            self.emit("approval-decided", {"id": approval.id, "decision": decision, "by": by})

    async def watch_approvals(self, decide: Decide, *, until: trio.Event | None = None) -> None:
        """``remote approvals``: decide every request until cancelled, reconnecting."""

        async def body(gateway: Gateway) -> None:
            async with trio.open_nursery() as nursery:
                while until is None or not until.is_set():
                    event = await gateway.next_event()
                    approval = Approval.from_event(event)
                    if approval is not None:
                        nursery.start_soon(self._approve, gateway, approval, decide)
                    elif event.event in ("exec.approval.resolved", "plugin.approval.resolved"):
                        payload = event.payload if isinstance(event.payload, dict) else {}
                        self.emit("approval-resolved", {"id": payload.get("id"),
                                                        "decision": payload.get("decision")})
                nursery.cancel_scope.cancel()

        await self.run("approvals", body)

    # -- beyond the seed: status -----------------------------------------------------

    async def status(self) -> dict[str, Any]:
        async with self.connect("status") as gateway:
            row: dict[str, Any] = {"name": self.remote.name, "state": "connected",
                                   "version": gateway.hello.server_version,
                                   "protocol": gateway.hello.protocol}
            for method, key in (("health", "health"), ("agents.list", "agents"),
                                ("sessions.list", "sessions")):
                try:
                    row[key] = await gateway.call(method, {})
                except RemoteError as exc:
                    row[key] = {"error": str(exc)}
            return summarize_status(row)


def summarize_status(row: dict[str, Any]) -> dict[str, Any]:
    """The table row of ``remote status`` from the raw answers (pure)."""
    health = row.get("health")
    ok = isinstance(health, dict) and "error" not in health and health.get("ok", True) is not False
    agents = row.get("agents")
    agent_list = agents.get("agents") if isinstance(agents, dict) else agents
    sessions = row.get("sessions")
    session_list = sessions.get("sessions") if isinstance(sessions, dict) else sessions
    session_list = session_list if isinstance(session_list, list) else []
    active = [s for s in session_list if isinstance(s, dict) and s.get("hasActiveRun")]
    return {"name": row["name"], "state": row["state"], "version": row.get("version"),
            "protocol": row.get("protocol"), "health": "ok" if ok else "degraded",
            "agents": [a.get("id") or a.get("agentId") for a in agent_list or [] if isinstance(a, dict)],
            "sessions": len(session_list),
            "activeSessions": [s.get("key") for s in active]}


def _revoked_message(name: str) -> str:
    return (f"the gateway refused this device's token: it was revoked or rotated on the gateway; "
            f"pair again: paddedcell remote pair {name}")


def _session_key(answer: Any) -> str | None:
    if isinstance(answer, dict):
        for key in ("key", "sessionKey"):
            if isinstance(answer.get(key), str) and answer[key]:
                return answer[key]
        session = answer.get("session") or answer.get("entry")
        if isinstance(session, dict):
            return _session_key(session)
    return None


def _tool_summary(data: dict[str, Any]) -> str:
    args = data.get("args")
    if isinstance(args, dict):
        for key in ("command", "path", "file_path", "url", "query", "pattern"):
            if isinstance(args.get(key), str):
                return args[key][:200]
    return ""


@dataclass
class _Turn:
    """One chat turn's progress, kept across reconnects."""

    message: str
    idempotency_key: str = field(default_factory=lambda: str(uuid.uuid4()))
    session_key: str | None = None
    run_id: str | None = None
    sent: bool = False
    done: bool = False
    state: str = "running"
    error: str | None = None
    assistant_text: str = ""
    reply: protocol.ReplyText = field(default_factory=protocol.ReplyText)

    def result(self) -> dict[str, Any]:
        return {"state": self.state, "text": self.reply.shown, "runId": self.run_id,
                "sessionKey": self.session_key}
