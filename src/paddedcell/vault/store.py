"""One agent's store: a single JSON file of sealed entries with per-key history.

File ``<store dir>/store.json`` (0600): a header line ``paddedcell-vault/2 <tag>``
(GMAC under the host key's "admin-mac" subkey over the raw bytes that follow, checked
before they are parsed), then canonical JSON::

    {"format": 2, "agent_id", "store_id", "generation",
     "wrap_host":  box of the data key under a host-key subkey,
     "wrap_admin": box of the data key to the admin X25519 public key,
     "wrap_admin_next"?: the same to the key of an ``admin init`` in progress (see
                       api.init_admin: it becomes wrap_admin once admin.json is replaced),
     "entries": {KEY: {"next": N, "length"?, "symbols"?,
                       "bind"?: {"hosts": [...], "inject", "plain_http"} (egress/binding.py),
                       "versions": [{"v", "created", "nonce", "ct"}, ...newest first]}},
     "retired"?: [{"k": KEY, "v", "until": unix time, "nonce", "ct"}, ...],
     "mac": GMAC over the rest under the data key's MAC half}

``retired`` holds values that left the store (``unset``, or rotated out of the
history) until ``until`` (``vault.retired_mask_days`` later): they are probably
still valid upstream and in files the agent wrote, so output keeps masking them.
Sealed like entries, under their own associated data ("retired", key, version).

The data key is 64 random bytes: 32 for AES-256-GCM entries, 32 for the MAC.
Each entry's associated data binds format, agent id, store id, key name and
version, so a box moved to another key, version or agent fails to open; the
MAC catches deleted, added or reordered entries. ``generation`` grows by one
on every write, which gives concurrent writers a serial order to check.
"""

from __future__ import annotations

import os
import stat

from . import crypto
from .errors import IntegrityError, NoSuchKey, VaultError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STORE_FILE = "store.json"
#: What the format-2 header's tag covers besides the body (it is under a host subkey
#: that admin.json's tag uses too, with b"admin.json").
STORE_CONTEXT = b"store.json|"
LOCK_FILE = ".lock"
DATA_KEY_BYTES = 64

# Character sets, not regular expressions: `re` (and the `enum` it imports) would cost
# every `pass_mgr get` a few milliseconds of start-up.
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_AGENT_ID_FIRST = _ALNUM
_AGENT_ID_REST = _ALNUM | frozenset("._@+-")
_KEY_NAME_FIRST = _ALNUM | frozenset("_")
_KEY_NAME_REST = _ALNUM | frozenset("._:/@+-")
_HEX = frozenset("0123456789abcdef")


def _name_ok(text: str, first: frozenset[str], rest: frozenset[str]) -> bool:
    """``text`` is 1-128 characters, the first from ``first``, the others from ``rest``."""
    return 0 < len(text) <= 128 and text[0] in first and rest.issuperset(text[1:])


def check_agent_id(agent_id: str) -> str:
    if not isinstance(agent_id, str) or not _name_ok(agent_id, _AGENT_ID_FIRST, _AGENT_ID_REST):
        raise VaultError(f"invalid AGENT_ID {agent_id!r}: use letters, digits and . _ @ + - "
                         "(at most 128, not starting with a dot or dash)")
    return agent_id


def check_key_name(key: str, *, show: bool = True) -> str:
    """``key`` when it is a valid key name; ``show=False`` keeps it out of the error
    (``set`` with its arguments swapped would print the secret value)."""
    if not isinstance(key, str) or not _name_ok(key, _KEY_NAME_FIRST, _KEY_NAME_REST) \
            or ".." in key.split("/"):
        named = f" {key!r}" if show else " (not shown: check the argument order)"
        raise VaultError(f"invalid key name{named}: use letters, digits and . _ : / @ + - "
                         "(at most 128 characters)")
    return key


class StoreRef:
    """An agent's store directory, its data file and its lock sentinel, as path strings
    (``pathlib`` would cost every ``pass_mgr get`` a few milliseconds of imports)."""

    __slots__ = ("agent_id", "directory")

    def __init__(self, agent_id: str, directory: str):
        self.agent_id = agent_id
        self.directory = directory

    @property
    def file(self) -> str:
        return os.path.join(self.directory, STORE_FILE)

    @property
    def lock(self) -> str:
        return os.path.join(self.directory, LOCK_FILE)


