"""HTTP/1.1 + JSON over a Unix socket, with h11 doing all the parsing.

The guarantee: whatever a peer sends, and whenever it leaves, only its own
connection ends; the daemon and every other connection go on, and an answer is
a 4xx or 2xx unless the daemon itself has a bug (then one logged 500 line).

Theory of operation: one Trio task per connection; each request is read whole
(bodies are JSON documents capped at ``MAX_BODY_BYTES``; a begun request must
arrive within ``request_timeout`` seconds, else 408), checked at the edge by
:mod:`paddedcell.daemon.validate` (depth, surrogates, number ranges: a handler
never sees what it cannot carry), routed by ``(method, path)`` to an async
handler that takes a :class:`Request` and returns a JSON-able dict, and answered
with keep-alive. HEAD is answered like GET without the body; a known path with
another method is 405 with ``Allow``. A handler's exception becomes a status
through the one table in ``validate`` (``HTTPError``, ``RequestError``,
``ExecRefused``, ``CoordinatorError``, ...); any other is logged and answered
500 with one line, never a stack trace (docs/design.md §4.4).

A handler may instead return :class:`Streaming`: the answer is then sent with
chunked transfer encoding, one chunk per ``write`` (``/exec`` with
``"stream": true`` sends NDJSON lines this way). The producer learns that the
peer went away from an event, or from ``trio.BrokenResourceError`` on a write,
and decides whether to carry on without it. A client that half-closes after its
request (end-of-file, legal HTTP/1.1) has not gone away: only a hang-up
(``POLLHUP``) or a failed write says so. GET handlers (long polls) are cancelled
when their client hangs up, so they give back the file descriptor at once.

Only peers with our own uid are served: the socket is 0600 and every accepted
connection is checked with ``SO_PEERCRED`` as well, because a 0600 socket in a
directory someone else controls is not enough on its own.
"""

from __future__ import annotations

import json
import logging
import math
import os
import select
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlsplit

import h11
import trio

from . import validate
from ..accept import accept_retrying

log = logging.getLogger("paddedcell.daemon")

MAX_BODY_BYTES = 32 * 1024 * 1024
READ_SIZE = 64 * 1024
#: Bodies above this are parsed in a worker process (and their answers encoded in a
#: worker thread), so a 10 MB check-leak or command does not stall every other connection.
PARSE_IN_THREAD_BYTES = 256 * 1024
#: Bytes of a pipelined next request kept while an answer is produced.
MAX_PIPELINED_BYTES = 1024 * 1024
#: How often a half-closed client is checked for a hang-up.
HANGUP_POLL_SECONDS = 0.25
LISTEN_BACKLOG = 1024

#: One worker thread at a time parses a big body, encodes its answer or scans a
#: big text for leaks (routes_vault): each CPU-bound thread makes the event loop
#: wait for the GIL after every system call, so N of them stall everything N-fold.
cpu_limiter = trio.CapacityLimiter(1)
#: Child processes parsing big bodies at once (bigbody.py). A process, not a thread:
#: copying, decoding and parsing 10 MB are single C calls that hold the GIL for 30-130
#: ms on a loaded host, and the event loop waits that long for it beside a thread.
parse_limiter = trio.CapacityLimiter(2)


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
    #: path -> what a big body's child gets beside the body (JSON; bigbody.py), asked for
    #: when such a body starts to arrive.
    big_body_extras: dict[str, Callable[[], Any]] = field(default_factory=dict)

    def add(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method.upper(), path)] = handler

    def route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            self.add(method, path, handler)
            return handler

        return decorate

    def allowed(self, path: str) -> list[str]:
        """The methods ``path`` answers (GET implies HEAD), for ``Allow``."""
        methods = {method for method, route in self.routes if route == path}
        if "GET" in methods:
            methods.add("HEAD")
        return sorted(methods)

    async def dispatch(self, request: Request) -> tuple[int, "dict[str, Any] | Streaming"]:
        """Run the handler; its exception becomes a status through the one table
        in :mod:`paddedcell.daemon.validate` (unknown ones: a logged 500)."""
        method = "GET" if request.method == "HEAD" else request.method
        handler = self.routes.get((method, request.path))
        if handler is None:
            if any(path == request.path for _, path in self.routes):
                return 405, {"error": f"{request.method} is not allowed on {request.path}; "
                                      f"use {' or '.join(self.allowed(request.path))}"}
            return 404, {"error": f"no route {request.path}; see GET /healthz for the version"}
        try:
            return 200, await handler(request)
        except Exception as exc:
            return validate.answer_for(exc, lambda what: log.exception(
                "%s for %s %s", what, request.method, request.path))


