"""One client connection of the session proxy: read its request head, then a CONNECT
tunnel (blind, or handed to :mod:`.intercept`) or a relayed plain-HTTP exchange; refusals
as one-line answers. :mod:`.proxy` imports this at its first connection (h11 and the
relay are not needed by a session whose command never uses the network).
"""

from __future__ import annotations

import h11
import trio

from .policy import BadTarget, split_target
from .relay import (HttpRelay, ProxyContext, ProxyError, answer, next_event, open_upstream,
                    resolve_allowed, splice)


async def handle_client(stream: trio.SocketStream, ctx: ProxyContext) -> None:
    limits = ctx.limits
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
    try:
        with trio.move_on_after(limits.request_timeout) as timer:
            try:
                event = await next_event(stream, conn, limits.chunk_bytes)
            except h11.RemoteProtocolError as exc:
                await stream.send_all(answer(conn, exc.error_status_hint,
                                             f"egress: bad request ({exc})"))
                return
        if timer.cancelled_caught:
            await stream.send_all(answer(conn, 408, "egress: the request head did not arrive "
                                                     "in time"))
            return
        if not isinstance(event, h11.Request):
            return
        if event.method == b"CONNECT":
            await _tunnel(stream, conn, event, ctx)
        elif ctx.session is not None:
            # Plain HTTP is seen whole: placeholders are swapped (bindings that allow
            # http://) or refused, and answers masked, as inside an intercepted tunnel.
            from .intercept import SubstitutingExchange

            await HttpRelay(stream, conn, ctx, fixed=None,
                            exchange=SubstitutingExchange(ctx.session, https=False)).run(event)
        else:
            await HttpRelay(stream, conn, ctx, fixed=None).run(event)
    except ProxyError as exc:
        ctx.audit("egress-refused", line=exc.line)
        try:
            await stream.send_all(answer(conn, exc.status, exc.line))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError,
            h11.ProtocolError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def _tunnel(stream: trio.SocketStream, conn: h11.Connection, request: h11.Request,
                  ctx: ProxyContext) -> None:
    try:
        host, port = split_target(request.target.decode("ascii", "replace"))
    except BadTarget as exc:
        raise ProxyError(400, f"egress: {exc}") from None
    # Read the EndOfMessage h11 reports for a CONNECT (it has no body).
    event = await next_event(stream, conn, ctx.limits.chunk_bytes)
    if not isinstance(event, h11.EndOfMessage):
        raise ProxyError(400, "egress: a CONNECT request cannot have a body")
    session = ctx.session
    if session is not None and (session.handed or session.intercepts(host, port)):
        # A bound host, or any host once the session holds a placeholder: TLS ends here
        # (intercept.py) so requests can be swapped or looked at. The policy still decides
        # first, and nothing goes upstream before the client's handshake names the host.
        # Imported here: interception loads TLS and x509 (~80-200 ms at a start), and
        # a session without bound secrets never intercepts.
        from .intercept import serve_intercepted, serve_scanned

        await resolve_allowed(ctx, host, port)
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=[],
                                                     reason=b"Connection established")))
        if session.intercepts(host, port):
            await serve_intercepted(stream, conn.trailing_data[0], host, port, ctx)
        else:
            await serve_scanned(stream, conn.trailing_data[0], host, port, ctx)
        return
    upstream = await open_upstream(ctx, host, port)
    async with upstream:
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=[],
                                                     reason=b"Connection established")))
        leftover, _ = conn.trailing_data
        if leftover:
            await upstream.send_all(leftover)
        # A blind tunnel ends when its session is handed a placeholder: what the client
        # sends after that could hold it, and this tunnel cannot look.
        cut = []

        def may_send() -> bool:
            if session is not None and session.handed:
                cut.append(True)
                return False
            return True

        await splice(stream, upstream, chunk=ctx.limits.chunk_bytes,
                     idle=ctx.limits.idle_timeout, pipe_bytes=ctx.limits.tunnel_pipe_bytes,
                     a_may_send=None if session is None else may_send)
        if cut:
            ctx.audit("egress.tunnel-closed", host=host, port=port,
                      reason="the session was handed a placeholder")
