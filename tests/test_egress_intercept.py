"""Interception for bound hosts through real clients (curl, Python's ssl) and real TLS
upstreams on loopback signed by a test CA the session trusts through
``upstream_cafile`` (the test-only setting egress.extra_upstream_ca_file).

Each case checks both ends: what the upstream received (the real value only where the
binding allows) and what the client saw (no value; masks where a server echoes it)."""

from __future__ import annotations

import base64
import json
import ssl

import pytest
import trio

from paddedcell.egress.binding import Binding
from paddedcell.egress.ca import CertificateAuthority
from paddedcell.egress.placeholders import same_shape
from paddedcell.egress.session import ProxySession

from egress_helpers import (curl, headers_of, local_policy, running_proxy, tls_through,
                            upstream)

REAL = "ghp_" + "R3alT0kenValue0123456789abcdefABCDEF"
OTHER = "sk-" + "0therSecretValue0123456789xyzXYZ"
TEST_CA = CertificateAuthority("PaddedCell test upstream CA")
MASK = "######"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("egress")
    upstream_ca = root / "upstream-ca.pem"
    upstream_ca.write_bytes(TEST_CA.certificate_pem)
    return root, str(upstream_ca)


class World:
    """A session with gh bound to upstream A, other bound to upstream B, and C unbound."""

    def __init__(self, files, a: int, b: int, *, inject: str = "header",
                 plain_http: bool = False, trust_upstream: bool = True):
        root, upstream_ca = files
        self.events: list[tuple[str, dict]] = []
        self.session = ProxySession(
            "agent1", {"gh": Binding((f"localhost:{a}",), inject, plain_http),
                       "other": Binding((f"localhost:{b}",))},
            mask_values=[REAL, OTHER],
            audit=lambda event, **fields: self.events.append((event, fields)),
            upstream_cafile=upstream_ca if trust_upstream else None)
        self.placeholder = self.session.issue("gh", REAL)
        self.other_placeholder = self.session.issue("other", OTHER)
        self.bundle = root / f"bundle-{id(self)}.pem"
        self.bundle.write_bytes(self.session.bundle())


def _all_text(*parts) -> str:
    return "\n".join(json.dumps(p) if not isinstance(p, str) else p for p in parts)


async def test_header_bearer_is_swapped_and_the_echo_is_masked(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, got_b):
        world = World(files, a, b)
        assert same_shape(world.placeholder, REAL) and world.placeholder != REAL
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            code, out, err = await curl("--cacert", str(world.bundle), "-x",
                                        f"http://127.0.0.1:{proxy}",
                                        "-H", f"Authorization: Bearer {world.placeholder}",
                                        "-H", "Host: attacker.example",
                                        f"https://localhost:{a}/user?t={world.placeholder}")
    assert code == 0, err
    sent = headers_of(got_a[0])
    assert sent["authorization"] == f"Bearer {REAL}"
    assert sent["host"] == f"localhost:{a}"  # authorised by the CONNECT target
    assert got_a[0]["path"] == f"/user?t={REAL}"
    assert sent["accept-encoding"] == "identity"
    assert REAL not in out and world.placeholder not in out and MASK in out
    assert ("egress.substituted", {"agentId": "agent1", "keys": ["gh"], "host": "localhost",
                                   "port": a, "method": "GET"}) in world.events
    assert REAL not in _all_text(*[e for _, e in world.events])


async def test_basic_auth_is_decoded_swapped_and_reencoded(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _):
        world = World(files, a, b, inject="basic")
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            code, out, err = await curl("--cacert", str(world.bundle), "-x",
                                        f"http://127.0.0.1:{proxy}",
                                        "-u", f"x-access-token:{world.placeholder}",
                                        f"https://localhost:{a}/repo.git/info/refs")
            # inject=basic: the same placeholder in another header is refused.
            refused = await curl("--cacert", str(world.bundle), "-x",
                                 f"http://127.0.0.1:{proxy}", "-H",
                                 f"X-Token: {world.placeholder}", f"https://localhost:{a}/")
    assert code == 0, err
    credential = headers_of(got_a[0])["authorization"].split()[1]
    assert base64.b64decode(credential).decode() == f"x-access-token:{REAL}"
    assert refused[1] == (f"egress refused: gh goes to localhost:{a} in Authorization: Basic "
                          "only, not in headers (pass_mgr bind --inject changes that)\n")
    assert len(got_a) == 1


async def test_body_is_swapped_only_with_inject_body(files):
    body = "token=" + "P" * 5000 + "{p}&again={p}"
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _):
        header_world = World(files, a, b)
        async with running_proxy(local_policy(a, b), session=header_world.session) as proxy:
            refused = await curl("--cacert", str(header_world.bundle), "-x",
                                 f"http://127.0.0.1:{proxy}", "-d",
                                 body.format(p=header_world.placeholder),
                                 f"https://localhost:{a}/post")
        body_world = World(files, a, b, inject="body")
        async with running_proxy(local_policy(a, b), session=body_world.session) as proxy:
            # Chunked and split: the placeholder straddles curl's writes.
            code, out, err = await curl("--cacert", str(body_world.bundle), "-x",
                                        f"http://127.0.0.1:{proxy}", "-H",
                                        "Transfer-Encoding: chunked", "-d",
                                        body.format(p=body_world.placeholder),
                                        f"https://localhost:{a}/post")
    assert refused[1].startswith("egress refused: gh goes to localhost:")
    assert "not in the body" in refused[1]
    assert REAL not in "".join(r["body"] for r in got_a[:-1])
    assert code == 0, err
    assert got_a[-1]["body"] == body.format(p=REAL)
    assert REAL not in out and MASK in out


