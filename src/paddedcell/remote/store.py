"""Configured remotes in ``PADDEDCELL_HOME/remote.db``: SQLite (stdlib), WAL, a schema
version with migrations, and no secret in clear.

What is stored where:

- ``remotes``: name, URL, auth kind, ``allow_insecure``, the device's *public* id
  and key, the last connection state (for ``remote list``), the pairing request
  id, the remembered chat session key. Nothing here is secret.
- ``remote_secrets``: the shared gateway token or password, the device's Ed25519
  private key and every device token the gateway issued, each an AES-256-GCM box
  (:func:`paddedcell.vault.crypto.seal`) under the host key's wrap subkey, with
  associated data naming the remote and the secret's kind, so a box copied onto
  another row or kind does not open. The host key is the vault's
  (``PADDEDCELL_HOME/keys/host.key``), created here under the vault's admin lock
  when the vault has none yet; ``pass_mgr admin init`` keeps an existing one.

``PRAGMA secure_delete`` overwrites deleted content, so a token replaced or
migrated out of an older schema does not linger in free pages; the WAL is
checkpointed and truncated after such writes for the same reason.

Schema versions (``PRAGMA user_version``): 1 is the seed's layout (one
``remote_agents`` table with ``auth_token``, ``device_private_key`` and
``device_token`` in clear); 2 is this one. Opening a version-1 file migrates it
in one transaction and then scrubs the clear values from the file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Iterator, NamedTuple

from .errors import RemoteError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .identity import DeviceIdentity

# The vault and cryptography are imported where a secret is sealed or opened, not here:
# ``remote list`` reads no secret, and importing them costs it most of its start-up.

SCHEMA_VERSION = 2
AUTH_TYPES = ("none", "token", "password")
STATUSES = ("unknown", "connected", "pending", "error")
#: Secret kinds (``remote_secrets.kind``).
SHARED_TOKEN, PASSWORD, DEVICE_KEY, DEVICE_TOKEN = "auth-token", "auth-password", "device-key", "device-token"

_SCHEMA_V2 = """
CREATE TABLE remotes (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    protocol TEXT NOT NULL DEFAULT 'openclaw',
    url TEXT NOT NULL,
    auth_type TEXT NOT NULL DEFAULT 'none',
    allow_insecure INTEGER NOT NULL DEFAULT 0,
    avatar TEXT,
    description TEXT,
    device_id TEXT NOT NULL,
    device_public_key TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'unknown',
    status_detail TEXT,
    pairing_request_id TEXT,
    server_version TEXT,
    protocol_version INTEGER,
    session_key TEXT,
    last_connected_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE remote_secrets (
    remote_id TEXT NOT NULL REFERENCES remotes(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT '',
    box TEXT NOT NULL,
    scopes TEXT,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (remote_id, kind, role)
);
"""

#: The seed's table (schema 1), kept to test the migration and to read old files.
SCHEMA_V1 = """
CREATE TABLE remote_agents (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, protocol TEXT NOT NULL, url TEXT NOT NULL,
    auth_type TEXT NOT NULL DEFAULT 'none', auth_token TEXT, avatar TEXT, description TEXT,
    allow_insecure INTEGER NOT NULL DEFAULT 0, device_id TEXT, device_public_key TEXT,
    device_private_key TEXT, device_token TEXT, status TEXT, last_connected_at INTEGER,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
);
"""


class Remote(NamedTuple):
    """One configured remote, without its secrets. (A NamedTuple, not a dataclass: making
    a dataclass at import was a tenth of ``remote list``'s start-up.)"""

    id: str
    name: str
    url: str
    auth_type: str
    allow_insecure: bool
    device_id: str
    device_public_key: str
    status: str = "unknown"
    status_detail: str | None = None
    pairing_request_id: str | None = None
    server_version: str | None = None
    protocol_version: int | None = None
    session_key: str | None = None
    last_connected_at: int | None = None
    protocol: str = "openclaw"
    avatar: str | None = None
    description: str | None = None
    created_at: int = 0
    updated_at: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "statusDetail": self.status_detail,
                "protocol": self.protocol, "url": self.url, "auth": self.auth_type,
                "allowInsecure": self.allow_insecure, "deviceId": self.device_id,
                "pairingRequestId": self.pairing_request_id, "serverVersion": self.server_version,
                "protocolVersion": self.protocol_version, "sessionKey": self.session_key,
                "lastConnectedAt": self.last_connected_at}


class Secrets:
    """A remote's secrets in clear, for one connect; ``repr`` shows none of them."""

    __slots__ = ("identity", "shared_token", "password", "device_token")

    def __init__(self, identity: DeviceIdentity, shared_token: str | None = None,
                 password: str | None = None, device_token: str | None = None):
        self.identity = identity
        self.shared_token = shared_token
        self.password = password
        self.device_token = device_token

    def __repr__(self) -> str:
        return "Secrets(...)"


#: Remote's fields, in order: rows selected as these make a Remote positionally.
_COLUMNS = ("id", "name", "url", "auth_type", "allow_insecure", "device_id", "device_public_key",
            "status", "status_detail", "pairing_request_id", "server_version", "protocol_version",
            "session_key", "last_connected_at", "protocol", "avatar", "description",
            "created_at", "updated_at")


def _now_ms() -> int:
    return int(time.time() * 1000)


class RemoteStore:
    """``remote.db`` under ``home``. Each method is one transaction; the connection is
    opened per store object (SQLite connections do not cross threads)."""

    def __init__(self, home: str | os.PathLike[str], *, lock_timeout: float = 30.0):
        self.home = os.fspath(home)
        self.path = os.path.join(self.home, "remote.db")
        self.lock_timeout = lock_timeout
        self._host_key: bytes | None = None
        _ensure_private_home(self.home)
        old = os.umask(0o077)
        try:
            self.db = sqlite3.connect(self.path, timeout=lock_timeout, isolation_level=None)
        finally:
            os.umask(old)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a crash cannot corrupt the file; a power cut may lose the last
        # state update, which the next connect rewrites. Spares an fsync per connect.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA secure_delete=ON")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ----------------------------------------------------------------------

    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        version = self.schema_version()
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise RemoteError(f"{self.path} has schema {version}, newer than this PaddedCell "
                              f"({SCHEMA_VERSION}); update PaddedCell")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self.schema_version()  # another process may have migrated meanwhile
            scrub = False
            if version == 0:
                if self._has_table("remote_agents"):  # a seed database without a version
                    version = 1
                else:
                    self._create_v2()
                    version = SCHEMA_VERSION
            if version == 1:
                self._migrate_1_to_2()
                version, scrub = 2, True
            self.db.execute(f"PRAGMA user_version={version}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        if scrub:
            self._scrub()

    def _create_v2(self) -> None:
        # Not executescript: it commits first, and this must stay in the migration's transaction.
        for statement in _SCHEMA_V2.split(";"):
            if statement.strip():
                self.db.execute(statement)

    def _has_table(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                               (name,)).fetchone() is not None

    def _migrate_1_to_2(self) -> None:
        """The seed's rows, their clear secrets sealed; the old table dropped."""
        from .identity import DeviceIdentity

        self._create_v2()
        rows = self.db.execute("SELECT * FROM remote_agents").fetchall()
        now = _now_ms()
        for row in rows:
            row = dict(row)
            seed = _seed_from_text(row.get("device_private_key"))
            identity = DeviceIdentity.from_seed(seed) if seed else DeviceIdentity.generate()
            name = self._unique_name(row["name"] or row["id"])
            status = row["status"] if row["status"] in STATUSES else "unknown"
            auth = row["auth_type"] if row["auth_type"] in AUTH_TYPES else \
                ("token" if row["auth_type"] == "bearer" else "none")
            self.db.execute(
                "INSERT INTO remotes (id, name, protocol, url, auth_type, allow_insecure, avatar, "
                "description, device_id, device_public_key, status, last_connected_at, created_at, "
                "updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (row["id"], name, row["protocol"] or "openclaw", row["url"], auth,
                 int(bool(row["allow_insecure"])), row["avatar"], row["description"],
                 identity.device_id, identity.public_key, status, row["last_connected_at"],
                 row["created_at"] or now, now))
            self._put_secret(row["id"], DEVICE_KEY, identity.seed().hex())
            if row.get("auth_token"):
                self._put_secret(row["id"], PASSWORD if auth == "password" else SHARED_TOKEN,
                                 row["auth_token"])
            if row.get("device_token"):
                self._put_secret(row["id"], DEVICE_TOKEN, row["device_token"], role="operator")
        self.db.execute("DROP TABLE remote_agents")

    def _unique_name(self, name: str) -> str:
        candidate, n = name, 2
        while self.db.execute("SELECT 1 FROM remotes WHERE name=?", (candidate,)).fetchone():
            candidate, n = f"{name}-{n}", n + 1
        return candidate

    def _scrub(self) -> None:
        """No clear value left in free pages or the WAL after a migration or removal."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.execute("VACUUM")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- sealing ---------------------------------------------------------------------

    def _key(self) -> bytes:
        from ..vault import admin
        from ..vault.errors import IntegrityError
        from ..vault.files import FileLock, ensure_private_dir

        if self._host_key is None:
            paths = admin.AdminPaths(self.home)
            if not os.path.lexists(paths.host_key):
                ensure_private_dir(paths.vault_dir)
                with FileLock(paths.lock_file, exclusive=True, timeout=self.lock_timeout):
                    if not os.path.lexists(paths.host_key):
                        admin.create_host_key(paths)
            try:
                self._host_key = admin.read_host_key(paths)
            except IntegrityError as exc:
                raise RemoteError(str(exc)) from None
        return admin.subkey(self._host_key, "wrap")

    def _put_secret(self, remote_id: str, kind: str, value: str, *, role: str = "",
                    scopes: tuple[str, ...] | None = None) -> None:
        import json

        from ..vault import crypto

        box = crypto.seal(self._key(), value.encode("utf-8"), crypto.aad("remote", remote_id, kind, role))
        self.db.execute(
            "INSERT INTO remote_secrets (remote_id, kind, role, box, scopes, updated_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(remote_id, kind, role) DO UPDATE SET "
            "box=excluded.box, scopes=excluded.scopes, updated_at=excluded.updated_at",
            (remote_id, kind, role, json.dumps(box, sort_keys=True),
             ",".join(scopes) if scopes is not None else None, _now_ms()))

    def _get_secret(self, remote_id: str, kind: str, role: str = "") -> str | None:
        import json

        from ..vault import crypto
        from ..vault.errors import IntegrityError

        row = self.db.execute("SELECT box FROM remote_secrets WHERE remote_id=? AND kind=? AND role=?",
                              (remote_id, kind, role)).fetchone()
        if row is None:
            return None
        try:
            box = json.loads(row["box"])
        except ValueError:
            raise RemoteError(crypto.damaged(f"{self.path} ({kind})").message) from None
        try:
            return crypto.unseal(self._key(), box, crypto.aad("remote", remote_id, kind, role),
                                 f"{self.path} ({kind})").decode("utf-8")
        except IntegrityError as exc:
            raise RemoteError(str(exc)) from None

    # -- remotes ---------------------------------------------------------------------

    def list(self) -> list[Remote]:
        rows = self.db.execute(f"SELECT {', '.join(_COLUMNS)} FROM remotes ORDER BY name").fetchall()
        return [_remote(row) for row in rows]

    def find(self, name: str) -> Remote | None:
        row = self.db.execute(f"SELECT {', '.join(_COLUMNS)} FROM remotes WHERE name=?",
                              (name,)).fetchone()
        return _remote(row) if row else None

    def get(self, name: str) -> Remote:
        remote = self.find(name)
        if remote is None:
            raise RemoteError(f"no remote named {name!r}; see: paddedcell remote list")
        return remote

    def add(self, name: str, url: str, *, auth_type: str = "none", secret: str | None = None,
            allow_insecure: bool = False, description: str | None = None) -> Remote:
        _check_name(name)
        from .protocol import normalize_url

        url = normalize_url(url)
        _check_auth(auth_type, secret)
        from .identity import DeviceIdentity

        import uuid

        identity = DeviceIdentity.generate()
        remote_id, now = str(uuid.uuid4()), _now_ms()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if self.find(name) is not None:
                raise RemoteError(f"a remote named {name!r} exists; change it with: paddedcell remote edit {name}")
            self.db.execute(
                "INSERT INTO remotes (id, name, url, auth_type, allow_insecure, description, device_id, "
                "device_public_key, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (remote_id, name, url, auth_type, int(allow_insecure), description,
                 identity.device_id, identity.public_key, now, now))
            self._put_secret(remote_id, DEVICE_KEY, identity.seed().hex())
            if secret is not None:
                self._put_secret(remote_id, PASSWORD if auth_type == "password" else SHARED_TOKEN, secret)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return self.get(name)

    def edit(self, name: str, *, new_name: str | None = None, url: str | None = None,
             auth_type: str | None = None, secret: str | None = None,
             allow_insecure: bool | None = None, description: str | None = None) -> Remote:
        """Change what is given; a new URL or auth resets the state to unknown (the
        next connect re-checks it)."""
        remote = self.get(name)
        changes: dict[str, Any] = {}
        if new_name is not None and new_name != name:
            _check_name(new_name)
            if self.find(new_name) is not None:
                raise RemoteError(f"a remote named {new_name!r} exists")
            changes["name"] = new_name
        if url is not None:
            from .protocol import normalize_url

            changes["url"] = normalize_url(url)
        if auth_type is not None:
            _check_auth(auth_type, secret)
            changes["auth_type"] = auth_type
        elif secret is not None and remote.auth_type == "none":
            raise RemoteError("this remote has --auth none; give --auth token or --auth password with the secret")
        if allow_insecure is not None:
            changes["allow_insecure"] = int(allow_insecure)
        if description is not None:
            changes["description"] = description
        if "url" in changes or "auth_type" in changes or secret is not None:
            changes.update(status="unknown", status_detail=None)
        changes["updated_at"] = _now_ms()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            sets = ", ".join(f"{column}=?" for column in changes)
            self.db.execute(f"UPDATE remotes SET {sets} WHERE id=?", (*changes.values(), remote.id))
            kind_now = auth_type or remote.auth_type
            if auth_type is not None:
                self.db.execute("DELETE FROM remote_secrets WHERE remote_id=? AND kind IN (?, ?)",
                                (remote.id, SHARED_TOKEN, PASSWORD))
            if secret is not None:
                self._put_secret(remote.id, PASSWORD if kind_now == "password" else SHARED_TOKEN, secret)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        if auth_type is not None or secret is not None:
            self._scrub_wal()
        return self.get(changes.get("name", name))

    def remove(self, name: str) -> None:
        remote = self.get(name)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("DELETE FROM remote_secrets WHERE remote_id=?", (remote.id,))
            self.db.execute("DELETE FROM remotes WHERE id=?", (remote.id,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._scrub_wal()

    def _scrub_wal(self) -> None:
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError:
            pass  # a reader holds the WAL: the next checkpoint truncates it

    # -- secrets and state -----------------------------------------------------------

    def secrets(self, remote: Remote) -> Secrets:
        from ..vault import crypto
        from .identity import DeviceIdentity

        seed = self._get_secret(remote.id, DEVICE_KEY)
        if seed is None:
            raise RemoteError(f"the device key of {remote.name!r} is missing from {self.path}; "
                              f"re-create it: paddedcell remote remove {remote.name}, then add it again")
        identity = DeviceIdentity.from_seed(bytes.fromhex(seed))
        if identity.device_id != remote.device_id:
            raise RemoteError(crypto.damaged(f"{self.path} (device key of {remote.name})").message)
        return Secrets(identity,
                       shared_token=self._get_secret(remote.id, SHARED_TOKEN),
                       password=self._get_secret(remote.id, PASSWORD),
                       device_token=self._get_secret(remote.id, DEVICE_TOKEN, "operator"))

    def all_secret_values(self) -> list[str]:
        """Every token and password of every remote, for the terminal's redactor."""
        values = []
        for row in self.db.execute("SELECT remote_id, kind, role FROM remote_secrets WHERE kind != ?",
                                   (DEVICE_KEY,)).fetchall():
            value = self._get_secret(row["remote_id"], row["kind"], row["role"])
            if value:
                values.append(value)
        return values

    def save_device_token(self, remote: Remote, token: str, scopes: tuple[str, ...]) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._put_secret(remote.id, DEVICE_TOKEN, token, role="operator", scopes=scopes)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._scrub_wal()

    def forget_device_token(self, remote: Remote) -> None:
        self.db.execute("DELETE FROM remote_secrets WHERE remote_id=? AND kind=?", (remote.id, DEVICE_TOKEN))
        self._scrub_wal()

    def set_status(self, remote: Remote, status: str, detail: str | None = None, *,
                   request_id: str | None = None, server_version: str | None = None,
                   protocol_version: int | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        now = _now_ms()
        self.db.execute(
            "UPDATE remotes SET status=?, status_detail=?, pairing_request_id=?, "
            "server_version=COALESCE(?, server_version), protocol_version=COALESCE(?, protocol_version), "
            "last_connected_at=CASE WHEN ?='connected' THEN ? ELSE last_connected_at END, updated_at=? "
            "WHERE id=?",
            (status, detail, request_id, server_version, protocol_version, status, now, now, remote.id))

    def set_session_key(self, remote: Remote, key: str) -> None:
        self.db.execute("UPDATE remotes SET session_key=?, updated_at=? WHERE id=?", (key, _now_ms(), remote.id))

    def iter_names(self) -> Iterator[str]:
        for row in self.db.execute("SELECT name FROM remotes ORDER BY name"):
            yield row[0]


def _ensure_private_home(home: str) -> None:
    """The vault's check (0700, ours), skipped when a stat already shows it holds: the
    common case, and it spares ``remote list`` the vault's imports."""
    try:
        st = os.stat(home)
        if st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return
    except FileNotFoundError:
        pass
    from ..vault.files import ensure_private_dir

    ensure_private_dir(home)


def _remote(row: sqlite3.Row) -> Remote:
    """A row selected as ``_COLUMNS`` (the field order of :class:`Remote`)."""
    values = tuple(row)
    return Remote._make(values[:4] + (bool(values[4]),) + values[5:])


def _seed_from_text(text: str | None) -> bytes | None:
    """The seed's private key as stored in schema 1: PEM (PKCS8) or raw hex."""
    if not text:
        return None
    text = text.strip()
    if text.startswith("-----BEGIN"):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption, PrivateFormat,
                                                                  load_pem_private_key)
        key = load_pem_private_key(text.encode("ascii"), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            return None
        return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if len(raw) == 32 else None


def _check_name(name: str) -> None:
    if not name or len(name) > 64 or not all(ch.isalnum() or ch in "-_." for ch in name):
        raise RemoteError(f"bad remote name {name!r}: use 1-64 letters, digits, '-', '_' or '.'")


def _check_auth(auth_type: str, secret: str | None) -> None:
    if auth_type not in AUTH_TYPES:
        raise RemoteError(f"unknown --auth {auth_type!r}: use none, token or password")
    if auth_type != "none" and not secret:
        raise RemoteError(f"--auth {auth_type} needs the {auth_type}: type it at the prompt or pipe it on stdin")
    if auth_type == "none" and secret:
        raise RemoteError("--auth none takes no token")
