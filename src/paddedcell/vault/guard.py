"""The admin-password guard's leak detector: in memory, and its filter on tmpfs between starts.

Why not on disk (issue 20, item 6): a leak detector is a test of guessed passwords. Sealed
under the host key in admin.json (releases before this one), whoever held a copy of
``PADDEDCELL_HOME`` — host key included — filtered guesses at hash speed (a class pattern
and 16 bits of keyed BLAKE2b per form: ``L + 16`` bits) and paid Argon2 only for the rare
survivors, so any password of fewer than ``L + 16`` bits of entropy fell at hash speed.
The options weighed: seal it under a key the admin KDF derives from the password — but
only someone who knows the password can then open it, and they can build it anew, so
nothing is gained by keeping it; or build it from the password whenever a human gives
one (``admin init``, ``set``, ``bind``, ``recover``, ``admin guard``) and keep it in
memory. So we keep it in memory: on disk nothing derived from the password is left but
admin.json's Argon2 verifier and the admin key sealed under the Argon2-derived key.

Between daemon starts (``vault/guard_runtime.py``): the process a human authenticated in
also seals the detector's *filter* (``L + 16`` bits per form, hits confirmed by the admin
KDF) into a runtime file on tmpfs, outside ``PADDEDCELL_HOME``, gone at reboot; a daemon
(or a foreground ``pcexec``) that holds nothing loads it. This still meets item 6: nothing
of it is offline — not under the home, not in its backups, not after a reboot — and a
same-uid process outside every sandbox that can read it live holds the host key and could
as well read a daemon's memory (where a full test lives); sessions see neither (their
sandbox has its own ``/dev/shm``, ``/tmp`` and ``/run/user/UID``, and no ``/run``).

Where no tmpfs directory is usable the guard is memory only, as before: a daemon that
(re)starts holds no detector until a human next authenticates — the guard is *waiting*
(``pass_mgr admin status``, the daemon's log); after a reboot too. Sessions still start
then: the admin password is never handed to an agent; the guard is the second line, for a
password a human left where an agent can read it.

A detector belongs to one admin.json, whose verifier is kept beside it: when admin.json
changes (another process set a new password) and its verifier is not the one the detector
was built for, the detector is dropped (and a runtime file of another verifier is never
loaded). Pure of Trio; thread-safe (the daemon scans in worker threads).
"""
from __future__ import annotations

import os
import threading
from typing import Any

from . import admin, crypto, guard_runtime
from .admin import AdminPaths
from .errors import Busy, VaultError
from .leak import LeakDetector

#: "armed": a detector is held; "waiting": the vault has an admin password, but no human
#: gave it to this process since it started; "uninitialized": there is nothing to find.
ARMED, WAITING, UNINITIALIZED = "armed", "waiting", "uninitialized"
#: What to tell a human when the guard waits (``admin status``, the daemon's log).
WAITING_HINT = ("waiting for a human to authenticate (run: pass_mgr admin guard); until "
                "then the admin password is not masked in session output")

_lock = threading.Lock()
#: (admin.json verifier, detector) or None.
_armed: tuple[bytes, LeakDetector] | None = None
#: admin.json's (inode, mtime, size) when it was last checked against the detector.
_checked: tuple[int, int, int] | None = None
#: (admin.json stamp, runtime file stamp) when the runtime file was last tried.
_recalled: tuple | None = None


def detector() -> LeakDetector | None:
    """The detector held now (no file access: what a stream asks at every read)."""
    held = _armed
    return held[1] if held is not None else None


def arm(password: str, doc: dict[str, Any], paths: AdminPaths | None = None,
        host_key: bytes | None = None) -> str | None:
    """Hold a detector of ``password``, which the caller has checked against ``doc``'s
    verifier (the admin KDF: ``admin.unlock_admin_private``); with ``paths`` and the host
    key, also leave its filter in the runtime file for daemons that start later. Returns
    why that file could not be written (None when it was, or was not asked for)."""
    verifier, found = crypto.b64d(doc.get("verifier")), LeakDetector.create(password)
    _hold(verifier, found)
    if paths is None or host_key is None:
        return None
    try:
        guard_runtime.save(paths.home, host_key, verifier, found.filter_json())
    except (OSError, VaultError) as exc:
        return str(exc)
    return None


