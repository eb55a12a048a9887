"""One authenticated WebSocket to an OpenClaw gateway, under Trio (trio-websocket).

Theory of operation. :func:`open_gateway` dials, waits for ``connect.challenge``,
sends the signed ``connect`` and returns a :class:`Gateway` once ``hello-ok`` is
in; one reader task then owns the socket: responses wake their caller (by id, so
out-of-order answers are fine), events go through a :class:`~.protocol.SeqTracker`
(duplicates and late events dropped, gaps reported) into a channel, and a
watchdog closes the socket with 4000 when nothing arrived for twice the
gateway's ``tickIntervalMs``. Every way a connection ends becomes one
:class:`ConnectionLost` with the words of :func:`~.protocol.explain_close`.

Timeouts (named settings, ``remote.*``): 10 s to open the socket ("Connection
timed out (10s)"), 15 s for the whole handshake ("Handshake timed out (15s)"),
``challenge_wait_seconds`` for the challenge before a legacy v1 connect (gateways
older than the challenge; 2026.9.6 answers that with DEVICE_AUTH_NONCE_REQUIRED).

:func:`run_connected` is the reconnect loop of the seed's F-RAGENT-12: backoff
1 s doubling to 30 s, at most 10 attempts in a row, a state callback for every
change (persisted for ``remote list`` by the caller).
"""

from __future__ import annotations

import math
import ssl
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

import trio
import trio_websocket

from .. import __version__
from . import protocol
from .protocol import ConnectFailure, Event, GatewayError, RemoteError, Response

DEFAULT_TICK_MS = 30_000


class ConnectRefused(RemoteError):
    """The gateway answered the connect with an error; ``failure`` says what kind."""

    def __init__(self, failure: ConnectFailure):
        super().__init__(failure.message)
        self.failure = failure


class ConnectionLost(RemoteError):
    """An open connection ended (closed, dropped, tick timeout)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class RequestFailed(RemoteError):
    """An RPC answered ``ok: false``."""

    def __init__(self, method: str, error: GatewayError):
        super().__init__(f"{method} failed: {error.message or error.code} ({error.code})")
        self.method = method
        self.error = error


class NoAnswer(RemoteError):
    """An RPC got no answer in time: the socket may be half-dead, so a new one may help."""


@dataclass(frozen=True)
class Credentials:
    """What one connect presents. ``shared_token``/``password`` are the gateway's own
    secret (auth mode token/password); ``device_token`` what an earlier ``hello-ok``
    issued to this device. Never printed: ``repr`` hides them."""

    identity: Any = field(repr=False)
    shared_token: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    device_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Hello:
    protocol: int
    server_version: str
    conn_id: str
    tick_interval_ms: int
    max_payload: int
    role: str
    scopes: tuple[str, ...]
    device_token: str | None = field(repr=False)
    methods: tuple[str, ...] = ()
    snapshot: dict[str, Any] = field(default_factory=dict, repr=False)
    used_device_token: bool = False

    @classmethod
    def from_payload(cls, payload: Any, used_device_token: bool) -> Hello:
        if not isinstance(payload, dict) or payload.get("type") != "hello-ok":
            raise protocol.ProtocolError("the gateway answered connect without hello-ok")
        server = payload.get("server") if isinstance(payload.get("server"), dict) else {}
        policy = payload.get("policy") if isinstance(payload.get("policy"), dict) else {}
        auth = payload.get("auth") if isinstance(payload.get("auth"), dict) else {}
        features = payload.get("features") if isinstance(payload.get("features"), dict) else {}
        tick = policy.get("tickIntervalMs")
        token = auth.get("deviceToken")
        return cls(
            protocol=int(payload.get("protocol") or 0),
            server_version=str(server.get("version") or "?"),
            conn_id=str(server.get("connId") or ""),
            tick_interval_ms=tick if isinstance(tick, int) and tick > 0 else DEFAULT_TICK_MS,
            max_payload=int(policy.get("maxPayload") or 0),
            role=str(auth.get("role") or ""),
            scopes=tuple(s for s in auth.get("scopes") or () if isinstance(s, str)),
            device_token=token if isinstance(token, str) and token else None,
            methods=tuple(m for m in features.get("methods") or () if isinstance(m, str)),
            snapshot=payload.get("snapshot") if isinstance(payload.get("snapshot"), dict) else {},
            used_device_token=used_device_token,
        )


def ssl_context_for(url: str, allow_insecure: bool) -> ssl.SSLContext | None:
    """None for ws:; for wss: the system's verifying context, or one that verifies
    nothing when the operator said ``--allow-insecure`` (a self-signed gateway)."""
    if not url.lower().startswith("wss:"):
        return None
    context = ssl.create_default_context()
    if allow_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _describe_dial_error(exc: BaseException, url: str) -> str:
    """A failed dial in one line: TLS problems named as such, refusals and DNS too."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (f"TLS certificate not trusted ({cause.verify_message or cause.reason}); "
                    "fix the gateway's certificate, or pass --allow-insecure if you trust this host")
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed ({cause.reason or cause}); is this a wss:// gateway?"
        if isinstance(cause, trio_websocket.ConnectionRejected) and cause.status_code == 503:
            return "the gateway is not accepting connections yet (HTTP 503: starting or restarting)"
        if isinstance(cause, trio_websocket.ConnectionRejected):
            return f"the server refused the WebSocket upgrade (HTTP {cause.status_code}); is {url} a gateway?"
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused by {url}; is the gateway running?"
        if isinstance(cause, OSError) and cause.strerror:
            return f"cannot reach {url}: {cause.strerror}"
        if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]  # trio's happy eyeballs: one error per address tried
            continue
        cause = cause.__cause__ or cause.__context__
    text = str(exc) or type(exc).__name__
    return f"cannot connect to {url}: {text}"


