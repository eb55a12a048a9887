"""Connecting upstream and relaying bytes and HTTP exchanges: what the session proxy
(:mod:`.proxy`) and TLS interception (:mod:`.intercept`) share.

- :func:`resolve_allowed` / :func:`open_upstream`: the policy's checks on every address,
  at connect time; :func:`splice`: bytes both ways (``splice(2)`` between TCP sockets);
- :class:`HttpRelay`: requests of one client connection relayed upstream with h11, one
  exchange at a time, each side's bytes batched per read (:class:`Batch`); what an
  exchange changes is an :class:`Exchange` (the plain proxy's changes nothing).
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import select
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import h11
import trio

from .policy import Address, BadTarget, EgressLimits, EgressPolicy, Refusal, split_target

if TYPE_CHECKING:
    from .session import ProxySession

#: Request headers that concern one hop only (RFC 9110 §7.6.1), plus the proxy's own.
#: Content-Length and Transfer-Encoding stay: h11 frames the upstream body from them.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization",
                        b"proxy-authenticate", b"te", b"trailer", b"upgrade"})
_LOCAL_ADDRESS_TTL = 5.0


class ProxyError(Exception):
    """A request the proxy answers itself: ``status`` and a one-line ``line``."""

    def __init__(self, status: int, line: str):
        super().__init__(line)
        self.status = status
        self.line = line


def refused(refusal: Refusal) -> ProxyError:
    return ProxyError(403, refusal.line)


# -- the host's own addresses -------------------------------------------------------------

def parse_local_addresses(fib_trie: str, if_inet6: str) -> frozenset[Address]:
    """Addresses assigned to this host's interfaces, from ``/proc/net/fib_trie`` (IPv4: the
    ``/32 host LOCAL`` leaves) and ``/proc/net/if_inet6`` (IPv6: first column)."""
    found: set[Address] = set()
    last = None
    for line in fib_trie.splitlines():
        stripped = line.strip()
        if stripped.startswith("|--") or stripped.startswith("+--"):
            last = stripped[3:].strip().split("/")[0].split()[0]
        elif stripped.startswith("/32 host LOCAL") and last:
            try:
                found.add(ipaddress.IPv4Address(last))
            except ValueError:
                pass
    for line in if_inet6.splitlines():
        fields = line.split()
        if fields and len(fields[0]) == 32:
            try:
                found.add(ipaddress.IPv6Address(int(fields[0], 16)))
            except ValueError:
                pass
    return frozenset(found)


class LocalAddresses:
    """The host's addresses, re-read at most every few seconds (DHCP, VPNs change them)."""

    def __init__(self) -> None:
        self._at = -_LOCAL_ADDRESS_TTL
        self._value: frozenset[Address] = frozenset()

    def current(self) -> frozenset[Address]:
        now = time.monotonic()
        if now - self._at >= _LOCAL_ADDRESS_TTL:
            self._value = parse_local_addresses(_read("/proc/net/fib_trie"),
                                                _read("/proc/net/if_inet6"))
            self._at = now
        return self._value


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


# -- connecting upstream --------------------------------------------------------------------

@dataclass
class ProxyContext:
    """What every connection handler needs; one per :func:`serve_proxy`."""

    policy: EgressPolicy
    session: "ProxySession | None"
    local: LocalAddresses

    @property
    def limits(self) -> EgressLimits:
        return self.policy.limits

    def audit(self, event: str, **fields: Any) -> None:
        if self.session is not None:
            self.session.audit(event, **fields)


async def resolve_allowed(ctx: ProxyContext, host: str, port: int) -> list[Address]:
    """The addresses of ``host`` the policy allows, in resolver order; ProxyError if none."""
    refusal = ctx.policy.check_name(host, port)
    if refusal is not None:
        raise refused(refusal)
    try:
        literal: Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            with trio.fail_after(ctx.limits.connect_timeout):
                infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, trio.TooSlowError):
            raise ProxyError(502, f"egress: cannot resolve {host}") from None
        addresses = []
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if address not in addresses:
                addresses.append(address)
    local = ctx.local.current()
    allowed, first_refusal = [], None
    for address in addresses:
        refusal = ctx.policy.check_address(host, port, address, local)
        if refusal is None:
            allowed.append(address)
        elif first_refusal is None:
            first_refusal = refusal
    if not allowed:
        if first_refusal is None:
            raise ProxyError(502, f"egress: {host} has no address")
        raise refused(first_refusal)
    return allowed


