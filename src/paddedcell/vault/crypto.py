"""The small, dull crypto of the vault: AES-256-GCM boxes, GMAC tags, canonical JSON.

Every box is ``{"nonce", "ct"}`` sealed under a fresh 96-bit random nonce, with
associated data that names what the box is for (format version, agent, store,
key name, entry version), so a box copied to another place fails to open.
Whole files are authenticated with GMAC (AES-GCM over empty plaintext, the file
as associated data, a fresh random nonce per tag: NIST SP 800-38D). Any failure
to open or verify is one :class:`IntegrityError` with no reason.

This module is on the ``pass_mgr get`` path, and AES-GCM is all it needs: the
password KDF and the X25519 admin wrap live in :mod:`.admin_crypto`. Why GMAC
and not HMAC: ``hashes``/``hmac`` (or ``hashlib``) would add 5-12 ms to every
``get``; see :data:`AESGCM` for the same reason.
"""

from __future__ import annotations

import binascii
import json
import os

from .errors import IntegrityError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    # The public module (cryptography.hazmat.primitives.ciphers.aead) imports the
    # whole ciphers package and typing first: ~14 ms of a ~40 ms `pass_mgr get`.
    # It re-exports this very class; tests/test_vault.py checks they stay identical.
    from cryptography.hazmat.bindings._rust import openssl as _rust_openssl

    AESGCM = _rust_openssl.aead.AESGCM
except (ImportError, AttributeError):  # another cryptography layout: the public path
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FORMAT = 1
LABEL = "paddedcell-vault/1"
KEY_BYTES = 32
NONCE_BYTES = 12


def b64e(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def b64d(text: Any) -> bytes:
    if not isinstance(text, str):
        raise IntegrityError("a vault field is not base64 text; the file is corrupt")
    try:
        data = binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise IntegrityError("a vault field is not valid base64; the file is corrupt") from None
    # Strict mode still ignores the unused low bits of the last character, so two
    # texts decode alike; a flipped bit there in a MAC field would go unnoticed.
    if b64e(data) != text:
        raise IntegrityError("a vault field is not canonical base64; the file was tampered with")
    return data


def aad(*parts: object) -> bytes:
    """Associated data: the label and the parts, joined with '|' (parts never contain '|')."""
    return "|".join((LABEL, *map(str, parts))).encode("utf-8")


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def parse_canonical(raw: bytes, what: str) -> dict[str, Any]:
    """Parse a vault JSON file and insist it is byte-for-byte canonical.

    The canonical check means a flipped byte anywhere (even in whitespace-like
    spots) is noticed, because the MACs cover the canonical form.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise IntegrityError(f"{what} is not valid JSON; it is corrupt or was tampered with") from None
    if not isinstance(obj, dict) or canonical(obj) != raw:
        raise IntegrityError(f"{what} is not in canonical form; it is corrupt or was tampered with")
    return obj


def seal(key: bytes, plaintext: bytes, associated: bytes) -> dict[str, str]:
    nonce = os.urandom(NONCE_BYTES)
    return {"nonce": b64e(nonce), "ct": b64e(AESGCM(key).encrypt(nonce, plaintext, associated))}


def unseal(key: bytes, box: Any, associated: bytes, what: str) -> bytes:
    if not isinstance(box, dict):
        raise IntegrityError(f"{what} is missing; the file is corrupt or was tampered with")
    nonce = b64d(box.get("nonce"))
    if len(nonce) != NONCE_BYTES:
        raise IntegrityError(f"{what} has a bad nonce; the file is corrupt or was tampered with")
    try:
        return AESGCM(key).decrypt(nonce, b64d(box.get("ct")), associated)
    except Exception:  # InvalidTag, or a malformed input: either way the box is bad
        raise IntegrityError(f"{what} failed authentication; the file is corrupt, was tampered "
                             "with, or belongs to another key") from None


def tag(key: bytes, data: bytes) -> str:
    """GMAC of ``data``: base64 of nonce (12 bytes) + tag (16 bytes)."""
    nonce = os.urandom(NONCE_BYTES)
    return b64e(nonce + AESGCM(key).encrypt(nonce, b"", data))


def verify_tag(key: bytes, data: bytes, expected: Any, what: str) -> None:
    raw = b64d(expected)
    try:
        if len(raw) != NONCE_BYTES + 16:
            raise ValueError("bad tag length")
        AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], data)
    except Exception:
        raise IntegrityError(f"{what} failed its integrity check; it is corrupt or was "
                             "tampered with") from None


def sign_document(key: bytes, body: dict[str, Any], context: bytes) -> bytes:
    """Canonical bytes of ``body`` plus a ``mac`` field over the rest (and ``context``)."""
    return canonical({**body, "mac": tag(key, context + canonical(body))})


def verify_document(key: bytes, doc: dict[str, Any], context: bytes, what: str) -> None:
    body = {k: v for k, v in doc.items() if k != "mac"}
    verify_tag(key, context + canonical(body), doc.get("mac"), what)