async def dial(nursery: trio.Nursery, url: str, allow_insecure: bool,
               settings: Any) -> trio_websocket.WebSocketConnection:
    """TCP, then TLS for wss: (its handshake done here, so a bad certificate is an
    error now rather than a silent hang inside the WebSocket upgrade), then the upgrade."""
    parts = urlsplit(url)
    secure = parts.scheme.lower() == "wss"
    port = parts.port or (443 if secure else 80)
    host = parts.hostname or ""
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    stream: trio.abc.Stream
    if secure:
        stream = await trio.open_ssl_over_tcp_stream(host, port, ssl_context=ssl_context_for(url, allow_insecure),
                                                     https_compatible=True)
        await stream.do_handshake()
    else:
        stream = await trio.open_tcp_stream(host, port)
    host_header = host if port == (443 if secure else 80) else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]" + host_header[len(host):]
    return await trio_websocket.wrap_client_stream(
        nursery, stream, host_header, resource,
        max_message_size=int(settings["remote.max_frame_bytes"]),
        message_queue_size=int(settings["remote.message_queue"]))


class Gateway:
    """An open, authenticated connection: :meth:`call` RPCs, :meth:`next_event` events."""

    def __init__(self, ws: trio_websocket.WebSocketConnection, hello: Hello, settings: Any,
                 on_gap: Callable[[int], None] | None = None):
        self.ws = ws
        self.hello = hello
        self.request_timeout = float(settings["remote.request_timeout_seconds"])
        self._pending: dict[str, tuple[trio.Event, list[Response]]] = {}
        self._send_events, self._events = trio.open_memory_channel[Event](math.inf)
        self._seq = protocol.SeqTracker()
        self._on_gap = on_gap
        self._lost: ConnectionLost | None = None
        self.last_inbound = time.monotonic()

    async def call(self, method: str, params: dict[str, Any] | None = None, *,
                   timeout: float | None = None) -> Any:
        """The payload of a successful answer; :class:`RequestFailed` otherwise."""
        request_id, text = protocol.request_frame(method, params)
        done = trio.Event()
        slot: list[Response] = []
        self._pending[request_id] = (done, slot)
        try:
            if self._lost is not None:
                raise self._lost
            try:
                await self.ws.send_message(text)
            except trio_websocket.ConnectionClosed as exc:
                raise self._closed(exc) from None
            with trio.move_on_after(timeout or self.request_timeout):
                await done.wait()
            if not slot:
                if self._lost is not None:
                    raise self._lost
                raise NoAnswer(f"{method}: no answer from the gateway in "
                                  f"{timeout or self.request_timeout:.0f} s")
        finally:
            self._pending.pop(request_id, None)
        answer = slot[0]
        if not answer.ok:
            raise RequestFailed(method, answer.error or GatewayError("UNKNOWN", ""))
        return answer.payload

    async def next_event(self) -> Event:
        try:
            return await self._events.receive()
        except trio.EndOfChannel:
            raise self._lost or ConnectionLost("Connection closed") from None

    def _closed(self, exc: trio_websocket.ConnectionClosed) -> ConnectionLost:
        reason = exc.reason
        code = getattr(reason, "code", None)
        lost = ConnectionLost(protocol.explain_close(code, getattr(reason, "reason", None)), code)
        self._lost = self._lost or lost
        return self._lost

    def _dispatch(self, frame: Event | Response | None) -> None:
        if isinstance(frame, Response):
            waiter = self._pending.get(frame.id)
            if waiter is not None and not waiter[1]:  # a duplicate answer is ignored
                waiter[1].append(frame)
                waiter[0].set()
        elif isinstance(frame, Event):
            deliver, missed = self._seq.see(frame.seq)
            if missed and self._on_gap is not None:
                self._on_gap(missed)
            if deliver:
                self._send_events.send_nowait(frame)

    async def _read(self) -> None:
        """The reader task: until the socket ends, then wakes every waiter."""
        try:
            while True:
                try:
                    text = await self.ws.get_message()
                except trio_websocket.ConnectionClosed as exc:
                    self._closed(exc)
                    return
                self.last_inbound = time.monotonic()
                try:
                    self._dispatch(protocol.parse_frame(text))
                except protocol.ProtocolError as exc:
                    self._lost = self._lost or ConnectionLost(f"Connection closed: {exc}", 1002)
                    await self.ws.aclose(1002, "bad frame")
                    return
        finally:
            self._send_events.close()
            for done, _slot in self._pending.values():
                done.set()

    async def _watch_ticks(self) -> None:
        """Close with 4000 when nothing came for 2 × tickIntervalMs (the seed's tick watch)."""
        limit = 2 * self.hello.tick_interval_ms / 1000
        while True:
            quiet = time.monotonic() - self.last_inbound
            if quiet > limit:
                self._lost = self._lost or ConnectionLost(protocol.explain_close(4000, "tick timeout"), 4000)
                await self.ws.aclose(4000, "tick timeout")
                return
            await trio.sleep(max(limit - quiet, 0.05) if quiet < limit else 0.05)

    async def aclose(self) -> None:
        await self.ws.aclose(1000, "bye")