async def test_a_placeholder_toward_another_host_is_refused_and_audited(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, got_b):
        world = World(files, a, b)
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            code, out, err = await curl("--cacert", str(world.bundle), "-x",
                                        f"http://127.0.0.1:{proxy}", "-H",
                                        f"Authorization: token {world.placeholder}",
                                        f"https://localhost:{b}/steal")
    assert out == f"egress refused: gh is bound to localhost:{a}\n"
    assert got_b == [] and got_a == []
    assert ("egress.refused", {"agentId": "agent1", "key": "gh", "host": "localhost",
                               "port": b, "method": "GET"}) in world.events


async def test_an_unbound_host_is_terminated_and_refused_once_a_placeholder_is_held(files):
    with upstream(TEST_CA) as (a, _), upstream(TEST_CA) as (b, _), \
            upstream(TEST_CA) as (c, got_c):
        world = World(files, a, b)
        async with running_proxy(local_policy(a, b, c), session=world.session) as proxy:
            args = ["--cacert", str(world.bundle), "-x", f"http://127.0.0.1:{proxy}"]
            refused = await curl(*args, "-H", f"Authorization: Bearer {world.placeholder}",
                                 f"https://localhost:{c}/")
            # Without a placeholder the request goes as sent, the answer comes untouched.
            clean = await curl(*args, "-H", "Accept-Encoding: gzip", "-H", f"X-Echo: {REAL}",
                               f"https://localhost:{c}/clean")
    assert refused[1] == f"egress refused: gh is bound to localhost:{a}\n"
    assert ("egress.refused", {"agentId": "agent1", "key": "gh", "host": "localhost",
                               "port": c, "method": "GET"}) in world.events
    assert clean[0] == 0, clean[2]
    assert [r["path"] for r in got_c] == ["/clean"]
    assert headers_of(got_c[0])["accept-encoding"] == "gzip"  # not rewritten
    assert REAL in clean[1]  # not masked: nothing was swapped toward this host


async def test_plain_http_to_a_bound_host_needs_allow_plain_http(files):
    with upstream() as (a, got_a), upstream(TEST_CA) as (b, _):
        strict = World(files, a, b)
        async with running_proxy(local_policy(a, b), session=strict.session) as proxy:
            refused = await curl("-x", f"http://127.0.0.1:{proxy}", "-H",
                                 f"Authorization: Bearer {strict.placeholder}",
                                 f"http://localhost:{a}/")
        loose = World(files, a, b, plain_http=True)
        async with running_proxy(local_policy(a, b), session=loose.session) as proxy:
            code, out, err = await curl("-x", f"http://127.0.0.1:{proxy}", "-H",
                                        f"Authorization: Bearer {loose.placeholder}",
                                        f"http://localhost:{a}/")
    assert refused[1] == (f"egress refused: gh is bound to localhost:{a} over https only (a "
                          "human can allow http:// with pass_mgr bind --allow-plain-http)\n")
    assert len(got_a) == 1
    assert headers_of(got_a[0])["authorization"] == f"Bearer {REAL}"
    assert REAL not in out and MASK in out


async def test_an_upstream_that_does_not_verify_gets_nothing(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _):
        world = World(files, a, b, trust_upstream=False)
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            code, out, err = await curl("--cacert", str(world.bundle), "-x",
                                        f"http://127.0.0.1:{proxy}", "-H",
                                        f"Authorization: Bearer {world.placeholder}",
                                        f"https://localhost:{a}/")
    assert out.startswith("egress: localhost's certificate does not verify (")
    assert out.endswith("nothing was sent\n")
    assert got_a == []


async def test_sni_must_match_the_connect_target(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _):
        world = World(files, a, b)
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            tls = await tls_through(proxy, f"localhost:{a}", str(world.bundle),
                                    "attacker.example", check_hostname=False)
            with pytest.raises(trio.BrokenResourceError):
                await tls.do_handshake()
    assert got_a == []
    assert any(event == "egress.handshake-failed" for event, _ in world.events)


async def test_the_session_ca_mints_for_any_host_and_speaks_http11_only(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _):
        world = World(files, a, b)
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            code, out, err = await curl("--http2", "-v", "--cacert", str(world.bundle), "-x",
                                        f"http://127.0.0.1:{proxy}", f"https://localhost:{a}/")
    assert code == 0, err
    assert "ALPN: server accepted http/1.1" in err or "ALPN, server accepted to use http/1.1" in err
    # Not name-constrained: every host is terminated once the session holds a placeholder.
    from cryptography import x509
    with pytest.raises(x509.ExtensionNotFound):
        world.session.ca.certificate.extensions.get_extension_for_class(x509.NameConstraints)


