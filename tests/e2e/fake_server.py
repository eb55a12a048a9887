"""The HTTP plumbing the fake model servers share (fake_model, fake_messages, fake_responses).

``FakeServer`` serves a handler on 127.0.0.1 (a free port) in a daemon thread, as a
context manager; the handler class gets the scripted model as ``self.model``.
``JsonHandler`` is quiet, speaks HTTP/1.1 and reads a JSON request body.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    model: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def read_json(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")


class FakeServer:
    def __init__(self, handler: type[JsonHandler], model: object, name: str) -> None:
        handler = type("Handler", (handler,), {"model": model})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