def peer_credentials(sock: trio.socket.SocketType) -> tuple[int | None, int | None]:
    """``(pid, uid)`` of the peer from ``SO_PEERCRED``; ``(None, None)`` if unreadable."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None, None
    pid, uid, _gid = struct.unpack("3i", raw)
    return (pid if pid > 0 else None), uid


def _hung_up(sock: trio.socket.SocketType) -> bool:
    """The peer closed both directions (``POLLHUP``), not merely its sending half.

    On a Unix stream socket end-of-file on reading only says the client is done
    sending (``shutdown(SHUT_WR)`` is legal HTTP/1.1); a hang-up is a full close.
    """
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLOUT)
        return any(events & (select.POLLHUP | select.POLLERR | select.POLLNVAL)
                   for _, events in poller.poll(0))
    except (OSError, ValueError):
        return True


class _Peer:
    """Watches the client while an answer is produced.

    Bytes that arrive are the client's next request(s), kept for h11 (at most
    ``MAX_PIPELINED_BYTES``). End-of-file is a half-close, not a departure: the
    watcher then polls for the hang-up. ``gone`` is set when the peer left.
    """

    def __init__(self, stream: trio.SocketStream, conn: h11.Connection):
        self.stream, self.conn = stream, conn
        self.gone = trio.Event()

    async def watch(self, on_gone: Callable[[], None] | None = None) -> None:
        try:
            while len(self.conn.trailing_data[0]) < MAX_PIPELINED_BYTES:
                data = await self.stream.receive_some(READ_SIZE)
                if not data:
                    break
                self.conn.receive_data(data)
            while not _hung_up(self.stream.socket):
                await trio.sleep(HANGUP_POLL_SECONDS)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        self.gone.set()
        if on_gone is not None:
            on_gone()


def _response(status: int, body_length: int, *, keep_alive: bool = True,
              headers: list[tuple[str, str]] = ()) -> h11.Response:
    fields = [("content-type", "application/json; charset=utf-8"),
              ("content-length", str(body_length)), *headers]
    if not keep_alive:
        fields.append(("connection", "close"))
    return h11.Response(status_code=status, headers=fields)


async def _send(stream: trio.SocketStream, conn: h11.Connection, status: int,
                payload: dict[str, Any], keep_alive: bool = True, *,
                headers: list[tuple[str, str]] = (), head: bool = False,
                body: bytes | None = None) -> None:
    """One whole JSON answer (headers only for HEAD, with the GET's length)."""
    if body is None:
        body = _encode_or_500(payload)
        if body is None:
            status, body = 500, validate.encode(validate.INTERNAL_ERROR)
    data = conn.send(_response(status, len(body), keep_alive=keep_alive, headers=headers))
    if not head:
        data += conn.send(h11.Data(data=body))
    await stream.send_all(data + conn.send(h11.EndOfMessage()))


def _encode_or_500(payload: Any) -> bytes | None:
    try:
        return validate.encode(payload)
    except (TypeError, ValueError):
        log.exception("a handler returned an answer that is not JSON")
        return None


async def _refuse(stream: trio.SocketStream, conn: h11.Connection, status: int,
                  message: str) -> None:
    """Answer an unreadable request and end the connection; a departed peer is fine."""
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    try:
        await _send(stream, conn, status, {"error": validate.one_line(message)}, False)
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
        pass


async def _send_streaming(stream: trio.SocketStream, conn: h11.Connection,
                          answer: Streaming) -> None:
    """Chunked 200 answer (h11 chooses chunked: no content-length, HTTP/1.1 peer).

    While producing, a :class:`_Peer` watches the client: ``peer_gone`` is set
    only when it hung up, so a client that half-closes after sending its
    request still gets the whole answer. A failed write also means it left.
    """
    response = h11.Response(status_code=200, headers=[("content-type", answer.content_type)])
    await stream.send_all(conn.send(response))
    peer = _Peer(stream, conn)

    async def write(data: bytes) -> None:
        if data:
            await stream.send_all(conn.send(h11.Data(data=data)))

    failed = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.watch)
        try:
            await answer.produce(write, peer.gone)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            failed = True
        except Exception:
            log.exception("streaming answer failed")
            failed = True
        nursery.cancel_scope.cancel()
    if failed:
        raise trio.BrokenResourceError("streaming answer failed")
    await stream.send_all(conn.send(h11.EndOfMessage()))


