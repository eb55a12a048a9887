"""Fail closed: once a session holds a placeholder, none leaves toward a host its binding
does not name, whatever the path — a CONNECT tunnel (TLS terminated and searched, plain
HTTP inside it, any other protocol searched as bytes), plain HTTP, percent-encoded forms,
compressed bodies (decoded, swapped or refused; what cannot be decoded is refused) — and a
blind tunnel opened before the first placeholder closes once there is one.

Real curl and real TLS upstreams on loopback (egress_helpers)."""

from __future__ import annotations

import gzip
import json
import os
import socket
import threading
import zlib
from urllib.parse import quote

import pytest
import trio

from paddedcell.egress.binding import Binding
from paddedcell.egress.ca import CertificateAuthority
from paddedcell.egress.session import ProxySession

from egress_helpers import write_ca, curl, headers_of, local_policy, raw_request, running_proxy, \
    tls_through, upstream

REAL = "ghp_" + "Fa1lCl0sedValue0123456789abcdefABCDEF"
TEST_CA = CertificateAuthority("PaddedCell fail-closed upstream CA")


@pytest.fixture(scope="module")
def upstream_ca(tmp_path_factory):
    return write_ca(tmp_path_factory, TEST_CA, "failclosed")


def session_for(bound_port: int, upstream_ca: str, tmp, *, inject: str = "header",
                issue: bool = True):
    events: list[tuple[str, dict]] = []
    session = ProxySession("agent1", {"gh": Binding((f"localhost:{bound_port}",), inject)},
                           mask_values=[REAL], upstream_cafile=upstream_ca,
                           audit=lambda event, **fields: events.append((event, fields)))
    bundle = tmp / f"bundle-{bound_port}-{inject}.pem"
    bundle.write_bytes(session.bundle())
    placeholder = session.issue("gh", REAL) if issue else None
    return session, placeholder, str(bundle), events


def refusals(events) -> list[dict]:
    return [fields for event, fields in events if event == "egress.refused"]


@pytest.mark.parametrize("copy", ["splice", "plain copy"])
async def test_a_blind_tunnel_closes_when_the_session_gets_its_first_placeholder(
        copy, upstream_ca, tmp_path, monkeypatch):
    if copy == "plain copy":  # where the kernel cannot splice: the same cut
        monkeypatch.delattr(os, "splice", raising=False)
    with upstream(TEST_CA) as (c, got_c):
        session, _, _, events = session_for(1, upstream_ca, tmp_path, issue=False)
        async with running_proxy(local_policy(c), session=session) as proxy:
            # No placeholder yet: a plain tunnel (the client trusts the upstream's own CA).
            tls = await tls_through(proxy, f"localhost:{c}", upstream_ca, "localhost")
            request = b"GET /one HTTP/1.1\r\nHost: localhost\r\n\r\n"
            await tls.send_all(request)
            first = b""
            with trio.fail_after(10):
                while b'"raw": ""}' not in first:  # the whole echoed answer
                    first += await tls.receive_some(65536)
            placeholder = session.issue("gh", REAL)
            with trio.fail_after(10):
                try:
                    await tls.send_all(f"GET /two?t={placeholder} HTTP/1.1\r\n"
                                       f"Host: localhost\r\n\r\n".encode())
                    second = await tls.receive_some(65536)
                except trio.BrokenResourceError:
                    second = b""
                while not any(e == "egress.tunnel-closed" for e, _ in events):
                    await trio.sleep(0.02)  # audited once the tunnel's copies have ended
    assert first.startswith(b"HTTP/1.1 200 ")
    assert second == b""
    assert [r["path"] for r in got_c] == ["/one"]
    assert ("egress.tunnel-closed", {"agentId": "agent1", "host": "localhost", "port": c,
                                     "reason": "the session was handed a placeholder"}) in events


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compressed_body_is_decoded_swapped_and_reencoded(upstream_ca, tmp_path,
                                                                  coding):
    pack = gzip.compress if coding == "gzip" else zlib.compress
    unpack = gzip.decompress if coding == "gzip" else zlib.decompress
    with upstream(TEST_CA) as (a, got_a):
        session, placeholder, bundle, events = session_for(a, upstream_ca, tmp_path,
                                                           inject="body")
        body = tmp_path / "body"
        body.write_bytes(pack(json.dumps({"token": placeholder, "pad": "x" * 5000}).encode()))
        clean = tmp_path / "clean"
        clean.write_bytes(pack(b'{"nothing": "here"}'))
        async with running_proxy(local_policy(a), session=session) as proxy:
            args = ["--cacert", bundle, "-x", f"http://127.0.0.1:{proxy}", "-H",
                    f"Content-Encoding: {coding}", "-H", "Content-Type: application/json"]
            code, out, err = await curl(*args, "--data-binary", f"@{body}",
                                        f"https://localhost:{a}/post")
            code2, _, err2 = await curl(*args, "--data-binary", f"@{clean}",
                                        f"https://localhost:{a}/clean")
    assert code == 0 and code2 == 0, err + err2
    sent = bytes.fromhex(got_a[0]["raw"])
    assert int(headers_of(got_a[0])["content-length"]) == len(sent)
    assert json.loads(unpack(sent))["token"] == REAL
    assert REAL not in out and placeholder not in out
    assert bytes.fromhex(got_a[1]["raw"]) == clean.read_bytes()  # nothing to swap: as sent


