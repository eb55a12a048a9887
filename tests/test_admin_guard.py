"""Issue 20, item 6: the leak detector costs an attacker with the host key as much as Argon2.

The detector lives in the memory of the process a human gave the admin password to
(vault/guard.py); on disk nothing derived from the password is left but admin.json's
Argon2 verifier. An offline attacker with a copy of PADDEDCELL_HOME (host key included)
is played by ``offline_guess_testers``: every sealed box it can open with any part of the
host key, every JSON document it can read, tried as a leak detector. The cost — a
(re)started daemon cannot mask the password until a human authenticates — is shown where
a human looks (``pass_mgr admin status``) and ends when one does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from paddedcell import config
from paddedcell.vault import (Forbidden, arm_guard, crypto, find_leaks, guard_state, init_admin,
                              output_guard, set_secret, vault_status)
from paddedcell.vault import admin, guard, guard_runtime
from paddedcell.vault.files import atomic_write
from paddedcell.vault.leak import LeakDetector, encoded_forms
from supervisor_helpers import BIN, Daemon, base_env, init_vault
from test_session_reach import CHANNEL_CLIENT, run_in_session

FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}
PW = "guarded-admin-pw-42"
#: What a sealed detector of an older release held, as JSON keys.
DETECTOR_MARKERS = (b'"classes"', b'"weights"', b'"maskStart"', b'"detector"')


def reboot(home: str | Path) -> None:
    """What a reboot does to the guard: tmpfs is empty, no process holds a detector."""
    guard_runtime.remove(str(home))
    guard.forget()


@pytest.fixture
def s(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)
    init_admin(PW, settings)
    yield settings
    guard.forget()


def seal_old_detector(home: Path, password: str) -> None:
    """admin.json as a release before this one wrote it: a detector with full keyed BLAKE2b
    digests, sealed under the host key's third part."""
    paths = admin.AdminPaths(str(home))
    host = admin.read_host_key(paths)
    doc = admin.load_admin(paths, host)
    detector = LeakDetector.create(password).to_json()
    key = bytes.fromhex(detector["key"])
    for form, item in zip(encoded_forms(password), detector["forms"]):
        item[2] = hashlib.blake2b(form, key=key, digest_size=32).hexdigest()
    body = {k: v for k, v in doc.items() if k != "mac"}
    body["detector"] = crypto.seal(host[64:96], crypto.canonical(detector),
                                   crypto.aad("detector"))
    atomic_write(paths.admin_file, crypto.seal_file(admin.subkey(host, "admin-mac"),
                                                    crypto.canonical(body), b"admin.json"))


def _documents(raw: bytes) -> list:
    for parse in (lambda: crypto.parse_canonical(crypto.split_file(raw, "f")[1], "f"),
                  lambda: json.loads(raw)):
        try:
            return [parse()]
        except Exception:
            continue
    return []


def _walk(value):
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def offline_guess_testers(roots: list[Path]) -> list[LeakDetector]:
    """Everything in these trees that tests a guessed password without the admin KDF, as an
    attacker holding the files (host key included) would find it."""
    host = (roots[0] / "keys" / "host.key").read_bytes()[:96]
    keys = [host[i:i + 32] for i in range(0, 96, 32)]
    aads = [crypto.aad("detector"), crypto.aad("admin-private"), b""]
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if not path.is_file():
                continue
            for doc in _documents(path.read_bytes()):
                candidates = list(_walk(doc))
                for box in [v for v in candidates if isinstance(v, dict) and "ct" in v]:
                    for key in keys:
                        for aad in aads:
                            try:
                                plain = crypto.unseal(key, box, aad, "box")
                            except Exception:
                                continue
                            candidates.extend(_walk(_documents(plain)))
                for value in candidates:
                    try:
                        found.append(LeakDetector.from_json(value))
                    except Exception:
                        continue
    return found


