"""Find the admin password in any text without keeping the password.

The detector keeps, per encoded form of the password (its UTF-8 bytes, and its
JSON-escaped bytes when those differ): the length ``L``, a keyed BLAKE2b digest,
and a *window sum*: the sum of 256 secret random 16-bit weights, one per byte
value, over the password's bytes. A scan computes the weight sum of every
window of ``L`` bytes from prefix sums and confirms the rare windows whose sum
matches with the digest. Everything per byte runs inside C (``map``,
``accumulate``, ``list.index``), so the scan is linear and ~3x faster than a
Python-level rolling hash; memory stays bounded by scanning in chunks.

Which windows can match: every occurrence of the password (no false negatives),
rearrangements of its bytes, and random collisions (about one window in 2**18);
each costs one BLAKE2b call, so even hostile text stays linear.

What this keeps is a fast test for a guessed password, as any leak detector
must, and the window sum says about 20 bits about the password's bytes; so the
whole detector is stored sealed under the host key (see ``admin.py``), and the
vault refuses admin passwords shorter than ``vault.admin_password_min_length``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from itertools import accumulate, islice
from operator import sub
from typing import Any, NamedTuple

WEIGHT_BITS = 16
CHUNK = 1 << 14  # window sums are built for this many positions at a time


def encoded_forms(password: str) -> list[bytes]:
    """The byte strings whose presence means the password leaked."""
    raw = password.encode("utf-8")
    forms = [raw]
    for escaped in (json.dumps(password)[1:-1].encode("ascii"),
                    json.dumps(password, ensure_ascii=False)[1:-1].encode("utf-8")):
        if escaped not in forms:
            forms.append(escaped)
    return forms


class _Form(NamedTuple):
    length: int
    window_sum: int
    digest: bytes


class LeakDetector:
    """``LeakDetector.create(password)`` once; ``contains(text)`` as often as needed."""

    def __init__(self, key: bytes, weights: list[int], forms: list[_Form]):
        if len(weights) != 256 or len(key) != 32:
            raise ValueError("a leak detector needs a 32-byte key and 256 weights")
        self._key = key
        self._weights = weights
        self._forms = forms

    @classmethod
    def create(cls, password: str) -> "LeakDetector":
        key = secrets.token_bytes(32)
        weights = [secrets.randbits(WEIGHT_BITS) for _ in range(256)]
        forms = [_Form(len(form), sum(weights[byte] for byte in form), cls._digest(key, form))
                 for form in encoded_forms(password)]
        return cls(key, weights, forms)

    @staticmethod
    def _digest(key: bytes, window: bytes) -> bytes:
        return hashlib.blake2b(window, key=key, digest_size=32).digest()

    def to_json(self) -> dict[str, Any]:
        return {"key": self._key.hex(), "weights": self._weights,
                "forms": [[f.length, f.window_sum, f.digest.hex()] for f in self._forms]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "LeakDetector":
        return cls(bytes.fromhex(obj["key"]), [int(w) for w in obj["weights"]],
                   [_Form(int(n), int(total), bytes.fromhex(d)) for n, total, d in obj["forms"]])

    def contains(self, text: str | bytes) -> bool:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        return any(self._scan(data, form) for form in self._forms)

    def _scan(self, data: bytes, form: _Form) -> bool:
        length, target = form.length, form.window_sum
        weight = self._weights.__getitem__
        for start in range(0, len(data) - length + 1, CHUNK):
            chunk = data[start:start + CHUNK + length - 1]
            prefix = list(accumulate(map(weight, chunk), initial=0))
            # sums[i] is the weight sum of chunk[i:i + length]
            sums = list(map(sub, islice(prefix, length, None), prefix))
            index = 0
            while True:
                try:
                    index = sums.index(target, index)
                except ValueError:
                    break
                window = chunk[index:index + length]
                if secrets.compare_digest(self._digest(self._key, window), form.digest):
                    return True
                index += 1
        return False
