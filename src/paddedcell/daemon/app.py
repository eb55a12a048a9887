"""The daemon process: single instance, routes from each domain, clean shutdown.

Each domain contributes its routes through a ``register(router, ctx)`` function
listed in ``ROUTE_MODULES``; ``ctx`` gives it the settings and a nursery for
background tasks that live as long as the daemon.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .. import __version__, config, exits
from . import hygiene, routes_session
from .client import socket_path, socket_path_problem
from .http import Request, Router, SocketLimits, serve_unix

#: Modules with a ``register(router, ctx)`` function, imported at start.
ROUTE_MODULES: list[str] = [
    "paddedcell.daemon.routes_restart",
    "paddedcell.daemon.routes_vault",
    "paddedcell.daemon.routes_exec",
]

log = logging.getLogger("paddedcell.daemon")


@dataclass
class DaemonContext:
    settings: config.Settings
    nursery: trio.Nursery
    services: dict[str, Any] = field(default_factory=dict)


class AlreadyRunning(RuntimeError):
    pass


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": round(record.created, 3), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def build_router(ctx: DaemonContext, started: float) -> Router:
    """Every route of the daemon, as its socket serves them (and its sessions' channels)."""
    router = Router()

    @router.route("GET", "/healthz")
    async def healthz(request: Request) -> dict[str, Any]:
        return {"ok": True, "version": __version__, "pid": os.getpid(),
                "uptimeSeconds": round(time.time() - started, 3)}

    for name in ROUTE_MODULES:
        importlib.import_module(name).register(router, ctx)
    hygiene.install(router, ctx)  # idle / home-gone exit (daemon/hygiene.py)
    routes_session.install_guard(router, ctx)  # session callers: their agent only
    return router


def _take_pidfile(run_dir: Path) -> int:
    """Hold an exclusive lock on ``run/paddedcell.pid`` for the daemon's life."""
    fd = os.open(run_dir / "paddedcell.pid", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        raise AlreadyRunning(f"a paddedcell daemon is already running (pid {other or '?'}); "
                             "stop it with: paddedcell stop") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def read_pid(settings: config.Settings) -> int | None:
    try:
        return int((settings.home / "run" / "paddedcell.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _say_guard(settings) -> None:
    """Arm the admin-password guard at start from the filter a human's process left on
    tmpfs (vault/guard_runtime.py), and say so in one line; without it, the guard waits for
    a human. An admin.json from an older release loses its sealed detector here."""
    from ..vault import VaultError, guard_state
    from ..vault.guard import ARMED, WAITING, WAITING_HINT

    try:
        state = guard_state(settings)
        if state == WAITING:
            log.warning("admin-password guard: %s", WAITING_HINT)
        elif state == ARMED:
            log.info("admin-password guard: armed from its runtime file (tmpfs)")
    except (OSError, VaultError) as exc:
        log.warning("admin-password guard: cannot read the vault (%s)", exc)


def _say_sandbox(settings) -> None:
    """One line at start when every agent command will be refused (no sandbox this host
    can give, docs/design.md §1), so the operator reads why before an agent does."""
    from ..supervisor.spawn import Sandbox, SpawnError

    try:
        Sandbox.from_settings(settings).mode()
    except SpawnError as exc:
        log.warning("sandbox: %s", exc)


async def run_daemon(settings: config.Settings, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve until SIGTERM/SIGINT or cancellation."""
    os.umask(0o077)
    run_dir = settings.home / "run"
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(settings.home, 0o700)
    pid_fd = _take_pidfile(run_dir)
    started = time.time()
    try:
        async with trio.open_nursery() as nursery:
            ctx = DaemonContext(settings, nursery)
            router = build_router(ctx, started)
            path = str(socket_path(settings))
            await nursery.start(partial(serve_unix, request_timeout=float(
                settings["daemon.request_timeout_seconds"]),
                limits=SocketLimits.from_settings(settings)), router, path)
            nursery.start_soon(_stop_on_signal, nursery.cancel_scope)
            log.info("paddedcell daemon %s listening on %s", __version__, path)
            _say_sandbox(settings)
            _say_guard(settings)
            task_status.started(ctx)
    finally:
        try:
            os.unlink(socket_path(settings))
        except OSError:
            pass
        os.ftruncate(pid_fd, 0)
        os.close(pid_fd)


async def _stop_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("stopping on signal %s", signal.Signals(signum).name)
            scope.cancel()
            return


def main(settings: config.Settings | None = None) -> int:
    settings = settings or config.load()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    # The event loop takes the GIL back after each system call; with a worker
    # thread scanning (check-leak, secret resolution, the filter threads' Python
    # steps) it waits up to one switch interval each time, a few times a request.
    # 0.2 ms instead of 5: /healthz p99 under 8 sessions streaming `xxd /dev/urandom`
    # (the redactor's dump view decodes lines in Python) 60 ms at 1 ms, 26 at 0.2
    # (benchmarks/supervisor.py --only-latency); a switch costs only under contention.
    sys.setswitchinterval(0.0002)
    problem = socket_path_problem(socket_path(settings))
    if problem:
        print(f"paddedcell: {problem}", file=sys.stderr)
        return exits.USAGE
    try:
        trio.run(run_daemon, settings)
    except AlreadyRunning as exc:
        print(f"paddedcell: {exc}", file=sys.stderr)
        return 1
    return 0
