"""Which destinations a session may reach through its proxy: pure, no I/O.

The guarantee: the proxy connects only to an address this module allowed, and it asks
about the address it is about to connect to, not about the name the client typed. A name
that resolves to 127.0.0.1 (DNS rebinding), ``CONNECT 127.0.0.1:22``, ``[::ffff:7f00:1]``,
``2130706433`` or ``0177.0.0.1`` all arrive here as the loopback address they are.

Two questions, in order:

1. :meth:`EgressPolicy.check_name` before resolving: the requested host against
   ``deny_hosts`` then ``allow_hosts`` (empty = any name). Numeric spellings other than
   the canonical dotted quad and bracketed IPv6 are refused outright: they exist to fool
   pattern lists, and no client needs them.
2. :meth:`EgressPolicy.check_address` for each resolved address: only globally routable
   unicast addresses that are not the host's own (its loopback, its other interfaces) pass,
   unless ``allow_local`` names the requested ``host[:port]`` (a name pattern) or the
   address itself (an IP pattern). IPv6 forms that carry an IPv4 address (mapped,
   compatible, 6to4, NAT64, Teredo) are judged by the IPv4 address inside.

Host patterns: ``api.github.com`` (exact), ``*.example.com`` (any subdomain, not the apex),
``*`` (any), each with an optional ``:port`` (``*.internal:5432``); ``127.0.0.1:8080``
and ``[::1]:8080`` for addresses. Names compare case-insensitively without a trailing dot.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: The cloud metadata address (AWS, GCP, Azure, ...): named in refusals, link-local anyway.
METADATA_ADDRESS = ipaddress.IPv4Address("169.254.169.254")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._")


class BadTarget(ValueError):
    """The request names no usable host and port; ``str()`` is the one-line answer."""


@dataclass(frozen=True)
class Refusal:
    """Why a destination is refused: ``reason`` is one line for the 403 body."""

    reason: str

    @property
    def line(self) -> str:
        return f"egress refused: {self.reason}"


@dataclass(frozen=True)
class HostPattern:
    """``host`` is a lower-case name, ``*.suffix``, ``*``, or an address; port None = any."""

    host: str
    port: int | None = None
    address: Address | None = None

    @classmethod
    def parse(cls, text: str) -> "HostPattern":
        raw = text.strip()
        if not raw:
            raise ValueError("an empty host pattern")
        port: int | None = None
        if raw.startswith("["):
            end = raw.find("]")
            if end < 0:
                raise ValueError(f"host pattern {text!r}: a '[' without ']'")
            host, rest = raw[1:end], raw[end + 1:]
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"host pattern {text!r}: expected :PORT after ']'")
                port = _port(rest[1:], text)
        elif raw.count(":") == 1:
            host, port_text = raw.split(":")
            port = None if port_text == "*" else _port(port_text, text)
        elif ":" in raw:
            host = raw  # a bare IPv6 address
        else:
            host = raw
        if host.strip() in ("*.", ""):
            raise ValueError(f"host pattern {text!r}: no host")
        host = normalize_host(host)
        try:
            address: Address | None = ipaddress.ip_address(host)
        except ValueError:
            address = None
            body = host[2:] if host.startswith("*.") else host
            if host != "*" and (not body or not _HOST_CHARS.issuperset(body) or "*" in body):
                raise ValueError(f"host pattern {text!r}: use a name, *.domain, * or an "
                                 "address, each with an optional :port") from None
        return cls(host, port, address)

    def matches_name(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.address is not None:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])  # ".example.com": never the apex itself
        return host == self.host

    def matches_address(self, address: Address, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        return self.address is not None and _unwrap(address) == _unwrap(self.address)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def _port(text: str, pattern: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"host pattern {pattern!r}: the port must be 1-65535 or *")
    return int(text)


def normalize_host(host: str) -> str:
    """Lower case, no trailing dot, IDNA-encoded (``bücher.de`` → ``xn--bcher-kva.de``)."""
    host = host.strip().rstrip(".").lower()
    if host and not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"{host!r} is not a valid host name") from None
    return host


def parse_patterns(value: str | Iterable[str]) -> tuple[HostPattern, ...]:
    """A comma-separated string (as from the environment) or a list of patterns."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(HostPattern.parse(item) for item in items if str(item).strip())


