"""The start-up-sensitive part of ``pass_mgr``: the fast ``get`` path (a running
daemon's answer first, then the local read) and the helpers every command shares
(one-line failures, the agent's identity, human-only refusals).

Agents run ``pass_mgr get KEY`` inside their commands many times, so this module
imports neither click nor ``json``, ``pathlib`` or ``dataclasses``; everything
else (``pass_mgr_click``) may. Exit codes: :mod:`paddedcell.exits`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

from .. import AGENT_CONTEXT_VARIABLES as AGENT_MARKERS
from .. import exits

PROG = "pass_mgr"


def fail(message: str, code: int) -> NoReturn:
    prefix = "" if message.startswith(PROG + " ") else f"{PROG}: "
    sys.stderr.write(f"{prefix}{message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def os_error_line(exc: OSError) -> str:
    """One line for a file-system error, naming the file."""
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def agent_env() -> tuple[str, str]:
    """(AGENT_ID, AGENT_WORKSPACE) from the environment; exit 1 naming a missing one."""
    for name in ("AGENT_ID", "AGENT_WORKSPACE"):
        if not os.environ.get(name):
            fail(f"{name} is not set; agent commands run inside an agent session "
                  "(pcexec sets AGENT_ID and AGENT_WORKSPACE)", exits.ERROR)
    return os.environ["AGENT_ID"], os.environ["AGENT_WORKSPACE"]


def agent_marker() -> str | None:
    """The first agent-context variable present in the environment (set even if empty)."""
    return next((name for name in AGENT_MARKERS if name in os.environ), None)


def refuse_in_agent_context(what: str) -> None:
    marker = agent_marker()
    if marker:
        fail(f"{what} is for humans only and refuses to run in an agent context ({marker} is "
              "set); run it in your own terminal", exits.FORBIDDEN)
    # Not the environment: the process tree and the sandbox (docs/design.md §4.3, agent_session).
    from ..agent_session import inside_agent_session

    if inside_agent_session():
        fail(f"{what} is for humans only and refuses to run inside an agent session (whatever "
             "its environment says); run it in your own terminal", exits.FORBIDDEN)


def load_settings():
    """config.load(), a bad setting becoming one line and exit 2 (as in every CLI)."""
    from .. import config

    try:
        return config.load()
    except config.ConfigError as exc:
        fail(str(exc), exc.exit_code)


def get_settings():
    """The settings a get reads: their defaults when no config file and no setting's
    variable can change them (``config_base.defaults_only``: the whole table is ~0.7 ms
    of a get's start-up), else :func:`load_settings` (a bad setting: one line, exit 2)."""
    from ..config_base import defaults_only

    return defaults_only() or load_settings()


def require_ready(settings) -> None:
    """Exit 3 with the vault's message unless it is initialized and not locked."""
    from ..vault.errors import VaultError
    from ..vault.read import AdminPaths, require_ready as vault_ready

    try:
        vault_ready(AdminPaths(settings.home_text))
    except VaultError as exc:
        fail(str(exc), exc.exit_code)


# -- a running daemon's answer -------------------------------------------------------
#
# A human's direct ``pass_mgr get`` asks a running daemon (``POST /vault/get``): the
# local read imports the vault and cryptography's Rust bindings (~8 ms before any work);
# a running daemon has them loaded. One HTTP/1.1 exchange on its unix socket, written by
# hand over ``_socket`` and ``_json`` (:mod:`paddedcell.session.wire`), as lean as the
# channel client: no ``socket``, ``json``, ``http.client``, vault or click. Here, not in
# a module of its own: every direct get takes this path, and a module costs a start ~0.1 ms.
#
# Anything but a 200 with a string value (no daemon, a refusal, a vault error, a
# timeout, an odd answer) gives None and the caller reads locally: same answers, same
# exit codes, same messages as without a daemon (docs/design.md §4.3).

#: The most of an answer read: a value and its HTTP head.
MAX_ANSWER_BYTES = 1 << 20


def _http_post(path: str, target: str, body: bytes, timeout: float) -> tuple[bytes, bytes]:
    """(status line and headers, payload) of one POST on the unix socket ``path``."""
    try:
        from _socket import AF_UNIX, SOCK_STREAM, socket
    except ImportError:  # pragma: no cover - CPython always has _socket
        from socket import AF_UNIX, SOCK_STREAM, socket

    sock = socket(AF_UNIX, SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(b"POST %s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                     % (target.encode(), len(body), body))
        chunks, size = [], 0
        while size <= MAX_ANSWER_BYTES:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        sock.close()
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    return head, payload


def get_via_daemon(settings, key: str, version: int | None) -> str | None:
    """KEY's value from a running daemon, or None when the local read must answer."""
    agent_id, workspace = os.environ.get("AGENT_ID"), os.environ.get("AGENT_WORKSPACE")
    if not agent_id or not workspace or not workspace.startswith("/"):
        return None  # the local read names what is missing; a relative path is the caller's
    path = os.path.join(settings.home_text, "run", settings["daemon.socket_name"])
    if not os.path.exists(path):
        return None  # no daemon: no socket module, no exchange (most humans' gets)
    from ..session.wire import decode_line, encode_line

    fields = {"agentId": agent_id, "agentWorkspace": workspace, "key": key}
    if version is not None:
        fields["version"] = version
    try:
        head, payload = _http_post(path, "/vault/get", encode_line(fields),
                                   float(settings["daemon.direct_get_timeout_seconds"]))
    except (OSError, ValueError):  # no daemon, a stale socket, a timeout, a path too long
        return None
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200 ") or any(
            line.lower().startswith(b"transfer-encoding:") for line in lines[1:]):
        return None
    length = next((line.split(b":", 1)[1].strip() for line in lines[1:]
                   if line.lower().startswith(b"content-length:")), None)
    if length is None or not length.isdigit() or int(length) != len(payload):
        return None
    try:
        answer = decode_line(payload)
    except ValueError:
        return None
    value = answer.get("value") if isinstance(answer, dict) else None
    return value if isinstance(value, str) else None


# -- the fast get path ---------------------------------------------------------------


def _parse_get(args: list[str]) -> tuple[str, int | None] | None:
    """(key, version) of ``get`` by the one grammar; None sends the call to click, whose
    usage error (exit 2) or help is the answer."""
    from ..pass_mgr_grammar import UsageError, parse

    try:
        call = parse(["get", *args])
    except UsageError:
        return None
    return call.key, call.options.get("version")


def run_get(key: str, version: int | None) -> int:
    """Print KEY's value and a newline; every failure is one stderr line and its exit code."""
    os.umask(0o077)
    settings = get_settings()
    value = get_via_daemon(settings, key, version)  # None: read locally, as without a daemon
    if value is not None:
        sys.stdout.write(value + "\n")
        sys.stdout.flush()
        return exits.OK
    require_ready(settings)
    agent_id, workspace = agent_env()
    from ..vault.errors import VaultError
    from ..vault.read import get_secret

    try:
        value = get_secret(agent_id, workspace, key, version=version, settings=settings)
    except VaultError as exc:
        fail(str(exc), exc.exit_code)
    except OSError as exc:
        fail(os_error_line(exc), exits.ERROR)
    sys.stdout.write(value + "\n")
    sys.stdout.flush()
    return exits.OK
