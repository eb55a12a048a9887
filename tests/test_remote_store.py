"""remote.db: CRUD, WAL, schema migrations, and no secret in clear anywhere in the files."""

from __future__ import annotations

import os
import sqlite3

import pytest

from paddedcell.remote import store as store_module
from paddedcell.remote.identity import DeviceIdentity
from paddedcell.remote.protocol import RemoteError
from paddedcell.remote.store import RemoteStore

TOKEN = "shared-gateway-token-Zq81xK"
DEVICE_TOKEN = "issued-device-token-Pp44Lm"


def files_bytes(home) -> bytes:
    """Every byte of remote.db and its WAL/SHM, to scan for secrets."""
    data = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = os.path.join(home, "remote.db" + suffix)
        if os.path.exists(path):
            with open(path, "rb") as handle:
                data += handle.read()
    return data


def assert_absent(secret: str, data: bytes) -> None:
    import base64

    raw = secret.encode()
    for form in (raw, raw.hex().encode(), base64.b64encode(raw), secret.encode("utf-16-le")):
        assert form not in data, f"a secret form is in the database files: {form[:8]!r}…"


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return str(path)


def test_add_list_edit_remove(home):
    with RemoteStore(home) as store:
        assert store.list() == []
        added = store.add("gw1", " 10.0.0.5:18789 ", auth_type="token", secret=TOKEN)
        assert added.url == "ws://10.0.0.5:18789" and added.status == "unknown"
        store.add("alpha", "wss://a.example", allow_insecure=True)
        assert [r.name for r in store.list()] == ["alpha", "gw1"]
        with pytest.raises(RemoteError, match="exists"):
            store.add("gw1", "ws://x:1")
        with pytest.raises(RemoteError, match="Unsupported protocol: http:"):
            store.add("bad", "http://x")
        with pytest.raises(RemoteError, match="needs the token"):
            store.add("bad", "ws://x:1", auth_type="token")
        with pytest.raises(RemoteError, match="bad remote name"):
            store.add("a b", "ws://x:1")
        store.set_status(added, "connected", "ok", server_version="9", protocol_version=4)
        edited = store.edit("gw1", new_name="gw2", url="ws://10.0.0.6:1")
        assert edited.name == "gw2" and edited.url == "ws://10.0.0.6:1"
        assert edited.status == "unknown", "a new URL must be re-checked"
        assert store.secrets(edited).shared_token == TOKEN
        store.edit("gw2", auth_type="none")
        assert store.secrets(store.get("gw2")).shared_token is None
        store.remove("gw2")
        assert store.find("gw2") is None
        with pytest.raises(RemoteError, match="no remote named"):
            store.remove("gw2")
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.schema_version() == store_module.SCHEMA_VERSION
    assert oct(os.stat(os.path.join(home, "remote.db")).st_mode & 0o777) == "0o600"


def test_no_secret_in_clear_in_the_files(home):
    with RemoteStore(home) as store:
        remote = store.add("gw1", "ws://h:1", auth_type="token", secret=TOKEN)
        store.save_device_token(remote, DEVICE_TOKEN, ("operator.read",))
        secrets = store.secrets(remote)
        assert secrets.shared_token == TOKEN and secrets.device_token == DEVICE_TOKEN
        seed = secrets.identity.seed()
        assert secrets.identity.device_id == remote.device_id
        assert TOKEN not in repr(secrets) and DEVICE_TOKEN not in repr(secrets)
        assert sorted(store.all_secret_values()) == sorted([TOKEN, DEVICE_TOKEN])
        data = files_bytes(home)
    assert_absent(TOKEN, data)
    assert_absent(DEVICE_TOKEN, data)
    assert seed not in data and seed.hex().encode() not in data