def split_target(target: str, default_port: int | None = None) -> tuple[str, int]:
    """``host:port`` (authority form, ``[v6]:port``) → (normalized host, port)."""
    raw = target.strip()
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise BadTarget(f"bad target {target!r}: '[' without ']'")
        host, rest = raw[1:end], raw[end + 1:]
        port_text = rest[1:] if rest.startswith(":") else None
        if rest and port_text is None:
            raise BadTarget(f"bad target {target!r}")
        try:
            ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            raise BadTarget(f"bad target {target!r}: not an IPv6 address in brackets") from None
        if "%" in host:
            raise BadTarget(f"bad target {target!r}: scoped IPv6 addresses are not allowed")
    else:
        host, sep, port_text = raw.rpartition(":")
        if not sep:
            host, port_text = raw, None
        if ":" in host:
            raise BadTarget(f"bad target {target!r}: put IPv6 addresses in brackets")
    if port_text is None or port_text == "":
        if default_port is None:
            raise BadTarget(f"bad target {target!r}: give host:port")
        port = default_port
    elif port_text.isdigit() and port_text.isascii() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise BadTarget(f"bad target {target!r}: the port must be 1-65535")
    try:
        host = normalize_host(host)
    except ValueError as exc:
        raise BadTarget(str(exc)) from None
    if not host:
        raise BadTarget(f"bad target {target!r}: no host")
    return host, port


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it is one of the carrying forms."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or address in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # IPv4-compatible ::a.b.c.d (deprecated)
        return ipaddress.IPv4Address(packed)
    return None


def _unwrap(address: Address) -> Address:
    """The IPv4 address inside an IPv6 carrying form, else ``address`` itself."""
    if isinstance(address, ipaddress.IPv6Address):
        return _embedded_ipv4(address) or address
    return address


def address_class(address: Address, local_addresses: frozenset[Address] = frozenset()) -> str | None:
    """Why ``address`` is not a public destination ("loopback", ...), or None if it is."""
    inner = _unwrap(address)
    if inner.is_loopback:
        return "a loopback address"
    if inner.is_unspecified:
        return "the unspecified address"
    if inner in local_addresses or address in local_addresses:
        return "an address of this host"
    if inner == METADATA_ADDRESS:
        return "the cloud metadata address"
    if inner.is_link_local:
        return "a link-local address"
    if inner.is_multicast:
        return "a multicast address"
    if isinstance(inner, ipaddress.IPv4Address) and inner in _CGNAT:
        return "a shared (CGNAT) address"
    if inner.is_private:
        return "a private address"
    if isinstance(inner, ipaddress.IPv6Address) and inner.is_site_local:
        return "a site-local address"
    if not inner.is_global:
        return "a reserved address"
    return None


