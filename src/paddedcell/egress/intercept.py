"""TLS interception for bound hosts: the only place a real value joins a request.

Theory of operation, for a CONNECT to a host a binding names (the policy already allowed
the target):

1. The client's TLS ends here with a leaf for the CONNECT target from the session CA;
   the handshake fails unless its SNI is that target (``ca._sni_must_be``); ALPN offers
   ``http/1.1`` only, so HTTP/2 clients fall back.
2. Each request is read with h11. Authorisation is by the CONNECT target: the request's
   own ``Host`` is replaced by it. :class:`SubstitutingExchange` swaps placeholders for
   values where the bindings allow and refuses the request otherwise (403 inside the
   tunnel, one line, audited with the key and host, never the value).
3. The upstream connection opens at the first request: TCP to an address the policy
   allowed, then TLS verified against the system trust (``ProxySession.upstream_context``)
   before any request byte is written, so a substituted value never reaches a server that
   could not prove it is the host.
4. Responses come back through the session's masks (store values and placeholders), so an
   endpoint that echoes the request shows ``######``. Requests ask for
   ``Accept-Encoding: identity``: a compressed answer would hide what the mask looks for.
5. A WebSocket upgrade: the handshake goes through steps 2–4, then bytes are spliced.

Once the session holds a placeholder, a CONNECT to a host no binding names is looked into
as well (:func:`serve_scanned`): the same termination and upstream verification, but each
request is only searched — one carrying a placeholder is refused (403, audited), any other
goes out as sent and its answer comes back untouched. The cost: Python TLS on both sides
for that traffic, and clients that pin a certificate (or need their own client
certificate) fail toward such hosts while the session holds a placeholder.
"""

from __future__ import annotations

import re
import ssl

import h11
import trio

from .relay import (BodyFilter, Cut, Exchange, HttpRelay, ProxyContext, ProxyError, ResponseFilter,
                    answer, filtered_copy, next_event, open_upstream)
from .session import ProxySession
from .substitute import Destination, EncodedBody, Refused, Substituter, Undecodable
from .websocket import ClientFrames, FrameError, ServerFrames


class PrefixedStream(trio.abc.Stream):
    """``stream`` with ``prefix`` (bytes the h11 reader already took) read first."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes):
        self._stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            return data
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Masked(ResponseFilter):
    """Response bytes through a fresh stream of the session's masks."""

    drop_headers = frozenset({b"content-length"})  # masking may change the length

    def __init__(self, stream):
        self._stream = stream

    def feed(self, data: bytes) -> bytes:
        return self._stream.feed(data)

    def finish(self) -> bytes:
        return self._stream.flush()

    def headers(self, values: list[bytes]) -> list[bytes]:
        """All header values through one fresh stream, joined by newlines (which no value
        and no secret holds: h11 and the vault refuse them), then split again."""
        shown = self._stream.fresh()
        masked = (shown.feed(b"\n".join(values)) + shown.flush()).split(b"\n")
        if len(masked) == len(values):
            return masked
        mask = getattr(shown, "mask", "######")  # cannot happen; fail closed if it does
        return [mask.encode() if isinstance(mask, str) else bytes(mask)] * len(values)


class _SubstitutedBody(BodyFilter):
    def __init__(self, stream):
        self._stream = stream

    def feed(self, data: bytes) -> list[bytes]:
        return self._stream.feed(data)

    def finish(self) -> list[bytes]:
        return self._stream.finish()


class _WholeBody(BodyFilter):
    """An encoded body (:class:`~.substitute.EncodedBody`), rewritten in one piece."""

    whole = True

    def __init__(self, encoded: EncodedBody, refused):
        self._encoded = encoded
        self._refused = refused

    def rewrite(self, data: bytes) -> bytes:
        try:
            return self._encoded.rewrite(data)
        except Refused as exc:
            raise self._refused(exc) from None
        except Undecodable as exc:
            raise ProxyError(415, exc.line) from None


