"""The Ed25519 device identity a remote gateway pairs with (one per configured remote).

OpenClaw names a device by the lowercase hex SHA-256 of its *raw* 32-byte public
key and takes the key itself as unpadded base64url of those 32 bytes; a connect
proves possession by signing the gateway's challenge (see :mod:`.protocol` for
the payload). The private key is kept as its raw 32-byte seed, sealed in the
store like every other secret (:mod:`.store`); this module never touches disk.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SEED_BYTES = 32


def b64url(data: bytes) -> str:
    """Unpadded base64url, the encoding OpenClaw uses for keys and signatures."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class DeviceIdentity:
    """One Ed25519 key pair; ``device_id`` and ``public_key`` as the gateway expects them."""

    __slots__ = ("_private", "public_raw", "device_id")

    def __init__(self, private: Ed25519PrivateKey):
        self._private = private
        self.public_raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.device_id = hashlib.sha256(self.public_raw).hexdigest()

    @classmethod
    def generate(cls) -> DeviceIdentity:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> DeviceIdentity:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 device key is {SEED_BYTES} bytes, not {len(seed)}")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    def seed(self) -> bytes:
        """The raw private key (seal it; never log or print it)."""
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        return self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())

    @property
    def public_key(self) -> str:
        return b64url(self.public_raw)

    def sign(self, payload: str) -> str:
        """Ed25519 over the UTF-8 payload, as unpadded base64url."""
        return b64url(self._private.sign(payload.encode("utf-8")))

    def verify(self, payload: str, signature: str) -> bool:
        """For tests and the fake gateway: does ``signature`` verify under this key?"""
        return verify(self.public_key, payload, signature)

    def __repr__(self) -> str:
        return f"DeviceIdentity(device_id={self.device_id[:12]}…)"


def verify(public_key: str, payload: str, signature: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(public_key + "=" * (-len(public_key) % 4))
        sig = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, payload.encode("utf-8"))
    except Exception:  # bad encoding, bad key, bad signature: all "does not verify"
        return False
    return True
