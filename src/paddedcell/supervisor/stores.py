"""Which stores' values a live session must mask, and noticing when they change.

A session masks the values of every store it could print: its agent's own, and those of
every other agent whose workspace its user can read (a value written to ``app.env`` there
is as printable as one of its own) — values that existed when it started as well as ones
set, generated or rotated later by anyone (docs/design.md §4.4). The stores are the
vault's registry (every store on this host) plus the places sessions and
``POST /vault/changed`` name. Each store's values are read once and again only when its
file's (inode, mtime, size) changes, so a session start costs one ``stat`` per store.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

log = logging.getLogger("paddedcell.supervisor")

#: A stamp no file has: the store's values were never read.
UNREAD = (-1, -1, -1)


@dataclass
class KnownStore:
    agent_id: str
    workspace: str
    stamp: tuple[int, int, int] | None = UNREAD
    values: list[str] = field(default_factory=list)


class StoreWatch:
    """The stores known to this supervisor, each with its values as last read."""

    def __init__(self, settings):
        self.settings = settings
        self.stores: dict[tuple[str, str], KnownStore] = {}
        self._registry_stamp: tuple[int, int] | None = None

    def learn(self, agent_id: str | None, workspace: str | None) -> KnownStore | None:
        if not agent_id or not workspace:
            return None
        key = (agent_id, os.path.normpath(workspace))
        if key not in self.stores:
            self.stores[key] = KnownStore(*key)
        return self.stores[key]

    def discover(self) -> None:
        """Learn every registered store (read again only when the registry changed)."""
        if not os.path.isdir(os.path.join(self.settings.home_text, "vault")):
            return  # no vault, no registry (and no crypto import for a plain run)
        from ..vault import admin
        from ..vault.api import store_places

        try:
            st = os.stat(admin.AdminPaths(self.settings.home_text).registry_dir)
            stamp = (st.st_ino, st.st_mtime_ns)
        except (OSError, AttributeError):
            stamp = None
        if stamp is None or stamp == self._registry_stamp:
            return
        try:
            places = store_places(self.settings)
        except Exception as exc:  # a damaged registry: the stores sessions name still count
            log.warning("could not list the vault's stores: %s", exc)
            return
        self._registry_stamp = stamp
        for agent_id, workspace in places:
            self.learn(agent_id, workspace)

    def stamp(self, store: KnownStore) -> tuple[int, int, int] | None:
        """(inode, mtime, size) of the store's file; None when it has none (yet)."""
        from ..vault.settings import VaultSettings
        from ..vault.store import locate

        try:
            st = os.stat(locate(VaultSettings.of(self.settings).path_template,
                                store.agent_id, store.workspace).file)
        except Exception:  # no file, or an agent id / workspace the vault refuses
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def changed(self) -> list[KnownStore]:
        """Stores whose file is not the one their values were read from."""
        return [s for s in self.stores.values() if self.stamp(s) != s.stamp]

    def read(self, store: KnownStore) -> list[str]:
        """Read the store's values again (blocking: file locks, decryption). On a vault
        error (locked, damaged) the values read before are kept and it is tried again."""
        from ..vault.api import agent_secret_values

        stamp = self.stamp(store)
        try:
            values = [] if stamp is None else agent_secret_values(
                store.agent_id, store.workspace, settings=self.settings)
        except Exception as exc:
            log.warning("could not read the store of agent %s: %s", store.agent_id, exc)
            return store.values
        store.stamp = stamp
        # Values that left the store stay masked in sessions that already mask them;
        # new sessions get what the store masks now (retired values included).
        store.values = values
        return values

    def readable_values(self, agent_id: str | None, can_read) -> list[str]:
        """Current values of every store of ``agent_id`` or whose workspace ``can_read``
        (a predicate on the workspace path); stores changed since their last read are
        read again first."""
        values: list[str] = []
        for store in list(self.stores.values()):
            if store.agent_id != agent_id and not can_read(store.workspace):
                continue
            if self.stamp(store) != store.stamp:
                self.read(store)
            values.extend(store.values)
        return values


__all__ = ["StoreWatch", "KnownStore"]
