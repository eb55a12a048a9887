"""Password KDF and the public-key admin wrap (not on the ``get`` path).

Why a key pair: an agent's ``generate`` creates stores without knowing the
admin password, yet every store must be recoverable with that password if the
host key is lost. So ``admin init`` makes an X25519 key pair, keeps the private
half sealed under a key derived from the password (Argon2id, RFC 9106's second
recommended parameters; scrypt where OpenSSL lacks Argon2), and each store
wraps its data key to the public half (ephemeral X25519 + HKDF-SHA256 +
AES-256-GCM, the shape of HPKE's base mode).
"""

from __future__ import annotations

import os
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from .crypto import b64d, b64e, damaged, seal, unseal
from .errors import IntegrityError
from .settings import VaultSettings

SALT_BYTES = 16
#: Refuse stored KDF parameters beyond these before any work (a tampered file must not
#: eat the machine): 1 GiB and 16 passes is 16x RFC 9106's second recommendation.
MAX_MEMORY_KIB = 1024 * 1024
MAX_ITERATIONS = 16
MAX_LANES = 16
#: scrypt's memory is 128 * n * r bytes: at most 1 GiB as well.
MAX_SCRYPT_BYTES = 1 << 30


def argon2_available() -> bool:
    try:
        from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

        Argon2id(salt=b"\0" * SALT_BYTES, length=32, iterations=1, lanes=1, memory_cost=8)
    except (ImportError, UnsupportedAlgorithm):
        return False
    return True


def new_kdf_params(settings: Any) -> dict[str, Any]:
    salt = b64e(os.urandom(SALT_BYTES))
    vs = VaultSettings.of(settings)
    if argon2_available():
        return {"alg": "argon2id", "salt": salt, "iterations": vs.kdf_iterations,
                "lanes": vs.kdf_lanes, "memory_kib": vs.kdf_memory_kib}
    return {"alg": "scrypt", "salt": salt, "n": vs.scrypt_n, "r": 8, "p": 1}


def _int(value: Any) -> int:
    if type(value) is not int:  # not bool, float or str: the file is ours, ints only
        raise ValueError("not an integer")
    return value


def check_kdf_params(params: Any, ceiling: Any = None) -> dict[str, Any]:
    """``params`` when they are well formed and within bounds (and, given ``ceiling``,
    demand no more than it); else IntegrityError. Costs nothing: call before deriving."""
    try:
        if not isinstance(params, dict):
            raise ValueError("not an object")
        b64d(params.get("salt"))
        if params.get("alg") == "argon2id":
            iterations, lanes, memory = (_int(params["iterations"]), _int(params["lanes"]),
                                         _int(params["memory_kib"]))
            if not (1 <= iterations <= MAX_ITERATIONS and 1 <= lanes <= MAX_LANES
                    and 8 * lanes <= memory <= MAX_MEMORY_KIB):
                raise ValueError("out of range")
            if ceiling is not None and (iterations > ceiling["iterations"]
                                        or memory > ceiling["memory_kib"]):
                raise ValueError("above this host's settings")
        elif params.get("alg") == "scrypt":
            n, r, p = _int(params["n"]), _int(params["r"]), _int(params["p"])
            if not (2 <= n and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16
                    and 128 * n * r <= MAX_SCRYPT_BYTES):
                raise ValueError("out of range")
            if ceiling is not None and n > ceiling["n"]:
                raise ValueError("above this host's settings")
        else:
            raise ValueError("unknown algorithm")
    except (KeyError, TypeError, ValueError):
        raise IntegrityError("the admin KDF parameters are invalid; admin.json is corrupt") from None
    return params


def kdf_ceiling(settings: Any) -> dict[str, int]:
    """What this host's settings would demand: the bound for parameters no MAC vouches for."""
    vs = VaultSettings.of(settings)
    return {"iterations": vs.kdf_iterations, "memory_kib": vs.kdf_memory_kib, "n": vs.scrypt_n}


def derive(password: str, params: Any, ceiling: Any = None) -> tuple[bytes, bytes]:
    """(verifier, key-encryption key) from the admin password; 64 bytes of KDF output split.
    The parameters are checked (``check_kdf_params``) before any work."""
    params = check_kdf_params(params, ceiling)
    salt = b64d(params["salt"])
    secret = password.encode("utf-8")
    if params["alg"] == "argon2id":
        from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

        out = Argon2id(salt=salt, length=64, iterations=params["iterations"],
                       lanes=params["lanes"], memory_cost=params["memory_kib"]).derive(secret)
    else:
        out = Scrypt(salt=salt, length=64, n=params["n"], r=params["r"],
                     p=params["p"]).derive(secret)
    return out[:32], out[32:]


def new_admin_keypair() -> tuple[bytes, bytes]:
    """(private, public) raw X25519 bytes."""
    private = X25519PrivateKey.generate()
    return private.private_bytes_raw(), private.public_key().public_bytes_raw()


def _wrap_key(shared: bytes, associated: bytes, epk: bytes, public: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=associated + b"|" + epk + public).derive(shared)


def wrap_to_admin(public: bytes, data_key: bytes, associated: bytes) -> dict[str, str]:
    ephemeral = X25519PrivateKey.generate()
    epk = ephemeral.public_key().public_bytes_raw()
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(public))
    box = seal(_wrap_key(shared, associated, epk, public), data_key, associated)
    box["epk"] = b64e(epk)
    return box


def unwrap_as_admin(private: bytes, box: Any, associated: bytes, what: str) -> bytes:
    if not isinstance(box, dict):
        raise damaged(what)
    epk = b64d(box.get("epk"), what)
    key = X25519PrivateKey.from_private_bytes(private)
    try:
        shared = key.exchange(X25519PublicKey.from_public_bytes(epk))
    except ValueError:
        raise damaged(what) from None
    public = key.public_key().public_bytes_raw()
    return unseal(_wrap_key(shared, associated, epk, public), box, associated, what)


def public_of(private: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()
