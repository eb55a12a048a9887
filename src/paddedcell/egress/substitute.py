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
placeholder's percent-encoded length less one byte is held back between chunks).

Forms clients really send are seen too:
- percent-encoded (URL queries, ``application/x-www-form-urlencoded`` bodies, ``+`` for a
  space): found in the decoded text and swapped unit by unit, each character keeping its
  own encoding, so the length still holds (placeholders keep the value's punctuation);
- inside a decoded ``Authorization: Basic`` credential (re-encoded after);
- in a body with ``Content-Encoding: gzip`` / ``deflate`` (:class:`EncodedBody`: decoded
  whole, swapped, re-encoded; the caller fixes ``Content-Length``). Any other coding,
  or one that does not decode, is refused (:class:`Undecodable`) rather than passed.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

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


class Undecodable(Exception):
    """A request body the proxy cannot look inside (an unknown or broken
    ``Content-Encoding``, or one that decodes past the limit); ``line`` is the answer."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


#: One percent-encoded byte or one raw byte: a decoded byte per unit.
_UNIT = re.compile(rb"%[0-9A-Fa-f]{2}|.", re.DOTALL)


def _units(data: bytes, plus_is_space: bool) -> tuple[list[bytes], bytes]:
    """``data`` cut into units and their decoded bytes (one byte per unit)."""
    units = _UNIT.findall(data)
    decoded = bytes(int(u[1:], 16) if len(u) == 3 else (32 if plus_is_space and u == b"+"
                                                          else u[0]) for u in units)
    return units, decoded


def _encode_like(unit: bytes, byte: int) -> bytes:
    """``byte`` written the way ``unit`` was: %XX (same hex case), ``+`` or raw."""
    if len(unit) == 3:
        text = "%02x" % byte if any(c in b"abcdef" for c in unit[1:]) else "%02X" % byte
        return b"%" + text.encode()
    if unit == b"+" and byte == 32:
        return b"+"
    return bytes((byte,))


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
        # A placeholder percent-encoded whole is three times as long.
        self.window = 3 * max((len(g.placeholder) for g in self.grants), default=0)
        self._spaces = any(b" " in g.placeholder for g in self.grants)
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
        if b"%" in data or (self._spaces and b"+" in data):
            data = self._replace_encoded(data, part, plus_is_space=False)
            if self._spaces:
                data = self._replace_encoded(data, part, plus_is_space=True)
        return data

    def _replace_encoded(self, data: bytes, part: str, *, plus_is_space: bool) -> bytes:
        """Placeholders written percent-encoded (wholly or partly) swapped in place."""
        decoded = unquote_to_bytes(data.replace(b"+", b" ") if plus_is_space else data)
        found = [g for g in self.grants if g.placeholder in decoded]
        if not found:
            return data
        units, decoded = _units(data, plus_is_space)
        for grant in found:
            self._check(grant, part)
            start = decoded.find(grant.placeholder)
            while start >= 0:
                for k, byte in enumerate(grant.value):
                    units[start + k] = _encode_like(units[start + k], byte)
                start = decoded.find(grant.placeholder, start + len(grant.placeholder))
            self.substituted.add(grant.key)
        return b"".join(units)

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

    def encoded_body(self, content_encoding: bytes, limit: int) -> "EncodedBody":
        return EncodedBody(self, content_encoding, limit)


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


_DECODERS = {b"gzip": 31, b"x-gzip": 31, b"deflate": 15}


class EncodedBody:
    """A body with a ``Content-Encoding``, taken whole (``limit`` bytes decoded at most):
    :meth:`rewrite` returns it unchanged when no placeholder is inside, else decoded,
    swapped and encoded again (the caller sets the new ``Content-Length``)."""

    def __init__(self, substituter: Substituter, content_encoding: bytes, limit: int):
        self.substituter = substituter
        self.limit = limit
        self.codings = [c.strip().lower() for c in content_encoding.split(b",")
                        if c.strip() and c.strip().lower() != b"identity"]
        for coding in self.codings:
            if coding not in _DECODERS:
                raise Undecodable(
                    f"egress refused: cannot look inside a request body with "
                    f"Content-Encoding: {coding.decode('ascii', 'replace')}; send it "
                    "uncompressed, gzip or deflate")

    def rewrite(self, data: bytes) -> bytes:
        layers = []  # (coding, wbits) outermost first
        plain = data
        for coding in reversed(self.codings):
            plain, wbits = self._decode(plain, coding)
            layers.append((coding, wbits))
        swapped = self.substituter.replace(plain, "body")
        if swapped == plain:
            return data
        for coding, wbits in reversed(layers):
            packer = zlib.compressobj(wbits=wbits)
            swapped = packer.compress(swapped) + packer.flush()
        return swapped

    def _decode(self, data: bytes, coding: bytes) -> tuple[bytes, int]:
        tries = (_DECODERS[coding],) if coding != b"deflate" else (15, -15)  # zlib or raw
        for wbits in tries:
            unpacker = zlib.decompressobj(wbits=wbits)
            try:
                plain = unpacker.decompress(data, self.limit + 1)
            except zlib.error:
                continue
            if len(plain) > self.limit or unpacker.unconsumed_tail:
                raise Undecodable(f"egress refused: the request body decodes to more than "
                                  f"{self.limit} bytes (egress.max_decoded_body_bytes)")
            if not unpacker.eof:
                continue
            return plain, wbits
        raise Undecodable(f"egress refused: the request body is not valid "
                          f"{coding.decode('ascii', 'replace')}; nothing was sent")