async def open_upstream(ctx: ProxyContext, host: str, port: int) -> trio.SocketStream:
    """A TCP connection to an allowed address of ``host`` (tried in order)."""
    addresses = await resolve_allowed(ctx, host, port)
    last: Exception | None = None
    with trio.move_on_after(ctx.limits.connect_timeout):
        for address in addresses:
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            sock = trio.socket.socket(family, socket.SOCK_STREAM)
            try:
                await sock.connect((str(address), port))
            except OSError as exc:
                sock.close()
                last = exc
                continue
            return trio.SocketStream(sock)
        raise ProxyError(502, f"egress: cannot connect to {host}:{port} "
                              f"({getattr(last, 'strerror', None) or last})")
    raise ProxyError(504, f"egress: connecting to {host}:{port} timed out")


# -- byte and h11 plumbing --------------------------------------------------------------------

_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)


async def splice(a: trio.abc.Stream, b: trio.abc.Stream, *, chunk: int, idle: float,
                 a_may_send: Callable[[], bool] | None = None,
                 pipe_bytes: int = 1 << 20) -> None:
    """Copy both ways until both sides ended (half-closes forwarded) or ``idle`` seconds
    pass with no byte either way. Two TCP sockets are joined in the kernel (``splice(2)``
    through a pipe of ``pipe_bytes``: no byte is copied into Python; where the kernel
    refuses to splice them, a plain copy in the same thread); other streams (TLS) by
    large reads. ``a_may_send`` is asked before each of ``a``'s reads is passed on: once
    it says no, the copy ends both ways (a blind tunnel whose session was then handed a
    placeholder)."""
    if isinstance(a, trio.SocketStream) and isinstance(b, trio.SocketStream):
        return await _kernel_splice(a.socket, b.socket, pipe_bytes=pipe_bytes, idle=idle,
                                    a_may_send=a_may_send)
    with trio.CancelScope(deadline=trio.current_time() + idle) as scope:

        async def pump(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
            try:
                while True:
                    data = await source.receive_some(chunk)
                    if not data:
                        break
                    if source is a and a_may_send is not None and not a_may_send():
                        nursery.cancel_scope.cancel()
                        return
                    scope.deadline = trio.current_time() + idle
                    await sink.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                nursery.cancel_scope.cancel()
                return
            try:
                await sink.send_eof()  # type: ignore[attr-defined]
            except (AttributeError, trio.BrokenResourceError, trio.ClosedResourceError,
                    OSError):
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump, a, b)
            nursery.start_soon(pump, b, a)


class _Joined:
    """What the two copy threads of one kernel-spliced tunnel share: ``end`` stops both
    (shutting the sockets down wakes a thread that waits)."""

    def __init__(self, a: socket.socket, b: socket.socket) -> None:
        self.stop = False
        self.last = time.monotonic()
        self._sockets = (a, b)

    def end(self) -> None:
        self.stop = True
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _copy_thread(source: socket.socket, sink: socket.socket, pipe_bytes: int, joined: _Joined,
                 may_send: Callable[[], bool] | None) -> None:
    """One direction of a tunnel, in a worker thread: ``splice(2)`` from the socket into a
    pipe and out again, a pipe's worth per call (:class:`_Pipe`; the GIL is free during
    each; a call polls only when the last one would have blocked). Where the kernel
    cannot splice these sockets (or has no splice), :class:`_Buffer` moves the bytes."""
    mover: _Pipe | _Buffer = _Pipe(pipe_bytes) if hasattr(os, "splice") else _Buffer(pipe_bytes)
    src, dst = source.fileno(), sink.fileno()
    readable, writable = select.poll(), select.poll()
    readable.register(src, select.POLLIN | select.POLLPRI)
    writable.register(dst, select.POLLOUT)
    moved = False
    try:
        while not joined.stop:
            try:
                count = mover.read(src)
            except BlockingIOError:
                readable.poll(_POLL_MS)
                continue
            except OSError as exc:
                if moved or exc.errno not in _NO_SPLICE or isinstance(mover, _Buffer):
                    raise
                mover.close()
                mover = _Buffer(pipe_bytes)
                continue
            moved = True
            if count == 0:
                sink.shutdown(socket.SHUT_WR)
                return
            joined.last = time.monotonic()
            if may_send is not None and not may_send():
                joined.end()
                return
            while count and not joined.stop:
                try:
                    count -= mover.write(dst, count)
                except BlockingIOError:
                    writable.poll(_POLL_MS)
    except OSError:
        joined.end()
    finally:
        mover.close()


