"""HTTP/1.1 + JSON over a Unix socket, with h11 doing all the parsing.

Theory of operation: one Trio task per connection; each request is read whole
(bodies are small JSON documents, capped at ``MAX_BODY_BYTES``), routed by
``(method, path)`` to an async handler that takes a :class:`Request` and returns
a JSON-able dict, and answered with keep-alive. Handlers raise
:class:`HTTPError` for anything the caller should fix; every other exception is
logged and answered 500 with one line, never a stack trace (DESIGN §4.4).

A handler may instead return :class:`Streaming`: the answer is then sent with
chunked transfer encoding, one chunk per ``write`` (``/exec`` with
``"stream": true`` sends NDJSON lines this way). The producer learns that the
peer went away from an event, or from ``trio.BrokenResourceError`` on a write,
and decides whether to carry on without it.

Only peers with our own uid are served: the socket is 0600 and every accepted
connection is checked with ``SO_PEERCRED`` as well, because a 0600 socket in a
directory someone else controls is not enough on its own.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlsplit

import h11
import trio

log = logging.getLogger("paddedcell.daemon")

MAX_BODY_BYTES = 32 * 1024 * 1024
READ_SIZE = 64 * 1024


class HTTPError(Exception):
    """An error the client caused or can fix; ``message`` is one line."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any]
    peer_uid: int | None = None
    #: The peer process's pid from ``SO_PEERCRED`` (at connect time), or None
    #: when the kernel would not say; maps a caller to its agent session.
    peer_pid: int | None = None

    def require(self, name: str, kind: type = str) -> Any:
        """The body field ``name``, which must be present and of ``kind``."""
        value = self.body.get(name)
        if not isinstance(value, kind) or (kind is str and not value):
            raise HTTPError(400, f"field {name!r} is required and must be a {kind.__name__}")
        return value


Write = Callable[[bytes], Awaitable[None]]


@dataclass(frozen=True)
class Streaming:
    """A 200 answer produced piece by piece: ``await produce(write, peer_gone)``.

    ``peer_gone`` is a ``trio.Event`` set when the client closes its end.
    """

    produce: Callable[[Write, trio.Event], Awaitable[None]]
    content_type: str = "application/x-ndjson"


Handler = Callable[[Request], Awaitable["dict[str, Any] | Streaming"]]


@dataclass
class Router:
    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)

    def add(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method.upper(), path)] = handler

    def route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            self.add(method, path, handler)
            return handler

        return decorate

    async def dispatch(self, request: Request) -> tuple[int, "dict[str, Any] | Streaming"]:
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            if any(path == request.path for _, path in self.routes):
                return 405, {"error": f"{request.method} is not allowed on {request.path}"}
            return 404, {"error": f"no route {request.path}; see GET /healthz for the version"}
        try:
            return 200, await handler(request)
        except HTTPError as exc:
            return exc.status, {"error": exc.message}
        except Exception:
            log.exception("handler for %s %s failed", request.method, request.path)
            return 500, {"error": "internal error in the paddedcell daemon; see its log"}


