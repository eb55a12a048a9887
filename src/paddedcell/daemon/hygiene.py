"""A daemon that goes away when it has nothing left to serve.

Test runs and short-lived homes used to leave daemons running for hours after
their ``PADDEDCELL_HOME`` was deleted. Every ``daemon.hygiene_check_seconds``
the daemon checks:

- its home, or its socket, is gone (deleted, or replaced by another
  daemon's): nobody can reach it any more, so it stops (any daemon);
- a daemon started on demand (``client.ensure_daemon`` marks it with
  ``PADDEDCELL_DAEMON=on-demand``) with no running session, no restart job
  and no request in flight or answered for ``daemon.idle_exit_minutes``
  stops too; the plugin and the CLIs start it again when they need it.
  ``0`` minutes keeps it forever. A daemon a person started with
  ``paddedcell serve`` is theirs to stop.

Stopping is the ordinary shutdown (the nursery is cancelled: sessions are
ended, the socket and pid file are removed).

Hooked into ``app.run_daemon`` with one line, after the routes registered:
``hygiene.install(router, ctx)`` wraps every handler to count requests.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any

import trio

from .client import socket_path

log = logging.getLogger("paddedcell.daemon")

ON_DEMAND_VARIABLE = "PADDEDCELL_DAEMON"


class Activity:
    """Requests in flight and the time the last one ended."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.last = time.monotonic()

    def wrap(self, handler):
        @functools.wraps(handler)
        async def counted(request):
            self.in_flight += 1
            try:
                return await handler(request)
            finally:
                self.in_flight -= 1
                self.last = time.monotonic()

        return counted


def _identity(path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def gone_reason(home, sock, sock_identity) -> str | None:
    """Why this daemon can no longer be reached, or None."""
    if not os.path.isdir(home):
        return f"its home {home} is gone"
    current = _identity(sock)
    if current is None:
        return f"its socket {sock} is gone"
    if sock_identity is not None and current != sock_identity:
        return f"its socket {sock} now belongs to another daemon"
    return None


def busy(ctx: Any) -> bool:
    supervisor = ctx.services.get("supervisor")
    if supervisor is not None and supervisor.live_sessions():
        return True
    coordinator = ctx.services.get("restart")
    return coordinator is not None and getattr(coordinator, "job", None) is not None


async def watch(ctx: Any, activity: Activity, scope: trio.CancelScope) -> None:
    settings = ctx.settings
    home, sock = str(settings.home), str(socket_path(settings))
    interval = float(settings["daemon.hygiene_check_seconds"])
    idle_minutes = float(settings["daemon.idle_exit_minutes"])
    on_demand = os.environ.get(ON_DEMAND_VARIABLE) == "on-demand"
    sock_identity = None
    with trio.move_on_after(5):  # the socket is bound just after we are installed
        while sock_identity is None and os.path.isdir(home):
            await trio.sleep(0.05)
            sock_identity = _identity(sock)
    while True:
        await trio.sleep(interval)
        reason = gone_reason(home, sock, sock_identity)
        if reason is None and on_demand and idle_minutes > 0:
            if busy(ctx) or activity.in_flight:
                activity.last = time.monotonic()
            elif time.monotonic() - activity.last >= idle_minutes * 60:
                reason = (f"it was started on demand and had no session and no client for "
                          f"{idle_minutes:g} min (daemon.idle_exit_minutes)")
        if reason is not None:
            log.info("stopping: %s", reason)
            scope.cancel()
            return


def install(router: Any, ctx: Any) -> Activity:
    """Count requests through every registered route and start the watcher."""
    activity = Activity()
    for key, handler in list(router.routes.items()):
        router.routes[key] = activity.wrap(handler)
    ctx.nursery.start_soon(watch, ctx, activity, ctx.nursery.cancel_scope)
    return activity