def _frame(payload: bytes, *, first: int = 0x81, key: bytes = b"k3y!") -> bytes:
    """A masked client frame (text, FIN unless ``first`` says otherwise)."""
    masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    size = bytes((0x80 | len(payload),)) if len(payload) < 126 else \
        bytes((0x80 | 126,)) + len(payload).to_bytes(2, "big")
    return bytes((first,)) + size + key + masked


async def _websocket(tls, placeholder: str, extensions: bool = False) -> bytes:
    await tls.send_all((
        f"GET /socket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {placeholder}\r\n"
        + ("Sec-WebSocket-Extensions: permessage-deflate\r\n" if extensions else "")
        + "\r\n").encode())
    head = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in head:
            head += await tls.receive_some(4096)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return head.split(b"\r\n\r\n", 1)[1]


async def _read_until_closed(tls) -> bytes:
    got = b""
    with trio.fail_after(10):
        try:
            while chunk := await tls.receive_some(4096):
                got += chunk
        except trio.BrokenResourceError:
            pass
    return got


async def test_websocket_frames_are_swapped_for_a_bound_host_and_echoes_masked(files):
    """A real WebSocket client (trio-websocket) through the tunnel: the handshake and the
    frames carry the placeholder; the upstream gets the value (inject=body allows
    payloads); the echo comes back masked; no extension is negotiated."""
    from trio_websocket import wrap_client_stream

    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _):
        world = World(files, a, b, inject="body")
        async with running_proxy(local_policy(a, b), session=world.session) as proxy:
            tls = await tls_through(proxy, f"localhost:{a}", str(world.bundle), "localhost")
            async with trio.open_nursery() as nursery:
                ws = await wrap_client_stream(
                    nursery, tls, "localhost", "/socket",
                    extra_headers=[(b"authorization", f"Bearer {world.placeholder}".encode()),
                                   (b"sec-websocket-extensions", b"permessage-deflate")])
                with trio.fail_after(10):
                    await ws.send_message(f"token={world.placeholder} " + "p" * 70000)
                    echoed = await ws.get_message()
                    await ws.send_message("nothing secret")
                    plain = await ws.get_message()
                await ws.aclose()
    assert headers_of(got_a[0])["authorization"] == f"Bearer {REAL}"
    assert "sec-websocket-extensions" not in headers_of(got_a[0])
    assert got_a[1]["ws"].startswith(f"token={REAL} ")
    assert echoed.startswith(f"echo:token={MASK} ") and REAL not in echoed
    assert plain == "echo:nothing secret"


async def test_websocket_frames_that_may_not_carry_the_placeholder_are_cut(files):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (b, _), \
            upstream(TEST_CA) as (c, got_c):
        world = World(files, a, b)  # inject=header: not in a payload
        p = world.placeholder.encode()
        async with running_proxy(local_policy(a, b, c), session=world.session) as proxy:
            results = {}
            for name, target, frames in [
                    ("header-only", f"localhost:{a}", [_frame(b"t=" + p)]),
                    ("unbound", f"localhost:{c}", [_frame(b"fine"), _frame(b"t=" + p)]),
                    ("compressed", f"localhost:{c}", [_frame(b"x", first=0xC1)]),
                    ("split", f"localhost:{c}", [_frame(b"t=" + p[:9], first=0x01),
                                                  _frame(p[9:], first=0x80)])]:
                tls = await tls_through(proxy, target, str(world.bundle), "localhost")
                await _websocket(tls, world.placeholder if name == "header-only" else "")
                for frame in frames:
                    try:
                        await tls.send_all(frame)
                    except trio.BrokenResourceError:
                        break
                    await trio.sleep(0.05)
                results[name] = await _read_until_closed(tls)
    assert b"echo:fine" in results["unbound"]  # a clean frame passed, untouched
    frames = [r.get("ws", "") for r in got_a + got_c]
    assert not any(world.placeholder in f or REAL in f for f in frames), frames
    assert frames.count("fine") == 1 and "x" not in frames
    parts = [fields.get("part") for event, fields in world.events if event == "egress.refused"]
    assert parts.count("websocket") == 4, world.events


def test_placeholders_keep_shape_and_differ_each_session():
    values = ["ghp_" + "a1B2" * 9, "github_pat_" + "11ABCDEFG0" * 8, "sk-ant-api03-" + "x-Y_z9" * 15,
              "xoxb-1234567890-0987654321-" + "AbCdEf" * 4, "AKIA" + "ABCDEFGH23456789",
              "plainpassword-with-dashes-2024"]
    for value in values:
        first = ProxySession("a", {"k": Binding(("x.example",))}).issue("k", value)
        second = ProxySession("a", {"k": Binding(("x.example",))}).issue("k", value)
        assert same_shape(first, value) and same_shape(second, value)
        assert first != value and second != value and first != second
