"""The vault library: crypto bindings, tampering, permissions, history, leak lock, recovery."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from paddedcell import config
from paddedcell.vault import (Busy, Forbidden, IntegrityError, Locked, NoSuchKey, NotInitialized,
                              UnsafePermissions, VaultError, agent_secret_values, check_leak,
                              generate_secret, get_secret, init_admin, key_history, list_keys,
                              recover, rotate_secret, rotate_store, set_secret, unset_secret,
                              vault_status)
from paddedcell.vault.files import FileLock
from paddedcell.vault.leak import LeakDetector

PW = "library test admin pw"
FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1,
            "vault.min_length": 1}  # short values: these tests are not about length


@pytest.fixture
def s(tmp_path):
    return config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)


@pytest.fixture
def ws(tmp_path) -> str:
    path = tmp_path / "ws"
    path.mkdir(mode=0o700)
    return str(path)


@pytest.fixture
def ready(s, ws):
    init_admin(PW, s)
    set_secret("a1", ws, "db", "db-value", PW, s)
    return s


def vault_doc(path: Path) -> dict:
    """The JSON of a vault file (format 2: after its header line; format 1: all of it)."""
    return json.loads(path.read_bytes().split(b"\n", 1)[-1])


def store_file(ws: str, agent: str = "a1") -> Path:
    return Path(ws) / ".paddedcell" / "secrets" / agent / "store.json"


def test_exit_codes_of_the_errors():
    assert [cls("x").exit_code for cls in (VaultError, NoSuchKey, Forbidden, IntegrityError,
                                           UnsafePermissions, Busy)] == [1, 4, 5, 6, 1, 1]
    assert NotInitialized().exit_code == Locked().exit_code == 3
    assert str(NotInitialized()) == ("pass_mgr is not initialized; a human must run: "
                                     "pass_mgr admin init")


def test_uninitialized(s, ws):
    assert vault_status(s) == "uninitialized"
    for call in (lambda: get_secret("a1", ws, "k", settings=s),
                 lambda: agent_secret_values("a1", ws, settings=s),
                 lambda: generate_secret("a1", ws, "k", settings=s),
                 lambda: set_secret("a1", ws, "k", "v", PW, s)):
        with pytest.raises(NotInitialized):
            call()
    assert check_leak(PW, "x", settings=s) is False


def test_roundtrip_history_and_values(ready, ws):
    s = ready
    assert agent_secret_values("a1", ws, settings=s) == ["db-value"]
    assert agent_secret_values("nobody", ws, settings=s) == []
    first = generate_secret("a1", ws, "api", settings=s)
    assert len(first.value) == 32 and first.value not in repr(first)
    values = [first.value] + [rotate_secret("a1", ws, "api", settings=s).value for _ in range(5)]
    assert [v for v, _ in key_history("a1", ws, "api", settings=s)] == [6, 5, 4, 3, 2]
    assert get_secret("a1", ws, "api", settings=s) == values[-1]
    assert get_secret("a1", ws, "api", version=2, settings=s) == values[1]
    with pytest.raises(NoSuchKey):
        get_secret("a1", ws, "api", version=1, settings=s)
    # The version rotated out of the history stays masked (vault.retired_mask_days).
    assert sorted(agent_secret_values("a1", ws, settings=s)) == sorted(values + ["db-value"])
    assert list_keys("a1", ws, settings=s) == ["api", "db"]
    unset_secret("a1", ws, "api", settings=s)
    assert list_keys("a1", ws, settings=s) == ["db"]
    with pytest.raises(NoSuchKey):
        unset_secret("a1", ws, "api", settings=s)
    with pytest.raises(NoSuchKey):
        rotate_secret("a1", ws, "nope", settings=s)


def test_history_depth_setting(s, ws):
    s = config.load({"PADDEDCELL_HOME": str(s.home)}, {**FAST_KDF, "vault.history_depth": 2})
    init_admin(PW, s)
    for value in ("v1", "v2", "v3"):
        set_secret("a1", ws, "k", value, PW, s)
    assert [v for v, _ in key_history("a1", ws, "k", settings=s)] == [3, 2]
    assert agent_secret_values("a1", ws, settings=s) == ["v3", "v2", "v1"]  # v1 retired


def test_rotate_store_changes_every_ciphertext_not_the_values(ready, ws):
    s = ready
    generate_secret("a1", ws, "api", settings=s)
    before = vault_doc(store_file(ws))
    values = agent_secret_values("a1", ws, settings=s)
    rotate_store("a1", ws, settings=s)
    after = vault_doc(store_file(ws))
    assert agent_secret_values("a1", ws, settings=s) == values
    assert after["store_id"] == before["store_id"]
    assert after["wrap_host"] != before["wrap_host"] and after["wrap_admin"] != before["wrap_admin"]
    for key in ("api", "db"):
        assert before["entries"][key]["versions"][0]["ct"] != after["entries"][key]["versions"][0]["ct"]


def test_generate_refuses_to_overwrite_and_respects_options(ready, ws):
    s = ready
    with pytest.raises(VaultError, match="--force"):
        generate_secret("a1", ws, "db", settings=s)
    change = generate_secret("a1", ws, "db", length=20, symbols=False, force=True, settings=s)
    assert change.value.isalnum() and len(change.value) == 20 and change.version == 2
    rotated = rotate_secret("a1", ws, "db", settings=s).value
    assert rotated.isalnum() and len(rotated) == 20  # rotate keeps the generator's shape


def _resign(ws: str, s, mutate) -> None:
    """Rewrite a store with a valid MAC after ``mutate`` (an attacker holding the data key)."""
    from paddedcell.vault import admin, crypto

    from paddedcell.vault.store import STORE_CONTEXT

    path = store_file(ws)
    doc = vault_doc(path)
    host = admin.read_host_key(admin.AdminPaths(s.home))
    data_key = crypto.unseal(admin.subkey(host, "wrap"), doc["wrap_host"],
                             crypto.aad("wrap-host", doc["agent_id"], doc["store_id"]), "w")
    mutate(doc)
    body = {k: v for k, v in doc.items() if k != "mac"}
    inner = crypto.sign_document(data_key[32:], body,
                                 crypto.aad("store", doc["agent_id"], doc["store_id"]))
    path.write_bytes(crypto.seal_file(admin.subkey(host, "admin-mac"), inner, STORE_CONTEXT))


def test_entries_are_bound_to_their_key_and_version(ready, ws):
    """Even with a valid MAC, a box moved to another key or version does not open."""
    s = ready
    set_secret("a1", ws, "other", "other-value", PW, s)

    def swap(doc):
        entries = doc["entries"]
        entries["db"]["versions"][0], entries["other"]["versions"][0] = \
            entries["other"]["versions"][0], entries["db"]["versions"][0]
        entries["db"]["versions"][0]["v"], entries["other"]["versions"][0]["v"] = 1, 1

    _resign(ws, s, swap)
    with pytest.raises(IntegrityError):
        get_secret("a1", ws, "db", settings=s)

    set_secret("a1", ws, "db", "second", PW, s)

    def renumber(doc):
        doc["entries"]["db"]["versions"][0]["v"] = 7

    _resign(ws, s, renumber)
    with pytest.raises(IntegrityError):
        get_secret("a1", ws, "db", settings=s)


def test_a_store_copied_to_another_agent_does_not_open(ready, ws):
    target = store_file(ws, "a2")
    target.parent.mkdir(mode=0o700, parents=True)
    shutil.copy2(store_file(ws), target)
    with pytest.raises(IntegrityError):
        get_secret("a2", ws, "db", settings=ready)


@pytest.mark.parametrize("which", ["store", "admin", "host"])
def test_every_flipped_byte_is_an_integrity_error(ready, ws, which):
    s = ready
    path = {"store": store_file(ws), "admin": s.home / "vault" / "admin.json",
            "host": s.home / "keys" / "host.key"}[which]
    original = path.read_bytes()
    for index in range(len(original)):
        for flip in (0x01, 0x80):
            data = bytearray(original)
            data[index] ^= flip
            path.write_bytes(bytes(data))
            with pytest.raises(IntegrityError):
                if which == "admin":
                    set_secret("a1", ws, "db", "x", PW, s)
                else:
                    get_secret("a1", ws, "db", settings=s)
    path.write_bytes(original)
    assert get_secret("a1", ws, "db", settings=s) == "db-value"


def test_wrong_admin_password_is_forbidden(ready, ws):
    with pytest.raises(Forbidden):
        set_secret("a1", ws, "db", "x", "wrong password", ready)
    with pytest.raises(Forbidden):
        init_admin("a new admin password", ready)  # ready: needs the current one
    with pytest.raises(Forbidden):
        init_admin("a new admin password", ready, current_password="wrong password")
    with pytest.raises(VaultError, match="too short"):
        init_admin("short", ready, current_password=PW)


@pytest.mark.parametrize("target", ["store", "store_dir", "host", "admin"])
def test_loose_permissions_are_refused(ready, ws, target):
    s = ready
    path, mode = {"store": (store_file(ws), 0o604), "store_dir": (store_file(ws).parent, 0o750),
                  "host": (s.home / "keys" / "host.key", 0o640),
                  "admin": (s.home / "vault" / "admin.json", 0o660)}[target]
    os.chmod(path, mode)
    with pytest.raises(UnsafePermissions, match="chmod"):
        if target == "admin":
            set_secret("a1", ws, "db", "x", PW, s)
        else:
            get_secret("a1", ws, "db", settings=s)


def test_files_and_directories_are_private(ready, ws):
    generate_secret("a1", ws, "api", settings=ready)
    for root in (ready.home, Path(ws) / ".paddedcell"):
        for path in [root, *root.rglob("*")]:
            mode = path.stat().st_mode & 0o777
            assert mode == (0o700 if path.is_dir() else 0o600), path


def test_no_file_keeps_the_admin_password(ready, ws):
    check_leak("warm the cache", "x", settings=ready)
    forms = [PW.encode(), base64.b64encode(PW.encode()), PW.encode().hex().encode()]
    for root in (ready.home, Path(ws)):
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert not any(form in data for form in forms), path


def test_leak_locks_and_init_recovers_every_store(ready, ws, tmp_path):
    s = ready
    other_ws = tmp_path / "ws2"
    other_ws.mkdir(mode=0o700)
    api = generate_secret("a2", str(other_ws), "api", settings=s).value
    assert check_leak("no password here", "message:in", settings=s) is False
    assert check_leak(f'{{"cmd": "echo {PW}"}}'.encode(), "tool-call:exec", settings=s) is True
    assert vault_status(s) == "locked"
    with pytest.raises(Locked):
        get_secret("a1", ws, "db", settings=s)
    with pytest.raises(Locked):
        agent_secret_values("a1", ws, settings=s)
    log = [json.loads(line) for line in (s.home / "security.log").read_text().splitlines()]
    assert [e["source"] for e in log if e["level"] == "CRITICAL"] == ["tool-call:exec"]
    report = init_admin("the next admin pw", s)
    assert (report.previous_state, report.rewrapped, report.failed) == ("locked", 2, ())
    assert get_secret("a1", ws, "db", settings=s) == "db-value"
    assert get_secret("a2", str(other_ws), "api", settings=s) == api
    assert check_leak(PW, "x", settings=s) is False  # the old password is no longer watched
    assert check_leak("..the next admin pw..", "x", settings=s) is True


def test_a_source_label_holding_the_password_is_withheld(ready):
    assert check_leak(PW, f"label {PW}", settings=ready)
    assert PW not in (ready.home / "security.log").read_text()


def test_recover_after_losing_the_host_key(ready, ws):
    s = ready
    generate_secret("a1", ws, "api", settings=s)
    values = agent_secret_values("a1", ws, settings=s)
    (s.home / "keys" / "host.key").unlink()
    with pytest.raises(IntegrityError, match="admin recover"):
        get_secret("a1", ws, "db", settings=s)
    with pytest.raises(Forbidden):
        recover("not the password", s)
    report = recover(PW, s)
    assert report.rewrapped == 1 and report.failed == ()
    assert agent_secret_values("a1", ws, settings=s) == values
    set_secret("a1", ws, "db", "after recovery", PW, s)  # admin.json verifies again
    assert check_leak(PW, "x", settings=s)  # and the detector still works


def test_a_writer_waits_for_the_lock_and_gives_up_with_busy(ready, ws):
    s = config.load({"PADDEDCELL_HOME": str(ready.home)}, {"vault.lock_timeout_seconds": 0.2})
    lock = store_file(ws).parent / ".lock"
    with FileLock(lock, exclusive=True, timeout=1):
        with pytest.raises(Busy):
            generate_secret("a1", ws, "x", settings=s)
    generate_secret("a1", ws, "x", settings=s)


def test_names_are_checked(ready, ws):
    for key in ("", "../x", "a b", "a|b", "x" * 200, "-flag"):
        with pytest.raises(VaultError):
            get_secret("a1", ws, key, settings=ready)
    for agent in ("", "..", "a/b", ".hidden"):
        with pytest.raises(VaultError):
            get_secret(agent, ws, "db", settings=ready)
    with pytest.raises(VaultError, match="absolute"):
        get_secret("a1", "relative/ws", "db", settings=ready)


# -- the leak detector on its own ---------------------------------------------------------

passwords = st.text(min_size=8, max_size=40).filter(lambda p: p == p.strip() and "\0" not in p)


@hsettings(max_examples=200, deadline=None)
@given(password=passwords, before=st.binary(max_size=300), after=st.binary(max_size=300))
def test_detector_finds_the_password_anywhere(password, before, after):
    detector = LeakDetector.create(password)
    raw = password.encode("utf-8")
    assert detector.contains(before + raw + after)
    assert detector.contains(json.dumps({"text": password}))
    assert detector.contains(json.dumps({"text": password}, ensure_ascii=False))


@hsettings(max_examples=100, deadline=None)
@given(password=passwords, text=st.binary(min_size=0, max_size=2000))
def test_detector_has_no_false_positive(password, text):
    from paddedcell.vault.leak import encoded_forms

    detector = LeakDetector.create(password)
    assert detector.contains(text) == any(form in text for form in encoded_forms(password))


def test_detector_survives_serialisation_and_keeps_no_plaintext():
    detector = LeakDetector.create("pa\"ss\\wörd 123")
    blob = json.dumps(detector.to_json())
    raw = "pa\"ss\\wörd 123".encode()
    assert not any(form in blob.encode() for form in
                   (raw, raw.hex().encode(), base64.b64encode(raw),
                    json.dumps("pa\"ss\\wörd 123").encode()))
    again = LeakDetector.from_json(json.loads(blob))
    assert again.contains(json.dumps({"x": "pa\"ss\\wörd 123"}))
    assert again.contains("pa\"ss\\wörd 123")
    assert not again.contains("pa\"ss\\wörd 12")


def test_non_canonical_base64_in_a_mac_is_caught(ready, ws):
    """Regression: the unused low bits of the MAC's last base64 character went unchecked."""
    from paddedcell.vault import crypto

    path = store_file(ws)
    good = path.read_bytes()
    mac, body = crypto.split_file(good, "store")  # format 2: the header's tag
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = mac.rstrip("=")[-1]
    twin = alphabet[alphabet.index(last) ^ 1]  # differs only in a discarded bit
    twin_mac = mac.rstrip("=")[:-1] + twin + "=" * (len(mac) - len(mac.rstrip("=")))
    assert base64.b64decode(twin_mac) == base64.b64decode(mac)
    path.write_bytes(crypto.HEADER + twin_mac.encode() + b"\n" + body)
    with pytest.raises(IntegrityError):
        get_secret("a1", ws, "db", settings=ready)
    path.write_bytes(good)
    assert get_secret("a1", ws, "db", settings=ready) == "db-value"