async def test_compressed_bodies_to_an_unbound_host_or_that_cannot_be_read_are_refused(
        upstream_ca, tmp_path):
    with upstream(TEST_CA) as (a, got_a), upstream(TEST_CA) as (c, got_c):
        session, placeholder, bundle, events = session_for(a, upstream_ca, tmp_path,
                                                           inject="body")
        hidden = tmp_path / "hidden.gz"
        hidden.write_bytes(gzip.compress(f"token={placeholder}".encode()))
        garbage = tmp_path / "garbage"
        garbage.write_bytes(b"\x1f\x8b not gzip at all")
        async with running_proxy(local_policy(a, c), session=session) as proxy:
            args = ["--cacert", bundle, "-x", f"http://127.0.0.1:{proxy}"]
            to_c = await curl(*args, "-H", "Content-Encoding: gzip", "--data-binary",
                              f"@{hidden}", f"https://localhost:{c}/post")
            brotli = await curl(*args, "-H", "Content-Encoding: br", "--data-binary",
                                "@" + str(hidden), f"https://localhost:{a}/post")
            broken = await curl(*args, "-H", "Content-Encoding: gzip", "--data-binary",
                                f"@{garbage}", f"https://localhost:{a}/post")
    assert to_c[1] == f"egress refused: gh is bound to localhost:{a}\n"
    assert brotli[1] == ("egress refused: cannot look inside a request body with "
                         "Content-Encoding: br; send it uncompressed, gzip or deflate\n")
    assert broken[1] == "egress refused: the request body is not valid gzip; nothing was sent\n"
    assert got_a == [] and got_c == []
    assert refusals(events)[0]["key"] == "gh" and refusals(events)[0]["port"] == c


@pytest.mark.parametrize("form", ["all-encoded", "partly-encoded", "plus-form"])
async def test_percent_encoded_placeholders_toward_an_unbound_host_are_refused(
        upstream_ca, tmp_path, form):
    with upstream() as (c, got_c):
        session, placeholder, bundle, events = session_for(1, upstream_ca, tmp_path)
        encoded = {"all-encoded": "".join(f"%{b:02X}" for b in placeholder.encode()),
                   "partly-encoded": quote(placeholder[:5], safe="") + "%" +
                   f"{ord(placeholder[5]):02x}" + placeholder[6:],
                   "plus-form": quote(placeholder, safe="")}[form]
        async with running_proxy(local_policy(c), session=session) as proxy:
            in_url = await curl("-x", f"http://127.0.0.1:{proxy}",
                                f"http://localhost:{c}/x?t={encoded}")
            in_body = await curl("-x", f"http://127.0.0.1:{proxy}", "-d", f"a=1&t={encoded}",
                                 f"http://localhost:{c}/x")
            in_cookie = await curl("-x", f"http://127.0.0.1:{proxy}", "-H",
                                   f"Cookie: t={encoded}", f"http://localhost:{c}/x")
    for result in (in_url, in_body, in_cookie):
        assert result[1] == "egress refused: gh is bound to localhost:1\n", result
    assert got_c == []
    assert len(refusals(events)) == 3


async def test_plain_http_inside_a_tunnel_to_an_unbound_host_is_searched(upstream_ca,
                                                                        tmp_path):
    with upstream() as (c, got_c):
        session, placeholder, _, events = session_for(1, upstream_ca, tmp_path)
        async with running_proxy(local_policy(c), session=session) as proxy:
            ok = await raw_request(proxy, f"CONNECT localhost:{c} HTTP/1.1\r\nHost: x\r\n\r\n"
                                          f"GET /fine HTTP/1.1\r\nHost: localhost\r\n"
                                          f"Connection: close\r\n\r\n".encode())
            bad = await raw_request(proxy, f"CONNECT localhost:{c} HTTP/1.1\r\nHost: x\r\n\r\n"
                                           f"GET /x HTTP/1.1\r\nHost: localhost\r\n"
                                           f"Authorization: Basic "
                                           f"{__import__('base64').b64encode(b'u:' + placeholder.encode()).decode()}"
                                           f"\r\n\r\n".encode())
    assert b"HTTP/1.1 200 OK" in ok.split(b"\r\n\r\n", 1)[1]
    assert bad.split(b"\r\n\r\n", 1)[1].startswith(b"HTTP/1.1 403 ")
    assert bad.endswith(b"egress refused: gh is bound to localhost:1\n")
    assert [r["path"] for r in got_c] == ["/fine"]
    assert refusals(events)


def _tcp_echo() -> tuple[int, list[bytes], socket.socket]:
    """A raw (non-HTTP) TCP server: answers each read with ``ok:`` + the bytes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    seen.append(data)
                    conn.sendall(b"ok:" + data)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], seen, server


async def test_another_protocol_to_an_unbound_host_is_cut_at_a_placeholder(upstream_ca,
                                                                           tmp_path):
    port, seen, server = _tcp_echo()
    try:
        session, placeholder, _, events = session_for(1, upstream_ca, tmp_path)
        async with running_proxy(local_policy(port), session=session) as proxy:
            stream = await trio.open_tcp_stream("127.0.0.1", proxy)
            await stream.send_all(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            with trio.fail_after(10):
                assert (await stream.receive_some(4096)).startswith(b"HTTP/1.1 200 ")
                # A small exchange is not held back (an interactive protocol keeps working).
                await stream.send_all(b"HELLO\n")
                assert await stream.receive_some(4096) == b"ok:HELLO\n"
                # The placeholder split across two writes is still seen; the second is cut.
                await stream.send_all(b"AUTH " + placeholder[:10].encode())
                assert await stream.receive_some(4096) == b"ok:AUTH " + placeholder[:10].encode()
                await stream.send_all(placeholder[10:].encode() + b"\n")
                assert await stream.receive_some(4096) == b""
            await stream.aclose()
    finally:
        server.close()
    assert placeholder[10:].encode() not in b"".join(seen)
    assert refusals(events)[0]["part"] == "stream"
