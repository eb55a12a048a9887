"""``accept()`` that outlasts a flood: the daemon socket and every session channel.

Out of descriptors or kernel memory (EMFILE, ENFILE, ENOBUFS, ENOMEM: a flood, here or
anywhere in the process) is a moment to wait, not a reason to end the listener; the wait
starts at 10 ms and doubles up to ``supervisor.accept_backoff_max_seconds``.
"""

from __future__ import annotations

import errno
import logging

import trio

log = logging.getLogger("paddedcell.accept")

#: accept() errors that mean "out of descriptors or memory for now": back off, retry.
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
FIRST_BACKOFF_SECONDS = 0.01


async def accept_retrying(sock: trio.socket.SocketType, backoff_max: float, what: str):
    """The next ``(conn, address)`` from ``sock``; capacity errors are logged (on the first
    and the longest waits) and retried, any other error is raised."""
    backoff = 0.0
    while True:
        try:
            return await sock.accept()
        except OSError as exc:
            if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                raise
            backoff = min(max(backoff * 2, FIRST_BACKOFF_SECONDS), backoff_max)
            if backoff in (backoff_max, FIRST_BACKOFF_SECONDS):
                log.warning("%s accept failed (%s); retrying in %.2f s", what,
                            errno.errorcode.get(exc.errno, exc.errno), backoff)
            await trio.sleep(backoff)