#: splice(2) errors that mean "not these descriptors" (nothing was read): copy instead.
_NO_SPLICE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF})


class _Pipe:
    """Bytes moved by ``splice(2)`` through a pipe of (at most) ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self._out, self._in = os.pipe2(os.O_CLOEXEC)
        try:  # bigger than the 64 KiB default: fewer calls and wake-ups per byte
            fcntl.fcntl(self._in, fcntl.F_SETPIPE_SZ, size)
        except OSError:
            pass  # over fs.pipe-max-size or the user's pipe pages: the default pipe works
        self._size = fcntl.fcntl(self._in, fcntl.F_GETPIPE_SZ)

    def read(self, src: int) -> int:
        return os.splice(src, self._in, self._size, flags=_SPLICE_FLAGS)

    def write(self, dst: int, count: int) -> int:
        return os.splice(self._out, dst, count, flags=_SPLICE_FLAGS)

    def close(self) -> None:
        os.close(self._out)
        os.close(self._in)


class _Buffer:
    """Bytes moved through one buffer of ``size`` bytes (``readv`` then ``write``)."""

    def __init__(self, size: int) -> None:
        self._buffer = memoryview(bytearray(size))
        self._filled = 0

    def read(self, src: int) -> int:
        self._filled = os.readv(src, [self._buffer])
        return self._filled

    def write(self, dst: int, count: int) -> int:
        return os.write(dst, self._buffer[self._filled - count:self._filled])

    def close(self) -> None:
        pass


#: How often a waiting copy thread looks whether its tunnel has ended (a backstop: the
#: end of a tunnel shuts its sockets down, which wakes the threads at once).
_POLL_MS = 500


async def _kernel_splice(a: Any, b: Any, *, pipe_bytes: int, idle: float,
                         a_may_send: Callable[[], bool] | None) -> None:
    """Both directions in worker threads (:func:`_copy_thread`: no trio scheduling per
    chunk); this task watches for the idle timeout and cancellation, and ends the
    threads on either."""
    joined = _Joined(a, b)
    limiter = trio.CapacityLimiter(2)  # this tunnel's two threads, outside trio's 40

    async def direction(source: Any, sink: Any, check: Callable[[], bool] | None) -> None:
        await trio.to_thread.run_sync(_copy_thread, source, sink, pipe_bytes, joined, check,
                                      limiter=limiter)

    async def watch() -> None:
        try:
            while not joined.stop:
                await trio.sleep(max(0.0, joined.last + idle - time.monotonic()) + 0.01)
                if time.monotonic() - joined.last >= idle:
                    joined.end()
        finally:
            if not joined.stop:  # cancelled from outside: the threads must end too
                joined.end()

    async with trio.open_nursery() as outer:
        outer.start_soon(watch)
        async with trio.open_nursery() as inner:
            inner.start_soon(direction, a, b, a_may_send)
            inner.start_soon(direction, b, a, None)
        joined.stop = True  # both directions ended: no need to shut anything down
        outer.cancel_scope.cancel()


async def next_event(stream: trio.abc.Stream, conn: h11.Connection, chunk: int) -> Any:
    """The next h11 event, reading from ``stream`` as needed (EOF is fed to h11)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            data = await stream.receive_some(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            data = b""
        conn.receive_data(data)


def answer(conn: h11.Connection, status: int, line: str) -> bytes:
    """A small text response (one line + newline) that closes the connection."""
    body = (line.replace("\r", " ").replace("\n", " ") + "\n").encode("utf-8", "replace")
    reason = {403: b"Forbidden", 400: b"Bad Request", 408: b"Request Timeout",
              413: b"Payload Too Large", 415: b"Unsupported Media Type",
              431: b"Request Header Fields Too Large", 502: b"Bad Gateway",
              503: b"Service Unavailable", 504: b"Gateway Timeout"}.get(status, b"Error")
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    try:
        return conn.send(h11.Response(status_code=status, headers=headers, reason=reason)) \
            + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError:  # the client broke the protocol first: answer raw
        return (b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n" % (status, reason, len(body))
                + body)


def forward_headers(headers: list[tuple[bytes, bytes]], *, host: bytes,
                    keep: frozenset[bytes] = frozenset()) -> list[tuple[bytes, bytes]]:
    """The request's headers without hop-by-hop ones (and those ``Connection`` names), with
    exactly one ``Host``: the authorised target's."""
    named = {token.strip().lower() for name, value in headers if name.lower() == b"connection"
             for token in value.split(b",")}
    drop = (HOP_BY_HOP | named | {b"host"}) - keep
    return [(b"host", host)] + [(n, v) for n, v in headers if n.lower() not in drop]


def authority(host: str, port: int, default: int) -> bytes:
    shown = f"[{host}]" if ":" in host else host
    return (shown if port == default else f"{shown}:{port}").encode("ascii")


class HttpRelay:
    """Requests from one client connection relayed upstream, one exchange at a time.

    ``fixed`` is None for a plain proxy connection (each request names its target in
    absolute form) or ``(host, port, scheme)`` inside an intercepted TLS connection, where
    the CONNECT target decides and the request's own target is a path. ``upstream_for``
    opens the upstream stream for a target; ``on_request`` may rewrite or refuse a request
    (substitution); ``on_response_body`` may rewrite response bytes (redaction)."""

    def __init__(self, stream: trio.abc.Stream, conn: h11.Connection, ctx: ProxyContext, *,
                 fixed: tuple[str, int, str] | None,
                 upstream_for: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None,
                 exchange: "Exchange | None" = None):
        self.stream = stream
        self.conn = conn
        self.ctx = ctx
        self.fixed = fixed
        self.upstream_for = upstream_for or (lambda host, port: open_upstream(ctx, host, port))
        self.exchange = exchange or Exchange()
        self._upstream: trio.abc.Stream | None = None
        self._upstream_conn: h11.Connection | None = None
        self._target: tuple[str, int] | None = None
        self._queued_body = b""

    async def run(self, request: h11.Request) -> None:
        try:
            while True:
                if not await self._one(request):
                    return
                self.conn.start_next_cycle()
                with trio.move_on_after(self.ctx.limits.idle_timeout):
                    event = await next_event(self.stream, self.conn, self.ctx.limits.chunk_bytes)
                    if isinstance(event, h11.Request):
                        request = event
                        continue
                return
        finally:
            if self._upstream is not None:
                await trio.aclose_forcefully(self._upstream)

    def _target_of(self, request: h11.Request) -> tuple[str, int, bytes]:
        target = request.target.decode("ascii", "replace")
        if self.fixed is not None:
            host, port, _ = self.fixed
            if not target.startswith("/") and target != "*":
                raise ProxyError(400, "egress: inside a tunnel, send origin-form requests")
            return host, port, request.target
        if target.startswith("https://"):
            raise ProxyError(400, "egress: use CONNECT for https:// (set HTTPS_PROXY)")
        if not target.startswith("http://"):
            raise ProxyError(400, "egress: this is a proxy; send absolute-form "
                                  "requests (http://host/path) or CONNECT")
        rest = target[len("http://"):]
        cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0),
                  default=len(rest))
        netloc, path = rest[:cut], rest[cut:]
        if "@" in netloc:
            raise ProxyError(400, "egress: credentials in the URL's authority are not "
                                  "forwarded; use an Authorization header")
        try:
            host, port = split_target(netloc, default_port=80)
        except BadTarget as exc:
            raise ProxyError(400, f"egress: {exc}") from None
        path = path.split("#")[0]
        if not path.startswith("/"):
            path = "/" + path
        return host, port, path.encode("ascii")

    async def _upstream_stream(self, host: str, port: int) -> tuple[trio.abc.Stream,
                                                                      h11.Connection]:
        if self._upstream is not None and self._target == (host, port) \
                and self._upstream_conn is not None \
                and self._upstream_conn.our_state is h11.IDLE:
            return self._upstream, self._upstream_conn
        if self._upstream is not None:
            await trio.aclose_forcefully(self._upstream)
            self._upstream = None
        self._upstream = await self.upstream_for(host, port)
        self._upstream_conn = h11.Connection(
            h11.CLIENT, max_incomplete_event_size=self.ctx.limits.max_header_bytes)
        self._target = (host, port)
        return self._upstream, self._upstream_conn

    async def _whole_body(self, request: h11.Request, body: "BodyFilter") -> h11.Request:
        """Read the client's whole body (at most ``egress.max_decoded_body_bytes``), let
        ``body.rewrite`` change it and queue it; the request gets its new length."""
        limit = self.ctx.limits.max_decoded_body_bytes
        if self.conn.they_are_waiting_for_100_continue:
            await self.stream.send_all(self.conn.send(
                h11.InformationalResponse(status_code=100, headers=[])))
        parts: list[bytes] = []
        size = 0
        with trio.fail_after(self.ctx.limits.request_timeout):
            while True:
                event = await next_event(self.stream, self.conn, self.ctx.limits.chunk_bytes)
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > limit:
                        raise ProxyError(413, f"egress refused: the request body is over "
                                              f"{limit} bytes (egress.max_decoded_body_bytes)")
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    raise trio.BrokenResourceError("the client left mid-request")
        data = body.rewrite(b"".join(parts))
        self._queued_body = data
        headers = [(n, v) for n, v in request.headers
                   if n.lower() not in (b"content-length", b"transfer-encoding", b"expect")]
        headers.append((b"content-length", str(len(data)).encode()))
        return h11.Request(method=request.method, target=request.target, headers=headers)

    async def _one(self, request: h11.Request) -> bool:
        """Relay one exchange; True when both connections may carry another."""
        host, port, path = self._target_of(request)
        scheme = self.fixed[2] if self.fixed is not None else "http"
        default = 443 if scheme == "https" else 80
        upgrade = self.exchange.upgrade(request)
        keep = frozenset({b"upgrade", b"connection"}) if upgrade else frozenset()
        headers = forward_headers(list(request.headers), host=authority(host, port, default),
                                  keep=keep)
        if upgrade:
            headers = [(n, v) for n, v in headers if n != b"connection"] \
                + [(b"connection", b"Upgrade")]
        # The exchange sees (and may rewrite or refuse) the request as it will go upstream.
        outgoing = await self.exchange.request(
            h11.Request(method=request.method, target=path, headers=headers),
            host, port, scheme, self.ctx)
        body = self.exchange.body(outgoing, host, port, self.ctx)
        chunk, idle = self.ctx.limits.chunk_bytes, self.ctx.limits.idle_timeout
        if body.whole:  # an encoded body: read it all, then the request with its length
            outgoing = await self._whole_body(outgoing, body)
        upstream, up = await self._upstream_stream(host, port)
        started = False
        switched = False
        failures: list[BaseException] = []

        # Bytes for one side collect in a Batch and go out when the next event needs a
        # read: a small exchange is one write each way (one TLS record, one wake-up of
        # the peer) instead of one per h11 event.
        to_upstream = Batch(upstream, up.send(outgoing))
        to_client = Batch(self.stream)

        async def send_body() -> None:
            if body.whole:
                queued, self._queued_body = self._queued_body, b""
                if queued:
                    to_upstream.add(up.send(h11.Data(data=queued)))
                to_upstream.add(up.send(h11.EndOfMessage()))
                await to_upstream.flush()
                return
            while True:
                event = await to_upstream.next_event(self.stream, self.conn, chunk)
                scope.deadline = trio.current_time() + idle
                if isinstance(event, h11.Data):
                    for piece in body.feed(bytes(event.data)):
                        to_upstream.add(up.send(h11.Data(data=piece)))
                elif isinstance(event, h11.EndOfMessage):
                    for piece in body.finish():
                        to_upstream.add(up.send(h11.Data(data=piece)))
                    to_upstream.add(up.send(h11.EndOfMessage(headers=event.headers)))
                    await to_upstream.flush()
                    return
                else:  # ConnectionClosed
                    raise trio.BrokenResourceError("the client left mid-request")

        async def relay_response() -> None:
            nonlocal started, switched
            redact = self.exchange.response(self.ctx)
            while True:
                event = await to_client.next_event(upstream, up, chunk)
                scope.deadline = trio.current_time() + idle
                if isinstance(event, h11.InformationalResponse):
                    if event.status_code == 101 and upgrade:
                        headers = list(zip([n for n, _ in event.headers],
                                           redact.headers([v for _, v in event.headers])))
                        to_client.add(self.conn.send(h11.InformationalResponse(
                            status_code=101, headers=headers, reason=event.reason)))
                        await to_client.flush()
                        switched = True
                        return
                    if event.status_code == 100 and self.conn.they_are_waiting_for_100_continue:
                        to_client.add(self.conn.send(event))
                    continue
                if isinstance(event, h11.Response):
                    drop = HOP_BY_HOP | redact.drop_headers
                    kept = [(n, v) for n, v in event.headers if n.lower() not in drop]
                    headers = list(zip([n for n, _ in kept],
                                       redact.headers([v for _, v in kept])))
                    started = True
                    to_client.add(self.conn.send(h11.Response(
                        status_code=event.status_code, headers=headers, reason=event.reason)))
                elif isinstance(event, h11.Data):
                    data = redact.feed(bytes(event.data))
                    if data:
                        to_client.add(self.conn.send(h11.Data(data=data)))
                elif isinstance(event, h11.EndOfMessage):
                    tail = redact.finish()
                    if tail:
                        to_client.add(self.conn.send(h11.Data(data=tail)))
                    to_client.add(self.conn.send(h11.EndOfMessage()))
                    await to_client.flush()
                    return
                else:  # ConnectionClosed
                    raise ProxyError(502, f"egress: {host}:{port} closed the connection "
                                          "before answering")

        async def guarded(task: Callable[[], Awaitable[None]], cancel: trio.CancelScope,
                          last: bool) -> None:
            try:
                await task()
            except Exception as exc:  # first failure wins; the other task is cancelled
                failures.append(exc)
                cancel.cancel()
                return
            if last:
                cancel.cancel()  # the response is whole: stop waiting for body bytes

        with trio.CancelScope(deadline=trio.current_time() + idle) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(guarded, relay_response, nursery.cancel_scope, True)
                nursery.start_soon(guarded, send_body, nursery.cancel_scope, False)
        if failures:
            raise failures[0]
        if scope.cancelled_caught:
            if started:
                raise trio.BrokenResourceError("idle timeout mid-response")
            raise ProxyError(504, f"egress: {host}:{port} did not answer in time")
        if switched:  # a WebSocket: the handshake went through the exchange, now frames
            frames = self.exchange.websocket(host, port, self.ctx)
            if frames is None:
                if up.trailing_data[0]:
                    await self.stream.send_all(up.trailing_data[0])
                if self.conn.trailing_data[0]:
                    await upstream.send_all(self.conn.trailing_data[0])
                await splice(self.stream, upstream, chunk=chunk, idle=idle,
                             pipe_bytes=self.ctx.limits.tunnel_pipe_bytes)
                return False
            outward, inward = frames
            await filtered_copy(self.stream, upstream, outward, inward, chunk=chunk, idle=idle,
                                first=(self.conn.trailing_data[0], up.trailing_data[0]))
            return False
        if self.conn.our_state is not h11.DONE:
            raise trio.BrokenResourceError("the response did not complete")
        reusable = (self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE)
        if up.our_state is h11.DONE and up.their_state is h11.DONE:
            up.start_next_cycle()
        else:
            await trio.aclose_forcefully(upstream)
            self._upstream = None
        return reusable


