"""The per-session channel: how processes inside a session reach their supervisor.

Identity is a property of the session (docs/design.md §1). Every session gets its own
Unix socket, ``PADDEDCELL_HOME/run/sessions/<token>.sock`` (directory 0700),
served by the supervisor that started the session (the daemon, or a
foreground ``pcexec``). ``pass_mgr`` and the CLIs inside the session send one
JSON line and read one JSON line back; the supervisor answers for the
session's agent only, whatever the request or the caller's environment says.

A socket path is not a credential: without the sandbox every session's
socket is in the same directory. So each connection's peer (``SO_PEERCRED``
pid, translated into our PID namespace by the kernel, sandbox or not) must
belong to the session's process tree (:func:`procs.in_tree`), else the answer
is "forbidden" (exit 5). Values the supervisor hands out (``get``,
``generate``, ``rotate``) join the session's redactors before the answer is
written, so they are masked from their first byte.

The protocol, the routes a session may use and the rule "act as the session's
agent" (:func:`bind`) live in :mod:`paddedcell.session.protocol`, shared with the
daemon. Requests for the daemon go to the forwarder the supervisor's owner gives
(the daemon: its own routes, in-process; a foreground ``pcexec``: the daemon's
socket). Inside the sandbox the daemon's own socket is hidden: this channel is
the only way out.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from .. import exits
from ..accept import accept_retrying
from ..session.lines import parse_in_child, parsed_or_why, value_bound
from ..session.protocol import CHANNEL_VARIABLE, SESSION_ROUTES, VAULT_OPS, Refusal, bind
from . import procs
from .settings import SupervisorSettings

log = logging.getLogger("paddedcell.supervisor")


#: Sends one bound daemon request, ``(method, path, body)``, and returns the daemon's
#: answer; raises :class:`Refusal`. Supplied by whoever owns the supervisor.
Forward = Callable[[str, str, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    """What one session's channel may hold, from the ``supervisor.channel_*`` settings.

    A session could otherwise open thousands of connections and feed each a line
    that never ends: the daemon's descriptors (EMFILE ends ``accept`` for everyone)
    and memory (4 MiB each) would go. So each channel serves at most
    ``max_connections`` at once (more are closed on accept: only this session
    waits), a request line is at most ``max_request_bytes``, all of a session's
    unfinished lines together at most ``session_buffer_bytes``, and a line must
    arrive whole within ``idle_seconds``.
    """

    max_connections: int
    max_request_bytes: int
    session_buffer_bytes: int
    idle_seconds: float
    accept_backoff_max: float
    #: A longer line is parsed in a child process; no line holds more values.
    parse_in_child_bytes: int = 64 * 1024
    max_values: int = 20000

    @classmethod
    def from_settings(cls, settings) -> "ChannelLimits":
        limits = SupervisorSettings.of(settings)
        return cls(limits.channel_max_connections, limits.channel_max_request_bytes,
                   limits.channel_session_buffer_bytes, limits.channel_idle_seconds,
                   limits.accept_backoff_max_seconds, limits.channel_parse_in_child_bytes,
                   limits.channel_max_values)


def channel_dir(settings) -> Path:
    return settings.home / "run" / "sessions"


def bind_path(path: str) -> tuple[str, int | None]:
    """A name short enough for ``sun_path`` (108 bytes): long paths go through
    ``/proc/self/fd/N/`` of their directory. Returns the name and the fd to close."""
    if len(os.fsencode(path)) < 100:
        return path, None
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}", fd


def peer_pid(sock, uids: tuple[int, ...] = ()) -> int | None:
    """The peer's pid when it runs as us or as one of ``uids`` (a root daemon's
    sessions run as their agent's own uid, supervisor/sandbox_plan.py)."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid if pid > 0 and (uid == os.getuid() or uid in uids) else None