class _Timeout(Exception):
    pass


async def _read_request(stream: trio.SocketStream, conn: h11.Connection,
                        timeout: float, extras: dict[str, Callable[[], Any]] | None = None
                        ) -> tuple[h11.Request, "bytes | Digested"] | tuple[int, str] | None:
    """The next whole request and its body; ``(status, message)`` to refuse it;
    None when the peer closed between requests.

    Waiting for a request to begin has no limit (a kept-alive client may idle);
    once its first byte is here, the rest must arrive within ``timeout`` seconds.
    """
    deadline = trio.current_time() + timeout if conn.trailing_data[0] else math.inf

    async def next_event() -> Any:
        nonlocal deadline
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            with trio.move_on_at(deadline):
                data = await stream.receive_some(READ_SIZE)
                if deadline == math.inf:
                    deadline = trio.current_time() + timeout
                conn.receive_data(data)
                continue
            raise _Timeout

    try:
        event = await next_event()
        if not isinstance(event, h11.Request):  # ConnectionClosed, PAUSED
            return None
        declared = _content_length(event)
        if declared is not None and declared > MAX_BODY_BYTES:
            return 413, f"request body of {declared} bytes is over {MAX_BODY_BYTES} bytes"
        if declared is not None and declared > PARSE_IN_THREAD_BYTES:
            return await _read_big_body(event, next_event, extras or {})
        body = bytearray()
        while True:
            part = await next_event()
            if isinstance(part, h11.Data):
                body += part.data
                if len(body) > MAX_BODY_BYTES:
                    return 413, f"request body over {MAX_BODY_BYTES} bytes"
            elif isinstance(part, h11.EndOfMessage):
                return event, bytes(body)
            else:
                return None
    except h11.RemoteProtocolError as exc:
        # h11 hints 501 for a Transfer-Encoding it does not know: the client's to fix.
        status = exc.error_status_hint if 400 <= exc.error_status_hint < 500 else 400
        return status, f"bad HTTP request: {exc}"
    except _Timeout:
        return 408, f"request incomplete after {timeout:g} s (daemon.request_timeout_seconds)"


@dataclass
class Digested:
    """A big body as its child parsed it (bigbody.py): the body, or why it was refused."""

    body: "dict[str, Any] | str"


class _BigBodyChild:
    """``python -m paddedcell.daemon.bigbody ROUTE``, fed one body as it arrives."""

    def __init__(self, process: trio.Process):
        self.process = process

    @classmethod
    async def start(cls, route: str, extra: Any = None) -> "_BigBodyChild":
        import subprocess
        import sys

        from .. import orphans

        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "paddedcell.daemon.bigbody", route],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        orphans.claim(process.pid)
        child = cls(process)
        await child.feed(json.dumps(extra).encode() + b"\n")  # its first line (bigbody.main)
        return child

    async def feed(self, data: bytes) -> None:
        await self.process.stdin.send_all(data)

    async def result(self) -> Digested:
        await self.process.stdin.aclose()
        chunks = []
        while chunk := await self.process.stdout.receive_some(READ_SIZE):
            chunks.append(chunk)
        if await self.process.wait() != 0 or not chunks:
            raise RuntimeError(f"the body parser exited with {self.process.returncode}")
        import pickle

        return Digested(pickle.loads(b"".join(chunks)))

    async def aclose(self) -> None:
        from .. import orphans

        with trio.CancelScope(shield=True):
            if self.process.returncode is None:
                self.process.kill()
            await self.process.wait()
            await self.process.stdin.aclose()
            await self.process.stdout.aclose()
        orphans.release(self.process.pid)