class Cut(Exception):
    """A filter of :func:`filtered_copy` ended the connection (it has said why)."""


async def filtered_copy(client: trio.abc.Stream, upstream: trio.abc.Stream,
                        outward: Callable[[bytes], bytes] | None,
                        inward: Callable[[bytes], bytes] | None, *, chunk: int, idle: float,
                        first: tuple[bytes, bytes] = (b"", b"")) -> None:
    """Bytes both ways, each direction through its filter (None: as they are), until
    both ended or ``idle`` seconds of silence; a filter raising :class:`Cut` closes the
    connection. ``first``: bytes already read from the client and from upstream."""
    with trio.CancelScope(deadline=trio.current_time() + idle) as scope:

        async def pump(source: trio.abc.Stream, sink: trio.abc.Stream,
                       change: Callable[[bytes], bytes] | None, data: bytes) -> None:
            try:
                while True:
                    if data:
                        scope.deadline = trio.current_time() + idle
                        shown = change(data) if change is not None else data
                        if shown:
                            await sink.send_all(shown)
                    data = await source.receive_some(chunk)
                    if not data:
                        break
                await sink.send_eof()  # type: ignore[attr-defined]
            except (Cut, trio.BrokenResourceError, trio.ClosedResourceError, OSError,
                    AttributeError):
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, upstream, outward, first[0])
            nursery.start_soon(pump, upstream, client, inward, first[1])