def test_a_box_moved_to_another_remote_does_not_open(home):
    with RemoteStore(home) as store:
        one = store.add("one", "ws://h:1", auth_type="token", secret=TOKEN)
        two = store.add("two", "ws://h:2", auth_type="token", secret="other-token-123456")
        box = store.db.execute("SELECT box FROM remote_secrets WHERE remote_id=? AND kind=?",
                               (one.id, store_module.SHARED_TOKEN)).fetchone()[0]
        store.db.execute("UPDATE remote_secrets SET box=? WHERE remote_id=? AND kind=?",
                         (box, two.id, store_module.SHARED_TOKEN))
        with pytest.raises(RemoteError, match="integrity check"):
            store.secrets(two)
        # and a key box under the token's kind fails as well
        key_box = store.db.execute("SELECT box FROM remote_secrets WHERE remote_id=? AND kind=?",
                                   (one.id, store_module.DEVICE_KEY)).fetchone()[0]
        store.db.execute("UPDATE remote_secrets SET box=? WHERE remote_id=? AND kind=?",
                         (key_box, one.id, store_module.SHARED_TOKEN))
        with pytest.raises(RemoteError, match="integrity check"):
            store.secrets(store.get("one"))


def test_the_host_key_is_the_vaults_and_is_kept(home):
    with RemoteStore(home) as store:
        remote = store.add("gw1", "ws://h:1", auth_type="token", secret=TOKEN)
    key_path = os.path.join(home, "keys", "host.key")
    before = open(key_path, "rb").read()
    with RemoteStore(home) as store:
        assert store.secrets(remote).shared_token == TOKEN
    assert open(key_path, "rb").read() == before
    os.remove(key_path)
    with RemoteStore(home) as store, pytest.raises(RemoteError, match="integrity check"):
        store.secrets(remote)  # a new host key cannot open the old boxes


def seed_database(home: str, *, private_key_text: str) -> None:
    """A database as the seed's client writes it (schema 1, secrets in clear)."""
    db = sqlite3.connect(os.path.join(home, "remote.db"))
    db.executescript(store_module.SCHEMA_V1)
    db.execute("INSERT INTO remote_agents (id, name, protocol, url, auth_type, auth_token, allow_insecure, "
               "device_id, device_public_key, device_private_key, device_token, status, created_at, "
               "updated_at) VALUES ('id-1','office','openclaw','ws://10.1.1.1:18789','bearer',?,1,'x','y',?,?,"
               "'connected',1,2)", (TOKEN, private_key_text, DEVICE_TOKEN))
    db.execute("INSERT INTO remote_agents (id, name, protocol, url, auth_type, created_at, updated_at) "
               "VALUES ('id-2','office','openclaw','ws://10.1.1.2:18789','none',1,2)")
    db.commit()
    db.close()


@pytest.mark.parametrize("form", ["pem", "hex"])
def test_an_older_schema_is_migrated_and_scrubbed(home, form):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    text = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode() if form == "pem" \
        else seed.hex()
    seed_database(home, private_key_text=text)
    assert TOKEN.encode() in files_bytes(home)
    with RemoteStore(home) as store:
        assert store.schema_version() == 2
        office, second = store.list()
        assert (office.name, second.name) == ("office", "office-2")
        assert office.auth_type == "token" and office.allow_insecure and office.status == "connected"
        secrets = store.secrets(office)
        assert secrets.shared_token == TOKEN and secrets.device_token == DEVICE_TOKEN
        assert secrets.identity.device_id == DeviceIdentity.from_seed(seed).device_id
        assert store.secrets(second).shared_token is None
        assert not store._has_table("remote_agents")
    data = files_bytes(home)
    assert_absent(TOKEN, data)
    assert_absent(DEVICE_TOKEN, data)
    assert text.encode() not in data


def test_a_newer_schema_is_refused(home):
    db = sqlite3.connect(os.path.join(home, "remote.db"))
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(RemoteError, match="newer than this PaddedCell"):
        RemoteStore(home)


def test_status_and_session_key_persist(home):
    with RemoteStore(home) as store:
        remote = store.add("gw1", "ws://h:1")
        store.set_status(remote, "pending", "approve it", request_id="req-9")
        store.set_session_key(remote, "agent:main:k")
    with RemoteStore(home) as store:
        again = store.get("gw1")
        assert (again.status, again.pairing_request_id, again.session_key) == ("pending", "req-9", "agent:main:k")
        with pytest.raises(ValueError):
            store.set_status(again, "weird")
