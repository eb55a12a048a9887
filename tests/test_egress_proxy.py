"""The session proxy through real curl: tunnels, plain HTTP, refusals, limits.

Upstreams are local servers (loopback, allowed through allow_local as an operator would);
the refusals are the same requests without that exception, and the spellings an agent
would try to reach the host's own services.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import threading

import pytest
import trio

from paddedcell.egress.ca import CertificateAuthority
from paddedcell.egress.policy import EgressLimits, EgressPolicy
from paddedcell.egress.relay import parse_local_addresses

from egress_helpers import (write_ca, curl, headers_of, local_policy, raw_request, running_proxy,
                            upstream)

TEST_CA = CertificateAuthority("PaddedCell test upstream CA")


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory):
    return write_ca(tmp_path_factory, TEST_CA, "ca")


async def test_plain_http_goes_upstream_in_origin_form_with_the_targets_host():
    with upstream() as (port, received):
        async with running_proxy(local_policy(port)) as proxy:
            code, out, err = await curl("-x", f"http://127.0.0.1:{proxy}",
                                        "-H", "Host: evil.example", "-H", "X-Test: 1",
                                        "-H", "Proxy-Authorization: Basic eDp5",
                                        f"http://localhost:{port}/a/b?c=d")
    assert code == 0, err
    record = json.loads(out)
    assert record["path"] == "/a/b?c=d"
    headers = headers_of(record)
    assert headers["host"] == f"localhost:{port}"  # the target's, never the client's Host
    assert headers["x-test"] == "1"
    assert "proxy-authorization" not in headers and "proxy-connection" not in headers


async def test_plain_http_bodies_and_keep_alive():
    with upstream() as (port, received):
        async with running_proxy(local_policy(port)) as proxy:
            url = f"http://localhost:{port}/post"
            code, out, err = await curl("-x", f"http://127.0.0.1:{proxy}", "-d", "a=1&b=2", url,
                                        "--next", "-x", f"http://127.0.0.1:{proxy}",
                                        "-H", "Transfer-Encoding: chunked", "-d", "x" * 70000,
                                        url, "--next", "-x", f"http://127.0.0.1:{proxy}",
                                        "-I", url, "-v")
    assert code == 0, err
    assert [r["method"] for r in received] == ["POST", "POST", "HEAD"]
    assert received[0]["body"] == "a=1&b=2"
    assert received[1]["body"] == "x" * 70000
    assert "Re-using existing connection" in err  # the client connection carried all three


async def test_connect_tunnel_to_tls_upstream_and_large_download(ca_file):
    size = 8 * 1024 * 1024 + 17
    with upstream(tls=TEST_CA) as (port, received):
        async with running_proxy(local_policy(port)) as proxy:
            result = await trio.run_process(
                ["curl", "-sS", "--max-time", "30", "--cacert", ca_file, "-x",
                 f"http://127.0.0.1:{proxy}", f"https://localhost:{port}/big?n={size}"],
                capture_stdout=True, capture_stderr=True)
    assert result.returncode == 0, result.stderr
    block = bytes(range(256)) * 256
    expected = (block * (size // len(block) + 1))[:size]
    assert hashlib.sha256(result.stdout).digest() == hashlib.sha256(expected).digest()
    assert received[0]["path"] == f"/big?n={size}"


@contextlib.contextmanager
def sink_then_blast(answer_bytes: int):
    """A raw TCP upstream: reads the client's bytes to EOF, answers their SHA-256 and then
    ``answer_bytes`` of a pattern, and closes. Yields its port."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            digest = hashlib.sha256()
            while data := conn.recv(1 << 16):
                digest.update(data)
            conn.sendall(digest.digest() + _pattern(answer_bytes))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        thread.join(10)


