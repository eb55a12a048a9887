"""A small synchronous client for the daemon, and starting it on demand.

Synchronous on purpose: the CLIs that use it (pcexec --background,
safe-restart, paddedcell process) make a handful of calls and must start fast,
so they import neither Trio nor h11.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import AGENT_CONTEXT_VARIABLES, config
from ..session.protocol import CHANNEL_VARIABLE, SESSION_ROUTES, Refusal


class DaemonError(Refusal):
    """The daemon answered with an error (``status``), or could not be reached (None);
    ``exit_code`` is the one a CLI exits with (:data:`~paddedcell.session.protocol.EXIT_STATUS`)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message, status=status)


def socket_path(settings: config.Settings) -> Path:
    return settings.home / "run" / settings["daemon.socket_name"]


#: A unix socket's address holds 108 bytes with the closing NUL (unix(7)).
UNIX_PATH_MAX = 107


def socket_path_problem(path: Path) -> str | None:
    """Why no daemon can listen at ``path`` (a PADDEDCELL_HOME too deep), or None."""
    size = len(os.fsencode(path))
    if size <= UNIX_PATH_MAX:
        return None
    return (f"the daemon's socket {path} is {size} bytes long, over the {UNIX_PATH_MAX} a unix "
            "socket allows; set PADDEDCELL_HOME to a shorter directory")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DaemonClient:
    """``client.call("POST", "/exec", {...})`` returns the JSON answer."""

    def __init__(self, settings: config.Settings | None = None, timeout: float | None = 60.0):
        self.settings = settings or config.load()
        self.path = str(socket_path(self.settings))
        self.timeout = timeout
        self._conn: _UnixConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "DaemonClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        if os.environ.get(CHANNEL_VARIABLE) and self._channel_route(method, path):
            return self._call_via_channel(method, path, body, timeout)
        payload = b"" if body is None else json.dumps(body).encode("utf-8")
        headers = {"content-type": "application/json"} if body is not None else {}
        # Every call sets its own timeout: a kept-alive socket must not keep
        # the short timeout of an earlier call (healthy() uses 2 s).
        effective = self.timeout if timeout is None else timeout
        while True:
            if self._conn is None:
                self._conn = _UnixConnection(self.path, effective)
            else:
                self._conn.timeout = effective
                if self._conn.sock is not None:
                    self._conn.sock.settimeout(effective)
            reused = self._conn.sock is not None
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                raw = response.read()
                break
            except ConnectionRefusedError:
                self.close()
                raise DaemonError(f"paddedcell daemon is not running (nothing listens on "
                                  f"{self.path}); start it with: paddedcell serve") from None
            except ConnectionError as exc:
                # Retry once on a fresh connection only when a kept-alive one had
                # gone stale; on a fresh one the daemon may have acted already
                # (a POST /exec must not run twice).
                self.close()
                if not reused:
                    raise DaemonError(f"paddedcell daemon at {self.path} closed the connection "
                                      f"({exc}); see its log, {self.settings.home / 'daemon.log'}") from None
            except FileNotFoundError:
                self.close()
                raise DaemonError(f"paddedcell daemon is not running (no {self.path}); start it with: paddedcell serve") from None
            except TimeoutError:
                self.close()
                raise DaemonError(f"the paddedcell daemon did not answer {method} {path} "
                                  f"within {effective} s (timed out)") from None
            except OSError as exc:
                self.close()
                raise DaemonError(f"cannot reach the paddedcell daemon at {self.path}: {exc}") from None
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            raise DaemonError(f"paddedcell daemon sent a non-JSON answer (HTTP {response.status})") from None
        if response.status >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise DaemonError(message or f"HTTP {response.status}", response.status)
        return answer

    @staticmethod
    def _channel_route(method: str, path: str) -> bool:
        route = SESSION_ROUTES.get((method, path))
        return route is not None and route.op == "daemon"

    def _call_via_channel(self, method: str, path: str, body: dict[str, Any] | None,
                          timeout: float | None) -> dict[str, Any]:
        """Inside an agent session: through the session's channel (the daemon's socket is
        hidden by the sandbox; the session's agent is the only one), docs/design.md §1.
        A refusal keeps the daemon's status (a 409 stays a 409)."""
        from ..session.client import call_daemon

        try:
            return call_daemon(method, path, body, timeout or self.timeout)
        except Refusal as exc:
            raise DaemonError(exc.message, exc.status) from None

    def healthy(self) -> bool:
        try:
            return bool(self.call("GET", "/healthz", timeout=2.0).get("ok"))
        except DaemonError:
            return False


def daemon_command() -> list[str]:
    """How to start the daemon from this interpreter."""
    return [sys.executable, "-m", "paddedcell.cli.main", "serve"]


def ensure_daemon(settings: config.Settings | None = None) -> DaemonClient:
    """A client for a running daemon, starting one (detached) when absent."""
    settings = settings or config.load()
    client = DaemonClient(settings)
    if client.healthy():
        return client
    settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_path = settings.home / "daemon.log"
    with open(log_path, "ab") as log_file:
        subprocess.Popen(
            daemon_command(),
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
            start_new_session=True, close_fds=True, env=_daemon_env(), cwd="/",
        )
    deadline = time.monotonic() + float(settings["daemon.start_timeout_seconds"])
    while time.monotonic() < deadline:
        if client.healthy():
            return client
        time.sleep(0.05)
    raise DaemonError(f"the paddedcell daemon did not start within "
                      f"{settings['daemon.start_timeout_seconds']} s; see {log_path}")


#: A session's own variables: a daemon started from inside a session is not of it.
_SESSION_VARIABLES = ("PADDEDCELL_TREE", "PADDEDCELL_CHANNEL")


def _daemon_env() -> dict[str, str]:
    """The daemon serves every agent: it must not inherit one agent's identity, nor the
    session marker that would make it part of (and die with) the session's tree.
    ``PADDEDCELL_DAEMON=on-demand`` lets it stop when idle (daemon/hygiene.py)."""
    env = {k: v for k, v in os.environ.items()
           if k not in AGENT_CONTEXT_VARIABLES and k not in _SESSION_VARIABLES}
    env["PADDEDCELL_DAEMON"] = "on-demand"
    return env
