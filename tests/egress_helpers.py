"""Local upstream servers and a running session proxy for the egress tests.

Upstreams are real ``http.server`` servers on loopback (plain or TLS with a test CA);
the proxy is the real :func:`paddedcell.egress.proxy.serve_proxy` on a loopback listener,
allowed to reach them through ``allow_local`` (loopback is refused by default).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import trio

from paddedcell.egress.ca import CertificateAuthority, load_chain_from_memory
from paddedcell.egress.policy import EgressLimits, EgressPolicy
from paddedcell.egress.proxy import serve_proxy


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body, by Content-Length or chunked."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        data = b""
        while True:
            size = int(handler.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                handler.rfile.readline()
                return data
            data += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


async def tls_through(proxy: int, target: str, cafile: str, server_hostname: str, *,
                      check_hostname: bool = True) -> trio.SSLStream:
    """A CONNECT tunnel to ``target`` through the proxy, then TLS to ``server_hostname``
    trusting ``cafile`` (the handshake is left to the caller's first use)."""
    stream = await trio.open_tcp_stream("127.0.0.1", proxy)
    await stream.send_all(f"CONNECT {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    answer = await stream.receive_some(1024)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    context = ssl.create_default_context(cafile=cafile)
    context.check_hostname = check_hostname
    return trio.SSLStream(stream, context, server_hostname=server_hostname)


class EchoHandler(BaseHTTPRequestHandler):
    """``/big?n=N``: N bytes of a pattern; anything else: the request as JSON
    (method, path, headers, body); ``/reflect``: the request body verbatim."""

    protocol_version = "HTTP/1.1"
    received: list[dict] = []  # replaced per server

    def log_message(self, *args) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        return read_body(self)

    def _answer(self) -> None:
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self._websocket()
        body = self._body()
        record = {"method": self.command, "path": self.path,
                  "headers": [[k, v] for k, v in self.headers.items()],
                  "body": body.decode("utf-8", "replace"), "raw": body.hex()}
        self.server.received.append(record)  # type: ignore[attr-defined]
        if self.path.startswith("/big"):
            size = int(self.path.split("n=")[1])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = bytes(range(256)) * 256
            sent = 0
            while sent < size:
                piece = block[:min(len(block), size - sent)]
                self.wfile.write(piece)
                sent += len(piece)
            return
        payload = body if self.path.startswith("/reflect") else json.dumps(record).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _websocket(self) -> None:
        """Record the handshake, answer 101, then echo each client frame's payload as an
        unmasked text frame ``echo:`` + payload (recorded as ``{"ws": payload}``)."""
        self.server.received.append({"method": self.command, "path": self.path,  # type: ignore[attr-defined]
                                     "headers": [[k, v] for k, v in self.headers.items()],
                                     "body": ""})
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                break
            length = head[1] & 0x7F
            if length == 126:
                length = int.from_bytes(self.rfile.read(2), "big")
            elif length == 127:
                length = int.from_bytes(self.rfile.read(8), "big")
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            opcode = head[0] & 0x0F
            if opcode == 8:  # close: answer it and stop
                self.wfile.write(b"\x88\x00")
                break
            self.server.received.append({"ws": payload.decode("utf-8", "replace")})  # type: ignore[attr-defined]
            reply = b"echo:" + payload
            size = (bytes((len(reply),)) if len(reply) < 126 else
                    bytes((126,)) + len(reply).to_bytes(2, "big") if len(reply) < 65536 else
                    bytes((127,)) + len(reply).to_bytes(8, "big"))
            self.wfile.write(b"\x81" + size + reply)
            self.wfile.flush()
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], tls: CertificateAuthority | None = None,
            host: str = "localhost", address: str = "127.0.0.1"
            ) -> Iterator[tuple[int, list[dict]]]:
    """A threaded server of ``handler`` on ``address`` (TLS with a leaf for ``host`` from
    ``tls``); yields (port, the records of the requests it received)."""
    server = ThreadingHTTPServer((address, 0), handler)
    server.daemon_threads = True
    server.received = []  # type: ignore[attr-defined]
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        load_chain_from_memory(context, *tls.issue(host))
        context.set_alpn_protocols(["http/1.1"])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], server.received  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def upstream(tls: CertificateAuthority | None = None, host: str = "localhost"):
    """The echo server (:class:`EchoHandler`) on 127.0.0.1."""
    return serving(EchoHandler, tls, host)


def write_ca(tmp_path_factory, ca: CertificateAuthority, name: str) -> str:
    """``ca``'s certificate in a fresh file (what clients or the proxy are told to trust)."""
    path = tmp_path_factory.mktemp(name) / "ca.pem"
    path.write_bytes(ca.certificate_pem)
    return str(path)


def listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextlib.asynccontextmanager
async def running_proxy(policy: EgressPolicy, **kwargs):
    """The proxy serving on a fresh loopback port; yields the port."""
    sock = listener()
    port = sock.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: serve_proxy(sock, policy, task_status=task_status,
                                                            **kwargs))
        try:
            yield port
        finally:
            nursery.cancel_scope.cancel()


def local_policy(*ports: int, limits: EgressLimits | None = None, **kwargs) -> EgressPolicy:
    """A policy that lets the proxy reach these loopback ports (by name or address)."""
    allow = tuple(f"{h}:{p}" for p in ports for h in ("127.0.0.1", "localhost"))
    return EgressPolicy(allow_local=allow + tuple(kwargs.pop("allow_local", ())),
                        limits=limits or EgressLimits(), **kwargs)


async def curl(*args: str, check: bool = False) -> tuple[int, str, str]:
    """Run the real curl; returns (exit code, stdout, stderr)."""
    result = await trio.run_process(["curl", "-sS", "--max-time", "20", *args],
                                    capture_stdout=True, capture_stderr=True, check=check)
    return (result.returncode, result.stdout.decode("utf-8", "replace"),
            result.stderr.decode("utf-8", "replace"))


async def raw_request(port: int, data: bytes, *, read_timeout: float = 5.0) -> bytes:
    """Send ``data`` to the proxy on a raw socket and read until it closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        received = b""
        with trio.move_on_after(read_timeout):
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                received += chunk
        return received


def headers_of(record: dict) -> dict[str, str]:
    return {k.lower(): v for k, v in record["headers"]}
