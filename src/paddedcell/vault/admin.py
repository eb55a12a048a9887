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
``get`` stays cheap; only a present lock file is read and its MAC checked. Paths are
strings (``os.path``): ``pathlib`` and ``json`` would cost every ``get`` milliseconds of
imports. The read side (paths, status, host key, generations) lives in :mod:`.read`, which
``get`` imports without this module; it is re-exported here.
"""

from __future__ import annotations

import os
import time

from . import crypto
from .errors import NotInitialized, VaultError
from .files import atomic_write, ensure_private_dir, read_private
# The read side (what `pass_mgr get` needs) lives in .read; re-exported here for writers.
from .read import (HOST_KEY_BYTES, AdminPaths, check_generation, generation_file, host_key_check,
                   lock_is_authentic, read_host_key, record_generation, require_ready,
                   seen_generation, status, subkey)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


def create_host_key(paths: AdminPaths) -> bytes:
    ensure_private_dir(paths.keys_dir)
    key = os.urandom(HOST_KEY_BYTES)
    atomic_write(paths.host_key, key + host_key_check(key))
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
