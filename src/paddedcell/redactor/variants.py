"""Encoded forms of a secret that command output commonly shows.

A program rarely prints a secret only verbatim: a PTY turns ``\\n`` into
``\\r\\n``, ``base64`` and ``xxd -p`` encode it, curl and JSON serialisers escape
it. Each form here is a plain byte string matched like the secret itself.

Variants apply only to secrets of at least ``variant_min_length`` bytes: the
encodings of a short secret are short strings that ordinary output contains by
chance (GitHub's runner masked every ``e`` and ``f`` for that reason, see
actions/runner #326). The secret itself is always matched, whatever its length.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from urllib.parse import quote, quote_plus


@dataclass(frozen=True, slots=True)
class Variants:
    """Which encoded forms of each (long enough) secret are masked too."""

    crlf: bool = True  # every "\n" of a multi-line secret as "\r\n" (PTY cooked mode)
    base64: bool = True  # standard and URL-safe alphabets, all three byte alignments
    url: bool = True  # percent-encoding, upper- and lower-case hex, "+" for space
    json: bool = True  # JSON string body, with and without \\uXXXX for non-ASCII
    hex: bool = True  # lower- and upper-case hex digits

    @classmethod
    def none(cls) -> "Variants":
        return cls(crlf=False, base64=False, url=False, json=False, hex=False)

    @classmethod
    def coerce(cls, value: "bool | Variants") -> "Variants":
        if isinstance(value, Variants):
            return value
        if isinstance(value, bool):
            return cls() if value else cls.none()
        raise TypeError(f"variants must be a bool or Variants, not {type(value).__name__}")


def base64_inner_forms(secret: bytes) -> list[bytes]:
    """Base64 of ``secret`` at byte offsets 0, 1 and 2, cut to the stable part.

    Preceded by ``a`` other bytes, the secret occupies bits ``[8a, 8(a+n))`` of
    the encoded stream; output character ``j`` covers bits ``[6j, 6j+6)``. Only
    characters lying wholly inside the secret's bits are the same whatever
    precedes or follows it, so those are what we match (GitHub's runner kept
    the padded tail and missed ``echo $S | base64``, actions/runner #291).
    """
    forms = []
    n = len(secret)
    for a in range(3):
        encoded = base64.b64encode(b"\0" * a + secret)
        first = (8 * a + 5) // 6
        last = (8 * (a + n)) // 6
        forms.append(encoded[first:last])
    return forms


_PERCENT_HEX = re.compile(rb"%[0-9A-F]{2}")


def expand(secret: bytes, variants: Variants) -> set[bytes]:
    """All enabled encoded forms of ``secret``, without the secret itself."""
    forms: set[bytes] = set()
    if variants.crlf and b"\n" in secret:
        forms.add(secret.replace(b"\n", b"\r\n"))
    if variants.base64:
        for inner in base64_inner_forms(secret):
            forms.add(inner)
            forms.add(inner.translate(_URLSAFE))
    if variants.url:
        upper = quote(secret, safe="").encode("ascii")
        forms.add(upper)
        forms.add(_PERCENT_HEX.sub(lambda m: m.group(0).lower(), upper))
        forms.add(quote_plus(secret, safe="").encode("ascii"))
    if variants.json:
        try:
            text = secret.decode("utf-8")
        except UnicodeDecodeError:
            pass  # not text, so no JSON serialiser prints it as a string
        else:
            forms.add(json.dumps(text, ensure_ascii=True)[1:-1].encode("ascii"))
            forms.add(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass"))
    if variants.hex:
        forms.add(secret.hex().encode("ascii"))
        forms.add(secret.hex().upper().encode("ascii"))
    forms.discard(secret)
    forms.discard(b"")
    return forms


_URLSAFE = bytes.maketrans(b"+/", b"-_")
