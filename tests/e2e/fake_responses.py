"""A fake OpenAI Responses-API model for Codex CLI, scripted per case (tests/e2e/test_mcp_clients.py).

Codex (``wire_api = "responses"``) posts ``/v1/responses`` with ``stream: true`` and reads
server-sent events; a completed ``function_call`` item makes it call the tool, and the
next request carries a ``function_call_output``. MCP tools come in a namespace
(``mcp__SERVER``): a call names the tool and the namespace. A test puts ``[case:NAME]``
in its prompt; each request is answered from that script by counting the
``function_call_output`` items so far. Every request body is kept.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from fake_server import FakeServer, JsonHandler

CASE = re.compile(r"\[case:([A-Za-z0-9_.-]+)\]")


def _texts(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class FakeResponses(FakeServer):
    def __init__(self) -> None:
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        super().__init__(_Handler, self, "fake-responses")

    def script(self, case: str, calls: list[dict[str, Any]]) -> None:
        """``calls``: ``{"namespace", "name", "arguments"}`` per turn, then a final text."""
        with self.lock:
            self.scripts[case] = calls

    def requests_for(self, case: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for body in self.requests if f"[case:{case}]" in _texts(body.get("input"))]

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(body)
            inputs = body.get("input") or []
            match = CASE.search(_texts(inputs))
            calls = self.scripts.get(match.group(1), []) if match else []
            done = sum(1 for item in inputs if isinstance(item, dict) and item.get("type") == "function_call_output")
        if done < len(calls):
            call = calls[done]
            return {"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done}",
                    "name": call["name"], "namespace": call["namespace"],
                    "arguments": json.dumps(call["arguments"]), "status": "completed"}
        return {"type": "message", "role": "assistant", "id": "msg_done",
                "content": [{"type": "output_text", "text": "done", "annotations": []}]}


class _Handler(JsonHandler):
    model: FakeResponses

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        if not self.path.endswith("/responses"):
            self.send_error(404)
            return
        item = self.model.answer(body)
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        events = [
            ("response.created", {"type": "response.created", "response": {"id": "resp_fake"}}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed",
                                    "response": {"id": "resp_fake", "output": [], "usage": usage}}),
        ]
        data = b"".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode() for name, payload in events)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