async def _handshake(ws: trio_websocket.WebSocketConnection, name: str, credentials: Credentials,
                     scopes: tuple[str, ...], caps: tuple[str, ...], settings: Any,
                     version: str) -> Hello:
    nonce, signed_at = None, None
    with trio.move_on_after(float(settings["remote.challenge_wait_seconds"])):
        while nonce is None:
            frame = protocol.parse_frame(await ws.get_message())
            if isinstance(frame, Event) and frame.event == "connect.challenge":
                payload = frame.payload if isinstance(frame.payload, dict) else {}
                ts = payload.get("ts")
                if not isinstance(payload.get("nonce"), str) or not payload["nonce"] \
                        or not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                    raise protocol.ProtocolError("the gateway sent a malformed connect.challenge")
                nonce, signed_at = payload["nonce"], ts
    if nonce is None:
        version, signed_at = "v1", int(time.time() * 1000)  # a gateway from before the challenge
    token = credentials.shared_token or credentials.device_token
    params = protocol.connect_params(
        credentials.identity, scopes=scopes, caps=caps, token=token, password=credentials.password,
        nonce=nonce, signed_at_ms=signed_at, version=version, client_version=__version__)
    request_id, text = protocol.request_frame("connect", params)
    await ws.send_message(text)
    while True:
        frame = protocol.parse_frame(await ws.get_message())
        if isinstance(frame, Response) and frame.id == request_id:
            break
    if not frame.ok:
        raise ConnectRefused(protocol.explain_connect_error(frame.error or GatewayError("UNKNOWN", ""), name))
    return Hello.from_payload(frame.payload, used_device_token=bool(token) and token == credentials.device_token)