def adopt(filter_json: dict[str, Any], doc: dict[str, Any]) -> None:
    """Hold a daemon's detector filter (``LeakDetector.to_json``: ``L + 16`` bits per form,
    never a test): each window that passes it is confirmed by the admin KDF against
    ``doc``'s verifier (a foreground ``pcexec``, whose memory no human authenticated)."""
    found = LeakDetector.from_json(filter_json)
    found.confirm = admin.password_confirmer(doc)
    _hold(crypto.b64d(doc.get("verifier")), found)


def _hold(verifier: bytes, found: LeakDetector) -> None:
    global _armed
    with _lock:
        _armed = (verifier, found)


def forget() -> None:
    """Drop the detector (and what was checked): the process starts waiting again."""
    global _armed, _checked, _recalled
    with _lock:
        _armed, _checked, _recalled = None, None, None


def look_again() -> None:
    """Read the runtime file at the next ``current`` even if nothing seems changed (its
    writer says it just wrote it), and drop a held detector of another admin.json then."""
    global _checked, _recalled
    with _lock:
        _checked, _recalled = None, None


def _recall(paths: AdminPaths, stamp: tuple | None) -> None:
    """Nothing held: adopt the filter a human's process left in the runtime file, when it
    names admin.json's verifier (tried again only once admin.json or that file changed)."""
    global _recalled
    seen = (stamp, guard_runtime.stamp(paths.home))
    if seen[1] is None or seen == _recalled:
        _recalled = seen
        return
    _recalled = seen
    host = admin.read_host_key(paths)
    doc = admin.load_admin(paths, host)
    found = guard_runtime.load(paths.home, host, crypto.b64d(doc.get("verifier")))
    if found is not None:
        try:
            adopt(found, doc)
        except (ValueError, KeyError, TypeError):
            pass  # a filter this release cannot read: as no file


def current(paths: AdminPaths) -> LeakDetector | None:
    """The detector, once checked against admin.json (a stat while it is unchanged):
    dropped when admin.json is gone or names another password; with none held, the
    runtime file's filter for admin.json's verifier (``_recall``). A detector an older
    release sealed into admin.json is removed from it (``admin.drop_sealed_detector``).
    A damaged admin.json raises its VaultError."""
    global _armed, _checked
    try:
        st = os.stat(paths.admin_file)
    except FileNotFoundError:
        forget()
        return None
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    if stamp != _checked:
        host = admin.read_host_key(paths)
        doc = admin.load_admin(paths, host)
        if "detector" in doc:
            try:
                admin.drop_sealed_detector(paths, host)
                st = os.stat(paths.admin_file)
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            except (OSError, VaultError, Busy):
                stamp = None  # not written back this time: checked again next time
        verifier = crypto.b64d(doc.get("verifier"))
        with _lock:
            if _armed is not None and _armed[0] != verifier:
                _armed = None
            _checked = stamp
    if _armed is None:
        _recall(paths, stamp)
    return detector()


def state(paths: AdminPaths) -> str:
    """ARMED, WAITING or UNINITIALIZED, after ``current``."""
    if current(paths) is not None:
        return ARMED
    return WAITING if os.path.lexists(paths.admin_file) else UNINITIALIZED


def kept_where(paths: AdminPaths) -> str:
    """What ``admin status`` says about daemons that start later: where the armed filter
    is kept for them, or why the guard is memory only here."""
    try:
        directory = guard_runtime.where()
    except VaultError as exc:
        return (f"memory only ({exc}): a daemon that starts waits for a human, as after "
                "a reboot")
    kept = guard_runtime.stamp(paths.home)
    return (f"kept for daemons that start, until reboot, in {kept[0][0]} (tmpfs)" if kept else
            f"nothing kept in {directory} (tmpfs) since the last reboot: a daemon that starts "
            "waits for a human")
