"""Find the admin password in any text without keeping the password.

The detector keeps, per encoded form of the password (its UTF-8 bytes, and its
JSON-escaped bytes when those differ), the length ``L``, a keyed BLAKE2b digest,
and a 24-bit Rabin-Karp fingerprint under a random base. A scan rolls the
fingerprint over every window of length ``L`` (one multiply-add per byte, so
linear in the text) and confirms the rare fingerprint hits with the digest.

What this keeps is a fast test for a guessed password, as any leak detector
must; so the whole detector is stored sealed under the host key (see
``admin.py``), and the vault refuses admin passwords shorter than
``vault.admin_password_min_length``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from itertools import islice
from typing import Any

#: A prime below 2**31 keeps every product of the rolling hash in a machine word.
MODULUS = 2_147_483_647
FINGERPRINT_BITS = 24
_MASK = (1 << FINGERPRINT_BITS) - 1


def encoded_forms(password: str) -> list[bytes]:
    """The byte strings whose presence means the password leaked."""
    raw = password.encode("utf-8")
    forms = [raw]
    for escaped in (json.dumps(password)[1:-1].encode("ascii"),
                    json.dumps(password, ensure_ascii=False)[1:-1].encode("utf-8")):
        if escaped not in forms:
            forms.append(escaped)
    return forms


def _rolling(data: bytes, base: int) -> int:
    h = 0
    for byte in data:
        h = (h * base + byte) % MODULUS
    return h


@dataclass(frozen=True, slots=True)
class _Form:
    length: int
    fingerprint: int
    digest: bytes


class LeakDetector:
    """``LeakDetector.create(password)`` once; ``contains(text)`` as often as needed."""

    def __init__(self, key: bytes, base: int, forms: list[_Form]):
        self._key = key
        self._base = base
        self._forms = forms

    @classmethod
    def create(cls, password: str) -> "LeakDetector":
        key = secrets.token_bytes(32)
        base = secrets.randbelow(MODULUS - 257) + 257
        forms = [_Form(len(form), _rolling(form, base) & _MASK, cls._digest(key, form))
                 for form in encoded_forms(password)]
        return cls(key, base, forms)

    @staticmethod
    def _digest(key: bytes, window: bytes) -> bytes:
        return hashlib.blake2b(window, key=key, digest_size=32).digest()

    def to_json(self) -> dict[str, Any]:
        return {"key": self._key.hex(), "base": self._base,
                "forms": [[f.length, f.fingerprint, f.digest.hex()] for f in self._forms]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "LeakDetector":
        return cls(bytes.fromhex(obj["key"]), int(obj["base"]),
                   [_Form(int(n), int(fp), bytes.fromhex(d)) for n, fp, d in obj["forms"]])

    def contains(self, text: str | bytes) -> bool:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        return any(self._scan(data, form) for form in self._forms)

    def _scan(self, data: bytes, form: _Form) -> bool:
        length, base, target = form.length, self._base, form.fingerprint
        if len(data) < length:
            return False
        modulus, mask = MODULUS, _MASK
        top = pow(base, length - 1, modulus)
        # Removing the outgoing byte costs one table lookup instead of a multiply.
        remove = [(b * top) % modulus for b in range(256)]
        h = _rolling(data[:length], base)
        start = 0
        if h & mask == target and self._confirm(data, 0, form):
            return True
        for outgoing, incoming in zip(data, islice(data, length, None)):
            h = ((h - remove[outgoing]) * base + incoming) % modulus
            start += 1
            if h & mask == target and self._confirm(data, start, form):
                return True
        return False

    def _confirm(self, data: bytes, start: int, form: _Form) -> bool:
        window = data[start:start + form.length]
        return secrets.compare_digest(self._digest(self._key, window), form.digest)
