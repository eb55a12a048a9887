"""Swapping placeholders for values in one request, or refusing the request. Pure.

The guarantee: a real value enters a request only where its binding allows it — toward one
of its hosts (decided by the CONNECT target or the absolute-form URL, never by ``Host``),
over TLS unless the binding allows plain HTTP, in a part of the request its ``inject`` mode
names. Any placeholder seen anywhere else refuses the whole request (nothing is sent) with
``egress refused: KEY is bound to HOSTS``; the placeholder itself is worthless, but the
agent learns at once that the request could not have worked.

Parts: ``header`` (any header value), ``basic`` (inside a decoded ``Authorization: Basic``
credential, re-encoded after), ``target`` (the request's path and query) and ``body``.
``inject=header`` allows header, basic and target; ``basic`` allows basic only; ``body``
allows all four. Placeholders and values have the same length, so a substituted body keeps
its ``Content-Length`` and can be rewritten as it streams (a window of the longest
placeholder's length less one byte is held back between chunks).
Not seen: bodies with a ``Content-Encoding`` (compressed bytes hide the placeholder, which
then travels as it is), percent-encoded placeholders in the target.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from .binding import Binding

_PARTS_BY_MODE = {"header": frozenset({"header", "basic", "target"}),
                  "basic": frozenset({"basic"}),
                  "body": frozenset({"header", "basic", "target", "body"})}
_PART_WORDS = {"header": "in headers", "basic": "in Authorization: Basic",
               "target": "in the URL", "body": "in the body"}


@dataclass(frozen=True)
class Grant:
    """One placeholder handed to a session: which key, its value and where it may go."""

    key: str
    placeholder: bytes = field(repr=False)
    value: bytes = field(repr=False)
    binding: Binding


class Refused(Exception):
    """A placeholder toward a place its binding does not allow; ``line`` is the 403 body,
    ``key`` and ``host`` go to the audit log (never a value)."""

    def __init__(self, key: str, host: str, line: str):
        super().__init__(line)
        self.key = key
        self.host = host
        self.line = line


@dataclass(frozen=True)
class Destination:
    host: str
    port: int
    scheme: str  # "https" (intercepted) or "http" (plain proxy)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


class Substituter:
    """Rewrites the parts of requests to one destination; see the module docstring."""

    def __init__(self, grants: list[Grant] | tuple[Grant, ...], destination: Destination):
        self.grants = tuple(grants)
        self.destination = destination
        self.window = max((len(g.placeholder) for g in self.grants), default=0)
        self.substituted: set[str] = set()  # keys whose value went out (for the audit log)

    def _check(self, grant: Grant, part: str) -> None:
        """Raise :class:`Refused` unless ``grant``'s value may go into ``part`` here."""
        binding, dest = grant.binding, self.destination
        hosts = ", ".join(binding.hosts)
        if not binding.allows(dest.host, dest.port):
            raise Refused(grant.key, dest.host, f"egress refused: {grant.key} is bound to {hosts}")
        if dest.scheme != "https" and not binding.plain_http:
            raise Refused(grant.key, dest.host,
                          f"egress refused: {grant.key} is bound to {hosts} over https only "
                          "(a human can allow http:// with pass_mgr bind --allow-plain-http)")
        if part not in _PARTS_BY_MODE[binding.inject]:
            allowed = " and ".join(_PART_WORDS[p] for p in sorted(_PARTS_BY_MODE[binding.inject]))
            raise Refused(grant.key, dest.host,
                          f"egress refused: {grant.key} goes to {hosts} {allowed} only, not "
                          f"{_PART_WORDS[part]} (pass_mgr bind --inject changes that)")

    def replace(self, data: bytes, part: str) -> bytes:
        """``data`` with every allowed placeholder swapped; Refused for any other."""
        if not self.grants or not data:
            return data
        for grant in self.grants:
            if grant.placeholder in data:
                self._check(grant, part)
                data = data.replace(grant.placeholder, grant.value)
                self.substituted.add(grant.key)
        return data

    def header_value(self, name: bytes, value: bytes) -> bytes:
        if name.lower() in (b"authorization", b"proxy-authorization"):
            scheme, _, credential = value.partition(b" ")
            if scheme.lower() == b"basic" and credential:
                try:
                    decoded = base64.b64decode(credential.strip(), validate=True)
                except (binascii.Error, ValueError):
                    decoded = None
                if decoded is not None:
                    swapped = self.replace(decoded, "basic")
                    if swapped != decoded:
                        return scheme + b" " + base64.b64encode(swapped)
        return self.replace(value, "header")

    def headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        return [(name, self.header_value(name, value)) for name, value in headers]

    def target(self, target: bytes) -> bytes:
        return self.replace(target, "target")

    def body(self) -> "BodyStream":
        return BodyStream(self)


class BodyStream:
    """A request body rewritten as it streams (same-length swaps, a held-back window)."""

    def __init__(self, substituter: Substituter):
        self.substituter = substituter
        self._held = b""

    def feed(self, data: bytes) -> list[bytes]:
        sub = self.substituter
        if not sub.grants:
            return [data] if data else []
        buffer = sub.replace(self._held + data, "body")
        keep = sub.window - 1
        cut = max(0, len(buffer) - keep)
        self._held = buffer[cut:]
        return [buffer[:cut]] if cut else []

    def finish(self) -> list[bytes]:
        held, self._held = self._held, b""
        return [held] if held else []