def _vault_call(op: str, agent_id: str, workspace: str, request: dict[str, Any],
                settings) -> tuple[dict[str, Any], list[str]]:
    """Run one vault op for the session's agent: ``(answer, values handed out)``."""
    from .. import vault
    from ..vault import api

    key = request.get("key")
    if op != "list" and not (op == "rotate" and key is None):
        if not isinstance(key, str) or not key:
            raise Refusal(f"{op} needs a KEY", 2)
    version = request.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)
                                or version < 1):
        raise Refusal("--version must be a whole number ≥ 1", 2)
    try:
        if op == "get":
            value = api.get_secret(agent_id, workspace, key, version=version, settings=settings)
            return {"value": value}, [value]
        if op == "generate":
            length = request.get("length")
            if length is not None and (not isinstance(length, int) or not 8 <= length <= 4096):
                raise Refusal("--length must be between 8 and 4096", 2)
            change = api.generate_secret(agent_id, workspace, key, length=length,
                                         symbols=bool(request.get("symbols", True)),
                                         force=bool(request.get("force")), settings=settings)
            return {"version": change.version, "length": len(change.value)}, [change.value]
        if op == "rotate":
            if key is None:
                api.rotate_store(agent_id, workspace, settings=settings)
                return {"agentId": agent_id}, []
            change = api.rotate_secret(agent_id, workspace, key, settings=settings)
            return {"version": change.version}, [change.value]
        if op == "unset":
            api.unset_secret(agent_id, workspace, key, settings=settings)
            return {}, []
        if op == "list":
            from ..egress.binding import describe_record

            bound = api.key_bindings(agent_id, workspace, settings=settings)
            return {"keys": api.list_keys(agent_id, workspace, settings=settings),
                    "bound": {k: describe_record(r) for k, r in bound.items()}}, []
        versions = api.key_history(agent_id, workspace, key, settings=settings)
        return {"versions": [[v, created] for v, created in versions]}, []
    except vault.VaultError as exc:
        raise Refusal(str(exc), exc.exit_code) from None
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise Refusal(f"{exc.strerror or exc}{where}", 1) from None


