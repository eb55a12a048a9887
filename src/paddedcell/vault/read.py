"""Reading a store: everything ``pass_mgr get`` needs, and nothing only a writer does.

Agents run ``pass_mgr get`` many times a command, and a fresh interpreter pays for every
module it loads (finding it, reading it, unmarshalling it): ``api`` and ``admin`` are
mostly writers (``set``, ``init``, ``recover``, the guard) and cost a ``get`` about a
millisecond. So the read side lives here, once: the admin paths and states
(``admin.status``), the host key, the rollback record of store generations, and
opening an agent's store. ``admin`` and ``api`` re-export these names and build on them;
this module imports only ``crypto``, ``files``, ``store``, ``settings`` and ``errors``.
The home's layout: :mod:`.admin`.
"""

from __future__ import annotations

import os

from ..config_base import path_text
from . import crypto
from .errors import IntegrityError, Locked, NoSuchKey, NotInitialized, VaultError
from .files import FileLock, atomic_write, check_private, ensure_private_dir, read_private
from .settings import VaultSettings
from .store import OpenStore, StoreRef, check_key_name, linked_below, locate

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


def load_settings(settings: Any) -> Any:
    """``settings``, or ``config.load()`` when None."""
    if settings is None:
        from .. import config

        return config.load()
    return settings


class AdminPaths:
    """Where the admin state lives under ``home`` (a plain class: ``dataclasses``
    costs ``pass_mgr get`` several milliseconds of imports)."""

    __slots__ = ("home",)

    def __init__(self, home: str | Path):
        self.home = path_text(os.fspath(home))

    @classmethod
    def of(cls, settings: Any) -> "AdminPaths":
        """The admin paths from the settings' home as text (never building a pathlib.Path)."""
        return cls(getattr(settings, "home_text", None) or settings.home)

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


# -- the admin state -------------------------------------------------------------------


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


def subkey(host_key: bytes, purpose: str) -> bytes:
    """The host key's independent key for ``purpose`` (random, not derived: no KDF on `get`)."""
    index = _HOST_SUBKEYS[purpose]
    return host_key[32 * index:32 * (index + 1)]


def host_key_check(key: bytes) -> bytes:
    """The CRC-32 that ends the host key file."""
    return crypto.crc32(key).to_bytes(_CRC_BYTES, "big")


def read_host_key(paths: AdminPaths) -> bytes:
    try:
        raw = read_private(paths.host_key)
    except FileNotFoundError:
        raise IntegrityError(f"the host key {paths.host_key} is missing; restore it from a backup, "
                             "or have a human run: pass_mgr admin recover") from None
    key, check = raw[:HOST_KEY_BYTES], raw[HOST_KEY_BYTES:]
    if len(raw) != HOST_KEY_BYTES + _CRC_BYTES or host_key_check(key) != check:
        raise IntegrityError(f"the host key {paths.host_key} is corrupt; restore it from a backup, "
                             "or have a human run: pass_mgr admin recover")
    return key


# -- store generations: a rolled-back store is refused -----------------------------------


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


# -- an agent's store ---------------------------------------------------------------------


def store_ref(settings: Any, agent_id: str, workspace: str) -> StoreRef:
    return locate(VaultSettings.of(settings).path_template, agent_id, workspace)


def no_store(agent_id: str, key: str) -> NoSuchKey:
    return NoSuchKey(f"no secret named {key!r} for agent {agent_id}; pass_mgr list shows the keys")


def read_store(settings: Any, agent_id: str, workspace: str) -> OpenStore | None:
    """The agent's store, opened and checked under its shared lock; None when it has none."""
    paths = AdminPaths.of(settings)
    require_ready(paths)
    ref = store_ref(settings, agent_id, workspace)
    if linked_below(workspace, ref.directory) is not None:
        return None  # not this workspace's store: where the agent's link points
    try:
        check_private(ref.directory)
    except FileNotFoundError:
        return None
    if not os.path.lexists(ref.file):
        return None
    host = read_host_key(paths)
    # The generation is checked under the shared lock too: a writer records the new
    # generation after replacing the store, so a check after the lock is released could
    # see a newer record than the copy read, and call it rolled back.
    with FileLock(ref.lock, exclusive=False, timeout=VaultSettings.of(settings).lock_timeout):
        try:
            raw = read_private(ref.file)
        except FileNotFoundError:
            return None
        store = OpenStore.load(raw, agent_id, str(ref.file), host_wrap_key=subkey(host, "wrap"),
                               host_mac_key=subkey(host, "admin-mac"))
        seen = check_generation(paths, store.store_id, store.generation, str(ref.file))
    if seen < store.generation:  # first sight (a store from before the records): remember it
        try:
            record_generation(paths, store.store_id, store.generation)
        except OSError:
            pass  # a read-only home: the check still runs against what is recorded
    return store


def get_secret(agent_id: str, workspace: str, key: str, *, version: int | None = None,
               settings: Any = None) -> str:
    """The current value of ``key`` (or an older ``version`` still in its history)."""
    settings = load_settings(settings)
    check_key_name(key)
    store = read_store(settings, agent_id, workspace)
    if store is None:
        raise no_store(agent_id, key)
    return store.value(key, version)