class Batch:
    """Bytes for ``sink``, written when the reader needs more input (or on ``flush``)."""

    def __init__(self, sink: trio.abc.Stream, first: bytes | None = b""):
        self.sink = sink
        self.parts: list[bytes] = [first] if first else []

    def add(self, data: bytes | None) -> None:
        if data:
            self.parts.append(data)

    async def flush(self) -> None:
        if self.parts:
            data = b"".join(self.parts)
            self.parts.clear()
            await self.sink.send_all(data)

    async def next_event(self, stream: trio.abc.Stream, conn: h11.Connection,
                         chunk: int) -> Any:
        """:func:`next_event`, flushing first whenever it would have to read."""
        event = conn.next_event()
        if event is h11.NEED_DATA:
            await self.flush()
            event = await next_event(stream, conn, chunk)
        return event


class BodyFilter:
    """Request body bytes as they pass: ``feed`` returns pieces to send, ``finish`` the
    rest. This one passes everything through unchanged. A filter with ``whole`` set
    takes the body in one piece instead (``rewrite``), before the request goes out."""

    whole = False

    def rewrite(self, data: bytes) -> bytes:
        return data

    def feed(self, data: bytes) -> list[bytes]:
        return [data] if data else []

    def finish(self) -> list[bytes]:
        return []


