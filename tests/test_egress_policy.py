"""The pure egress policy: host patterns, address classes, every IPv4-carrying IPv6 form."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, strategies as st

from paddedcell.egress.policy import (BadTarget, EgressPolicy, HostPattern, address_class,
                                      split_target)

PUBLIC_V4 = ["8.8.8.8", "1.1.1.1", "140.82.112.3"]
PUBLIC_V6 = ["2606:4700::1111", "2a00:1450:4001::200e"]


@pytest.mark.parametrize("address, why", [
    ("127.0.0.1", "loopback"), ("127.255.1.2", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("169.254.169.254", "metadata"), ("169.254.1.1", "link-local"), ("fe80::1", "link-local"),
    ("10.1.2.3", "private"), ("172.31.0.1", "private"), ("192.168.0.1", "private"),
    ("fd00::1", "private"), ("100.64.0.1", "CGNAT"), ("100.127.255.254", "CGNAT"),
    ("224.0.0.251", "multicast"), ("ff02::1", "multicast"), ("fec0::1", "site-local"),
    ("240.0.0.1", "private"), ("192.0.2.1", "private"), ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"), ("::ffff:169.254.169.254", "metadata"),
    ("64:ff9b::a9fe:a9fe", "metadata"), ("2002:a9fe:a9fe::1", "metadata"),
    ("::7f00:1", "loopback"), ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo
])
def test_address_classes(address, why):
    assert why in address_class(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC_V4 + PUBLIC_V6 + ["::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    assert address_class(ipaddress.ip_address(address)) is None
    assert EgressPolicy().check_address("h", 443, ipaddress.ip_address(address)) is None


def test_the_hosts_own_addresses_are_refused():
    own = ipaddress.ip_address("203.0.113.9")
    mine = frozenset({ipaddress.ip_address("8.8.4.4")})
    assert address_class(ipaddress.ip_address("8.8.4.4"), mine) == "an address of this host"
    assert address_class(ipaddress.ip_address("::ffff:8.8.4.4"), mine) == "an address of this host"
    assert address_class(own) is not None


_non_global_v4 = st.sampled_from(["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                  "169.254.0.0/16", "100.64.0.0/10", "0.0.0.0/8",
                                  "224.0.0.0/4"]).flatmap(
    lambda net: st.integers(0, ipaddress.IPv4Network(net).num_addresses - 1).map(
        lambda i, net=net: ipaddress.IPv4Network(net)[i]))


@given(_non_global_v4, st.integers(0, 2**16 - 1))
def test_every_ipv6_form_of_a_refused_ipv4_address_is_refused(v4, subnet):
    as_int = int(v4)
    forms = [
        ipaddress.IPv6Address((0xFFFF << 32) | as_int),                     # ::ffff:a.b.c.d
        ipaddress.IPv6Address(as_int) if as_int > 1 else None,              # ::a.b.c.d
        ipaddress.IPv6Address((0x2002 << 112) | (as_int << 80) | subnet),   # 6to4
        ipaddress.IPv6Address((0x64FF9B << 96) | as_int),                   # NAT64
    ]
    for form in filter(None, forms):
        assert address_class(form) is not None, form
        assert EgressPolicy().check_address("h", 22, form) is not None


@pytest.mark.parametrize("host", ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f000001",
                                  "017700000001", "1.2.3.04"])
def test_unusual_numeric_spellings_are_refused_before_resolving(host):
    refusal = EgressPolicy().check_name(host, 22)
    assert refusal is not None and "unusual spelling" in refusal.line


@pytest.mark.parametrize("host", ["example.com", "1password.com", "a-1.b2.example", "1.2.3.4"])
def test_names_and_canonical_addresses_are_not_numeric_spellings(host):
    assert EgressPolicy().check_name(host, 443) is None


@pytest.mark.parametrize("pattern, host, port, matches", [
    ("api.github.com", "api.github.com", 443, True),
    ("api.github.com", "API.GitHub.com", 443, False),  # check_name gets normalized hosts
    ("api.github.com", "github.com", 443, False),
    ("*.github.com", "api.github.com", 443, True),
    ("*.github.com", "a.b.github.com", 443, True),
    ("*.github.com", "github.com", 443, False),
    ("*.github.com", "evilgithub.com", 443, False),
    ("*.github.com:443", "api.github.com", 8443, False),
    ("github.com:*", "github.com", 8443, True),
    ("*", "anything.example", 1, True),
])
def test_name_patterns(pattern, host, port, matches):
    assert HostPattern.parse(pattern).matches_name(host, port) is matches


@pytest.mark.parametrize("bad", ["", "a b", "*.", "foo.*.com", "x:0", "x:70000", "[::1", "a:b"])
def test_bad_patterns_are_refused_with_a_line(bad):
    with pytest.raises(ValueError, match="pattern|empty"):
        HostPattern.parse(bad) if bad else EgressPolicy(allow_hosts=(bad, "x:0"))


def test_allow_local_opens_one_host_port_by_name_or_address():
    policy = EgressPolicy(allow_local=("db.internal:5432", "127.0.0.1:8080", "[::1]:9000"))
    private = ipaddress.ip_address("10.0.0.7")
    assert policy.check_address("db.internal", 5432, private) is None
    assert policy.check_address("db.internal", 22, private) is not None
    assert policy.check_address("other.internal", 5432, private) is not None
    assert policy.check_address("anything", 8080, ipaddress.ip_address("::ffff:127.0.0.1")) is None
    assert policy.check_address("x", 9000, ipaddress.ip_address("::1")) is None
    assert policy.check_address("x", 8081, ipaddress.ip_address("127.0.0.1")) is not None


def test_deny_wins_over_allow_local_and_allow():
    policy = EgressPolicy(allow_hosts=("*",), deny_hosts=("169.254.169.254", "*.bad.example"),
                          allow_local=("169.254.169.254",))
    assert policy.check_name("x.bad.example", 443) is not None
    assert policy.check_address("m", 80, ipaddress.ip_address("169.254.169.254")) is not None


def test_from_settings_reads_lists_and_comma_strings():
    settings = {"supervisor.sandbox_proxy_allow": "*.github.com, pypi.org",
                "supervisor.sandbox_proxy_deny": [],
                "supervisor.sandbox_allow_local": ["localhost:5432"],
                "egress.connect_timeout_seconds": 3.0, "egress.request_timeout_seconds": 4.0,
                "egress.idle_timeout_seconds": 5.0, "egress.max_connections": 6,
                "egress.max_header_bytes": 7000, "egress.chunk_bytes": 8000,
                "egress.max_decoded_body_bytes": 9000, "egress.tunnel_pipe_bytes": 10000}
    policy = EgressPolicy.from_settings(settings)
    assert policy.allow_hosts == ("*.github.com", "pypi.org")
    assert policy.allow_local == ("localhost:5432",)
    assert policy.limits.max_connections == 6 and policy.limits.chunk_bytes == 8000
    assert policy.limits.max_decoded_body_bytes == 9000
    assert policy.limits.tunnel_pipe_bytes == 10000
    settings["supervisor.sandbox_proxy_deny"] = "a b"
    with pytest.raises(ValueError, match="supervisor.sandbox_proxy_deny"):
        EgressPolicy.from_settings(settings)


@pytest.mark.parametrize("target, expected", [
    ("example.com:443", ("example.com", 443)), ("[::1]:22", ("::1", 22)),
    ("Example.COM.:8443", ("example.com", 8443)), ("bücher.de:443", ("xn--bcher-kva.de", 443)),
])
def test_split_target(target, expected):
    assert split_target(target) == expected


@pytest.mark.parametrize("target", ["example.com", "::1:22", "[::1]", "x:0", "x:99999", ":443",
                                    "[fe80::1%eth0]:22", "x:+1", "x:١٢"])
def test_split_target_refuses(target):
    with pytest.raises(BadTarget):
        split_target(target)