def locate(path_template: str, agent_id: str, workspace: str) -> StoreRef:
    """Where ``agent_id``'s store lives; the workspace must be an absolute path."""
    check_agent_id(agent_id)
    if not workspace or not os.path.isabs(workspace):
        raise VaultError(f"AGENT_WORKSPACE must be an absolute path, not {workspace!r}")
    path = path_template.replace("{AGENT_WORKSPACE}", os.path.normpath(workspace))
    path = path.replace("{AGENT_ID}", agent_id)
    return StoreRef(agent_id, os.path.abspath(os.path.expanduser(path)))


def linked_below(workspace: str, directory: str, lstat=os.lstat) -> str | None:
    """The first symbolic link on the way from ``workspace`` (not included) down to
    ``directory``, or None (also where ``directory`` is not below ``workspace``, or a
    step does not exist yet). The agent owns its workspace: a ``.paddedcell`` it made a
    link to ``/etc`` would have the daemon, or a human's ``pass_mgr``, create and write
    the store there, as itself (issue 19: write where the agent cannot)."""
    workspace, directory = os.path.normpath(workspace), os.path.normpath(directory)
    if not directory.startswith(workspace.rstrip("/") + "/"):
        return None
    path = workspace
    for part in directory[len(workspace.rstrip("/")) + 1:].split("/"):
        path = os.path.join(path, part)
        try:
            if stat.S_ISLNK(lstat(path).st_mode):
                return path
        except FileNotFoundError:
            return None
    return None


def workspace_of(path_template: str, agent_id: str, directory: str) -> str | None:
    """The workspace ``locate`` maps to this store directory, or None where the template
    cannot say (a store registered before workspaces were kept, under a template that does
    not begin with the workspace)."""
    head, found, tail = path_template.partition("{AGENT_WORKSPACE}")
    suffix = tail.replace("{AGENT_ID}", agent_id)
    if not found or head or "{AGENT_WORKSPACE}" in tail or not directory.endswith(suffix):
        return None
    workspace = directory[:len(directory) - len(suffix)] or "/"
    try:
        if os.path.isabs(workspace) and locate(path_template, agent_id,
                                               workspace).directory == directory:
            return os.path.normpath(workspace)
    except VaultError:
        pass
    return None