def _extra(extras: dict[str, Callable[[], Any]], path: str) -> Any:
    """What the route gives a big body's child (None: nothing, or it could not say)."""
    make = extras.get(path)
    try:
        return make() if make is not None else None
    except Exception as exc:  # the route answers for it when the body is handled
        log.warning("no extra for a big body of %s: %s", path, exc)
        return None


async def _read_big_body(event: h11.Request, next_event: Callable[[], Awaitable[Any]],
                         extras: dict[str, Callable[[], Any]]
                         ) -> tuple[h11.Request, Digested] | tuple[int, str] | None:
    """Stream a body over PARSE_IN_THREAD_BYTES to a child that parses it (bigbody.py):
    no chunk of it is copied whole on the daemon's thread."""
    import pickle

    async with parse_limiter:
        try:
            child = await _BigBodyChild.start(_path(event), _extra(extras, _path(event)))
        except OSError as exc:
            return 503, f"cannot parse a big request body now ({exc}); try again"
        try:
            while True:
                part = await next_event()
                if isinstance(part, h11.Data):
                    await child.feed(part.data)
                elif isinstance(part, h11.EndOfMessage):
                    return event, await child.result()
                else:
                    return None
        except (RuntimeError, pickle.UnpicklingError, trio.BrokenResourceError) as exc:
            log.error("the big-body parser failed: %s", exc)
            return 500, "the daemon could not parse the request body; see its log"
        finally:
            await child.aclose()


def _content_length(event: h11.Request) -> int | None:
    for name, value in event.headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def serve_connection(stream: trio.SocketStream, router: Router, *,
                           request_timeout: float = 30.0,
                           credentials: tuple[int | None, int | None] | None = None) -> None:
    """Answer requests on one connection until the peer closes it.

    Whatever goes wrong here (a peer that leaves mid-answer, an h11 refusal, a
    bug) ends this connection only; it never reaches the listener.
    """
    try:
        pid, uid = credentials or peer_credentials(stream.socket)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        async with stream:
            if uid != os.getuid():  # None: SO_PEERCRED failed, so the peer is unverified
                log.warning("refused a connection from uid %s", "unknown" if uid is None else uid)
                return
            await _serve(stream, conn, router, uid, pid, request_timeout)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the peer left
    except Exception:
        log.exception("a connection failed; it is closed, the daemon goes on")


async def _serve(stream: trio.SocketStream, conn: h11.Connection, router: Router,
                 uid: int | None, pid: int | None, request_timeout: float) -> None:
    while True:
        got = await _read_request(stream, conn, request_timeout, router.big_body_extras)
        if got is None:
            return
        if isinstance(got[0], int):
            await _refuse(stream, conn, got[0], got[1])
            return
        event, raw = got
        head = event.method.upper() == b"HEAD"
        big = isinstance(raw, Digested) or len(raw) > PARSE_IN_THREAD_BYTES
        if isinstance(raw, Digested):
            request = _parse(event, b"", uid, pid, body=raw.body)
        elif big:  # a big chunked body: its length was not known before it came
            request = _parse(event, raw, uid, pid, body=await trio.to_thread.run_sync(
                validate.parse_body_or_refusal, raw, _path(event), limiter=cpu_limiter))
        else:
            request = _parse(event, raw, uid, pid)
        headers: list[tuple[str, str]] = []
        if isinstance(request, tuple):
            status, payload = request
        elif request.method in ("GET", "HEAD"):
            # Reading routes only: one whose client hung up is cancelled, so an
            # abandoned long poll gives its file descriptor back at once.
            answer = await _dispatch_watched(stream, conn, router, request)
            if answer is None:
                return
            status, payload = answer
        else:
            status, payload = await router.dispatch(request)
        if status == 405 and not isinstance(request, tuple):
            headers.append(("allow", ", ".join(router.allowed(request.path))))
        if isinstance(payload, Streaming):
            if head:
                await stream.send_all(conn.send(h11.Response(
                    status_code=200, headers=[("content-type", payload.content_type)]))
                    + conn.send(h11.EndOfMessage()))
            else:
                await _send_streaming(stream, conn, payload)
        else:
            body = None
            if big:
                body = await trio.to_thread.run_sync(_encode_or_500, payload, limiter=cpu_limiter)
                if body is None:
                    status, body = 500, validate.encode(validate.INTERNAL_ERROR)
            await _send(stream, conn, status, payload, headers=headers, head=head, body=body)
        if conn.our_state is h11.MUST_CLOSE:
            return
        try:
            conn.start_next_cycle()
        except h11.LocalProtocolError:
            return