def peer_credentials(sock: trio.socket.SocketType) -> tuple[int | None, int | None]:
    """``(pid, uid)`` of the peer from ``SO_PEERCRED``; ``(None, None)`` if unreadable."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None, None
    pid, uid, _gid = struct.unpack("3i", raw)
    return (pid if pid > 0 else None), uid


def peer_uid(sock: trio.socket.SocketType) -> int | None:
    return peer_credentials(sock)[1]


def _encode(status: int, payload: dict[str, Any], keep_alive: bool) -> tuple[h11.Response, bytes]:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    headers = [
        ("content-type", "application/json; charset=utf-8"),
        ("content-length", str(len(body))),
    ]
    if not keep_alive:
        headers.append(("connection", "close"))
    return h11.Response(status_code=status, headers=headers), body


async def _send(stream: trio.SocketStream, conn: h11.Connection, status: int,
                payload: dict[str, Any], keep_alive: bool = True) -> None:
    response, body = _encode(status, payload, keep_alive)
    data = conn.send(response) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
    await stream.send_all(data)


async def _send_streaming(stream: trio.SocketStream, conn: h11.Connection,
                          answer: Streaming) -> None:
    """Chunked 200 answer (h11 chooses chunked: no content-length, HTTP/1.1 peer).

    While producing, a second task reads the socket: end-of-file means the
    client went away (``peer_gone`` is set, so the producer can stop work
    nobody will see); bytes are the client's next request, kept for h11.
    """
    response = h11.Response(status_code=200, headers=[("content-type", answer.content_type)])
    await stream.send_all(conn.send(response))
    peer_gone = trio.Event()

    async def watch_peer() -> None:
        try:
            while data := await stream.receive_some(READ_SIZE):
                conn.receive_data(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        peer_gone.set()

    async def write(data: bytes) -> None:
        if data:
            await stream.send_all(conn.send(h11.Data(data=data)))

    failed = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_peer)
        try:
            await answer.produce(write, peer_gone)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            failed = True
        except Exception:
            log.exception("streaming answer failed")
            failed = True
        nursery.cancel_scope.cancel()
    if failed:
        raise trio.BrokenResourceError("streaming answer failed")
    await stream.send_all(conn.send(h11.EndOfMessage()))


async def _next_event(stream: trio.SocketStream, conn: h11.Connection) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(READ_SIZE)
        conn.receive_data(data)


async def serve_connection(stream: trio.SocketStream, router: Router) -> None:
    """Answer requests on one connection until the peer closes it."""
    pid, uid = peer_credentials(stream.socket)
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    async with stream:
        if uid != os.getuid():  # None: SO_PEERCRED failed, so the peer is unverified
            log.warning("refused a connection from uid %s", "unknown" if uid is None else uid)
            return
        while True:
            try:
                event = await _next_event(stream, conn)
                if isinstance(event, (h11.ConnectionClosed, h11.EndOfMessage)) or event is h11.PAUSED:
                    return
                assert isinstance(event, h11.Request)
                body = bytearray()
                while True:
                    part = await _next_event(stream, conn)
                    if isinstance(part, h11.Data):
                        body += part.data
                        if len(body) > MAX_BODY_BYTES:
                            await _send(stream, conn, 413,
                                        {"error": f"request body over {MAX_BODY_BYTES} bytes"}, False)
                            return
                    elif isinstance(part, h11.EndOfMessage):
                        break
                    else:
                        return
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await _send(stream, conn, exc.error_status_hint,
                                {"error": f"bad HTTP request: {exc}"}, False)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return

            request = _parse(event, bytes(body), uid, pid)
            if isinstance(request, tuple):
                status, payload = request
            else:
                status, payload = await router.dispatch(request)
            try:
                if isinstance(payload, Streaming):
                    await _send_streaming(stream, conn, payload)
                else:
                    await _send(stream, conn, status, payload)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if conn.our_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return


def _parse(event: h11.Request, raw: bytes, uid: int | None,
           pid: int | None = None) -> Request | tuple[int, dict[str, Any]]:
    target = urlsplit(event.target.decode("latin-1"))
    query = dict(parse_qsl(target.query))
    body: Any = {}
    if raw.strip():
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return 400, {"error": "request body is not valid JSON"}
        if not isinstance(body, dict):
            return 400, {"error": "request body must be a JSON object"}
    return Request(event.method.decode("ascii").upper(), target.path, query, body, uid, pid)


async def serve_unix(router: Router, path: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Listen on ``path`` (mode 0600) and serve until cancelled."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        await sock.bind(path)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(128)
    listener = trio.SocketListener(sock)
    task_status.started(listener)
    await trio.serve_listeners(lambda stream: serve_connection(stream, router), [listener])
