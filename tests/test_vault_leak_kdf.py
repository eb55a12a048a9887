"""Issue 20: the sealed leak detector tests no guess faster than the admin KDF.

Whoever holds the host key can unseal the detector. It used to keep a keyed BLAKE2b of
the admin password: a guess cost one hash. Now each form keeps a 16-bit digest (a filter)
and a hit is confirmed by the admin KDF against admin.json's verifier, as admin init
checks a password; detectors sealed before are truncated and written back on first load.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from paddedcell import config
from paddedcell.vault import admin, admin_crypto, check_leak, crypto, init_admin
from paddedcell.vault.api import _forget_detector
from paddedcell.vault.leak import DIGEST_BYTES, encoded_forms

FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}
PW = "kdf guarded admin pw"


@pytest.fixture
def s(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)
    init_admin(PW, settings)
    _forget_detector()
    return settings


def sealed_detector(s) -> tuple[dict, dict, bytes]:
    paths = admin.AdminPaths(s.home_text)
    host = admin.read_host_key(paths)
    doc = admin.load_admin(paths, host)
    plain = crypto.unseal(admin.subkey(host, "detector"), doc["detector"],
                          crypto.aad("detector"), "detector")
    return json.loads(plain), doc, host


def test_the_sealed_detector_keeps_a_filter_and_hits_cost_the_kdf(s, monkeypatch):
    detector, _, _ = sealed_detector(s)
    assert all(len(bytes.fromhex(form[2])) == DIGEST_BYTES for form in detector["forms"])
    calls = []
    real = admin_crypto.derive
    monkeypatch.setattr(admin_crypto, "derive", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert not check_leak("nothing to see here, " * 50, "test", settings=s)
    assert calls == []  # no filter hit: no KDF
    assert check_leak(f"x {PW} y {PW}", "test", settings=s)
    assert len(calls) == 1  # one KDF confirms the hit; the repeat is cached


def test_a_detector_sealed_with_full_digests_is_migrated(s):
    detector, doc, host = sealed_detector(s)
    key = bytes.fromhex(detector["key"])
    for form, item in zip(encoded_forms(PW), detector["forms"]):
        item[2] = hashlib.blake2b(form, key=key, digest_size=32).hexdigest()  # the old way

    class Old:
        def to_json(self):
            return detector

    paths = admin.AdminPaths(s.home_text)
    admin.reseal_detector(paths, host, doc, Old())
    _forget_detector()
    assert all(len(item[2]) == 64 for item in sealed_detector(s)[0]["forms"])
    assert not check_leak("not the password at all", "test", settings=s)
    assert all(len(bytes.fromhex(item[2])) == DIGEST_BYTES
               for item in sealed_detector(s)[0]["forms"])
    assert check_leak(f"here: {PW}", "test", settings=s)
