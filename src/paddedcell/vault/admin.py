"""Admin state under ``PADDEDCELL_HOME``: host key, admin.json, lock marker, registry.

Layout (directories 0700, files 0600)::

    keys/host.key        96 random bytes + CRC-32; opens every store's host wrap, so
                         agents' ``get`` needs no password
    vault/admin.json     KDF parameters and verifier, the admin X25519 public key,
                         its private key sealed under the password-derived key;
                         GMAC'd. Nothing else derived from the password: the leak
                         detector lives in memory, its filter on tmpfs (vault/guard.py)
    vault/admin.next.json
                         the journal of an admin init in progress (see api.init_admin)
    vault/locked.json    present while the vault is locked after a leak; MACed under
                         the host key (any other file there is tampering, exit 6)
    vault/stores/<id>    one file per store ever created, holding its path, so
                         ``admin init`` can re-wrap every store it knows
    vault/generations/<store id>
                         the highest generation seen of each store: an older copy
                         put back (a rollback) is refused
    vault/.lock          serialises admin changes
    security.log         JSON lines; CRITICAL on a leak (time and source only)

Status is decided by two ``stat`` calls (locked.json, admin.json) so that
``get`` stays cheap; only a present lock file is read and its MAC checked. Paths are strings (``os.path``): ``pathlib`` and ``json``
would cost every ``get`` milliseconds of imports.
"""

from __future__ import annotations

import binascii
import os
import time

from ..config import path_text
from . import crypto
from .errors import IntegrityError, Locked, NotInitialized, VaultError
from .files import atomic_write, ensure_private_dir, read_private

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

#: Three independent 32-byte keys: store wraps, the admin.json MAC, and one unused since
#: the leak detector left the disk (older releases sealed it under the third); the file
#: adds a CRC-32 so that damage to a part `get` does not use is still noticed.
HOST_KEY_BYTES = 96
_CRC_BYTES = 4
_HOST_SUBKEYS = {"wrap": 0, "admin-mac": 1}


class AdminPaths:
    """Where the admin state lives under ``home`` (a plain class: ``dataclasses``
    costs ``pass_mgr get`` several milliseconds of imports)."""

    __slots__ = ("home",)

    def __init__(self, home: str | Path):
        self.home = path_text(os.fspath(home))

    def _under(self, *parts: str) -> str:
        return path_text(os.path.join(self.home, *parts))

    keys_dir = property(lambda self: self._under("keys"))
    host_key = property(lambda self: self._under("keys", "host.key"))
    vault_dir = property(lambda self: self._under("vault"))
    admin_file = property(lambda self: self._under("vault", "admin.json"))
    admin_next_file = property(lambda self: self._under("vault", "admin.next.json"))
    locked_file = property(lambda self: self._under("vault", "locked.json"))
    registry_dir = property(lambda self: self._under("vault", "stores"))
    generations_dir = property(lambda self: self._under("vault", "generations"))
    lock_file = property(lambda self: self._under("vault", ".lock"))
    security_log = property(lambda self: self._under("security.log"))


def status(paths: AdminPaths) -> str:
    """"locked" | "tampered" | "ready" | "uninitialized".

    Only a lock file the vault wrote (its MAC verifies under the host key) is a leak
    lock. Any other file at ``vault/locked.json`` is "tampered": something other than
    pass_mgr wrote there, which the vault refuses (exit 6) until a human looks, instead
    of treating it as a leak whose password must be replaced."""
    if os.path.lexists(paths.locked_file):
        try:
            host = read_host_key(paths)
        except VaultError:
            return "tampered"
        return "locked" if lock_is_authentic(paths, host) else "tampered"
    if os.path.lexists(paths.admin_file):
        return "ready"
    return "uninitialized"


def require_ready(paths: AdminPaths) -> None:
    state = status(paths)
    if state == "locked":
        raise Locked()
    if state == "tampered":
        raise IntegrityError(f"{paths.locked_file} was not written by pass_mgr (its MAC does not "
                             "verify): someone tampered with the vault; a human must check it, "
                             "then remove the file or run: pass_mgr admin init")
    if state == "uninitialized":
        raise NotInitialized()


def subkey(host_key: bytes, purpose: str) -> bytes:
    """The host key's independent key for ``purpose`` (random, not derived: no KDF on `get`)."""
    index = _HOST_SUBKEYS[purpose]
    return host_key[32 * index:32 * (index + 1)]


def read_host_key(paths: AdminPaths) -> bytes:
    try:
        raw = read_private(paths.host_key)
    except FileNotFoundError:
        raise IntegrityError(f"the host key {paths.host_key} is missing; restore it from a backup, "
                             "or have a human run: pass_mgr admin recover") from None
    key, check = raw[:HOST_KEY_BYTES], raw[HOST_KEY_BYTES:]
    if len(raw) != HOST_KEY_BYTES + _CRC_BYTES or \
            binascii.crc32(key).to_bytes(_CRC_BYTES, "big") != check:
        raise IntegrityError(f"the host key {paths.host_key} is corrupt; restore it from a backup, "
                             "or have a human run: pass_mgr admin recover")
    return key


