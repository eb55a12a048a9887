"""A scripted OpenClaw gateway for the remote client's unit tests (trio-websocket server).

It speaks the real handshake: ``connect.challenge``, then checks the ``connect``
frame's device signature (v3 or v2, as configured) with the device's public key,
and answers ``hello-ok`` or the scripted error. After the handshake, RPCs go to
``methods`` (a dict of callables) and ``script`` runs beside the reader to push
events. Every request frame is recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import trio
import trio_websocket

from paddedcell.remote import identity as identity_module
from paddedcell.remote import protocol


@dataclass
class FakeGateway:
    challenge: bool = True
    versions: tuple[str, ...] = ("v3", "v2")
    connect_error: dict[str, Any] | None = None
    device_token: str | None = "dev-token-AAAAbbbbCCCCdddd1234"
    tick_interval_ms: int = 30_000
    silent_connect: bool = False
    close_after_hello: tuple[int, str] | None = None
    methods: dict[str, Callable[[dict], Any]] = field(default_factory=dict)
    script: Callable[[Any, "FakeGateway"], Awaitable[None]] | None = None
    ssl_context: Any = None
    max_message_size: int = 64 * 1024 * 1024
    duplicate_responses: bool = False
    on_connect: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    connects: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    seq: int = 0

    async def event(self, ws, name: str, payload: Any, seq: int | None = None) -> None:
        if seq is None:
            self.seq += 1
            seq = self.seq
        await ws.send_message(json.dumps({"type": "event", "event": name, "payload": payload, "seq": seq}))

    async def _handler(self, request) -> None:
        ws = await request.accept()
        try:
            await self._serve(ws)
        except trio_websocket.ConnectionClosed:
            pass

    def _verify(self, params: dict[str, Any], nonce: str | None) -> str | None:
        device = params.get("device") or {}
        token = (params.get("auth") or {}).get("token")
        for version in self.versions:
            if version != "v1" and not nonce:
                continue
            client = params["client"]
            payload = protocol.signature_payload(
                version, device_id=device["id"], scopes=params["scopes"], signed_at_ms=device["signedAt"],
                token=token, nonce=nonce, client_id=client["id"], client_mode=client["mode"],
                role=params["role"], platform=client.get("platform"), device_family=client.get("deviceFamily"))
            if identity_module.verify(device["publicKey"], payload, device["signature"]):
                return version
        return None

    async def _serve(self, ws) -> None:
        nonce = None
        if self.challenge:
            nonce = "nonce-" + str(self.port)
            await ws.send_message(json.dumps({"type": "event", "event": "connect.challenge",
                                              "payload": {"nonce": nonce, "ts": 1_700_000_000_000}}))
        frame = json.loads(await ws.get_message())
        self.connects.append(frame)
        if self.silent_connect:
            await trio.sleep_forever()
        params = frame["params"]
        error = self.on_connect(params) if self.on_connect is not None else self.connect_error
        if error is not None:
            await ws.send_message(json.dumps({"type": "res", "id": frame["id"], "ok": False,
                                              "error": error}))
            await ws.aclose(1008, "refused")
            return
        if self._verify(params, nonce) is None:
            await ws.send_message(json.dumps({"type": "res", "id": frame["id"], "ok": False, "error": {
                "code": "INVALID_REQUEST", "message": "device signature invalid",
                "details": {"code": "DEVICE_AUTH_SIGNATURE_INVALID", "reason": "device-signature"}}}))
            await ws.aclose(1008, "device signature invalid")
            return
        auth = {"role": "operator", "scopes": params["scopes"]}
        if self.device_token:
            auth["deviceToken"] = self.device_token
        await ws.send_message(json.dumps({"type": "res", "id": frame["id"], "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "fake-1", "connId": "c1"},
            "features": {"methods": list(self.methods), "events": []}, "snapshot": {}, "auth": auth,
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800,
                       "tickIntervalMs": self.tick_interval_ms}}}))
        if self.close_after_hello:
            await ws.aclose(*self.close_after_hello)
            return
        async with trio.open_nursery() as nursery:
            if self.script is not None:
                nursery.start_soon(self.script, ws, self)
            while True:
                try:
                    text = await ws.get_message()
                except trio_websocket.ConnectionClosed:
                    nursery.cancel_scope.cancel()
                    return
                request = json.loads(text)
                self.requests.append(request)
                nursery.start_soon(self._answer, ws, request)

    async def _answer(self, ws, request: dict[str, Any]) -> None:
        handler = self.methods.get(request["method"])
        if handler is None:
            answer = {"type": "res", "id": request["id"], "ok": False,
                      "error": {"code": "INVALID_REQUEST", "message": f"unknown method {request['method']}"}}
        else:
            try:
                result = handler(request.get("params") or {})
                if hasattr(result, "__await__"):
                    result = await result
                answer = {"type": "res", "id": request["id"], "ok": True, "payload": result}
            except GatewayFault as fault:
                answer = {"type": "res", "id": request["id"], "ok": False, "error": fault.error}
        try:
            await ws.send_message(json.dumps(answer))
            if self.duplicate_responses:
                await ws.send_message(json.dumps({**answer, "payload": "duplicate"}))
        except trio_websocket.ConnectionClosed:
            pass

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(lambda task_status: trio_websocket.serve_websocket(
                self._handler, "127.0.0.1", 0, self.ssl_context, handler_nursery=nursery,
                max_message_size=self.max_message_size, task_status=task_status))
            self.port = server.port
            task_status.started(self)

    @property
    def url(self) -> str:
        scheme = "wss" if self.ssl_context is not None else "ws"
        return f"{scheme}://127.0.0.1:{self.port}"


class GatewayFault(Exception):
    def __init__(self, code: str, message: str, **details: Any):
        super().__init__(message)
        self.error = {"code": code, "message": message, "details": details}


class ThreadedGateway:
    """A FakeGateway served from its own thread (for CLI subprocess tests)."""

    def __init__(self, gateway: FakeGateway):
        self.gateway = gateway
        self._ready = threading.Event()
        self._stop: trio.CancelScope | None = None
        self._token = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._stop = scope
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.gateway.serve)
                    self._ready.set()
        trio.run(main)

    def __enter__(self) -> FakeGateway:
        self.thread.start()
        self._ready.wait(10)
        return self.gateway

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self._stop is not None:
            try:
                self._token.run_sync_soon(self._stop.cancel)
            except trio.RunFinishedError:
                pass
        self.thread.join(5)