class SubstitutingExchange(Exchange):
    """Placeholders swapped or refused (:mod:`.substitute`), answers masked. With
    ``scan_only`` (a host no binding names, terminated only to look for placeholders)
    nothing can be swapped, so requests go out as sent and answers come back untouched."""

    def __init__(self, session: ProxySession, *, scan_only: bool = False,
                 https: bool = True):
        self.session = session
        self.scan_only = scan_only
        self._https = https
        self._substituter: Substituter | None = None

    async def request(self, request: h11.Request, host: str, port: int, scheme: str,
                      ctx: ProxyContext) -> h11.Request:
        substituter = Substituter(self.session.grants(), Destination(host, port, scheme))
        self._substituter = substituter
        try:
            headers = substituter.headers(list(request.headers))
            target = substituter.target(request.target)
        except Refused as exc:
            self.session.audit("egress.refused", key=exc.key, host=exc.host, port=port,
                               method=request.method.decode("ascii", "replace"))
            raise ProxyError(403, exc.line) from None
        if self.upgrade(request):  # no permessage-deflate: frames must stay searchable
            headers = [(n, v) for n, v in headers if n != b"sec-websocket-extensions"]
        if self.session.grants() and not self.scan_only:
            headers = [(n, v) for n, v in headers if n != b"accept-encoding"] \
                + [(b"accept-encoding", b"identity")]
        if substituter.substituted:
            self.session.audit("egress.substituted", keys=sorted(substituter.substituted),
                               host=host, port=port,
                               method=request.method.decode("ascii", "replace"))
        return h11.Request(method=request.method, target=target, headers=headers)

    def upgrade(self, request: h11.Request) -> bool:
        return any(n == b"upgrade" and v.lower() == b"websocket" for n, v in request.headers)

    def body(self, request: h11.Request, host: str, port: int, ctx: ProxyContext) -> BodyFilter:
        substituter = self._substituter
        if substituter is None or not substituter.grants:
            return BodyFilter()
        session = self.session

        def refused(exc: Refused) -> ProxyError:
            session.audit("egress.refused", key=exc.key, host=exc.host, port=port,
                          part="body")
            return ProxyError(403, exc.line)

        coding = b", ".join(v for n, v in request.headers if n.lower() == b"content-encoding")
        if coding.strip() and coding.strip().lower() != b"identity":
            try:
                encoded = substituter.encoded_body(coding, ctx.limits.max_decoded_body_bytes)
            except Undecodable as exc:
                session.audit("egress.refused", host=host, port=port, part="body",
                              line=exc.line)
                raise ProxyError(415, exc.line) from None
            return _WholeBody(encoded, refused)

        class Audited(_SubstitutedBody):
            def feed(self, data: bytes) -> list[bytes]:
                try:
                    return super().feed(data)
                except Refused as exc:
                    raise refused(exc) from None

        return Audited(substituter.body())

    def websocket(self, host: str, port: int, ctx: ProxyContext):
        """Client frames searched (and swapped where the binding allows a body); server
        frames through the masks, unless this host is only searched."""
        session = self.session
        destination = Destination(host, port, "https" if self._https else "http")

        def replace(data: bytes) -> bytes:
            return Substituter(session.grants(), destination).replace(data, "body")

        def window() -> int:
            return Substituter(session.grants(), destination).window

        client = ClientFrames(replace, window)

        def outward(data: bytes) -> bytes:
            try:
                return client.feed(data)
            except Refused as exc:
                session.audit("egress.refused", key=exc.key, host=exc.host, port=port,
                              part="websocket")
            except FrameError as exc:
                session.audit("egress.refused", host=host, port=port, part="websocket",
                              line=exc.line)
            raise Cut()

        if self.scan_only or session.response_filter() is None:
            return outward, None
        server = ServerFrames(session.response_filter, ctx.limits.max_decoded_body_bytes)

        def inward(data: bytes) -> bytes:
            try:
                return server.feed(data)
            except FrameError as exc:
                session.audit("egress.refused", host=host, port=port, part="websocket",
                              line=exc.line)
                raise Cut() from None

        return outward, inward

    def response(self, ctx: ProxyContext) -> ResponseFilter:
        if self.scan_only:
            return ResponseFilter()
        stream = self.session.response_filter()
        return ResponseFilter() if stream is None else _Masked(stream)


async def open_tls_upstream(ctx: ProxyContext, host: str, port: int) -> trio.SSLStream:
    """TCP to an allowed address, then TLS verified for ``host`` (HTTP/1.1 by ALPN)."""
    assert ctx.session is not None
    tcp = await open_upstream(ctx, host, port)
    tls = trio.SSLStream(tcp, ctx.session.upstream_context(), server_hostname=host,
                         https_compatible=True)
    try:
        with trio.fail_after(ctx.limits.connect_timeout):
            await tls.do_handshake()
    except trio.TooSlowError:
        await trio.aclose_forcefully(tcp)
        raise ProxyError(504, f"egress: the TLS handshake with {host}:{port} timed out") \
            from None
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(tcp)
        cause = exc.__cause__
        why = getattr(cause, "verify_message", None) or getattr(cause, "reason", None) \
            or str(cause or exc)
        if isinstance(cause, ssl.SSLCertVerificationError):
            ctx.audit("egress.upstream-unverified", host=host, port=port, reason=str(why))
            raise ProxyError(502, f"egress: {host}'s certificate does not verify ({why}); "
                                  "nothing was sent") from None
        raise ProxyError(502, f"egress: TLS with {host}:{port} failed ({why})") from None
    if tls.selected_alpn_protocol() not in (None, "http/1.1"):
        await trio.aclose_forcefully(tls)
        raise ProxyError(502, f"egress: {host} would not speak HTTP/1.1")
    return tls


