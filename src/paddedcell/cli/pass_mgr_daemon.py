"""A human's direct ``pass_mgr get`` asks a running daemon (``POST /vault/get``).

The local read imports the vault and cryptography's Rust bindings (~8 ms before any
work); a running daemon has them loaded. One HTTP/1.1 exchange on its unix socket,
written by hand over ``_socket`` and ``_json`` (:mod:`paddedcell.session.wire`), as
lean as the channel client: no ``socket``, ``json``, ``http.client``, vault or click.

Anything but a 200 with a string value (no daemon, a refusal, a vault error, a
timeout, an odd answer) gives None and the caller reads locally: same answers, same
exit codes, same messages as without a daemon (docs/design.md §4.3).
"""

from __future__ import annotations

import os

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
