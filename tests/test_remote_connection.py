"""The gateway connection against a scripted local WebSocket server: the handshake,
every way it fails, frames out of order and twice, big frames, ticks, reconnects."""

from __future__ import annotations

import datetime
import json
import ssl
import sys
from pathlib import Path

import pytest
import trio

sys.path.insert(0, str(Path(__file__).parent))

from remote_fake_gateway import FakeGateway  # noqa: E402

from paddedcell import config  # noqa: E402
from paddedcell.remote import protocol  # noqa: E402
from paddedcell.remote.connection import (ConnectionLost, ConnectRefused, Credentials,  # noqa: E402
                                          open_gateway, probe_url, run_connected)
from paddedcell.remote.identity import DeviceIdentity  # noqa: E402
from paddedcell.remote.protocol import RemoteError  # noqa: E402


def settings(**overrides):
    return config.load(environ={"PADDEDCELL_HOME": "/nonexistent-remote-test"},
                       overrides={f"remote.{k}": v for k, v in overrides.items()})


IDENTITY = DeviceIdentity.generate()


async def start(nursery, gateway: FakeGateway) -> FakeGateway:
    await nursery.start(gateway.serve)
    return gateway


def connect(gateway, credentials=None, command="chat", **options):
    return open_gateway(gateway.url if isinstance(gateway, FakeGateway) else gateway,
                        credentials or Credentials(IDENTITY, shared_token="shared-tok"),
                        name="gw", command=command, settings=options.pop("s", None) or settings(), **options)


async def test_handshake_signs_v3_with_the_challenge_and_gets_hello(nursery):
    gateway = await start(nursery, FakeGateway(versions=("v3",)))
    async with connect(gateway) as conn:
        assert conn.hello.protocol == 4 and conn.hello.server_version == "fake-1"
        assert conn.hello.device_token == "dev-token-AAAAbbbbCCCCdddd1234"
    params = gateway.connects[0]["params"]
    assert params["device"]["nonce"] == f"nonce-{gateway.port}"
    assert params["device"]["signedAt"] == 1_700_000_000_000, "signedAt is the challenge ts"
    assert params["auth"] == {"token": "shared-tok"}
    assert params["caps"] == ["tool-events", "approvals"]


async def test_a_v2_only_gateway_gets_a_v2_signature_on_the_second_try(nursery):
    gateway = await start(nursery, FakeGateway(versions=("v2",)))
    async with connect(gateway) as conn:
        assert conn.hello.protocol == 4
    assert len(gateway.connects) == 2


async def test_a_gateway_without_challenge_gets_the_legacy_v1_connect(nursery):
    gateway = await start(nursery, FakeGateway(challenge=False, versions=("v1",)))
    async with connect(gateway, s=settings(challenge_wait_seconds=0.2)):
        pass
    assert "nonce" not in gateway.connects[0]["params"]["device"]


@pytest.mark.parametrize("code", sorted(protocol.CONNECT_ERROR_HINTS))
async def test_every_auth_detail_code_becomes_its_one_line(nursery, code):
    error = {"code": "INVALID_REQUEST", "message": "refused",
             "details": {"code": code, "requestId": "req-42"}}
    gateway = await start(nursery, FakeGateway(connect_error=error))
    with pytest.raises(ConnectRefused) as caught:
        async with connect(gateway):
            pass
    failure = caught.value.failure
    assert str(caught.value) == protocol.explain_connect_error(
        protocol.GatewayError("INVALID_REQUEST", "refused", error["details"]), "gw").message
    assert failure.kind == ("pending" if code == "PAIRING_REQUIRED" else "error")
    assert "\n" not in str(caught.value)


async def test_bad_urls_and_refused_ports():
    with pytest.raises(RemoteError, match=r"^Unsupported protocol: http:$"):
        async with connect("http://127.0.0.1:1"):
            pass
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(RemoteError, match="connection refused"):
        async with connect(f"127.0.0.1:{port}"):
            pass


async def test_a_server_that_never_upgrades_times_out(nursery):
    listeners = await nursery.start(trio.serve_tcp, lambda stream: trio.sleep_forever(), 0)
    port = listeners[0].socket.getsockname()[1]
    with pytest.raises(RemoteError, match=r"^Connection timed out \(0.3s\)$"):
        async with connect(f"127.0.0.1:{port}", s=settings(connect_timeout_seconds=0.3)):
            pass
    with pytest.raises(RemoteError, match=r"^Connection timed out \(0.3s\)$"):
        await probe_url(f"127.0.0.1:{port}", settings=settings(connect_timeout_seconds=0.3))