def canonical_numeric(host: str) -> Address | None:
    """The address a canonical literal names (``1.2.3.4``, ``::1``), else None.

    Raises :class:`BadTarget` for the other numeric spellings C's ``inet_aton`` and
    ``getaddrinfo`` accept (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``): they
    would resolve to addresses a name pattern never sees coming."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    labels = host.split(".")
    last = labels[-1]
    if last and (last.isdigit() or (last.startswith("0x") and _is_hex(last[2:]))) \
            and all(_is_number(label) for label in labels):
        raise BadTarget(f"{host!r} is a numeric address in an unusual spelling; "
                        "write it as a dotted quad")
    return None


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _is_number(label: str) -> bool:
    return bool(label) and (label.isdigit() or (label.startswith("0x") and _is_hex(label[2:])))


@dataclass(frozen=True)
class EgressLimits:
    """The proxy's bounds (the ``egress.*`` settings)."""

    connect_timeout: float = 10.0
    request_timeout: float = 30.0
    idle_timeout: float = 300.0
    max_connections: int = 64
    max_header_bytes: int = 64 * 1024
    chunk_bytes: int = 256 * 1024
    max_decoded_body_bytes: int = 32 * 1024 * 1024
    tunnel_pipe_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class EgressPolicy:
    """Host allow/deny patterns and the local exceptions; see the module docstring."""

    allow_hosts: tuple[str, ...] = ()   # host patterns; empty = every public address
    deny_hosts: tuple[str, ...] = ()
    allow_local: tuple[str, ...] = ()   # host[:port] patterns let through to local/private
    limits: EgressLimits = field(default_factory=EgressLimits)

    def __post_init__(self) -> None:
        # Parse once (a bad pattern fails here, at start-up, not at the first request).
        for name in ("allow_hosts", "deny_hosts", "allow_local"):
            value = getattr(self, name)
            patterns = parse_patterns(value)
            object.__setattr__(self, name, tuple(str(p) for p in patterns))
            object.__setattr__(self, f"_{name}", patterns)

    @classmethod
    def from_settings(cls, settings) -> "EgressPolicy":
        """``supervisor.sandbox_proxy_allow``/``_deny``/``sandbox_allow_local`` (lists or
        comma-separated strings) and the ``egress.*`` limits."""
        def patterns(name: str) -> tuple[str, ...]:
            value = settings[name]
            try:
                return tuple(str(p) for p in parse_patterns(value))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None

        limits = EgressLimits(
            connect_timeout=float(settings["egress.connect_timeout_seconds"]),
            request_timeout=float(settings["egress.request_timeout_seconds"]),
            idle_timeout=float(settings["egress.idle_timeout_seconds"]),
            max_connections=int(settings["egress.max_connections"]),
            max_header_bytes=int(settings["egress.max_header_bytes"]),
            chunk_bytes=int(settings["egress.chunk_bytes"]),
            max_decoded_body_bytes=int(settings["egress.max_decoded_body_bytes"]),
            tunnel_pipe_bytes=int(settings["egress.tunnel_pipe_bytes"]))
        return cls(patterns("supervisor.sandbox_proxy_allow"),
                   patterns("supervisor.sandbox_proxy_deny"),
                   patterns("supervisor.sandbox_allow_local"), limits)

    def check_name(self, host: str, port: int) -> Refusal | None:
        """Before resolving: the deny list, then the allow list (``host`` normalized)."""
        try:
            literal = canonical_numeric(host)
        except BadTarget as exc:
            return Refusal(str(exc))
        if literal is None:
            for pattern in self._deny_hosts:  # type: ignore[attr-defined]
                if pattern.matches_name(host, port):
                    return Refusal(f"{host}:{port} matches the deny pattern {pattern} "
                                   "(supervisor.sandbox_proxy_deny)")
            if self._allow_hosts and not any(  # type: ignore[attr-defined]
                    p.matches_name(host, port) for p in self._allow_hosts):  # type: ignore[attr-defined]
                return Refusal(f"{host}:{port} is not in supervisor.sandbox_proxy_allow")
            return None
        for pattern in self._deny_hosts:  # type: ignore[attr-defined]
            if pattern.matches_address(literal, port):
                return Refusal(f"{host}:{port} matches the deny pattern {pattern} "
                               "(supervisor.sandbox_proxy_deny)")
        if self._allow_hosts and not any(  # type: ignore[attr-defined]
                p.matches_address(literal, port) or p.host == "*"
                for p in self._allow_hosts) and not self._local_allowed(host, port, literal):  # type: ignore[attr-defined]
            return Refusal(f"{host}:{port} is not in supervisor.sandbox_proxy_allow")
        return None

    def check_address(self, host: str, port: int, address: Address,
                      local_addresses: frozenset[Address] = frozenset()) -> Refusal | None:
        """After resolving ``host``: may the proxy connect to ``address``:``port``?"""
        for pattern in self._deny_hosts:  # type: ignore[attr-defined]
            if pattern.matches_address(address, port):
                return Refusal(f"{address} matches the deny pattern {pattern} "
                               "(supervisor.sandbox_proxy_deny)")
        why = address_class(address, local_addresses)
        if why is None or self._local_allowed(host, port, address):
            return None
        shown = host if host == str(address) else f"{host} ({address})"
        return Refusal(f"{shown} is {why}; allow {host}:{port} with "
                       "supervisor.sandbox_allow_local if the session needs it")

    def _local_allowed(self, host: str, port: int, address: Address) -> bool:
        return any(p.matches_name(host, port) or p.matches_address(address, port)
                   for p in self._allow_local)  # type: ignore[attr-defined]
