"""A TLS upstream that real tools talk to: git smart HTTP (``git http-backend``), a
PEP 503 package index with one wheel, and an echo endpoint — every request
authenticated with the real secret (Bearer, or a Basic password), 401 otherwise.

Used by the egress tests through the proxy directly and inside pcexec sessions."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import subprocess
import zipfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Iterator

from paddedcell.egress.ca import CertificateAuthority

from egress_helpers import read_body, serving

WHEEL_NAME = "tinypkg-1.0-py3-none-any.whl"


def tiny_wheel(name: str = "tinypkg", version: str = "1.0", init: bytes = b"VALUE = 1\n") -> bytes:
    """A valid, minimal pure-Python wheel of package ``name`` (pip reads its metadata)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": init,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in files.items()) + f"{info}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{info}/RECORD", record)
    return buffer.getvalue()


def bare_repo(root: Path) -> Path:
    """``root/repo.git``: a bare repository with one commit, push over HTTP allowed."""
    work = root / "seed"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=env)
    (work / "README").write_text("seed\n")
    subprocess.run(["git", "-C", str(work), "add", "README"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "seed"], check=True, env=env)
    bare = root / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, env=env)
    subprocess.run(["git", "-C", str(bare), "config", "http.receivepack", "true"], check=True)
    return bare


class ToolsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    secret = ""
    root = Path("/")
    wheel = b""

    def log_message(self, *args) -> None:
        pass

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        if header == f"Bearer {self.secret}" or header == f"token {self.secret}":
            return True
        if header.startswith("Basic "):
            try:
                user_pass = base64.b64decode(header[6:]).decode()
            except ValueError:
                return False
            return user_pass.split(":", 1)[1:] == [self.secret]
        return False

    def _send(self, status: int, body: bytes, content_type: str = "text/plain",
              extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        body = read_body(self)
        self.server.received.append({  # type: ignore[attr-defined]
            "method": self.command, "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("utf-8", "replace")})
        if not self._authorized():
            return self._send(401, b"who are you?\n", extra={"WWW-Authenticate":
                                                             'Basic realm="egress test"'})
        path = self.path.split("?")[0]
        if path.startswith("/repo.git"):
            return self._git(body)
        if path.rstrip("/") == "/simple/tinypkg":
            digest = hashlib.sha256(self.wheel).hexdigest()
            page = (f'<html><body><a href="/files/{WHEEL_NAME}#sha256={digest}">'
                    f"{WHEEL_NAME}</a></body></html>").encode()
            return self._send(200, page, "text/html")
        if path == f"/files/{WHEEL_NAME}":
            return self._send(200, self.wheel, "application/octet-stream")
        record = {"method": self.command, "path": self.path,
                  "headers": [[k, v] for k, v in self.headers.items()],
                  "body": body.decode("utf-8", "replace")}
        return self._send(200, json.dumps(record).encode(), "application/json")

    def _git(self, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        env = {**os.environ, "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
               "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "tester",
               "REMOTE_ADDR": "127.0.0.1", "GIT_HTTP_MAX_REQUEST_BUFFER": "100M"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.split(b"\r\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers[name] = value.strip()
        content_type = headers.pop("Content-Type", "application/octet-stream")
        self._send(status, payload, content_type, headers)

    do_GET = do_POST = do_HEAD = _handle


@contextlib.contextmanager
def tools_upstream(ca: CertificateAuthority, secret: str, root: Path, host: str = "localhost",
                   address: str = "127.0.0.1") -> Iterator[tuple[int, list[dict]]]:
    """The server on ``address`` with a leaf for ``host``; yields (port, requests)."""
    root.mkdir(exist_ok=True)
    bare_repo(root)
    handler = type("Handler", (ToolsHandler,), {"secret": secret, "root": root,
                                                "wheel": tiny_wheel()})
    with serving(handler, ca, host, address) as served:
        yield served
