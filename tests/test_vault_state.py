"""Vault state on disk: rollbacks refused, KDF work bounded, new folders durable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddedcell import config
from paddedcell.vault import (IntegrityError, get_secret, init_admin, recover, set_secret,
                              unset_secret)
from paddedcell.vault import files

PW = "state test admin pw"
FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}


@pytest.fixture
def s(tmp_path):
    return config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)


@pytest.fixture
def ws(tmp_path) -> str:
    path = tmp_path / "ws"
    path.mkdir(mode=0o700)
    return str(path)


def vault_doc(path: Path) -> dict:
    """The JSON of a vault file (format 2: after its header line; format 1: all of it)."""
    return json.loads(path.read_bytes().split(b"\n", 1)[-1])


def store_file(ws: str, agent: str = "a1") -> Path:
    return Path(ws) / ".paddedcell" / "secrets" / agent / "store.json"


def test_an_older_store_put_back_is_refused_with_the_fix(s, ws, tmp_path):
    init_admin(PW, s)
    set_secret("a1", ws, "db", "old-value-1", PW, s)
    old = tmp_path / "old-store.json"
    shutil.copy2(store_file(ws), old)
    set_secret("a1", ws, "db", "new-value-2", PW, s)
    unset_secret("a1", ws, "db", settings=s)
    shutil.copy2(old, store_file(ws))  # validly MACed, just older
    with pytest.raises(IntegrityError) as caught:
        get_secret("a1", ws, "db", settings=s)
    message = str(caught.value)
    assert "rolled back" in message and "\n" not in message
    assert caught.value.exit_code == 6
    with pytest.raises(IntegrityError):  # writes refuse it too
        set_secret("a1", ws, "other", "x-value-123", PW, s)
    fix = message.rsplit("rm ", 1)[1]
    os.unlink(fix)
    assert get_secret("a1", ws, "db", settings=s) == "old-value-1"


def test_the_generation_is_recorded_under_the_home_not_the_workspace(s, ws):
    init_admin(PW, s)
    set_secret("a1", ws, "db", "value-1234", PW, s)
    doc = vault_doc(store_file(ws))
    record = Path(s.home) / "vault" / "generations" / doc["store_id"]
    assert record.read_text() == str(doc["generation"])


def test_pass_mgr_get_refuses_a_rolled_back_store_with_exit_6(s, ws, tmp_path):
    init_admin(PW, s)
    set_secret("a1", ws, "db", "old-value-1", PW, s)
    old = store_file(ws).read_bytes()
    set_secret("a1", ws, "db", "new-value-2", PW, s)
    store_file(ws).write_bytes(old)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
    env.update(PADDEDCELL_HOME=str(s.home), AGENT_ID="a1", AGENT_WORKSPACE=ws)
    done = subprocess.run([str(Path(sys.executable).parent / "pass_mgr"), "get", "db"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 6, done.stderr
    assert done.stdout == "" and "rolled back" in done.stderr


def tamper_kdf(s, **changes):
    path = Path(s.home) / "vault" / "admin.json"
    doc = vault_doc(path)
    doc["kdf"].update(changes)
    path.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))


@pytest.mark.parametrize("host_key", ["present", "lost"])
def test_recover_does_no_kdf_work_for_tampered_parameters(s, ws, host_key):
    init_admin(PW, s)
    set_secret("a1", ws, "db", "value-1234", PW, s)
    alg = vault_doc(Path(s.home) / "vault" / "admin.json")["kdf"]["alg"]
    if alg == "argon2id":
        tamper_kdf(s, memory_kib=1024 * 1024, iterations=16)  # within the absolute bounds
    else:
        tamper_kdf(s, n=2**20)
    if host_key == "lost":
        os.unlink(Path(s.home) / "keys" / "host.key")
    started = time.monotonic()
    with pytest.raises(IntegrityError):
        recover(PW, s)
    assert time.monotonic() - started < 2, "the KDF ran on parameters nothing vouched for"


def test_kdf_parameters_beyond_the_bounds_are_refused_before_any_work():
    from paddedcell.vault.admin_crypto import check_kdf_params

    salt = "AAAAAAAAAAAAAAAAAAAAAA=="
    for bad in ({"alg": "argon2id", "salt": salt, "iterations": 64, "lanes": 4, "memory_kib": 65536},
                {"alg": "argon2id", "salt": salt, "iterations": 3, "lanes": 4, "memory_kib": 4 << 20},
                {"alg": "argon2id", "salt": salt, "iterations": True, "lanes": 4, "memory_kib": 65536},
                {"alg": "scrypt", "salt": salt, "n": 2**22, "r": 32, "p": 1},
                {"alg": "scrypt", "salt": salt, "n": 2**17, "r": 8, "p": 1.0}):
        with pytest.raises(IntegrityError):
            check_kdf_params(bad)
    check_kdf_params({"alg": "scrypt", "salt": salt, "n": 2**17, "r": 8, "p": 1})


def test_new_folders_are_fsynced_into_their_parents(tmp_path, monkeypatch):
    synced = []
    real = files.fsync_dir
    monkeypatch.setattr(files, "fsync_dir", lambda d: (synced.append(str(d)), real(d)))
    target = tmp_path / "a" / "b" / "c"
    files.ensure_private_dir(str(target))
    assert synced == [str(tmp_path), str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    assert all((target.parent if i else target).stat().st_mode & 0o777 == 0o700 for i in range(1))


# -- retired values stay masked -------------------------------------------------------


def test_unset_and_rotated_away_values_stay_masked_for_the_retired_period(tmp_path, ws):
    from paddedcell.vault import agent_secret_values, generate_secret, rotate_secret, rotate_store

    s = config.load({"PADDEDCELL_HOME": str(tmp_path / "h")},
                    {**FAST_KDF, "vault.history_depth": 1})
    init_admin(PW, s)
    set_secret("a1", ws, "db", "first-db-value", PW, s)
    set_secret("a1", ws, "db", "second-db-value", PW, s)  # pushes the first out of history
    first = generate_secret("a1", ws, "tok", settings=s).value
    second = rotate_secret("a1", ws, "tok", settings=s).value
    unset_secret("a1", ws, "db", settings=s)
    rotate_store("a1", ws, settings=s)  # re-sealed under the new data key
    values = set(agent_secret_values("a1", ws, settings=s))
    assert {"first-db-value", "second-db-value", first, second} <= values
    raw = store_file(ws).read_text()
    assert "first-db-value" not in raw and "second-db-value" not in raw and first not in raw
    with pytest.raises(Exception):
        get_secret("a1", ws, "db", settings=s)  # gone for get, masked for output


def test_retired_values_expire(tmp_path, ws, monkeypatch):
    import time as time_module

    from paddedcell.vault import agent_secret_values

    s = config.load({"PADDEDCELL_HOME": str(tmp_path / "h")},
                    {**FAST_KDF, "vault.retired_mask_days": 1})
    init_admin(PW, s)
    set_secret("a1", ws, "db", "old-db-value", PW, s)
    set_secret("a1", ws, "keep", "kept-value-1", PW, s)
    unset_secret("a1", ws, "db", settings=s)
    assert "old-db-value" in agent_secret_values("a1", ws, settings=s)
    real = time_module.time
    monkeypatch.setattr(time_module, "time", lambda: real() + 2 * 86400)
    assert "old-db-value" not in agent_secret_values("a1", ws, settings=s)
    set_secret("a1", ws, "keep", "kept-value-2", PW, s)  # a write drops expired ones
    monkeypatch.setattr(time_module, "time", real)
    assert "old-db-value" not in agent_secret_values("a1", ws, settings=s)
    assert "retired" not in vault_doc(store_file(ws))


def test_a_retired_entry_moved_elsewhere_fails_authentication(s, ws):
    init_admin(PW, s)
    set_secret("a1", ws, "db", "old-db-value", PW, s)
    unset_secret("a1", ws, "db", settings=s)
    from paddedcell.vault import admin
    from paddedcell.vault.store import OpenStore

    assert vault_doc(store_file(ws))["retired"][0]["k"] == "db"
    host = admin.read_host_key(admin.AdminPaths(s.home))
    store = OpenStore.load(store_file(ws).read_bytes(), "a1", "store",
                           host_wrap_key=admin.subkey(host, "wrap"),
                           host_mac_key=admin.subkey(host, "admin-mac"))
    store.retired[0]["k"] = "other"  # sealed under ("retired", key, version): fails to open
    with pytest.raises(IntegrityError):
        store.all_values()


# -- the leak lock is authenticated -------------------------------------------------


def test_a_planted_lock_file_is_tampering_not_a_lock(s, ws):
    """Issue 20: only a lock the vault wrote locks; anything else is tampering (exit 6)
    and does not skip the current password."""
    from paddedcell.vault import Forbidden, check_leak, vault_status

    init_admin(PW, s)
    set_secret("a1", ws, "db", "value-1234", PW, s)
    locked = Path(s.home) / "vault" / "locked.json"
    locked.write_text('{"source":"planted","time":"2026-01-01T00:00:00Z"}')
    os.chmod(locked, 0o600)
    assert vault_status(s) == "tampered"
    with pytest.raises(IntegrityError) as refused:
        get_secret("a1", ws, "db", settings=s)
    assert refused.value.exit_code == 6 and "tampered" in str(refused.value)
    with pytest.raises(Forbidden):
        init_admin("a brand new admin pw", s)  # not authentic: the old password is not burnt
    init_admin("a brand new admin pw", s, current_password=PW)
    assert vault_status(s) == "ready"
    # A real leak writes an authentic lock: then init needs no current password.
    assert check_leak("x a brand new admin pw y", "test", settings=s)
    assert "mac" in json.loads(locked.read_text())
    init_admin("a third admin password", s)
    assert vault_status(s) == "ready"


# -- the crypto module: one error, known answers -----------------------------------


def test_every_integrity_failure_has_the_same_words(s, ws):
    """Flip, truncate, reorder, move: the message names the file, never the check."""
    init_admin(PW, s)
    set_secret("a1", ws, "db", "value-1234", PW, s)
    good = store_file(ws).read_bytes()
    doc = vault_doc(store_file(ws))
    header_tag = good.split(b"\n", 1)[0].split(b" ")[1]
    variants = {
        "flipped header tag": good.replace(header_tag[:4], b"AAAA", 1),
        "flipped inner mac": good.replace(doc["mac"][:4].encode(), b"AAAA", 1),
        "no header": good.split(b"\n", 1)[1],
        "not json": good[:-1],
        "not canonical": json.dumps(doc, indent=1).encode(),
        "other agent": good.replace(b'"agent_id":"a1"', b'"agent_id":"a2"'),
        "bad nonce": good.replace(doc["wrap_host"]["nonce"].encode(), b"AAAA", 1),
        "format": good.replace(b'"format":2', b'"format":9'),
    }
    messages = set()
    for name, raw in variants.items():
        assert raw != good, name
        store_file(ws).write_bytes(raw)
        with pytest.raises(IntegrityError) as caught:
            get_secret("a1", ws, "db", settings=s)
        messages.add(str(caught.value))
    assert len(messages) == 1, messages
    assert "failed its integrity check" in messages.pop()


def test_known_answers_through_the_nonce_seam(monkeypatch):
    """AES-256-GCM test cases 13 and 14 of McGrew & Viega's GCM specification
    (zero key, zero IV), through seal/unseal/tag/verify_tag."""
    import base64

    from paddedcell.vault import crypto

    monkeypatch.setattr(crypto, "_nonce", lambda: bytes(12))
    key = bytes(32)
    box = crypto.seal(key, bytes(16), b"")
    assert base64.b64decode(box["ct"]).hex() == ("cea7403d4d606b6e074ec5d3baf39d18"
                                                 "d0d1c8a799996bf0265b98b5d48ab919")
    assert crypto.unseal(key, box, b"", "t") == bytes(16)
    tag = crypto.tag(key, b"")
    assert base64.b64decode(tag).hex() == "00" * 12 + "530f8afbc74536b9a963b4f1c4cb738b"
    crypto.verify_tag(key, b"", tag, "t")
    with pytest.raises(IntegrityError):
        crypto.verify_tag(key, b"x", tag, "t")


def test_format_1_files_are_read_and_become_format_2_at_the_next_write(s, ws):
    """Stores and admin.json written before format 2 (the MAC a field inside the JSON)."""
    from paddedcell.vault import admin, crypto

    init_admin(PW, s)
    set_secret("a1", ws, "db", "value-1234", PW, s)
    host = admin.read_host_key(admin.AdminPaths(s.home))
    # Write both files the way format 1 did.
    admin_path = Path(s.home) / "vault" / "admin.json"
    body = {k: v for k, v in vault_doc(admin_path).items()}
    body["format"] = 1
    admin_path.write_bytes(crypto.sign_document(admin.subkey(host, "admin-mac"), body, b"admin.json"))
    doc = vault_doc(store_file(ws))
    data_key = crypto.unseal(admin.subkey(host, "wrap"), doc["wrap_host"],
                             crypto.aad("wrap-host", "a1", doc["store_id"]), "w")
    body = {k: v for k, v in doc.items() if k != "mac"}
    body["format"] = 1
    store_file(ws).write_bytes(crypto.sign_document(data_key[32:], body,
                                                    crypto.aad("store", "a1", doc["store_id"])))
    assert not store_file(ws).read_bytes().startswith(crypto.HEADER)
    assert get_secret("a1", ws, "db", settings=s) == "value-1234"
    set_secret("a1", ws, "other", "other-value-1", PW, s)  # reads admin.json v1 too
    assert store_file(ws).read_bytes().startswith(crypto.HEADER)
    assert vault_doc(store_file(ws))["format"] == 2
    assert get_secret("a1", ws, "db", settings=s) == "value-1234"
    init_admin("the next admin pw", s, current_password=PW)
    assert admin_path.read_bytes().startswith(crypto.HEADER)


def test_format_2_checks_the_raw_bytes_before_parsing(s, ws, monkeypatch):
    """A tampered format-2 store never reaches the JSON parser."""
    from paddedcell.vault import crypto

    init_admin(PW, s)
    set_secret("a1", ws, "db", "value-1234", PW, s)
    raw = store_file(ws).read_bytes()
    store_file(ws).write_bytes(raw[:-2] + b' }')  # still JSON-ish, not canonical
    parsed = []
    real = crypto.parse_canonical
    monkeypatch.setattr(crypto, "parse_canonical", lambda data, what: (parsed.append(what), real(data, what))[1])
    with pytest.raises(IntegrityError):
        get_secret("a1", ws, "db", settings=s)
    assert not any("store.json" in what for what in parsed), parsed