def create_host_key(paths: AdminPaths) -> bytes:
    ensure_private_dir(paths.keys_dir)
    key = os.urandom(HOST_KEY_BYTES)
    atomic_write(paths.host_key, key + binascii.crc32(key).to_bytes(_CRC_BYTES, "big"))
    return key


def load_admin(paths: AdminPaths, host_key: bytes) -> dict[str, Any]:
    """admin.json, parsed and verified under the host key."""
    try:
        raw = read_private(paths.admin_file)
    except FileNotFoundError:
        raise NotInitialized() from None
    return crypto.open_file(raw, subkey(host_key, "admin-mac"), b"admin.json",
                            str(paths.admin_file))


def parse_admin_unverified(paths: AdminPaths) -> dict[str, Any]:
    """admin.json without the host-key MAC, for recovery after the host key is lost.

    Only the sealed private key is used from it, and that box authenticates itself
    under the password-derived key.
    """
    try:
        raw = read_private(paths.admin_file)
    except FileNotFoundError:
        raise NotInitialized() from None
    return crypto.parse_canonical(crypto.split_file(raw, str(paths.admin_file))[1],
                                  str(paths.admin_file))


def admin_public_key(doc: dict[str, Any]) -> bytes:
    public = crypto.b64d(doc.get("admin_public"), "admin.json")
    if len(public) != 32:
        raise crypto.damaged("admin.json")
    return public


def unlock_admin_private(doc: dict[str, Any], password: str, *,
                         kdf_ceiling: dict[str, int] | None = None) -> bytes:
    """The admin X25519 private key, or :class:`Forbidden` for a wrong password.

    ``doc`` must have passed its MAC; when it could not be (recovery without the host
    key), ``kdf_ceiling`` bounds the KDF work to what this host's settings demand.
    """
    from .admin_crypto import derive
    from .errors import Forbidden

    try:
        password.encode("utf-8")
    except UnicodeEncodeError:  # no admin password is (init refuses them): a wrong one
        raise Forbidden("wrong admin password") from None
    verifier, kek = derive(password, doc.get("kdf"), kdf_ceiling)
    expected = crypto.b64d(doc.get("verifier"))
    if not _equal(verifier, expected):
        raise Forbidden("wrong admin password")
    return crypto.unseal(kek, doc.get("admin_private"), crypto.aad("admin-private"),
                         "the sealed admin key")


def _equal(a: bytes, b: bytes) -> bool:
    import hmac

    return hmac.compare_digest(a, b)


def password_confirmer(doc: dict[str, Any]):
    """``confirm(text)``: is ``text`` the admin password? By the admin KDF against the
    verifier, as ``admin init`` checks it: how a detector filter a daemon lends a foreground
    ``pcexec`` confirms a hit (``guard.adopt``), so the filter alone tests no guess faster
    than Argon2."""
    kdf, verifier = doc.get("kdf"), crypto.b64d(doc.get("verifier"))

    def confirm(text: str) -> bool:
        from .admin_crypto import derive

        try:
            text.encode("utf-8")
            got, _ = derive(text, kdf)
        except (UnicodeEncodeError, VaultError, ValueError):
            return False
        return _equal(got, verifier)

    return confirm


def drop_sealed_detector(paths: AdminPaths, host_key: bytes) -> None:
    """admin.json without the leak detector an older release sealed in it under the host
    key (a test of guesses at hash speed for whoever holds the host key: vault/guard.py);
    everything else as it was. Under the admin lock, waiting at most a second."""
    from .files import FileLock

    with FileLock(paths.lock_file, exclusive=True, timeout=1.0):
        doc = load_admin(paths, host_key)
        if "detector" not in doc:
            return
        body = {k: v for k, v in doc.items() if k not in ("mac", "detector")}
        body["format"] = crypto.FORMAT
        atomic_write(paths.admin_file, crypto.seal_file(subkey(host_key, "admin-mac"),
                                                        crypto.canonical(body), b"admin.json"))
    log_security(paths, "INFO", "admin-detector-removed",
                 message="the leak detector sealed in admin.json by an older release was "
                         "removed; the admin-password guard waits for a human: "
                         "pass_mgr admin guard")


def build_admin(settings: Any, password: str, host_key: bytes,
                keypair: tuple[bytes, bytes] | None = None) -> tuple[bytes, bytes]:
    """(admin.json bytes, admin public key) for ``password``; a new key pair unless given."""
    from .admin_crypto import derive, new_admin_keypair, new_kdf_params

    kdf = new_kdf_params(settings)
    verifier, kek = derive(password, kdf)
    private, public = keypair or new_admin_keypair()
    body = {
        "format": crypto.FORMAT,
        "created": now_iso(),
        "kdf": kdf,
        "verifier": crypto.b64e(verifier),
        "admin_public": crypto.b64e(public),
        "admin_private": crypto.seal(kek, private, crypto.aad("admin-private")),
    }
    return crypto.seal_file(subkey(host_key, "admin-mac"), crypto.canonical(body),
                            b"admin.json"), public