class OpenStore:
    """A decrypted-on-demand view of a store; values are opened one at a time."""

    def __init__(self, agent_id: str, store_id: str, generation: int, data_key: bytes,
                 entries: dict[str, Any], wrap_admin: Any, retired: list[Any] | None = None):
        self.agent_id = agent_id
        self.store_id = store_id
        self.generation = generation
        self._data_key = data_key
        self.entries = entries
        self.wrap_admin = wrap_admin  # kept as is while the data key is unchanged
        self.wrap_admin_next: Any = None
        self.retired = retired if retired is not None else []

    # -- reading ---------------------------------------------------------------

    @classmethod
    def new(cls, agent_id: str) -> "OpenStore":
        return cls(agent_id, os.urandom(16).hex(), 0, os.urandom(DATA_KEY_BYTES), {}, None)

    @classmethod
    def load(cls, raw: bytes, agent_id: str, what: str, *, host_wrap_key: bytes | None = None,
             host_mac_key: bytes | None = None,
             admin_private: bytes | None = None) -> "OpenStore":
        """Open through the host wrap, or through the admin wrap when recovering.

        Format 2: with ``host_mac_key`` the header's tag is checked over the raw bytes
        before anything is parsed; then, as in format 1, the data key's MAC inside (the
        only check left when recovering without the host key)."""
        tag_text, body = crypto.split_file(raw, what)
        if tag_text is not None and host_mac_key is not None:
            crypto.verify_tag(host_mac_key, STORE_CONTEXT + body, tag_text, what)
        doc = crypto.parse_canonical(body, what)
        if doc.get("format") != (1 if tag_text is None else crypto.FORMAT):
            raise crypto.damaged(what)
        if doc.get("agent_id") != agent_id:
            raise crypto.damaged(what)
        store_id = doc.get("store_id")
        if not isinstance(store_id, str) or len(store_id) != 32 or not _HEX.issuperset(store_id):
            raise crypto.damaged(what)
        if admin_private is not None:
            from .admin_crypto import unwrap_as_admin

            # Either wrap may be to this key while an interrupted admin init is pending.
            boxes = [box for box in (doc.get("wrap_admin_next"), doc.get("wrap_admin"))
                     if box is not None] or [None]
            for index, box in enumerate(boxes):
                try:
                    data_key = unwrap_as_admin(admin_private, box,
                                               crypto.aad("wrap-admin", agent_id, store_id), what)
                    break
                except IntegrityError:
                    if index == len(boxes) - 1:
                        raise
        else:
            data_key = crypto.unseal(host_wrap_key, doc.get("wrap_host"),
                                     crypto.aad("wrap-host", agent_id, store_id), what)
        if len(data_key) != DATA_KEY_BYTES:
            raise crypto.damaged(what)
        crypto.verify_document(data_key[32:], doc, crypto.aad("store", agent_id, store_id), what)
        generation, entries = doc.get("generation"), doc.get("entries")
        retired = doc.get("retired", [])
        if not isinstance(generation, int) or not isinstance(entries, dict) \
                or not isinstance(retired, list) or not all(isinstance(r, dict) for r in retired):
            raise crypto.damaged(what)
        store = cls(agent_id, store_id, generation, data_key, entries, doc.get("wrap_admin"),
                    retired)
        store.wrap_admin_next = doc.get("wrap_admin_next")
        return store

    def _entry(self, key: str) -> dict[str, Any]:
        entry = self.entries.get(key)
        if entry is None:
            raise NoSuchKey(f"no secret named {key!r} for agent {self.agent_id}; "
                            "pass_mgr list shows the keys")
        if not isinstance(entry, dict) or not isinstance(entry.get("versions"), list) \
                or not entry["versions"]:
            raise crypto.damaged(f"the entry {key!r}")
        return entry

    def _open(self, key: str, version: dict[str, Any]) -> str:
        associated = crypto.aad("entry", self.agent_id, self.store_id, key, version.get("v"))
        plain = crypto.unseal(self._data_key[:32], version, associated, f"secret {key!r}")
        return plain.decode("utf-8")

    def value(self, key: str, version: int | None = None) -> str:
        entry = self._entry(key)
        if version is None:
            return self._open(key, entry["versions"][0])
        for item in entry["versions"]:
            if item.get("v") == version:
                return self._open(key, item)
        kept = ", ".join(str(item.get("v")) for item in entry["versions"])
        raise NoSuchKey(f"{key!r} has no version {version}; kept versions: {kept} "
                        "(pass_mgr history shows them)")

    def all_values(self, now: float | None = None) -> list[str]:
        """Every kept value, and every retired one still within its masking period."""
        current = [self._open(key, item) for key in sorted(self.entries)
                   for item in self._entry(key)["versions"]]
        return current + [self._open_retired(item) for item in self._live_retired(now)]

    def _live_retired(self, now: float | None = None) -> list[dict[str, Any]]:
        import time

        moment = time.time() if now is None else now
        return [item for item in self.retired
                if isinstance(item.get("until"), int) and item["until"] > moment]

    def _open_retired(self, item: dict[str, Any]) -> str:
        associated = crypto.aad("retired", self.agent_id, self.store_id, item.get("k"),
                                item.get("v"))
        return crypto.unseal(self._data_key[:32], item, associated,
                             "a retired secret").decode("utf-8")

    def _seal_retired(self, key: str, version: Any, value: str, until: int) -> dict[str, Any]:
        associated = crypto.aad("retired", self.agent_id, self.store_id, key, version)
        return {"k": key, "v": version, "until": int(until),
                **crypto.seal(self._data_key[:32], value.encode("utf-8"), associated)}

    def retire(self, key: str, versions: list[dict[str, Any]], until: int | None) -> None:
        """Keep ``versions`` of ``key`` (leaving the store) masked until ``until``."""
        if until is None:
            return
        for item in versions:
            self.retired.append(self._seal_retired(key, item.get("v"), self._open(key, item),
                                                   until))

    def history(self, key: str) -> list[tuple[int, str]]:
        """(version, created) newest first, without values."""
        return [(item.get("v"), item.get("created")) for item in self._entry(key)["versions"]]

    def keys(self) -> list[str]:
        return sorted(self.entries)

    def binding(self, key: str) -> dict[str, Any] | None:
        """The stored binding record of ``key`` (hosts the value may travel to), or None."""
        record = self._entry(key).get("bind")
        return record if isinstance(record, dict) else None

    def bindings(self) -> dict[str, dict[str, Any]]:
        """Every bound key's binding record."""
        return {key: entry["bind"] for key, entry in sorted(self.entries.items())
                if isinstance(entry, dict) and isinstance(entry.get("bind"), dict)}

    def set_binding(self, key: str, record: dict[str, Any] | None) -> None:
        """Bind ``key`` (None: unbind). The record lives in the entry, so it is covered by
        the store's MAC and kept by ``put`` (rotate, generate --force, set)."""
        entry = self._entry(key)
        if record is None:
            entry.pop("bind", None)
        else:
            entry["bind"] = dict(record)

    # -- changing ----------------------------------------------------------------

    def put(self, key: str, value: str, *, depth: int, created: str,
            meta: dict[str, Any] | None = None, retire_until: int | None = None) -> int:
        """Add ``value`` as the key's newest version, keeping ``depth`` versions (those
        pushed out stay masked until ``retire_until``); returns the new version."""
        entry = self.entries.get(key) or {"next": 1, "versions": []}
        version = int(entry["next"])
        box = crypto.seal(self._data_key[:32], value.encode("utf-8"),
                          crypto.aad("entry", self.agent_id, self.store_id, key, version))
        versions = [{"v": version, "created": created, **box}, *entry["versions"]]
        new_entry = {k: v for k, v in entry.items() if k not in ("length", "symbols")}
        new_entry.update(meta or {})
        new_entry["next"] = version + 1
        new_entry["versions"] = versions[:max(1, depth)]
        self.retire(key, versions[max(1, depth):], retire_until)
        self.entries[key] = new_entry
        return version

    def remove(self, key: str, *, retire_until: int | None = None) -> None:
        """Delete ``key``; its values stay masked until ``retire_until``."""
        self.retire(key, self._entry(key)["versions"], retire_until)
        del self.entries[key]

    def rekey(self) -> None:
        """Re-encrypt every version of every key under a fresh data key."""
        old_key = self._data_key
        plain = {key: [(item, self._open(key, item)) for item in self._entry(key)["versions"]]
                 for key in self.entries}
        retired = [(item, self._open_retired(item)) for item in self._live_retired()]
        self._data_key = os.urandom(DATA_KEY_BYTES)
        self.retired = [self._seal_retired(item["k"], item["v"], value, item["until"])
                        for item, value in retired]
        self.wrap_admin = self.wrap_admin_next = None
        for key, items in plain.items():
            self.entries[key]["versions"] = [
                {"v": item["v"], "created": item.get("created"),
                 **crypto.seal(self._data_key[:32], value.encode("utf-8"),
                               crypto.aad("entry", self.agent_id, self.store_id, key, item["v"]))}
                for item, value in items]
        del old_key

    def rewrap_admin(self, admin_public: bytes, *, slot: str = "wrap_admin") -> None:
        """Wrap the data key to ``admin_public`` in ``slot`` (wrap_admin or wrap_admin_next)."""
        from .admin_crypto import wrap_to_admin

        if slot not in ("wrap_admin", "wrap_admin_next"):
            raise ValueError(slot)
        setattr(self, slot, wrap_to_admin(admin_public, self._data_key,
                                          crypto.aad("wrap-admin", self.agent_id, self.store_id)))

    def serialize(self, host_wrap_key: bytes, host_mac_key: bytes) -> bytes:
        if self.wrap_admin is None:
            raise VaultError("internal: the admin wrap is missing; call rewrap_admin first")
        self.generation += 1
        body = {
            "format": crypto.FORMAT,
            "agent_id": self.agent_id,
            "store_id": self.store_id,
            "generation": self.generation,
            "wrap_host": crypto.seal(host_wrap_key, self._data_key,
                                     crypto.aad("wrap-host", self.agent_id, self.store_id)),
            "wrap_admin": self.wrap_admin,
            "entries": self.entries,
        }
        if self.wrap_admin_next is not None:
            body["wrap_admin_next"] = self.wrap_admin_next
        self.retired = self._live_retired()  # expired ones are dropped at the next write
        if self.retired:
            body["retired"] = self.retired
        inner = crypto.sign_document(self._data_key[32:], body,
                                     crypto.aad("store", self.agent_id, self.store_id))
        return crypto.seal_file(host_mac_key, inner, STORE_CONTEXT)