def test_detector_finds_the_password_across_chunk_boundaries():
    from paddedcell.vault.leak import CHUNK

    password = "boundary password"
    detector = LeakDetector.create(password)
    filler = b"x" * (3 * CHUNK)
    for offset in (0, 1, CHUNK - len(password) - 1, CHUNK - len(password), CHUNK - 5, CHUNK - 1,
                   CHUNK, CHUNK + 1, 2 * CHUNK - 3, 3 * CHUNK):
        text = filler[:offset] + password.encode() + filler[offset:]
        assert detector.contains(text), offset
        assert not detector.contains(text.replace(b"boundary", b"boundarY")), offset


def test_the_fast_aesgcm_import_is_the_public_class():
    """crypto.py takes AESGCM from cryptography's Rust module to keep `get` lean; it must be
    the very class the public module exports (else the fallback import should be used)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from paddedcell.vault import crypto

    assert crypto.AESGCM is AESGCM


def test_get_imports_no_typing_trio_click_or_rich(ready, ws):
    """The lean `get` path: what a fresh interpreter imports to answer one get (as
    ``pass_mgr get`` does it: through vault.read, never the writers in api and admin)."""
    import subprocess
    import sys

    code = ("import sys\nfrom paddedcell import config\nfrom paddedcell.vault.read import get_secret\n"
            f"get_secret('a1', {ws!r}, 'db', settings=config.load())\n"
            "print(' '.join(sorted(sys.modules)))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
    env["PADDEDCELL_HOME"] = str(ready.home)
    def modules(source: str) -> set[str]:
        return set(subprocess.run([sys.executable, "-c", source], env=env, capture_output=True,
                                  text=True, check=True).stdout.split())

    # What the interpreter's own start-up (site, .pth files) loads is not ours to judge.
    loaded = modules(code) - modules("import sys; print(' '.join(sorted(sys.modules)))")
    for heavy in ("trio", "click", "rich", "typing", "hashlib", "dataclasses", "tomllib",
                  "binascii", "zlib",
                  "cryptography.hazmat.primitives.ciphers", "cryptography.hazmat.primitives.kdf",
                  "paddedcell.vault.api", "paddedcell.vault.admin", "paddedcell.vault.admin_crypto",
                  "paddedcell.vault.guard", "paddedcell.vault.leak"):
        assert heavy not in loaded, heavy


def test_the_package_names_resolve_lazily_and_stay_the_same_objects():
    """``paddedcell.vault`` loads api and errors at the first use of a name (PEP 562), so
    that importing vault.read does not; the names are the very objects of their modules."""
    import paddedcell.vault as vault
    from paddedcell.vault import api, errors, read

    assert vault.get_secret is api.get_secret is read.get_secret
    assert vault.VaultError is errors.VaultError
    assert set(vault.__all__) <= set(dir(vault))
    with pytest.raises(AttributeError):
        vault.no_such_name


def test_scrypt_when_openssl_lacks_argon2(s, ws, monkeypatch):
    from paddedcell.vault import admin_crypto

    monkeypatch.setattr(admin_crypto, "argon2_available", lambda: False)
    s = config.load({"PADDEDCELL_HOME": str(s.home)}, {"vault.scrypt_n": 1024, "vault.min_length": 1})
    init_admin(PW, s)
    kdf = vault_doc(s.home / "vault" / "admin.json")["kdf"]
    assert (kdf["alg"], kdf["n"], kdf["r"], kdf["p"]) == ("scrypt", 1024, 8, 1)
    set_secret("a1", ws, "db", "v", PW, s)
    with pytest.raises(Forbidden):
        set_secret("a1", ws, "db", "v", "wrong password", s)
    monkeypatch.undo()  # admin.json names its KDF, so a build with Argon2 still opens it
    set_secret("a1", ws, "db", "v2", PW, s)


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "NaN"])
def test_non_json_constants_in_admin_json_are_an_integrity_error_on_recover(ready, constant):
    """recover reads admin.json before any MAC: json's NaN/Infinity extensions must not pass
    (int(Infinity) in the KDF parameters used to crash with OverflowError)."""
    admin_file = ready.home / "vault" / "admin.json"
    doc = vault_doc(admin_file)
    doc["kdf"]["iterations"] = float(constant.replace("Infinity", "inf"))
    admin_file.write_bytes(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
    assert constant.encode() in admin_file.read_bytes()
    with pytest.raises(IntegrityError, match="failed its integrity check"):
        recover(PW, ready)


def test_no_part_of_the_password_reaches_the_log_through_the_source_label(ready):
    """The label is folded and cut to 200 characters; the password check must see the source
    as given, or a password split by the cut is logged in part."""
    source = "s" * 190 + " " + PW
    assert check_leak(PW, source, settings=ready)
    written = (ready.home / "security.log").read_text() + \
        (ready.home / "vault" / "locked.json").read_text()
    assert PW[:9] not in written and "withheld" in written


def test_text_that_is_not_utf8_is_refused_cleanly(ready, ws):
    """Non-UTF-8 bytes in argv arrive as lone surrogates; they used to raise UnicodeEncodeError."""
    with pytest.raises(VaultError, match="UTF-8") as caught:
        set_secret("a1", ws, "k", "bad \udcff value", PW, ready)
    assert type(caught.value) is VaultError
    with pytest.raises(Forbidden):
        set_secret("a1", ws, "k", "fine", "\udcff" + PW, ready)
    with pytest.raises(VaultError, match="UTF-8"):
        init_admin("a new \udcff password", ready, current_password=PW)
    assert get_secret("a1", ws, "db", settings=ready) == "db-value"
