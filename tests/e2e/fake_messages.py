"""A fake Anthropic Messages-API model for Claude Code, scripted per case (tests/e2e/test_mcp_clients.py).

Claude Code (``ANTHROPIC_BASE_URL``) posts ``/v1/messages``, mostly with ``stream: true``,
plus side requests (titles, token counts) that get a short text. A request whose user
text holds ``[case:NAME]`` and that offers tools is answered from that case's script by
counting the ``tool_result`` blocks so far: a ``tool_use`` per step, then "done". Every
request body is kept.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from fake_server import FakeServer, JsonHandler

CASE = re.compile(r"\[case:([A-Za-z0-9_.-]+)\]")


class FakeMessages(FakeServer):
    def __init__(self) -> None:
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        super().__init__(_Handler, self, "fake-messages")

    def script(self, case: str, calls: list[dict[str, Any]]) -> None:
        """``calls``: ``{"name", "input"}`` per turn, then a final text."""
        with self.lock:
            self.scripts[case] = calls

    def requests_for(self, case: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for body in self.requests
                    if body.get("tools") and f"[case:{case}]" in json.dumps(body.get("messages"))]

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(body)
            messages = body.get("messages") or []
            match = CASE.search(json.dumps(messages))
            calls = self.scripts.get(match.group(1), []) if match and body.get("tools") else []
            done = sum(1 for m in messages if isinstance(m.get("content"), list)
                       for block in m["content"] if isinstance(block, dict) and block.get("type") == "tool_result")
        if done < len(calls):
            return {"type": "tool_use", "id": f"toolu_fake_{done}", "name": calls[done]["name"],
                    "input": calls[done]["input"]}
        return {"type": "text", "text": "done"}


def _events(block: dict[str, Any], model: str) -> bytes:
    stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
    start = ({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
             if block["type"] == "tool_use" else {"type": "text", "text": ""})
    delta = ({"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
             if block["type"] == "tool_use" else {"type": "text_delta", "text": block["text"]})
    usage = {"input_tokens": 1, "output_tokens": 1}
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


class _Handler(JsonHandler):
    model: FakeMessages

    def _send(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"fake"}}')

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            self._send(200, "application/json", b'{"input_tokens": 1}')
            return
        if not path.endswith("/v1/messages"):
            self.do_GET()
            return
        block = self.model.answer(body)
        model = body.get("model", "claude-fake")
        if body.get("stream"):
            self._send(200, "text/event-stream", _events(block, model))
            return
        message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        self._send(200, "application/json", json.dumps(message).encode())