async def serve_intercepted(client: trio.abc.Stream, leftover: bytes, host: str, port: int,
                            ctx: ProxyContext) -> None:
    """Terminate the client's TLS for ``host`` and relay its requests (module docstring)."""
    session = ctx.session
    assert session is not None
    stream = PrefixedStream(client, leftover) if leftover else client
    tls = trio.SSLStream(stream, session.ca.server_context(host), server_side=True,
                         https_compatible=True)
    limits = ctx.limits
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
    request = None
    with trio.move_on_after(limits.request_timeout):
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:
            # A wrong SNI, a client that does not trust the session CA, or one that left.
            ctx.audit("egress.handshake-failed", host=host, port=port,
                      reason=str(exc.__cause__ or exc))
            return
        try:
            request = await next_event(tls, conn, limits.chunk_bytes)
        except h11.RemoteProtocolError as exc:
            await _say(tls, conn, exc.error_status_hint, f"egress: bad request ({exc})")
            return
    if not isinstance(request, h11.Request):
        await trio.aclose_forcefully(tls)
        return
    relay = HttpRelay(tls, conn, ctx, fixed=(host, port, "https"),
                      upstream_for=lambda h, p: open_tls_upstream(ctx, h, p),
                      exchange=SubstitutingExchange(
                          session, scan_only=not session.intercepts(host, port)))
    try:
        await relay.run(request)
    except ProxyError as exc:
        ctx.audit("egress.answered", host=host, port=port, status=exc.status, line=exc.line)
        await _say(tls, conn, exc.status, exc.line)
    finally:
        await trio.aclose_forcefully(tls)


async def _say(tls: trio.abc.Stream, conn: h11.Connection, status: int, line: str) -> None:
    try:
        await tls.send_all(answer(conn, status, line))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


_HTTP_START = re.compile(rb"[A-Z]{3,10} ")


async def serve_scanned(client: trio.abc.Stream, leftover: bytes, host: str, port: int,
                        ctx: ProxyContext) -> None:
    """A CONNECT to a host no binding names, in a session holding placeholders: nothing
    may carry one there, so the connection is looked into. TLS (a ClientHello first) is
    terminated like a bound host's, upstream verified, and each request refused if a
    placeholder is in it, else relayed as sent; plain HTTP the same without TLS; any
    other protocol is copied while its bytes are searched, and cut on a placeholder."""
    first = leftover
    with trio.move_on_after(ctx.limits.request_timeout):
        while not first:
            try:
                first = await client.receive_some(ctx.limits.chunk_bytes)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            if not first:
                return
    if not first:
        return
    if first[:1] == b"\x16":  # a TLS handshake record
        await serve_intercepted(client, first, host, port, ctx)
        return
    stream = PrefixedStream(client, first)
    if _HTTP_START.match(first):
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=ctx.limits.max_header_bytes)
        try:
            request = await next_event(stream, conn, ctx.limits.chunk_bytes)
        except h11.RemoteProtocolError as exc:
            await _say(stream, conn, exc.error_status_hint, f"egress: bad request ({exc})")
            return
        if not isinstance(request, h11.Request):
            return
        assert ctx.session is not None
        relay = HttpRelay(stream, conn, ctx, fixed=(host, port, "http"),
                          exchange=SubstitutingExchange(ctx.session, scan_only=True,
                                                        https=False))
        try:
            await relay.run(request)
        except ProxyError as exc:
            await _say(stream, conn, exc.status, exc.line)
        return
    upstream = await open_upstream(ctx, host, port)
    async with upstream:
        await _searched_copy(stream, upstream, host, port, ctx)


async def _searched_copy(client: trio.abc.Stream, upstream: trio.abc.Stream, host: str,
                         port: int, ctx: ProxyContext) -> None:
    """Bytes both ways; the client's are searched for placeholders (raw or percent-encoded,
    across reads) before they go, and the connection is cut at the first one. Nothing is
    held back: a protocol of small exchanges keeps working."""
    session = ctx.session
    assert session is not None
    tail = b""

    def outward(data: bytes) -> bytes:
        nonlocal tail
        search = Substituter(session.grants(), Destination(host, port, "tcp"))
        try:
            search.replace(tail + data, "body")
        except Refused as exc:
            session.audit("egress.refused", key=exc.key, host=exc.host, port=port,
                          part="stream")
            raise Cut() from None
        tail = (tail + data)[-(search.window - 1):] if search.window > 1 else b""
        return data

    await filtered_copy(client, upstream, outward, None, chunk=ctx.limits.chunk_bytes,
                        idle=ctx.limits.idle_timeout)