def write_locked(paths: AdminPaths, source: str) -> None:
    """The leak lock, MACed under the host key. Without a readable host key nothing
    could vouch for it, and ``get`` is refused (exit 6) by that missing key already:
    the unsigned file written then reads as tampering once the key is back."""
    ensure_private_dir(paths.vault_dir)
    body = {"time": now_iso(), "source": source}
    try:
        data = crypto.sign_document(subkey(read_host_key(paths), "admin-mac"), body,
                                    b"locked.json")
    except VaultError:
        data = crypto.canonical(body)
    atomic_write(paths.locked_file, data)


def lock_is_authentic(paths: AdminPaths, host_key: bytes) -> bool:
    """True when locked.json was written by the vault (its MAC verifies): only then is
    the vault locked after a leak and ``admin init`` treats the old password as burnt."""
    try:
        raw = read_private(paths.locked_file)
        doc = crypto.parse_canonical(raw, "locked.json")
        crypto.verify_document(subkey(host_key, "admin-mac"), doc, b"locked.json", "locked.json")
    except (OSError, VaultError):
        return False
    return True


def clear_locked(paths: AdminPaths) -> None:
    try:
        os.unlink(paths.locked_file)
    except FileNotFoundError:
        return


def register_store(paths: AdminPaths, store_dir: str | Path, agent_id: str | None = None,
                   workspace: str | None = None) -> None:
    """Remember a store so that ``admin init`` can re-wrap it later, and whose workspace it
    is, so that a daemon masks its values in every session that can read that workspace
    (idempotent; an entry from before workspaces were kept gains one)."""
    import hashlib
    import json

    text = str(store_dir)
    entry = os.path.join(paths.registry_dir, hashlib.sha256(text.encode()).hexdigest()[:32])
    record = text if workspace is None else json.dumps(
        {"directory": text, "agentId": agent_id, "workspace": workspace}, sort_keys=True)
    try:
        current: str | None = read_private(entry).decode("utf-8")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError, VaultError):
        return  # an entry read_private refuses is reported where stores are re-wrapped
    if current is not None and (current == record or workspace is None):
        return
    ensure_private_dir(paths.registry_dir)
    atomic_write(entry, record.encode("utf-8"))


def store_records(paths: AdminPaths) -> list[tuple[Path, str | None, str | None]]:
    """(store directory, agent id, workspace) of every registered store; the last two are
    None for entries written before workspaces were kept."""
    import json
    from pathlib import Path

    try:
        names = sorted(os.listdir(paths.registry_dir))
    except FileNotFoundError:
        return []
    records = []
    for name in names:
        if name.startswith("."):
            continue
        try:
            text = read_private(os.path.join(paths.registry_dir, name)).decode("utf-8")
        except (OSError, UnicodeDecodeError, VaultError):
            continue
        if not text.startswith("{"):
            records.append((Path(text), None, None))
            continue
        try:
            record = json.loads(text)
            records.append((Path(record["directory"]), record.get("agentId"),
                            record.get("workspace")))
        except (ValueError, KeyError, TypeError):
            continue
    return records


def known_stores(paths: AdminPaths) -> list[Path]:
    return [directory for directory, _agent, _workspace in store_records(paths)]


def generation_file(paths: AdminPaths, store_id: str) -> str:
    return os.path.join(paths.generations_dir, store_id)


def seen_generation(paths: AdminPaths, store_id: str) -> int:
    """The highest generation of this store seen on this host (0: never seen)."""
    try:
        raw = read_private(generation_file(paths, store_id))
    except FileNotFoundError:
        return 0
    text = raw.decode("ascii", "replace").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise IntegrityError(f"{generation_file(paths, store_id)} is corrupt; a human can remove "
                             "it to accept the store as it is")
    return int(text)


def record_generation(paths: AdminPaths, store_id: str, generation: int) -> None:
    """Remember ``generation`` for the store unless a higher one is recorded."""
    if generation <= seen_generation(paths, store_id):
        return
    ensure_private_dir(paths.generations_dir)
    atomic_write(generation_file(paths, store_id), str(generation).encode("ascii"))


def check_generation(paths: AdminPaths, store_id: str, generation: int, what: str) -> int:
    """Refuse a store older than the newest this host has seen (it was rolled back);
    returns the generation recorded."""
    seen = seen_generation(paths, store_id)
    if generation < seen:
        raise IntegrityError(
            f"{what} is older (generation {generation}) than the newest copy this host saw "
            f"(generation {seen}): it was rolled back; put the newest copy back, or accept "
            f"this one with: rm {generation_file(paths, store_id)}")
    return seen


def log_security(paths: AdminPaths, level: str, event: str, **fields: Any) -> None:
    """Append one JSON line to security.log (0600, O_APPEND, one write)."""
    import json

    ensure_private_dir(paths.home)
    line = json.dumps({"time": now_iso(), "level": level, "event": event, **fields},
                      ensure_ascii=False) + "\n"
    fd = os.open(paths.security_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
