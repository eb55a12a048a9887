"""The client side of a session's channel (server: ``supervisor/channel.py``).

Inside an agent session, ``pass_mgr get/generate/rotate/unset/list/history``,
``pcexec`` and ``paddedcell process`` do not read the vault or trust
``AGENT_ID``: they ask the supervisor that started the session, which answers
for the session's agent only. Import-light on purpose (``pass_mgr get`` runs
many times per command): ``_socket`` and ``_json`` through :mod:`.wire`, no HTTP
client, no ``socket``, ``json`` or ``re`` on the way.

Where the channel is: ``$PADDEDCELL_CHANNEL`` (a locator only; the server
checks that the caller belongs to its session). When that variable was
removed, the channel directory is searched: inside the sandbox it holds this
session's socket only; outside, every other session's socket refuses us.
"""

from __future__ import annotations

import os

from .. import exits
from ..agent_session import CHANNEL_VARIABLE, in_session  # noqa: F401 (the one decision)


def _candidates():
    """The named channel first; the channel directory only if that fails."""
    named = os.environ.get(CHANNEL_VARIABLE)
    if named:
        yield named
    from ..config import paddedcell_home_text

    directory = os.path.join(paddedcell_home_text(), "run", "sessions")
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(".sock") and path != named:
            yield path


def _connect(path: str, timeout: float | None):
    # _socket, not socket (whose selectors and enum cost more than the exchange); here,
    # not at the top: a human's `pass_mgr get` never needs it.
    try:
        from _socket import AF_UNIX, SOCK_STREAM, socket
    except ImportError:  # pragma: no cover - CPython always has _socket
        from socket import AF_UNIX, SOCK_STREAM, socket

    sock = socket(AF_UNIX, SOCK_STREAM)
    sock.settimeout(timeout)
    name, fd = path, None
    if len(os.fsencode(path)) >= 100:  # sun_path is 108 bytes: go through the directory fd
        directory, base = os.path.split(path)
        fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        name = f"/proc/self/fd/{fd}/{base}"
    try:
        sock.connect(name)
    except OSError:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


def _exchange(path: str, payload: bytes, timeout: float | None) -> dict:
    sock = _connect(path, timeout)
    try:
        sock.sendall(payload)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    finally:
        sock.close()
    raw = b"".join(chunks)
    from .protocol import Refusal
    from .wire import decode_line

    try:
        answer = decode_line(raw)
    except ValueError:
        raise Refusal("the session channel sent no answer (its supervisor stopped?)",
                      exits.ERROR) from None
    if not isinstance(answer, dict):
        raise Refusal("the session channel sent a malformed answer", exits.ERROR)
    return answer


def request(op: str, timeout: float | None = 60.0, **fields) -> dict:
    """Send one request; the answer dict when ``ok``, else raise :class:`Refusal`."""
    # Here, not at the top: a human's direct `pass_mgr get` needs neither.
    from .protocol import Refusal
    from .wire import encode_line

    payload = encode_line({"op": op, **fields})
    refused = None
    for path in _candidates():
        try:
            answer = _exchange(path, payload, timeout)
        except OSError:
            continue
        if answer.get("ok"):
            return answer
        refusal = Refusal.from_answer(answer)
        if refusal.exit_code == exits.FORBIDDEN and "another session" in refusal.message:
            refused = refusal
            continue  # not our session's socket: try the next one
        raise refusal
    if refused is not None:
        raise refused
    raise Refusal("inside an agent session, but its channel is not reachable "
                  f"(${CHANNEL_VARIABLE} unset and no session socket answers); run the "
                  "command through pcexec", exits.ERROR)


def call_daemon(method: str, path: str, body, timeout: float | None) -> dict:
    """One allow-listed daemon route through the channel: the daemon's answer."""
    return request("daemon", timeout=timeout, method=method, path=path, body=body)["result"]