class ResponseFilter:
    """Response body bytes and header values as they pass (redaction inside intercepted
    connections). A filter that can change the length names ``content-length`` in
    ``drop_headers`` (h11 then sends the body chunked)."""

    drop_headers: frozenset[bytes] = frozenset()

    def headers(self, values: list[bytes]) -> list[bytes]:
        return values

    def feed(self, data: bytes) -> bytes:
        return data

    def finish(self) -> bytes:
        return b""


class Exchange:
    """What happens to one request and its response; the plain proxy changes nothing.
    :mod:`.intercept` subclasses it to substitute placeholders and redact answers."""

    async def request(self, request: h11.Request, host: str, port: int, scheme: str,
                      ctx: ProxyContext) -> h11.Request:
        """The request as it goes upstream (origin-form target, forwarded headers)."""
        return request

    def upgrade(self, request: h11.Request) -> bool:
        """Whether to relay this request's ``Upgrade`` (then tunnel after a 101)."""
        return False

    def body(self, request: h11.Request, host: str, port: int, ctx: ProxyContext) -> BodyFilter:
        return BodyFilter()

    def response(self, ctx: ProxyContext) -> ResponseFilter:
        return ResponseFilter()

    def websocket(self, host: str, port: int, ctx: ProxyContext
                  ) -> tuple[Callable[[bytes], bytes] | None,
                             Callable[[bytes], bytes] | None] | None:
        """After a 101: filters for the client's and the server's bytes, or None to
        splice them untouched."""
        return None