async def _dispatch_watched(stream: trio.SocketStream, conn: h11.Connection, router: Router,
                            request: Request) -> tuple[int, "dict[str, Any] | Streaming"] | None:
    peer = _Peer(stream, conn)
    answer = None
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as handler_scope:
            nursery.start_soon(peer.watch, handler_scope.cancel)
            answer = await router.dispatch(request)
        nursery.cancel_scope.cancel()
    return answer


def _path(event: h11.Request) -> str:
    return urlsplit(event.target.decode("latin-1")).path


def _parse(event: h11.Request, raw: bytes, uid: int | None, pid: int | None = None,
           body: "dict[str, Any] | str | None" = None) -> Request | tuple[int, dict[str, Any]]:
    """The request; ``body``: already parsed from ``raw`` by a worker (a str: why it was
    refused)."""
    target = urlsplit(event.target.decode("latin-1"))
    query = dict(parse_qsl(target.query))
    if body is None:
        body = validate.parse_body_or_refusal(raw, target.path)
    if isinstance(body, str):
        return 400, {"error": body}
    method = event.method.decode("ascii").upper()
    return Request(method, target.path, query, body, uid, pid)


@dataclass(frozen=True)
class SocketLimits:
    """How many connections the daemon socket holds: ``daemon.max_connections`` in all
    (at most half the process's soft file limit, so descriptors stay for sessions and
    files) and ``daemon.max_connections_per_peer`` from one process (its SO_PEERCRED
    pid; at most half of the total), so one runaway client cannot take every slot. A
    connection over either cap is closed at once; accept errors back off
    (``supervisor.accept_backoff_max_seconds``)."""

    max_connections: int = 1024
    max_per_peer: int = 256
    accept_backoff_max: float = 1.0

    @classmethod
    def from_settings(cls, settings) -> "SocketLimits":
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        total = int(settings["daemon.max_connections"])
        if soft != resource.RLIM_INFINITY:
            total = min(total, max(2, soft // 2))
        return cls(total, max(1, min(int(settings["daemon.max_connections_per_peer"]),
                                     total // 2)),
                   float(settings["supervisor.accept_backoff_max_seconds"]))


async def serve_unix(router: Router, path: str, *, request_timeout: float = 30.0,
                     limits: SocketLimits = SocketLimits(),
                     task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Listen on ``path`` (mode 0600) and serve until cancelled.

    ``request_timeout``: seconds a begun request may take to arrive whole
    (``daemon.request_timeout_seconds``); a slower one is answered 408 and closed.
    """
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
    # A burst of several hundred connects must queue, not fail with EAGAIN; the
    # kernel caps this at net.core.somaxconn.
    sock.listen(max(LISTEN_BACKLOG, socket.SOMAXCONN))
    held: dict[int | None, int] = {}  # peer pid -> its open connections

    async def serve_counted(conn: trio.socket.SocketType, credentials) -> None:
        try:
            await serve_connection(trio.SocketStream(conn), router,
                                   request_timeout=request_timeout, credentials=credentials)
        finally:
            held[credentials[0]] -= 1
            if not held[credentials[0]]:
                del held[credentials[0]]

    with sock:
        async with trio.open_nursery() as nursery:
            task_status.started(sock)
            while True:
                conn, _ = await accept_retrying(sock, limits.accept_backoff_max,
                                                "daemon socket")
                credentials = peer_credentials(conn)
                if (sum(held.values()) >= limits.max_connections
                        or held.get(credentials[0], 0) >= limits.max_per_peer):
                    conn.close()  # over daemon.max_connections(_per_peer): this client waits
                    continue
                held[credentials[0]] = held.get(credentials[0], 0) + 1
                nursery.start_soon(serve_counted, conn, credentials)