def _pattern(size: int) -> bytes:
    return (bytes(range(251)) * (size // 251 + 1))[:size]


def _refuse_splice(*args, **kwargs):
    raise OSError(errno.EINVAL, "Invalid argument")


@pytest.mark.parametrize("copy", ["splice", "kernel refuses splice", "no splice"])
@pytest.mark.parametrize("pipe_bytes", [4096, 1 << 20])
async def test_a_blind_tunnel_carries_both_ways_and_forwards_half_closes(copy, pipe_bytes,
                                                                         monkeypatch):
    # Both directions whole and in order, the client's EOF passed on (the upstream
    # answers only after it), the upstream's EOF passed back: by splice(2) through a
    # small or a large pipe, and by the plain copy where the kernel cannot splice.
    if copy == "kernel refuses splice":
        monkeypatch.setattr(os, "splice", _refuse_splice)
    elif copy == "no splice":
        monkeypatch.delattr(os, "splice", raising=False)
    sent, answer_bytes = _pattern(3 * 1024 * 1024 + 5)[::-1], 5 * 1024 * 1024 + 3
    with sink_then_blast(answer_bytes) as port:
        limits = EgressLimits(tunnel_pipe_bytes=pipe_bytes)
        async with running_proxy(local_policy(port, limits=limits)) as proxy:
            stream = await trio.open_tcp_stream("127.0.0.1", proxy)
            await stream.send_all(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive_some(1)
            assert head.startswith(b"HTTP/1.1 200 ")
            received = bytearray()
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    async def upload() -> None:
                        await stream.send_all(sent)
                        await stream.send_eof()

                    nursery.start_soon(upload)
                    while data := await stream.receive_some(1 << 16):
                        received += data
            await stream.aclose()
    assert bytes(received[:32]) == hashlib.sha256(sent).digest()
    assert bytes(received[32:]) == _pattern(answer_bytes)


@pytest.mark.parametrize("url", [
    "https://127.0.0.1:{port}/", "https://localhost:{port}/", "https://[::1]:{port}/",
    "http://127.0.0.1:{port}/", "http://localhost:{port}/",
])
async def test_loopback_is_refused_without_allow_local(url):
    with upstream() as (port, received):
        async with running_proxy(EgressPolicy()) as proxy:
            code, out, err = await curl("-v", "-x", f"http://127.0.0.1:{proxy}",
                                        url.format(port=port))
    assert received == []
    assert "403" in err
    if url.startswith("http://"):
        assert out.startswith("egress refused: ") and "loopback" in out
        assert out.count("\n") == 1


@pytest.mark.parametrize("target, why", [
    (b"127.0.0.1:22", b"loopback"),
    (b"[::1]:22", b"loopback"),
    (b"[::ffff:127.0.0.1]:22", b"loopback"),
    (b"[::ffff:7f00:1]:22", b"loopback"),
    (b"[64:ff9b::7f00:1]:22", b"loopback"),
    (b"[2002:7f00:1::]:22", b"loopback"),
    (b"2130706433:22", b"unusual spelling"),
    (b"0177.0.0.1:22", b"unusual spelling"),
    (b"0x7f.1:22", b"unusual spelling"),
    (b"127.1:22", b"unusual spelling"),
    (b"0.0.0.0:22", b"unspecified"),
    (b"169.254.169.254:80", b"metadata"),
    (b"[fe80::1]:22", b"link-local"),
    (b"10.0.0.1:5432", b"private"),
    (b"192.168.1.1:80", b"private"),
    (b"172.16.0.1:80", b"private"),
    (b"100.64.0.1:80", b"CGNAT"),
    (b"224.0.0.1:80", b"multicast"),
    (b"localhost:22", b"loopback"),
    (b"LocalHost.:22", b"loopback"),
])
async def test_connect_refusals_are_one_line_403s(target, why):
    async with running_proxy(EgressPolicy()) as proxy:
        answer = await raw_request(proxy, b"CONNECT " + target + b" HTTP/1.1\r\nHost: "
                                   + target + b"\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 "), answer
    assert body.startswith(b"egress refused: ") and why in body
    assert body.endswith(b"\n") and body.count(b"\n") == 1


async def test_a_name_that_resolves_to_loopback_is_refused_at_connect_time():
    """DNS rebinding: the check is on the address the proxy would connect to."""

    class Rebinding(trio.abc.HostnameResolver):
        async def getaddrinfo(self, host, port, family=0, type=0, proto=0, flags=0):
            address = "127.0.0.1" if host in (b"rebind.example", "rebind.example") else None
            if address is None:
                raise socket.gaierror(socket.EAI_NONAME, "unknown")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

        async def getnameinfo(self, sockaddr, flags):
            raise NotImplementedError

    with upstream() as (port, received):
        previous = trio.socket.set_custom_hostname_resolver(Rebinding())
        try:
            async with running_proxy(EgressPolicy(allow_hosts=("rebind.example",))) as proxy:
                answer = await raw_request(proxy, f"CONNECT rebind.example:{port} HTTP/1.1\r\n"
                                                  f"Host: rebind.example\r\n\r\n".encode())
                code, out, err = await curl("-x", f"http://127.0.0.1:{proxy}",
                                            f"http://rebind.example:{port}/")
        finally:
            trio.socket.set_custom_hostname_resolver(previous)
    assert answer.startswith(b"HTTP/1.1 403 ") and b"rebind.example (127.0.0.1)" in answer
    assert out.startswith("egress refused: rebind.example (127.0.0.1) is a loopback address")
    assert received == []


async def test_the_hosts_other_local_addresses_are_refused():
    with open("/proc/net/fib_trie") as fib, open("/proc/net/if_inet6") as inet6:
        local = parse_local_addresses(fib.read(), inet6.read())
    others = sorted(str(a) for a in local if a.version == 4 and not a.is_loopback)
    if not others:
        pytest.skip("this host has no non-loopback IPv4 address")
    async with running_proxy(EgressPolicy()) as proxy:
        answer = await raw_request(proxy, f"CONNECT {others[0]}:22 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert b"egress refused: " in answer


def test_local_addresses_parse_the_proc_files():
    fib = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.0.2.15
        /32 host LOCAL
     |-- 10.0.2.255
        /32 link BROADCAST
"""
    inet6 = "fe80000000000000505400fffe123456 02 40 20 80     eth0\n"
    found = {str(a) for a in parse_local_addresses(fib, inet6)}
    assert found == {"10.0.2.15", "fe80::5054:ff:fe12:3456"}


async def test_allow_and_deny_host_patterns():
    policy = EgressPolicy(allow_hosts=("*.allowed.example", "exact.example:443"),
                          deny_hosts=("bad.allowed.example",))
    async with running_proxy(policy) as proxy:
        denied = await raw_request(proxy, b"CONNECT bad.allowed.example:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        outside = await raw_request(proxy, b"CONNECT other.example:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        wrong_port = await raw_request(proxy, b"CONNECT exact.example:8443 HTTP/1.1\r\nHost: x\r\n\r\n")
        apex = await raw_request(proxy, b"CONNECT allowed.example:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"deny pattern bad.allowed.example" in denied
    assert b"other.example:443 is not in supervisor.sandbox_proxy_allow" in outside
    assert b"exact.example:8443 is not in" in wrong_port
    assert b"allowed.example:443 is not in" in apex  # *.x matches subdomains, not the apex


async def test_origin_form_and_https_absolute_form_are_refused():
    async with running_proxy(EgressPolicy()) as proxy:
        origin = await raw_request(proxy, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        https = await raw_request(proxy, b"GET https://x.example/ HTTP/1.1\r\nHost: x\r\n\r\n")
        userinfo = await raw_request(proxy, b"GET http://u:p@x.example/ HTTP/1.1\r\nHost: x\r\n\r\n")
    assert origin.startswith(b"HTTP/1.1 400 ") and b"absolute-form" in origin
    assert https.startswith(b"HTTP/1.1 400 ") and b"CONNECT" in https
    assert userinfo.startswith(b"HTTP/1.1 400 ") and b"Authorization" in userinfo


async def test_a_silent_client_gets_408_and_a_huge_head_431():
    limits = EgressLimits(request_timeout=0.3, max_header_bytes=4096)
    async with running_proxy(EgressPolicy(limits=limits)) as proxy:
        silent = await raw_request(proxy, b"CONNECT exa", read_timeout=3)
        # h11 bounds the head while it is incomplete: a head that never ends is cut off.
        huge = await raw_request(proxy, b"GET http://x.example/ HTTP/1.1\r\nX: " + b"a" * 10000)
    assert silent.startswith(b"HTTP/1.1 408 ")
    assert huge.startswith(b"HTTP/1.1 431 ")


async def test_connections_beyond_the_cap_wait_for_a_slot():
    limits = EgressLimits(max_connections=2)
    with upstream() as (port, received):
        async with running_proxy(local_policy(port, limits=limits)) as proxy:
            held = [await trio.open_tcp_stream("127.0.0.1", proxy) for _ in range(2)]
            for stream in held:  # two open tunnels fill both slots
                await stream.send_all(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                assert (await stream.receive_some(1024)).startswith(b"HTTP/1.1 200 ")
            third = await trio.open_tcp_stream("127.0.0.1", proxy)
            await third.send_all(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            with trio.move_on_after(0.5) as waited:
                await third.receive_some(1024)
            assert waited.cancelled_caught  # no answer while both slots are taken
            await held[0].aclose()
            with trio.fail_after(5):
                assert (await third.receive_some(1024)).startswith(b"HTTP/1.1 200 ")
            for stream in (held[1], third):
                await stream.aclose()


async def test_idle_tunnel_closes():
    limits = EgressLimits(idle_timeout=0.3)
    with upstream() as (port, received):
        async with running_proxy(local_policy(port, limits=limits)) as proxy:
            stream = await trio.open_tcp_stream("127.0.0.1", proxy)
            await stream.send_all(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert (await stream.receive_some(1024)).startswith(b"HTTP/1.1 200 ")
            with trio.fail_after(5):
                assert await stream.receive_some(1024) == b""
            await stream.aclose()


async def test_unreachable_upstream_is_a_one_line_502():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # nothing listens once closed
    async with running_proxy(local_policy(closed_port)) as proxy:
        code, out, err = await curl("-x", f"http://127.0.0.1:{proxy}",
                                    f"http://localhost:{closed_port}/")
    assert out.startswith(f"egress: cannot connect to localhost:{closed_port}")
    assert out.count("\n") == 1
