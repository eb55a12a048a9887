"""The remote client's pure core: URLs, signatures, connect errors, chat pieces."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from paddedcell.remote import protocol
from paddedcell.remote.identity import DeviceIdentity, verify
from paddedcell.remote.protocol import GatewayError, RemoteError


@pytest.mark.parametrize("text, url", [
    ("  127.0.0.1:42617 ", "ws://127.0.0.1:42617"),
    ("gateway.example:18789", "ws://gateway.example:18789"),
    ("ws://h:1/path", "ws://h:1/path"),
    ("WSS://h", "WSS://h"),
])
def test_urls_are_trimmed_and_bare_hosts_become_ws(text, url):
    assert protocol.normalize_url(text) == url


@pytest.mark.parametrize("text, message", [
    ("http://h:1", "Unsupported protocol: http:"),
    ("https://h", "Unsupported protocol: https:"),
    ("file:///etc/passwd", "Unsupported protocol: file:"),
    ("ftp://h", "Unsupported protocol: ftp:"),
    ("http:h", "Unsupported protocol: http:"),
    ("", "URL is empty"),
    ("   ", "URL is empty"),
    ("ws://h:99999", "Invalid URL"),
    ("ws://", "Invalid URL"),
])
def test_bad_urls_are_refused_in_one_line(text, message):
    with pytest.raises(RemoteError) as caught:
        protocol.normalize_url(text)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_device_id_is_sha256_of_the_raw_public_key():
    import hashlib

    identity = DeviceIdentity.generate()
    assert identity.device_id == hashlib.sha256(identity.public_raw).hexdigest()
    assert len(identity.public_raw) == 32
    assert "=" not in identity.public_key and "+" not in identity.public_key
    again = DeviceIdentity.from_seed(identity.seed())
    assert again.device_id == identity.device_id
    assert identity.device_id[:12] in repr(identity) and identity.seed().hex() not in repr(identity)


def test_signature_payloads_are_openclaws_exact_strings():
    common = dict(device_id="dev", scopes=("operator.read", "operator.write"), signed_at_ms=123,
                  token="tok", nonce="n1")
    assert protocol.signature_payload("v3", **common, platform=" Linux ", device_family="Desk TOP") == \
        "v3|dev|cli|cli|operator|operator.read,operator.write|123|tok|n1|linux|desk top"
    assert protocol.signature_payload("v2", **common) == \
        "v2|dev|cli|cli|operator|operator.read,operator.write|123|tok|n1"
    assert protocol.signature_payload("v1", **{**common, "nonce": None}) == \
        "v1|dev|cli|cli|operator|operator.read,operator.write|123|tok"
    assert protocol.signature_payload("v2", **{**common, "token": None}).endswith("|123||n1")
    with pytest.raises(ValueError):
        protocol.signature_payload("v3", **{**common, "nonce": ""})


def test_connect_params_sign_exactly_what_they_send():
    identity = DeviceIdentity.generate()
    params = protocol.connect_params(identity, scopes=protocol.PAIRING_SCOPES, caps=("approvals",),
                                     token="shared", password=None, nonce="abc", signed_at_ms=42,
                                     version="v3", client_version="1.0")
    assert params["minProtocol"] == 3 and params["maxProtocol"] == 4
    assert params["client"]["id"] == "cli" and params["client"]["mode"] == "cli"
    assert params["role"] == "operator" and params["auth"] == {"token": "shared"}
    device = params["device"]
    assert device["signedAt"] == 42 and device["nonce"] == "abc" and device["id"] == identity.device_id
    payload = protocol.signature_payload("v3", device_id=identity.device_id, scopes=tuple(params["scopes"]),
                                         signed_at_ms=42, token="shared", nonce="abc")
    assert verify(device["publicKey"], payload, device["signature"])
    assert not verify(device["publicKey"], payload.replace("abc", "abd"), device["signature"])
    # Closed objects on the gateway: only the keys ConnectParamsSchema knows.
    assert set(params) <= {"minProtocol", "maxProtocol", "client", "caps", "commands", "permissions",
                           "role", "scopes", "device", "auth", "locale", "userAgent"}
    assert set(params["client"]) <= {"id", "displayName", "version", "platform", "mode"}


@pytest.mark.parametrize("code", sorted(protocol.CONNECT_ERROR_HINTS))
def test_every_connect_detail_code_is_one_line_that_says_what_to_do(code):
    error = GatewayError("INVALID_REQUEST", "x", {"code": code, "requestId": "req-1"})
    failure = protocol.explain_connect_error(error, "gw1")
    assert "\n" not in failure.message and failure.message
    assert "{" not in failure.message
    if code == "PAIRING_REQUIRED":
        assert failure.kind == "pending" and failure.request_id == "req-1"
        assert "openclaw devices approve req-1" in failure.message
    else:
        assert failure.kind == "error" and failure.code == code
        assert failure.message != "x"


def test_pairing_is_recognised_the_seeds_ways():
    by_step = GatewayError("X", "nope", {"recommendedNextStep": "wait_then_retry"})
    by_text = GatewayError("X", "Pairing Required: device is not approved yet")
    assert protocol.is_pairing_required(by_step) and protocol.is_pairing_required(by_text)
    assert protocol.explain_connect_error(by_text, "gw").kind == "pending"
    upgrade = GatewayError("X", "", {"code": "PAIRING_REQUIRED", "reason": "scope-upgrade", "requestId": "r2"})
    assert "more scopes" in protocol.explain_connect_error(upgrade, "gw").message
    hostile = GatewayError("X", "", {"code": "PAIRING_REQUIRED", "requestId": "r; rm -rf /"})
    assert protocol.explain_connect_error(hostile, "gw").request_id is None


def test_unknown_codes_and_startup_unavailable():
    failure = protocol.explain_connect_error(GatewayError("WEIRD", "strange thing"), "gw")
    assert failure.kind == "error" and "strange thing" in failure.message
    busy = protocol.explain_connect_error(GatewayError("UNAVAILABLE", "starting", retry_after_ms=2000), "gw")
    assert busy.retryable and "retry in 2 s" in busy.message


@pytest.mark.parametrize("name, kind", [
    ("Breadcrumb", "other"), ("thread_summary", "other"), ("spreadsheet", "other"),
    ("readFile", "read"), ("web_fetch", "read"), ("grep", "read"), ("list_dir", "read"),
    ("apply_patch", "edit"), ("write", "edit"), ("createIssue", "edit"),
    ("exec", "execute"), ("runCommand", "execute"), ("bash", "execute"), ("pcexec", "other"),
    ("HTTPGet", "read"), ("", "other"),
])
def test_tool_kind_goes_by_whole_words(name, kind):
    assert protocol.tool_kind(name) == kind


def test_tool_phases():
    assert protocol.tool_phase("start") == "running"
    assert protocol.tool_phase("update") == "running"
    assert protocol.tool_phase("partialResult") == "running"
    assert protocol.tool_phase("result") == "completed"
    assert protocol.tool_phase("result", is_error=True) == "failed"


def test_reply_text_yields_only_what_is_new():
    reply = protocol.ReplyText()
    assert reply.feed("Hel") == "Hel"
    assert reply.feed("Hello") == "lo"
    assert reply.feed("Hello") == ""
    assert reply.feed("Hello, world", ", world") == ", world"
    rewritten = protocol.ReplyText()
    rewritten.feed("abc")
    assert rewritten.feed("xyz", "z") == "z"


@given(st.lists(st.text(max_size=5), max_size=8))
def test_reply_text_of_growing_text_rebuilds_it(pieces):
    reply, text, shown = protocol.ReplyText(), "", ""
    for piece in pieces:
        text += piece
        shown += reply.feed(text)
    assert shown == text


def test_seq_tracker_drops_duplicates_and_late_events_and_counts_gaps():
    tracker = protocol.SeqTracker()
    assert tracker.see(1) == (True, 0)
    assert tracker.see(1) == (False, 0)
    assert tracker.see(2) == (True, 0)
    assert tracker.see(5) == (True, 2)
    assert tracker.see(4) == (False, 0)
    assert tracker.see(None) == (True, 0)


def test_frames_parse_and_bad_frames_are_protocol_errors():
    event = protocol.parse_frame('{"type":"event","event":"tick","payload":{},"seq":3}')
    assert event == protocol.Event("tick", {}, 3)
    response = protocol.parse_frame('{"type":"res","id":"a","ok":false,"error":{"code":"X","message":"m",'
                                    '"details":{"code":"AUTH_REQUIRED"},"retryAfterMs":5}}')
    assert not response.ok and response.error.detail_code == "AUTH_REQUIRED" and response.error.retry_after_ms == 5
    assert protocol.parse_frame('{"type":"hello"}') is None
    for bad in ("not json", "[1]", '{"type":"event"}', '{"type":"res"}', "{}"):
        with pytest.raises(protocol.ProtocolError):
            protocol.parse_frame(bad)
    request_id, text = protocol.request_frame("health", {})
    assert json.loads(text) == {"type": "req", "id": request_id, "method": "health", "params": {}}


def test_attachments_are_quoted_when_they_hold_whitespace():
    assert protocol.with_attachments("look", ["/a/b.txt", "/a/my file.txt"]) == '@/a/b.txt @"/a/my file.txt" look'
    assert protocol.with_attachments("look", []) == "look"


def test_countdown_is_m_ss():
    assert protocol.countdown(300) == "5:00"
    assert protocol.countdown(284.2) == "4:45"
    assert protocol.countdown(0) == "0:00"
    assert protocol.countdown(-3) == "0:00"


def test_close_codes_in_words():
    assert "restarting" in protocol.explain_close(1012, "")
    assert "tick" in protocol.explain_close(4000, None)
    assert "revoked" in protocol.explain_close(4001, "")