def _placeholder_for(session, key: str, answer: dict[str, Any],
                     values: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A bound key's ``get`` in a session whose proxy intercepts: the session's placeholder
    instead of the value (docs/design.md §6.5); both are masked from here on."""
    egress = getattr(session, "egress", None)
    if egress is None or not egress.is_bound(key):
        return answer, values
    from ..egress.placeholders import PlaceholderError

    try:
        placeholder = egress.issue(key, answer["value"])
    except PlaceholderError as exc:
        raise Refusal(f"{key} is bound to hosts, but {exc}", exits.ERROR) from None
    return {"value": placeholder}, [*values, placeholder]


async def _parse_line(line: bytes, limits: ChannelLimits) -> Any:
    """The request line parsed, or why not (a str). A long line, or one that may hold more
    than ``max_values`` values, is parsed in a child process (``session/lines.py``)."""
    if len(line) <= limits.parse_in_child_bytes and value_bound(line) <= limits.max_values:
        return parsed_or_why(line, limits.max_values)
    try:
        return await parse_in_child(line, limits.max_values)
    except (OSError, RuntimeError) as exc:
        log.warning("could not parse a long channel request: %s", exc)
        return "the channel request could not be parsed now; try again"


class SessionChannel:
    """Serves one session's socket until the session ends (cancel the task)."""

    def __init__(self, session, settings, directory: Path, token: str,
                 forward: Forward | None):
        #: The session served (set once it is spawned): its agent is the only one.
        self.session = session
        self.settings = settings
        self.path = str(directory / f"{token[:20]}.sock")
        self.forward = forward
        #: The session's egress CA bundle (written beside the socket), removed at close.
        self.ca_bundle: str | None = None
        #: Besides ours, the uid the session's commands run as (a root daemon's agent).
        self.peer_uids: tuple[int, ...] = ()
        self._sock = None
        #: ``share(agent_id, workspace, values)``: the supervisor's broadcast of values
        #: this channel handed out to every other live session that could print them.
        self.share: Callable[[str, str, list[str]], None] | None = None
        #: ``store_changed(agent_id, workspace)``: a foreground pcexec tells a running
        #: daemon, whose sessions could print the new value too (None in the daemon).
        self.store_changed: Callable[[str, str], Awaitable[None]] | None = None
        #: Connections being served, and request bytes they hold (ChannelLimits).
        self._open = 0
        self._buffered = 0

    def open(self) -> None:
        """Bind and listen now (before the command starts, so it can connect at once)."""
        directory = os.path.dirname(self.path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        name, fd = bind_path(self.path)
        try:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            raw.bind(name)  # the directory is 0700: only we can reach it
            raw.listen(64)
        except BaseException:
            raw.close()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        sock = trio.socket.from_stdlib_socket(raw)
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            try:
                os.unlink(self.path)
            except OSError:
                pass
        if self.ca_bundle is not None:  # the session's egress CA bundle, beside the socket
            try:
                os.unlink(self.ca_bundle)
            except OSError:
                pass
            self.ca_bundle = None

    async def serve(self) -> None:
        """Accept and answer until cancelled; whatever a client does ends at most this
        channel, never the supervisor (see :class:`ChannelLimits`)."""
        limits = ChannelLimits.from_settings(self.settings)
        try:
            async with trio.open_nursery() as nursery:
                await self._accept_loop(nursery, limits)
        except Exception:
            log.exception("the channel of session %s failed; it is closed, the session goes "
                          "on without it", getattr(self.session, "id", "?"))
        finally:
            self.close()

    async def _accept_loop(self, nursery, limits: "ChannelLimits") -> None:
        while True:
            conn, _ = await accept_retrying(self._sock, limits.accept_backoff_max,
                                            "session channel")
            if self._open >= limits.max_connections:
                conn.close()  # over supervisor.channel_max_connections: this client waits
                continue
            self._open += 1
            nursery.start_soon(self._handle, conn, limits)

    async def _handle(self, conn, limits: "ChannelLimits") -> None:
        try:
            with conn:
                try:
                    with trio.fail_after(limits.idle_seconds):
                        line = await self._read_line(conn, limits)
                    if line is None:
                        return
                    answer = await self._answer(conn, line, limits)
                except (trio.TooSlowError, OSError, trio.BrokenResourceError):
                    return
                try:
                    await conn.send(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
                except OSError:
                    pass
        except Exception:
            log.exception("a session channel connection failed; it is closed")
        finally:
            self._open -= 1

    async def _read_line(self, conn, limits: "ChannelLimits") -> bytes | None:
        """The request line; None (the connection is dropped) past the per-connection cap
        or the session's buffer budget."""
        data = bytearray()
        try:
            while True:
                chunk = await conn.recv(65536)
                if not chunk:
                    return bytes(data)
                end = chunk.find(b"\n")
                if end >= 0:
                    chunk = chunk[:end]
                if (len(data) + len(chunk) > limits.max_request_bytes
                        or self._buffered + len(chunk) > limits.session_buffer_bytes):
                    return None
                data += chunk
                self._buffered += len(chunk)
                if end >= 0:
                    return bytes(data)
        finally:
            self._buffered -= len(data)

    async def _answer(self, conn, line: bytes, limits: "ChannelLimits") -> dict[str, Any]:
        session = self.session
        pid = peer_pid(conn, self.peer_uids)
        if pid is None or not procs.in_tree(session.tree, pid):
            return Refusal("this channel belongs to another session; pass_mgr answers only "
                           "inside the session it was started for", exits.FORBIDDEN).answer()
        request = await _parse_line(line, limits)
        if isinstance(request, str):
            return Refusal(request, exits.USAGE).answer()
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            return Refusal("the channel request needs an 'op'", exits.USAGE).answer()
        op = request["op"]
        agent_id, workspace = session.agent_id, session.agent_workspace
        try:
            if op == "whoami":
                return {"ok": True, "agentId": agent_id, "agentWorkspace": workspace,
                        "sessionKey": session.session_key}
            if op in VAULT_OPS:
                if not (agent_id and workspace):
                    raise Refusal("this session belongs to no agent (no agent id and "
                                  "workspace), so it has no secrets", exits.ERROR)
                answer, values = await trio.to_thread.run_sync(
                    _vault_call, op, agent_id, workspace, request, self.settings)
                if op == "get":
                    answer, values = _placeholder_for(session, request["key"], answer, values)
                if values:
                    # Masked before the value leaves: from its first byte on, in this
                    # session and in every other live one that could print it.
                    session.add_secrets(values)
                    if self.share is not None:
                        self.share(agent_id, workspace, values)
                    if self.store_changed is not None and op != "get":
                        await self.store_changed(agent_id, workspace)
                return {"ok": True, **answer}
            if op in ("exec", "process", "daemon"):
                return {"ok": True, "result": await self._forward(op, request)}
        except Refusal as exc:
            return exc.answer()
        return Refusal(f"unknown channel op {op!r}", exits.USAGE).answer()

    async def _forward(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """A daemon request, bound to the session's agent, to this supervisor's forwarder."""
        if op == "daemon":
            method, path = request.get("method"), request.get("path")
        else:
            method, path = "POST", f"/{op}"
        route = SESSION_ROUTES.get((method, path))
        if route is None or route.op != op:
            raise Refusal(f"{method} {path} is not available inside an agent session",
                          exits.FORBIDDEN)
        body = bind(self.session, method, path, request.get("body"))
        if op == "exec":
            body.pop("stream", None)  # one result line; streaming is the plugin's
        if self.forward is None:
            raise Refusal("this supervisor cannot forward daemon requests", exits.ERROR)
        return await self.forward(method, path, body)
