"""A session's HTTP(S) proxy: CONNECT tunnels and absolute-form HTTP, trio + h11.

The guarantee: every upstream connection goes to an address :mod:`.policy` allowed, chosen
after resolving the name here, at connect time (the session has no DNS and no route of its
own; the listener lives in its network namespace, this code in the supervisor's).

Theory of operation, per accepted connection:

1. Read one request head (``egress.request_timeout_seconds``, ``egress.max_header_bytes``).
2. ``CONNECT host:port``: check the name, resolve, check each address, connect to the first
   allowed one, answer 200 and splice bytes both ways (``egress.chunk_bytes`` per read,
   no per-byte Python work; ``egress.idle_timeout_seconds`` of silence closes). When the
   session intercepts that host (a bound secret), or holds any placeholder at all (so
   none may leave unseen), :mod:`.intercept` takes the connection; a blind tunnel opened
   before the session's first placeholder closes once it has one.
3. ``GET http://host/path``: the same checks, then the request goes upstream in origin
   form with ``Host`` set from the target (authorisation is by target, never by ``Host``)
   and hop-by-hop headers dropped; the client may send more requests on the connection.
4. Anything refused gets one 4xx/5xx whose one-line body starts ``egress refused:`` (or
   says what failed), then the connection closes.

At most ``egress.max_connections`` connections are served at once; the rest wait in the
listener's backlog (nothing is read from them until a slot frees).

This module is the accept loop only (trio): one connection's handling is
:mod:`.connection`, imported with h11 and :mod:`.relay` at the first connection, and
:func:`serve_session_proxy` builds the policy then too; TLS interception (:mod:`.intercept`,
x509) loads only when a session intercepts.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from .policy import EgressPolicy
    from .session import ProxySession


# -- the accept loop ------------------------------------------------------------------------

async def serve_proxy(listener: socket.socket, policy: EgressPolicy, *,
                      session: "ProxySession | None" = None,
                      task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve the session's proxy on ``listener`` (already listening) until cancelled."""
    sock = trio.socket.from_stdlib_socket(listener)
    slots = trio.Semaphore(policy.limits.max_connections)
    ctx: Any = None
    handle: Any = None

    async def serve_one(client: trio.socket.SocketType) -> None:
        try:
            await handle(trio.SocketStream(client), ctx)
        finally:
            slots.release()

    async with trio.open_nursery() as nursery:
        task_status.started()
        while True:
            await slots.acquire()
            try:
                client, _ = await sock.accept()
            except OSError:
                slots.release()
                await trio.sleep(0.05)  # EMFILE and friends: let connections finish
                continue
            except BaseException:
                slots.release()
                raise
            if handle is None:  # the first connection: h11 and the relay load now
                from .connection import handle_client
                from .relay import LocalAddresses, ProxyContext

                ctx, handle = ProxyContext(policy, session, LocalAddresses()), handle_client
            nursery.start_soon(serve_one, client)


async def serve_session_proxy(listener: socket.socket, settings: Any, *,
                              session: "ProxySession | None" = None) -> None:
    """:func:`serve_proxy` for a session, under ``settings``' policy, built (and the proxy's
    code imported) only once the first connection arrives: most commands never connect,
    and a foreground ``pcexec`` would pay the imports at every start."""
    await trio.lowlevel.wait_readable(listener)
    from .policy import EgressPolicy

    await serve_proxy(listener, EgressPolicy.from_settings(settings), session=session)