async def test_a_gateway_that_never_answers_connect_times_out_the_handshake(nursery):
    gateway = await start(nursery, FakeGateway(silent_connect=True))
    with pytest.raises(RemoteError, match=r"^Handshake timed out \(0.5s\)$"):
        async with connect(gateway, s=settings(handshake_timeout_seconds=0.5)):
            pass


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context


async def test_tls_is_verified_unless_allow_insecure(nursery, tmp_path):
    gateway = await start(nursery, FakeGateway(ssl_context=_self_signed(tmp_path)))
    with pytest.raises(RemoteError, match="TLS certificate not trusted.*--allow-insecure"):
        async with connect(gateway):
            pass
    with pytest.raises(RemoteError, match="TLS certificate not trusted"):
        await probe_url(gateway.url, settings=settings())
    async with connect(gateway, allow_insecure=True) as conn:
        assert conn.hello.protocol == 4
    assert (await probe_url(gateway.url, settings=settings(), allow_insecure=True))["challenge"]
    plain = await start(nursery, FakeGateway())
    with pytest.raises(RemoteError, match="TLS handshake failed|cannot"):
        async with connect(plain.url.replace("ws://", "wss://")):
            pass


async def test_responses_out_of_order_and_twice_reach_the_right_caller(nursery):
    async def slow(params):
        await trio.sleep(0.2)
        return {"who": "slow"}
    gateway = await start(nursery, FakeGateway(duplicate_responses=True,
                                               methods={"slow": slow, "fast": lambda p: {"who": "fast"}}))
    async with connect(gateway) as conn:
        results = {}

        async def call(name):
            results[name] = await conn.call(name, {})
        async with trio.open_nursery() as inner:
            inner.start_soon(call, "slow")
            await trio.sleep(0.05)
            inner.start_soon(call, "fast")
        assert results == {"slow": {"who": "slow"}, "fast": {"who": "fast"}}
        assert await conn.call("fast") == {"who": "fast"}, "a duplicate answer is not the next one"


async def test_duplicate_and_late_events_are_dropped_and_gaps_reported(nursery):
    async def script(ws, gw):
        for seq in (1, 2, 2, 1, 5, 6):
            await gw.event(ws, "probe", {"n": seq}, seq=seq)
    gaps = []
    gateway = await start(nursery, FakeGateway(script=script))
    async with connect(gateway, on_gap=gaps.append) as conn:
        seen = [(await conn.next_event()).payload["n"] for _ in range(4)]
    assert seen == [1, 2, 5, 6]
    assert gaps == [2]


async def test_a_10_mb_frame_arrives_whole_and_a_frame_over_the_limit_closes(nursery):
    big = "x" * (10 * 1024 * 1024)

    async def script(ws, gw):
        await gw.event(ws, "big", {"text": big})
    gateway = await start(nursery, FakeGateway(script=script))
    async with connect(gateway) as conn:
        event = await conn.next_event()
        assert event.payload["text"] == big
    with pytest.raises(ConnectionLost, match="Connection closed"):
        async with connect(gateway, s=settings(max_frame_bytes=1024 * 1024)) as conn:
            await conn.next_event()


async def test_silence_past_two_ticks_closes_with_4000(nursery):
    gateway = await start(nursery, FakeGateway(tick_interval_ms=100))
    with trio.fail_after(5):
        with pytest.raises(ConnectionLost) as caught:
            async with connect(gateway) as conn:
                await conn.next_event()
    assert caught.value.code == 4000 and "tick" in str(caught.value)


async def test_a_revoking_close_is_named(nursery):
    gateway = await start(nursery, FakeGateway(close_after_hello=(4001, "device token revoked")))
    with pytest.raises(ConnectionLost, match=r"Connection closed \(4001\): device token revoked"):
        async with connect(gateway) as conn:
            await conn.next_event()


async def test_reconnect_backs_off_1_to_30_s_and_gives_up_after_10():
    delays, states = [], []

    async def fake_sleep(seconds):
        delays.append(seconds)

    def failing():
        return connect("127.0.0.1:1")

    with pytest.raises(RemoteError, match="gave up after 10 reconnect attempts"):
        await run_connected(failing, lambda conn: None, settings=settings(), on_state=lambda s, d: states.append(s),
                            sleep=fake_sleep)
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30, 30, 30]
    assert states == ["reconnecting"] * 10


async def test_reconnect_runs_the_body_again_after_a_loss(nursery):
    gateway = await start(nursery, FakeGateway(methods={"ping": lambda p: "pong"}))
    runs, states = [], []

    async def body(conn):
        runs.append(conn.hello.conn_id)
        if len(runs) == 1:
            await conn.ws.aclose(1012, "restart")  # the gateway goes away under us
            await conn.next_event()
        return await conn.call("ping")

    async def no_sleep(seconds):
        pass
    result = await run_connected(lambda: connect(gateway), body, settings=settings(),
                                 on_state=lambda s, d: states.append(s), sleep=no_sleep)
    assert result == "pong" and len(runs) == 2
    assert states == ["connected", "reconnecting", "connected"]