@asynccontextmanager
async def open_gateway(url: str, credentials: Credentials, *, name: str, command: str,
                       settings: Any, allow_insecure: bool = False,
                       on_gap: Callable[[int], None] | None = None) -> AsyncIterator[Gateway]:
    """An authenticated :class:`Gateway`, closed on exit. Raises :class:`RemoteError`
    (one line) for every failure before ``hello-ok``: :class:`ConnectRefused` when the
    gateway answered (pairing, auth), plain :class:`RemoteError` for the rest.

    The nursery holds trio-websocket's reader and ours; errors are carried out of it
    by hand so that callers see the one error, not an exception group."""
    url = protocol.normalize_url(url)
    version = "v3"
    for attempt in (1, 2):
        error: BaseException | None = None
        retry = False
        try:
            async with trio.open_nursery() as nursery:
                try:
                    ws = await _dial_and_greet(nursery, url, credentials, name, command, settings,
                                               allow_insecure, version)
                except ConnectRefused as exc:
                    if exc.failure.code == "DEVICE_AUTH_SIGNATURE_INVALID" and attempt == 1:
                        retry, version = True, "v2"  # a gateway that knows v2 only
                    else:
                        error = exc
                    nursery.cancel_scope.cancel()
                except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the nursery
                    error = exc
                    nursery.cancel_scope.cancel()
                else:
                    gateway = Gateway(ws[0], ws[1], settings, on_gap)
                    nursery.start_soon(gateway._read)
                    nursery.start_soon(gateway._watch_ticks)
                    try:
                        yield gateway
                    except BaseException as exc:  # noqa: BLE001 - the caller's own error
                        error = exc
                    finally:
                        with trio.CancelScope(shield=True), trio.move_on_after(2):
                            await ws[0].aclose(1000, "bye")
                        nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # trio-websocket's reader failed (a 503 while restarting)
            error = _dial_group_error(group, url)
        if error is not None:
            raise error
        if not retry:
            return


def _dial_group_error(group: BaseExceptionGroup, url: str) -> BaseException:
    """One error for a nursery that failed while dialing: the dial error in words."""
    single = single_error(group)
    if single is not group:
        return single
    leaves = _leaves(group)
    for leaf in leaves:
        # Ctrl-C (or an exit) while dialing: the reader's broken socket beside it is its
        # consequence, and a dial error here would make `remote pair` poll on.
        if not isinstance(leaf, Exception):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, (OSError, trio_websocket.HandshakeError, trio.BrokenResourceError)):
            return RemoteError(_describe_dial_error(leaf, url))
    return group


async def _dial_and_greet(nursery: trio.Nursery, url: str, credentials: Credentials, name: str,
                          command: str, settings: Any, allow_insecure: bool,
                          version: str) -> tuple[trio_websocket.WebSocketConnection, Hello]:
    scopes, caps = protocol.connect_access(command, paired=bool(credentials.device_token))
    dial_timeout = float(settings["remote.connect_timeout_seconds"])
    handshake_timeout = float(settings["remote.handshake_timeout_seconds"])
    ws = None
    try:
        with trio.fail_after(handshake_timeout):
            try:
                with trio.fail_after(dial_timeout):
                    ws = await dial(nursery, url, allow_insecure, settings)
            except trio.TooSlowError:
                raise RemoteError(f"Connection timed out ({dial_timeout:g}s)") from None
            except (OSError, trio_websocket.HandshakeError, trio.BrokenResourceError) as exc:
                raise RemoteError(_describe_dial_error(exc, url)) from None
            try:
                return ws, await _handshake(ws, name, credentials, scopes, caps, settings, version)
            except trio_websocket.ConnectionClosed as exc:
                reason = exc.reason
                raise RemoteError(protocol.explain_close(
                    getattr(reason, "code", None), getattr(reason, "reason", None))) from None
            except trio.BrokenResourceError as exc:
                raise RemoteError(_describe_dial_error(exc, url)) from None
    except trio.TooSlowError:
        if ws is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await ws.aclose(1000, "handshake timeout")
        raise RemoteError(f"Handshake timed out ({handshake_timeout:g}s)") from None
    except BaseException:
        if ws is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await ws.aclose(1000, "bye")
        raise


StateCallback = Callable[[str, str], None]


