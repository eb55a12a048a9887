"""A fake OpenAI-compatible chat model that scripts tool calls, for OpenClaw e2e tests.

OpenClaw calls only ``POST /v1/chat/completions`` with ``stream: true``. A test
registers a script under a case name and puts ``[case:NAME]`` in its user
message; each request is answered from that script by counting the assistant
tool calls since the last *real* user message (OpenClaw appends synthetic
``<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>`` user messages after tool results; a
model that took them as new requests would loop for ever). Every request body
is recorded so tests can assert on exactly what the model was shown.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fake_server import FakeServer, JsonHandler

CASE = re.compile(r"\[case:([A-Za-z0-9_.-]+)\]")
INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    text: str


Step = ToolCall | Reply | Callable[[list[dict]], "ToolCall | Reply"]


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def last_real_user_index(messages: list[dict]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not message_text(message).lstrip().startswith(INTERNAL):
            return index
    return -1


@dataclass
class FakeModel:
    scripts: dict[str, list[Step]] = field(default_factory=dict)
    requests: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, case: str, steps: list[Step]) -> None:
        with self.lock:
            self.scripts[case] = list(steps)

    def requests_for(self, case: str) -> list[dict]:
        """Request bodies whose last real user message names this case."""
        with self.lock:
            found = []
            for body in self.requests:
                messages = body.get("messages", [])
                index = last_real_user_index(messages)
                if index >= 0 and f"[case:{case}]" in message_text(messages[index]):
                    found.append(body)
            return found

    def answer(self, body: dict) -> ToolCall | Reply:
        messages = body.get("messages", [])
        with self.lock:
            self.requests.append(body)
        index = last_real_user_index(messages)
        if index < 0:
            return Reply("(fake model: no user message)")
        match = CASE.search(message_text(messages[index]))
        steps = self.scripts.get(match.group(1)) if match else None
        if steps is None:
            return Reply("ok")
        done = sum(len(m.get("tool_calls") or []) for m in messages[index + 1:] if m.get("role") == "assistant")
        if done >= len(steps):
            return Reply("done")
        step = steps[done]
        return step(messages) if callable(step) else step


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
               "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


class _Handler(JsonHandler):
    model: FakeModel

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        step = self.model.answer(body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        out = [_chunk({"role": "assistant", "content": ""})]
        if isinstance(step, ToolCall):
            call_id = f"call_fake_{len(self.model.requests)}"
            out.append(_chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                               "function": {"name": step.name,
                                                            "arguments": json.dumps(step.arguments)}}]}))
            out.append(_chunk({}, "tool_calls"))
        else:
            out.append(_chunk({"content": step.text}))
            out.append(_chunk({}, "stop"))
        out.append(b"data: [DONE]\n\n")
        self.wfile.write(b"".join(out))
        self.wfile.flush()
        self.close_connection = True


class FakeModelServer(FakeServer):
    """``with FakeModelServer() as server: server.port, server.model``"""

    def __init__(self) -> None:
        self.model = FakeModel()
        super().__init__(_Handler, self.model, "fake-model")
