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

``spans(text)`` says where: the confirmed windows of every form, overlapping
ones merged into one run, as ``[start, end)`` offsets in the caller's own units
(code points into a ``str``, bytes into ``bytes``); ``redact`` masks them, and
``utf16_spans`` converts them for JavaScript, whose strings count UTF-16 units.

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
from typing import Any, Iterator, NamedTuple

WEIGHT_BITS = 16
CHUNK = 1 << 14  # window sums are built for this many positions at a time
MASK = "######"

Span = tuple[int, int]


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
        data = _encode(text)
        return any(next(self._hits(data, form), None) is not None for form in self._forms)

    def spans(self, text: str | bytes) -> list[Span]:
        """Every hit as a ``[start, end)`` run, sorted; overlapping hits merge into one run.

        Offsets count code points when ``text`` is a ``str`` (so ``text[start:end]``
        is the hit) and bytes when it is ``bytes``. Adjacent hits stay separate runs.
        """
        data = _encode(text)
        windows = sorted((start, start + form.length)
                         for form in self._forms for start in self._hits(data, form))
        runs: list[list[int]] = []
        for start, end in windows:
            if runs and start < runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], end)
            else:
                runs.append([start, end])
        merged = [(start, end) for start, end in runs]
        return _code_point_spans(data, merged) if isinstance(text, str) else merged

    def _hits(self, data: bytes, form: _Form) -> Iterator[int]:
        """Start offsets (bytes) of every window of ``data`` that is this form."""
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
                    yield start + index
                index += 1


def _encode(text: str | bytes) -> bytes:
    # surrogatepass: a lone surrogate (JSON "\ud800") is scanned, not an error.
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)


def _code_point_spans(data: bytes, spans: list[Span]) -> list[Span]:
    """Byte runs of UTF-8 ``data`` as code-point runs of the str it encodes.

    Every run starts and ends on a character boundary: each form is whole UTF-8,
    and UTF-8 is self-synchronising. One pass over the text, however many runs.
    """
    out: list[Span] = []
    byte_pos = char_pos = 0

    def advance(to: int) -> int:
        nonlocal byte_pos, char_pos
        char_pos += len(data[byte_pos:to].decode("utf-8", "surrogatepass"))
        byte_pos = to
        return char_pos

    for start, end in spans:
        out.append((advance(start), advance(end)))
    return out


def redact(text: str, spans: list[Span], mask: str = MASK) -> str:
    """``text`` with each run from ``spans(text)`` replaced by ``mask``."""
    pieces, pos = [], 0
    for start, end in spans:
        pieces += [text[pos:start], mask]
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def utf16_spans(text: str, spans: list[Span]) -> list[Span]:
    """Code-point runs of ``text`` as UTF-16 code-unit runs (JavaScript string offsets)."""
    out: list[Span] = []
    pos = units = 0

    def advance(to: int) -> int:
        nonlocal pos, units
        units += len(text[pos:to].encode("utf-16-le", "surrogatepass")) // 2
        pos = to
        return units

    for start, end in spans:
        out.append((advance(start), advance(end)))
    return out