async def run_connected(connect: Callable[[], Any], body: Callable[[Gateway], Awaitable[Any]], *,
                        settings: Any, on_state: StateCallback,
                        sleep: Callable[[float], Awaitable[None]] = trio.sleep) -> Any:
    """Run ``body`` on a connection, reconnecting when it is lost (backoff 1 s → 30 s,
    at most ``remote.max_reconnect_attempts`` in a row). ``connect()`` returns an
    :func:`open_gateway` context. ``body`` must be safe to run again after a loss
    (the chat keeps its own progress). Refusals that retrying cannot fix (auth,
    pairing) end the loop at once, and so does every error of ``body``'s own that a new
    connection cannot fix (see :func:`_body_error_is_retried`). Only a loss starts a new
    series of attempts: a body that fails the same way on every connection (it used to
    reset the count at each connect and retry forever) gives up after the limit."""
    attempts = 0
    first = float(settings["remote.backoff_initial_seconds"])
    ceiling = float(settings["remote.backoff_max_seconds"])
    limit = int(settings["remote.max_reconnect_attempts"])
    while True:
        from_body: BaseException | None = None
        try:
            async with connect() as gateway:
                on_state("connected", f"gateway {gateway.hello.server_version}")
                try:
                    return await body(gateway)
                except BaseExceptionGroup as group:  # the body's nursery: one loss, seen by several tasks
                    from_body = single_error(group)
                    raise from_body from None
                except BaseException as exc:
                    from_body = exc
                    raise
        except ConnectionLost as exc:
            if exc is from_body:
                attempts = 0  # it worked until it dropped: a fresh series of attempts
            problem = str(exc)
        except ConnectRefused as exc:
            if not exc.failure.retryable:
                raise
            problem = str(exc)
        except RemoteError as exc:
            if exc is from_body and not _body_error_is_retried(exc):
                raise
            problem = str(exc)
        attempts += 1
        if attempts > limit:
            raise RemoteError(f"gave up after {limit} reconnect attempts; last error: {problem}")
        delay = min(ceiling, first * 2 ** (attempts - 1))
        on_state("reconnecting", f"{problem}; retry {attempts}/{limit} in {delay:g} s")
        await sleep(delay)


def _body_error_is_retried(exc: RemoteError) -> bool:
    """A body's error worth a new connection: no answer in time, or a request the gateway
    itself marked ``retryable``. The rest (the operator's own choice, a refused request)
    would fail the same way after minutes of backoff, so it is said at once."""
    if isinstance(exc, NoAnswer):
        return True
    return isinstance(exc, RequestFailed) and exc.error.retryable


async def probe_url(url: str, *, settings: Any, allow_insecure: bool = False) -> dict[str, Any]:
    """The seed's connection test for a bare URL: open the socket (TLS verified unless
    ``allow_insecure``) and wait for the gateway's ``connect.challenge``; no credentials
    are sent. ``{"url", "challenge": bool}``, or :class:`RemoteError`."""
    url = protocol.normalize_url(url)
    dial_timeout = float(settings["remote.connect_timeout_seconds"])
    result: dict[str, Any] = {"url": url, "challenge": False}
    error: BaseException | None = None
    try:
        await _probe(url, settings, allow_insecure, dial_timeout, result)
    except BaseExceptionGroup as group:
        error = _dial_group_error(group, url)
    except RemoteError as exc:
        error = exc
    if error is not None:
        raise error
    return result


async def _probe(url: str, settings: Any, allow_insecure: bool, dial_timeout: float,
                 result: dict[str, Any]) -> None:
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        try:
            with trio.fail_after(dial_timeout):
                ws = await dial(nursery, url, allow_insecure, settings)
        except trio.TooSlowError:
            error = RemoteError(f"Connection timed out ({dial_timeout:g}s)")
        except (OSError, trio_websocket.HandshakeError, trio.BrokenResourceError) as exc:
            error = RemoteError(_describe_dial_error(exc, url))
        except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the nursery
            error = exc
        else:
            try:
                with trio.move_on_after(float(settings["remote.challenge_wait_seconds"])):
                    while True:
                        frame = protocol.parse_frame(await ws.get_message())
                        if isinstance(frame, Event) and frame.event == "connect.challenge":
                            result["challenge"] = True
                            break
            except (trio_websocket.ConnectionClosed, protocol.ProtocolError) as exc:
                error = RemoteError(f"the server at {url} is not an OpenClaw gateway ({exc})")
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await ws.aclose(1000, "test")
        nursery.cancel_scope.cancel()
    if error is not None:
        raise error


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        elif not isinstance(exc, trio.Cancelled):
            leaves.append(exc)
    walk(group)
    return leaves


def single_error(group: BaseExceptionGroup) -> BaseException:
    """The first remote error inside a nursery's exception group, when every error in it
    is one (a lost connection wakes every task that used it); else the group itself."""
    leaves = _leaves(group)
    if leaves and all(isinstance(leaf, RemoteError) for leaf in leaves):
        return leaves[0]
    return group