async def test_refusals_are_not_retried():
    async def never(seconds):
        raise AssertionError("no retry expected")

    async with trio.open_nursery() as nursery:
        gateway = await start(nursery, FakeGateway(connect_error={
            "code": "INVALID_REQUEST", "message": "x", "details": {"code": "AUTH_TOKEN_MISMATCH"}}))
        with pytest.raises(ConnectRefused):
            await run_connected(lambda: connect(gateway), lambda c: None, settings=settings(),
                                on_state=lambda s, d: None, sleep=never)
        nursery.cancel_scope.cancel()


async def test_a_body_error_a_new_connection_cannot_fix_ends_the_loop_at_once(nursery):
    """Only a lost socket, an unanswered request and an answer the gateway marks
    ``retryable`` are worth the backoff; anything else the body raises (a refused request,
    the operator's wrong choice) is said at once: `remote chat` sat in 3 min of backoff."""
    from remote_fake_gateway import GatewayFault

    answers = {"refused": GatewayFault("INVALID_REQUEST", "session key names no agent"),
               "busy": GatewayFault("UNAVAILABLE", "gateway draining")}
    answers["busy"].error["retryable"] = True

    def fail(params):
        raise answers[params["what"]]
    gateway = await start(nursery, FakeGateway(methods={"fail": fail, "slow": lambda p: trio.sleep_forever()}))
    slept, quick = [], settings(max_reconnect_attempts=2, request_timeout_seconds=0.2)

    async def count_sleep(seconds):
        slept.append(seconds)

    async def run(body):
        slept.clear()
        with pytest.raises(RemoteError) as caught:
            await run_connected(lambda: connect(gateway, s=quick), body, settings=quick,
                                on_state=lambda s, d: None, sleep=count_sleep)
        return str(caught.value), len(slept)

    async def own_error(conn):
        raise RemoteError("gw has no agent 'nope'; pass --agent with one of: main")
    assert await run(own_error) == ("gw has no agent 'nope'; pass --agent with one of: main", 0)

    async def refused(conn):
        async with trio.open_nursery() as inner:  # from a nursery too: one error, not retried
            inner.start_soon(conn.next_event)
            await conn.call("fail", {"what": "refused"})
    assert await run(refused) == ("fail failed: session key names no agent (INVALID_REQUEST)", 0)

    async def busy(conn):
        await conn.call("fail", {"what": "busy"})
    message, retries = await run(busy)
    assert retries == 2 and message.startswith("gave up after 2 reconnect attempts; last error: fail failed")

    async def unanswered(conn):
        await conn.call("slow")
    message, retries = await run(unanswered)
    assert retries == 2 and "slow: no answer from the gateway" in message


def test_frames_in_and_out_are_json():
    request_id, text = protocol.request_frame("chat.send", {"message": "héllo"})
    assert json.loads(text)["params"]["message"] == "héllo"


async def test_a_loss_seen_by_several_tasks_of_the_body_is_one_reconnect(nursery):
    gateway = await start(nursery, FakeGateway(methods={"ping": lambda p: "pong"}))
    runs = []

    async def body(conn):
        runs.append(1)
        if len(runs) == 1:
            async with trio.open_nursery() as inner:
                inner.start_soon(conn.next_event)
                inner.start_soon(conn.next_event)
                await trio.sleep(0.05)
                await conn.ws.aclose(1012, "restart")
        return await conn.call("ping")

    async def no_sleep(seconds):
        pass
    assert await run_connected(lambda: connect(gateway), body, settings=settings(),
                               on_state=lambda s, d: None, sleep=no_sleep) == "pong"
    assert len(runs) == 2


def test_ctrl_c_while_dialing_stays_ctrl_c_not_a_dial_error():
    """A KeyboardInterrupt that lands inside the dial's nursery comes out beside the
    reader's broken socket; it must stay a KeyboardInterrupt (`remote pair` polled on
    when it became a retryable dial error)."""
    from paddedcell.remote.connection import _dial_group_error
    from paddedcell.remote.errors import RemoteError

    interrupt = KeyboardInterrupt()
    group = BaseExceptionGroup("dial", [trio.BrokenResourceError("reader"),
                                        BaseExceptionGroup("inner", [interrupt, OSError(104, "reset")])])
    assert _dial_group_error(group, "ws://127.0.0.1:1") is interrupt
    plain = _dial_group_error(BaseExceptionGroup("dial", [OSError(111, "refused")]), "ws://127.0.0.1:1")
    assert isinstance(plain, RemoteError)