def test_an_offline_attacker_finds_nothing_but_the_kdf_verifier(s, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    set_secret("a1", str(ws), "db", "a1-db-value-123", PW, s)  # an authentication
    assert find_leaks(f"x {PW} y", "test", settings=s)  # the guard works (and locks)
    init_admin("the next admin pw 7", s)  # after a leak: a new password
    roots = [Path(s.home_text), ws]
    assert offline_guess_testers(roots) == []
    everything = b"".join(p.read_bytes() for root in roots for p in root.rglob("*") if p.is_file())
    for marker in DETECTOR_MARKERS:
        assert marker not in everything
    for password in (PW, "the next admin pw 7"):
        for form in encoded_forms(password):
            for shown in (form, form.hex().encode(), base64.b64encode(form)):
                assert shown not in everything
    doc = admin.load_admin(admin.AdminPaths(s.home_text),
                           admin.read_host_key(admin.AdminPaths(s.home_text)))
    assert set(doc) == {"format", "created", "kdf", "verifier", "admin_public", "admin_private"}


def test_an_old_sealed_detector_is_removed_and_the_guard_waits_for_a_human(s):
    home = Path(s.home_text)
    seal_old_detector(home, PW)
    assert len(offline_guess_testers([home])) == 1  # the attacker's oracle, as it was
    reboot(home)  # a process no human gave the password to since the reboot
    assert guard_state(s) == "waiting"
    assert offline_guess_testers([home]) == []
    assert all(m not in (home / "vault" / "admin.json").read_bytes() for m in DETECTOR_MARKERS)
    assert "admin-detector-removed" in (home / "security.log").read_text()
    assert find_leaks(f"x {PW} y", "test", settings=s) == []  # nothing can find it yet
    assert vault_status(s) == "ready"
    with pytest.raises(Forbidden):
        arm_guard("not the admin password", s)
    assert guard_state(s) == "waiting"
    arm_guard(PW, s)
    assert guard_state(s) == "armed"
    assert find_leaks(f"x {PW} y", "test", settings=s) == [(2, 2 + len(PW))]


def test_a_stream_that_started_while_waiting_masks_once_a_human_authenticates(s):
    reboot(s.home_text)
    stream = output_guard(None, "test", settings=s).fresh()
    assert stream.feed(b"before\n") == b"before\n"  # waiting: nothing held, nothing found
    arm_guard(PW, s)
    out = stream.feed(f"a {PW[:5]}".encode()) + stream.feed(f"{PW[5:]} b\n".encode())
    assert out + stream.flush() == b"a ###### b\n"
    assert vault_status(s) == "locked"


def test_a_detector_of_a_password_changed_elsewhere_is_dropped(s):
    paths = admin.AdminPaths(s.home_text)
    old_doc = admin.load_admin(paths, admin.read_host_key(paths))
    init_admin("the next admin pw 7", s, current_password=PW)
    guard.arm(PW, old_doc)  # as a process that did not see the change would hold it
    found = guard.current(paths)  # dropped; the new password's filter comes from tmpfs
    assert not found.contains(f"x {PW} y") and found.contains("x the next admin pw 7 y")
    reboot(s.home_text)
    guard.arm(PW, old_doc)
    assert guard.current(paths) is None
    assert guard_state(s) == "waiting"


def pass_mgr(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "pass_mgr"), *args], input=input, env=base_env(home),
                          capture_output=True, text=True, timeout=120)


def test_a_daemon_started_after_a_reboot_waits_for_a_human_and_says_so(tmp_path):
    """Through the daemon: an old admin.json loses its detector at start (no crash); after
    a reboot (tmpfs empty) the status says the guard waits; no session can arm it or borrow
    it; once a human runs ``pass_mgr admin guard`` a session's output masks the password;
    a restart keeps it (tmpfs); another reboot waits again."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir()
    admin_pw = init_vault(home)
    seal_old_detector(home, admin_pw)
    guard_runtime.remove(str(home))
    (ws / "history").write_text(f"pass_mgr set a1 /ws db v {admin_pw}\n")
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        assert offline_guess_testers([home]) == []
        status = pass_mgr(home, "admin", "status")
        assert status.stdout == "ready\n"
        assert "admin-password guard: waiting for a human to authenticate" in status.stderr
        assert daemon.client.call("GET", "/vault/guard") == {"guard": "waiting"}
        assert daemon.call("/vault/check-leak", {"text": admin_pw, "source": "t"}) == \
            {"leak": False, "guard": "waiting"}
        # A session can neither arm the guard (a KDF oracle) nor borrow its filter.
        answers = run_in_session(daemon, ws, CHANNEL_CLIENT, *[json.dumps(line) for line in (
            {"op": "daemon", "method": "POST", "path": "/vault/guard",
             "body": {"password": admin_pw}},
            {"op": "daemon", "method": "GET", "path": "/vault/guard/filter", "body": {}})])
        assert [(a["ok"], a["status"]) for a in answers] == [(False, 403)] * 2, answers
        wrong = pass_mgr(home, "admin", "guard", "--password-stdin", input="wrong pw 123\n")
        assert wrong.returncode == 5
        assert daemon.client.call("GET", "/vault/guard") == {"guard": "waiting"}
        armed = pass_mgr(home, "admin", "guard", "--password-stdin", input=admin_pw + "\n")
        assert armed.returncode == 0, armed.stderr
        assert "admin-password guard: on" in pass_mgr(home, "admin", "status").stderr
        shown = daemon.call("/exec", {"command": "cat history", "agentId": "a1",
                                      "agentWorkspace": str(ws)})["content"][0]["text"]
        assert shown.strip() == "pass_mgr set a1 /ws db v ######"
        assert pass_mgr(home, "admin", "status").stdout == "locked\n"
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none"):
        assert "admin-password guard: on" in pass_mgr(home, "admin", "status").stderr
    guard_runtime.remove(str(home))
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none"):
        assert "waiting for a human to authenticate" in pass_mgr(home, "admin", "status").stderr
