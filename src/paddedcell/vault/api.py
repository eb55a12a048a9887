"""The vault's operations, as plain functions over ``paddedcell.config.Settings``.

Every function checks the admin state first (not initialized or locked after a
leak: nothing but ``vault_status`` and ``init_admin`` works), finds the agent's
store from ``vault.path_template``, and reads under a shared lock or changes
under an exclusive one. Agents' operations need only the host key; ``set``,
``init`` and ``recover`` need the admin password.
"""

from __future__ import annotations

import os

from . import admin, crypto
from .admin import AdminPaths
from .errors import Busy, Forbidden, IntegrityError, NoSuchKey, UnsafePermissions, VaultError
from .files import FileLock, atomic_write, ensure_private_dir, read_private, remove_stale_temps
# Reading (get_secret and the store read every reader shares) lives in .read, which
# `pass_mgr get` imports without this module.
from .read import get_secret, no_store, read_store, store_ref
from .read import load_settings as _load_settings
from .settings import VaultSettings
from .store import STORE_FILE, OpenStore, StoreRef, check_key_name, linked_below, workspace_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: Punctuation of generated values: only what ``printf %q`` leaves as is anywhere in a
#: word (no quotes, $, `, \, globs, braces, redirections, spaces, and not , ; ! ^ ~),
#: and never the mask character #. A value starts with a letter or digit, so it never
#: looks like an option (-x) to the command it is passed to.
SYMBOLS = "-_.:@%+="


# Plain classes, not NamedTuple or dataclasses: building those at import time costs
# `pass_mgr get` several milliseconds of start-up.
class Change:
    """What a write did; ``value`` is set only for generated values (never in repr)."""

    __slots__ = ("key", "version", "generation", "value")

    def __init__(self, key: str | None, version: int | None, generation: int,
                 value: str | None = None):
        self.key, self.version, self.generation, self.value = key, version, generation, value

    def __repr__(self) -> str:
        return (f"Change(key={self.key!r}, version={self.version!r}, "
                f"generation={self.generation!r})")


class InitReport:
    """What ``init_admin`` or ``recover`` did; ``failed`` names stores it could not re-wrap."""

    __slots__ = ("previous_state", "rewrapped", "failed")

    def __init__(self, previous_state: str, rewrapped: int, failed: tuple[str, ...]):
        self.previous_state, self.rewrapped, self.failed = previous_state, rewrapped, failed

    def __repr__(self) -> str:
        return (f"InitReport(previous_state={self.previous_state!r}, "
                f"rewrapped={self.rewrapped!r}, failed={self.failed!r})")


def vault_status(settings: Any = None) -> str:
    """"uninitialized" | "ready" | "locked" | "tampered" (a lock file pass_mgr did not write)."""
    return admin.status(AdminPaths.of(_load_settings(settings)))


# -- reading --------------------------------------------------------------------------


def _real_store_ref(settings: Any, agent_id: str, workspace: str) -> StoreRef:
    """The store to write: never through a symbolic link the agent made in its workspace
    (the writer would create and write the store wherever it points, as itself)."""
    ref = store_ref(settings, agent_id, workspace)
    link = linked_below(workspace, ref.directory)
    if link is not None:
        raise UnsafePermissions(f"refusing the store of agent {agent_id}: {link} is a symbolic "
                                "link (the store must be a real directory in the workspace); "
                                f"remove it (rm {link}) and try again")
    return ref


def agent_secret_values(agent_id: str, workspace: str, *, settings: Any = None) -> list[str]:
    """Every current and historical value in the agent's store, for redaction, and the
    retired ones (unset, rotated out) for ``vault.retired_mask_days`` after they left."""
    store = read_store(_load_settings(settings), agent_id, workspace)
    return [] if store is None else store.all_values()


def list_keys(agent_id: str, workspace: str, *, settings: Any = None) -> list[str]:
    store = read_store(_load_settings(settings), agent_id, workspace)
    return [] if store is None else store.keys()


def agent_values_and_bindings(agent_id: str, workspace: str, *, settings: Any = None
                              ) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``agent_secret_values`` and ``key_bindings`` from one read of the store (what a
    session start needs: its masks, and whether egress is on for it)."""
    store = read_store(_load_settings(settings), agent_id, workspace)
    return ([], {}) if store is None else (store.all_values(), store.bindings())


def store_places(settings: Any = None) -> list[tuple[str, str]]:
    """(agent id, workspace) of every registered store whose workspace is known (kept since
    this release, else read back through ``vault.path_template``): the stores a daemon
    watches, so that their values are masked wherever they could be printed."""
    settings = _load_settings(settings)
    template = VaultSettings.of(settings).path_template
    places = []
    for directory, agent_id, workspace in admin.store_records(AdminPaths.of(settings)):
        if workspace is None:
            try:
                agent_id = _agent_id_of(read_private(os.path.join(str(directory), STORE_FILE)))
            except (OSError, VaultError):
                continue
            workspace = workspace_of(template, agent_id, str(directory))
        if agent_id and workspace:
            places.append((agent_id, workspace))
    return places


def key_bindings(agent_id: str, workspace: str, *,
                 settings: Any = None) -> dict[str, dict[str, Any]]:
    """The bound keys of the agent's store and their binding records (no values)."""
    store = read_store(_load_settings(settings), agent_id, workspace)
    return {} if store is None else store.bindings()


def all_bindings(settings: Any = None) -> list[tuple[str, str, dict[str, dict[str, Any]]]]:
    """(agent id, store directory, its bindings) for every known store that has any: what
    ``admin status`` shows a human (names and hosts, never values). Unreadable stores are
    skipped (``pass_mgr list`` in that agent's context says why)."""
    settings = _load_settings(settings)
    paths = AdminPaths.of(settings)
    if admin.status(paths) != "ready":
        return []
    host = admin.read_host_key(paths)
    found = []
    for directory in admin.known_stores(paths):
        path = os.path.join(str(directory), STORE_FILE)
        try:
            raw = read_private(path)
            store = OpenStore.load(raw, _agent_id_of(raw), path,
                                   host_wrap_key=admin.subkey(host, "wrap"),
                                   host_mac_key=admin.subkey(host, "admin-mac"))
        except (OSError, VaultError):
            continue
        if store.bindings():
            found.append((store.agent_id, str(directory), store.bindings()))
    return found


def _binding_record(binding: Any) -> dict[str, Any]:
    """A checked binding record (``egress.binding.Binding`` or its record)."""
    from ..egress.binding import Binding, BindingError

    try:
        parsed = binding if isinstance(binding, Binding) else Binding.from_record(binding)
    except BindingError as exc:
        raise VaultError(str(exc)) from None
    return parsed.to_record()


def key_history(agent_id: str, workspace: str, key: str, *,
                settings: Any = None) -> list[tuple[int, str]]:
    """(version, created) of each kept value, newest first; no values."""
    check_key_name(key)
    store = read_store(_load_settings(settings), agent_id, workspace)
    if store is None:
        raise no_store(agent_id, key)
    return store.history(key)


# -- changing --------------------------------------------------------------------------


def _mutate(settings: Any, agent_id: str, workspace: str, change: Callable[[OpenStore], Change],
            *, create: bool, missing_key: str | None = None) -> Change:
    """Read-modify-write the agent's store under its exclusive lock, in one atomic replace."""
    paths = AdminPaths.of(settings)
    admin.require_ready(paths)
    ref = _real_store_ref(settings, agent_id, workspace)

    def missing() -> NoSuchKey:
        if missing_key is None:
            return NoSuchKey(f"agent {agent_id} has no secrets yet; nothing to rotate")
        return no_store(agent_id, missing_key)

    if not create and not os.path.lexists(ref.file):
        raise missing()
    ensure_private_dir(ref.directory)
    host = admin.read_host_key(paths)
    timeout = VaultSettings.of(settings).lock_timeout
    # The admin lock shared: no store is written (or created) while an admin init or
    # recover re-wraps stores, so none is left with a wrap to a replaced admin key.
    with FileLock(paths.lock_file, exclusive=False, timeout=timeout), \
            FileLock(ref.lock, exclusive=True, timeout=timeout):
        remove_stale_temps(ref.directory)
        try:
            raw = read_private(ref.file)
        except FileNotFoundError:
            if not create:
                raise missing() from None
            store, is_new = OpenStore.new(agent_id), True
        else:
            store = OpenStore.load(raw, agent_id, str(ref.file),
                                   host_wrap_key=admin.subkey(host, "wrap"),
                                   host_mac_key=admin.subkey(host, "admin-mac"))
            admin.check_generation(paths, store.store_id, store.generation, str(ref.file))
            is_new = False
        result = change(store)
        if store.wrap_admin is None:
            store.rewrap_admin(admin.admin_public_key(admin.load_admin(paths, host)))
        admin.register_store(paths, ref.directory, agent_id, os.path.normpath(workspace))
        atomic_write(ref.file, store.serialize(admin.subkey(host, "wrap"),
                                               admin.subkey(host, "admin-mac")))
        admin.record_generation(paths, store.store_id, store.generation)
    return Change(result.key, result.version, store.generation, result.value)


def _retire_until(settings: Any) -> int | None:
    """Until when values leaving the store stay masked (None: not at all)."""
    import time

    days = VaultSettings.of(settings).retired_mask_days
    return int(time.time() + days * 86400) if days > 0 else None


def random_value(length: int, symbols: bool = True) -> str:
    """``length`` characters from the OS CSPRNG (letters, digits, shell-safe symbols)."""
    import secrets  # imported here: it pulls in hashlib, which `get` does not need
    import string

    if not 1 <= length <= 4096:
        raise VaultError(f"length must be between 1 and 4096, not {length}")
    alnum = string.ascii_letters + string.digits
    alphabet = alnum + (SYMBOLS if symbols else "")
    return secrets.choice(alnum) + "".join(secrets.choice(alphabet) for _ in range(length - 1))


def generate_secret(agent_id: str, workspace: str, key: str, *, length: int | None = None,
                    symbols: bool = True, force: bool = False, settings: Any = None) -> Change:
    """Store a fresh random value under ``key``; refuses to replace one without ``force``."""
    settings = _load_settings(settings)
    check_key_name(key)
    length = int(length or VaultSettings.of(settings).generate_length)
    value = random_value(length, symbols)

    def change(store: OpenStore) -> Change:
        if key in store.entries and not force:
            raise VaultError(f"{key!r} already exists; use --force to replace it "
                             "(the old value stays in its history)")
        version = store.put(key, value, depth=VaultSettings.of(settings).history_depth,
                            created=admin.now_iso(), meta={"length": length, "symbols": symbols},
                            retire_until=_retire_until(settings))
        return Change(key, version, 0, value)

    return _mutate(settings, agent_id, workspace, change, create=True)


def rotate_secret(agent_id: str, workspace: str, key: str, *, settings: Any = None) -> Change:
    """Give ``key`` a fresh random value; the previous one stays in its history."""
    settings = _load_settings(settings)
    check_key_name(key)

    def change(store: OpenStore) -> Change:
        entry = store.entries.get(key)
        if entry is None:
            raise no_store(agent_id, key)
        length = int(entry.get("length") or VaultSettings.of(settings).generate_length)
        symbols = bool(entry.get("symbols", True))
        value = random_value(length, symbols)
        version = store.put(key, value, depth=VaultSettings.of(settings).history_depth,
                            created=admin.now_iso(), meta={"length": length, "symbols": symbols},
                            retire_until=_retire_until(settings))
        return Change(key, version, 0, value)

    return _mutate(settings, agent_id, workspace, change, create=False, missing_key=key)


def rotate_store(agent_id: str, workspace: str, *, settings: Any = None) -> Change:
    """Re-encrypt the agent's whole store under a fresh data key, in one atomic replace."""
    settings = _load_settings(settings)

    def change(store: OpenStore) -> Change:
        store.rekey()
        return Change(None, None, 0)

    return _mutate(settings, agent_id, workspace, change, create=False)


def unset_secret(agent_id: str, workspace: str, key: str, *, settings: Any = None) -> Change:
    """Delete ``key`` and its history."""
    settings = _load_settings(settings)
    check_key_name(key)

    def change(store: OpenStore) -> Change:
        store.remove(key, retire_until=_retire_until(settings))
        return Change(key, None, 0)

    return _mutate(settings, agent_id, workspace, change, create=False, missing_key=key)


def set_secret(agent_id: str, workspace: str, key: str, value: str, admin_password: str,
               settings: Any = None, *, allow_short: bool = False,
               binding: Any = None) -> Change:
    """A human sets ``key`` to ``value``; the admin password must be right (else Forbidden).
    A value under ``vault.min_length`` characters is refused unless ``allow_short``.
    ``binding`` (hosts the value may travel to) replaces the key's binding; without it a
    key keeps the binding it had."""
    settings = _load_settings(settings)
    record = None if binding is None else _binding_record(binding)
    check_key_name(key, show=False)  # swapped arguments would put the value here
    if not isinstance(value, str) or not value:
        raise VaultError("the secret value is empty; give a value")
    if "\n" in value or "\r" in value or "\0" in value:
        raise VaultError("the secret value contains a newline or NUL; give one line")
    if not _is_utf8(value):
        raise VaultError("the secret value is not valid UTF-8; give it as UTF-8 text")
    paths = AdminPaths.of(settings)
    admin.require_ready(paths)
    minimum = VaultSettings.of(settings).min_length
    if len(value) < minimum and not allow_short:
        raise VaultError(f"the secret is {len(value)} characters, under vault.min_length "
                         f"({minimum}): its encoded forms would not be masked and the mask "
                         "would confirm a guess; use a longer one, or give --allow-short")
    _authenticate(paths, admin_password)

    def change(store: OpenStore) -> Change:
        version = store.put(key, value, depth=VaultSettings.of(settings).history_depth,
                            created=admin.now_iso(), retire_until=_retire_until(settings))
        if record is not None:
            store.set_binding(key, record)
        return Change(key, version, 0)

    return _mutate(settings, agent_id, workspace, change, create=True)


def bind_secret(agent_id: str, workspace: str, key: str, binding: Any, admin_password: str,
                settings: Any = None) -> Change:
    """A human binds ``key`` to hosts (``binding`` None: unbinds it); the admin password
    must be right (else Forbidden). The key must exist; its value does not change."""
    settings = _load_settings(settings)
    check_key_name(key)
    record = None if binding is None else _binding_record(binding)
    paths = AdminPaths.of(settings)
    admin.require_ready(paths)
    _authenticate(paths, admin_password)

    def change(store: OpenStore) -> Change:
        if key not in store.entries:
            raise no_store(agent_id, key)
        store.set_binding(key, record)
        return Change(key, None, 0)

    return _mutate(settings, agent_id, workspace, change, create=False, missing_key=key)


# -- admin -----------------------------------------------------------------------------


def _authenticate(paths: AdminPaths, password: str) -> str | None:
    """Check a human's admin password (the admin KDF; Forbidden when wrong) and arm this
    process's admin-password guard with it, leaving its filter for daemons that start
    later (``guard.arm``)."""
    from . import guard

    host = admin.read_host_key(paths)
    doc = admin.load_admin(paths, host)
    admin.unlock_admin_private(doc, password)
    return guard.arm(password, doc, paths, host)


def arm_guard(password: str, settings: Any = None) -> str | None:
    """``pass_mgr admin guard`` and the daemon's ``POST /vault/guard``: a human gives the
    admin password; once the admin KDF confirms it, this process masks it in output and
    daemons that start later load its filter. Returns why no runtime file could keep it
    for them (None when one does: ``vault/guard_runtime.py``)."""
    settings = _load_settings(settings)
    paths = AdminPaths.of(settings)
    if admin.status(paths) == "uninitialized":
        raise admin.NotInitialized()
    return _authenticate(paths, password)


def reload_guard(settings: Any = None) -> str:
    """The daemon's ``POST /vault/guard {reload: true}``: look at the runtime file again now
    (a human's process just wrote it) and say the guard's state."""
    from . import guard

    paths = AdminPaths.of(_load_settings(settings))
    guard.look_again()
    return guard.state(paths)


def guard_state(settings: Any = None) -> str:
    """This process's admin-password guard: "armed", "waiting" (no human gave the password
    since it started) or "uninitialized" (``vault/guard.py``)."""
    from . import guard

    return guard.state(AdminPaths.of(_load_settings(settings)))


def lend_guard(settings: Any = None) -> dict[str, Any] | None:
    """The armed detector's filter (``L + 16`` bits per form, never a test: a hit is
    confirmed by the admin KDF) for a foreground ``pcexec``; None while waiting."""
    from . import guard

    found = guard.current(AdminPaths.of(_load_settings(settings)))
    return None if found is None else found.filter_json()


def borrow_guard(filter_json: dict[str, Any], settings: Any = None) -> None:
    """Hold the filter a daemon lent (``lend_guard``); its hits are confirmed by the KDF."""
    from . import guard

    paths = AdminPaths.of(_load_settings(settings))
    guard.adopt(filter_json, admin.load_admin(paths, admin.read_host_key(paths)))


def _check_new_password(password: str, settings: Any) -> None:
    minimum = VaultSettings.of(settings).admin_password_min_length
    if not isinstance(password, str) or len(password) < minimum:
        raise VaultError(f"the admin password is too short: use at least {minimum} characters")
    from .leak import MAX_PASSWORD_BYTES

    if len(password.encode("utf-8", "surrogatepass")) > MAX_PASSWORD_BYTES:
        raise VaultError(f"the admin password is too long: use at most {MAX_PASSWORD_BYTES} "
                         "bytes (UTF-8)")
    if password != password.strip() or "\n" in password or "\0" in password:
        raise VaultError("the admin password must not start or end with spaces "
                         "or contain a newline")
    if password.startswith("#"):
        # What output guards hold back must not depend on the password (leak.pending).
        raise VaultError("the admin password must not start with '#' (output masks end "
                         "with it); choose another first character")
    if not _is_utf8(password):
        raise VaultError("the admin password is not valid UTF-8; give it as UTF-8 text")


def _is_utf8(text: str) -> bool:
    """False for lone surrogates: how Python hands over non-UTF-8 bytes from argv."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def init_admin(password: str, settings: Any = None, *,
               current_password: str | None = None) -> InitReport:
    """Set the admin password and re-wrap every known store to the new admin key.

    Uninitialized: first setup. Locked after a leak: the old password is burnt, so
    it is not asked for. Ready: a password change, which needs ``current_password``.

    Journaled, so that a crash at any point leaves every store openable by the host
    key and recoverable by a password the human knows:

    1. the new admin.json is written as ``admin.next.json`` (the journal);
    2. every known store gets ``wrap_admin_next``, its data key wrapped to the new
       admin key, beside the old ``wrap_admin``;
    3. ``admin.next.json`` replaces admin.json (one rename: the commit);
    4. every store's ``wrap_admin_next`` becomes its ``wrap_admin``;
    5. the leak lock is cleared.

    Before 3 the old password still recovers every store, after it the new one does.
    The next ``admin init`` or ``recover`` first finishes what a crash left: before
    the commit it rolls back (drops the journal), after it rolls forward (step 4).
    Writers of stores hold the admin lock shared, so no store appears mid-way.
    """
    settings = _load_settings(settings)
    _check_new_password(password, settings)
    paths = AdminPaths.of(settings)
    ensure_private_dir(paths.home)
    ensure_private_dir(paths.vault_dir)
    with FileLock(paths.lock_file, exclusive=True, timeout=VaultSettings.of(settings).lock_timeout):
        _finish_interrupted_init(settings, paths)
        previous = admin.status(paths)
        if previous == "ready":
            if current_password is None:
                raise Forbidden("pass_mgr is already initialized; changing the admin password "
                                "needs the current one")
            host = admin.read_host_key(paths)
            admin.unlock_admin_private(admin.load_admin(paths, host), current_password)
        elif previous == "tampered":
            host = admin.read_host_key(paths)
            if current_password is None:
                raise Forbidden(f"{paths.locked_file} was not written by pass_mgr (its MAC "
                                "does not verify); changing the admin password needs the "
                                "current one (or remove the file if you know why it is there)")
            admin.unlock_admin_private(admin.load_admin(paths, host), current_password)
        elif previous == "locked":
            host = admin.read_host_key(paths)
        else:
            try:
                host = admin.read_host_key(paths)
            except IntegrityError:
                host = admin.create_host_key(paths)
                crash_point("host key created")
        admin_bytes, public = admin.build_admin(settings, password, host)
        atomic_write(paths.admin_next_file, admin_bytes)
        crash_point("journal written")
        rewrapped, failed = _rewrap_known_stores(settings, paths, host, public,
                                                 slot="wrap_admin_next")
        _commit_admin(paths)
        _rewrap_known_stores(settings, paths, host, public, slot="promote")
        admin.clear_locked(paths)
        crash_point("lock cleared")
        _arm_new(paths, host, password)
        admin.log_security(paths, "INFO", "admin-init", previous=previous,
                           stores_rewrapped=rewrapped, stores_failed=len(failed))
    return InitReport(previous, rewrapped, tuple(failed))


def crash_point(step: str) -> None:
    """Fault injection for the crash tests: ``PADDEDCELL_TEST_CRASH_AT=N`` ends the
    process (exit 86, no clean-up, like a kill) at the N-th step of this process."""
    global _steps
    _steps += 1
    if os.environ.get("PADDEDCELL_TEST_CRASH_AT") == str(_steps):
        os._exit(86)


_steps = 0


def _commit_admin(paths: AdminPaths) -> None:
    """Step 3 of init_admin: the journal becomes admin.json (one atomic rename)."""
    from .files import fsync_dir

    os.replace(paths.admin_next_file, paths.admin_file)
    fsync_dir(paths.vault_dir)
    crash_point("admin.json committed")


def _finish_interrupted_init(settings: Any, paths: AdminPaths) -> None:
    """Roll back an init that crashed before its commit, or forward one that crashed after.
    Call under the exclusive admin lock."""
    if os.path.lexists(paths.admin_next_file):
        os.unlink(paths.admin_next_file)  # before the commit: the old admin.json rules
        from .files import fsync_dir

        fsync_dir(paths.vault_dir)
        return
    if not os.path.lexists(paths.admin_file):
        return
    try:
        host = admin.read_host_key(paths)
        public = admin.admin_public_key(admin.load_admin(paths, host))
    except VaultError:
        return  # recover's business (a lost host key); it opens either wrap
    _rewrap_known_stores(settings, paths, host, public, slot="promote")


def _rewrap_known_stores(settings: Any, paths: AdminPaths, host: bytes, public: bytes, *,
                         admin_private: bytes | None = None,
                         slot: str = "wrap_admin") -> tuple[int, list[str]]:
    """Re-wrap each registered store; with ``admin_private``, open it through the admin wrap.

    ``slot``: "wrap_admin" re-wraps to ``public``; "wrap_admin_next" adds the wrap of an
    admin init in progress; "promote" makes that wrap the store's wrap_admin (a store
    without one, e.g. re-keyed since, is wrapped to ``public``), skipping stores with
    nothing to promote.
    """
    done, failed = 0, []
    for directory in admin.known_stores(paths):
        ref = StoreRef(directory.name, str(directory))
        try:
            with FileLock(ref.lock, exclusive=True,
                          timeout=VaultSettings.of(settings).lock_timeout):
                remove_stale_temps(ref.directory)
                raw = read_private(ref.file)
                agent_id = _agent_id_of(raw)
                wrap_key, mac_key = admin.subkey(host, "wrap"), admin.subkey(host, "admin-mac")
                try:
                    store = OpenStore.load(raw, agent_id, str(ref.file), host_wrap_key=wrap_key,
                                           host_mac_key=mac_key)
                except IntegrityError:
                    if admin_private is None:
                        raise
                    store = OpenStore.load(raw, agent_id, str(ref.file),
                                           admin_private=admin_private)
                admin.check_generation(paths, store.store_id, store.generation, str(ref.file))
                if slot == "promote":
                    if store.wrap_admin_next is None:
                        continue
                    store.wrap_admin, store.wrap_admin_next = store.wrap_admin_next, None
                else:
                    store.rewrap_admin(public, slot=slot)
                    if slot == "wrap_admin":
                        store.wrap_admin_next = None
                atomic_write(ref.file, store.serialize(wrap_key, mac_key))
                admin.record_generation(paths, store.store_id, store.generation)
            crash_point(f"store {slot}")
            done += 1
        except FileNotFoundError:
            continue  # the workspace was removed; nothing to re-wrap
        except (OSError, VaultError) as exc:
            failed.append(f"{directory}: {exc}")
    return done, failed


def _agent_id_of(raw: bytes) -> str:
    agent_id = crypto.parse_canonical(crypto.split_file(raw, "store")[1], "store").get("agent_id")
    if not isinstance(agent_id, str):
        raise crypto.damaged("a store")
    return agent_id


def recover(password: str, settings: Any = None) -> InitReport:
    """After the host key is lost: a new host key, every known store re-opened via the admin wrap."""
    settings = _load_settings(settings)
    paths = AdminPaths.of(settings)
    with FileLock(paths.lock_file, exclusive=True, timeout=VaultSettings.of(settings).lock_timeout):
        if os.path.lexists(paths.admin_next_file):  # an init crashed before its commit
            os.unlink(paths.admin_next_file)
        previous = admin.status(paths)
        if previous == "uninitialized":
            raise admin.NotInitialized()
        # The MAC first whenever the host key is there to check it; only a lost or
        # damaged host key leaves admin.json unverified, and then the KDF may demand no
        # more than this host's settings (the sealed key still authenticates itself).
        try:
            doc, ceiling = admin.load_admin(paths, admin.read_host_key(paths)), None
        except IntegrityError:
            from .admin_crypto import kdf_ceiling

            doc, ceiling = admin.parse_admin_unverified(paths), kdf_ceiling(settings)
        private = admin.unlock_admin_private(doc, password, kdf_ceiling=ceiling)
        from .admin_crypto import public_of

        public = public_of(private)
        # Every step can be repeated: a crash anywhere is finished by running recover again
        # (stores not yet re-wrapped still open through their admin wrap).
        host = admin.create_host_key(paths)
        crash_point("new host key")
        admin_bytes, _ = admin.build_admin(settings, password, host, keypair=(private, public))
        atomic_write(paths.admin_file, admin_bytes)
        crash_point("admin.json rewritten")
        rewrapped, failed = _rewrap_known_stores(settings, paths, host, public,
                                                 admin_private=private)
        _arm_new(paths, host, password)
        admin.log_security(paths, "WARNING", "admin-recover", previous=previous,
                           stores_rewrapped=rewrapped, stores_failed=len(failed))
    return InitReport(previous, rewrapped, tuple(failed))


# -- leak check -------------------------------------------------------------------------

def _arm_new(paths: AdminPaths, host: bytes, password: str) -> None:
    """After admin.json was written for ``password``: this process's guard masks it, and
    daemons that start later load its filter (``guard.arm``)."""
    from . import guard

    guard.arm(password, admin.load_admin(paths, host), paths, host)


def _detector(paths: AdminPaths) -> Any:
    """The admin-password detector this process holds (None: uninitialized, or waiting
    for a human to authenticate: ``vault/guard.py``)."""
    from . import guard

    return guard.current(paths)


def check_leak(text: str | bytes, source: str, *, settings: Any = None) -> bool:
    """True when ``text`` contains the admin password; then the vault is locked and logged."""
    return bool(find_leaks(text, source, settings=settings))


def find_leaks(text: str | bytes, source: str, *, settings: Any = None) -> list[tuple[int, int]]:
    """Where ``text`` holds the admin password: ``[start, end)`` runs (see ``LeakDetector.spans``:
    code points into a str, bytes into bytes), empty when it does not. A hit locks the vault
    and writes one CRITICAL line (time and source, never the text), whatever the run count."""
    settings = _load_settings(settings)
    paths = AdminPaths.of(settings)
    detector = _detector(paths)
    spans = detector.spans(text) if detector is not None else []
    if not spans:
        return []
    _lock_after_leak(settings, paths, detector, source)
    return spans


def _lock_after_leak(settings: Any, paths: AdminPaths, detector: Any, source: str, *,
                     wait: float | None = None) -> None:
    """Lock the vault and write one CRITICAL line naming ``source`` (never the password).
    ``wait`` bounds the wait for the admin lock; past it the lock file is written anyway
    (a leak must lock even while an admin command holds the lock)."""
    label = " ".join(str(source).split())[:200] or "unknown"
    # Check the source as given too: the fold and cut above can split the password,
    # and its first part would then be logged.
    if detector.contains(str(source)) or detector.contains(label):
        label = "(withheld: the source label contained the password)"
    timeout = VaultSettings.of(settings).lock_timeout if wait is None else wait
    try:
        with FileLock(paths.lock_file, exclusive=True, timeout=timeout):
            admin.write_locked(paths, label)
    except Busy:
        admin.write_locked(paths, label)
    admin.log_security(paths, "CRITICAL", "admin-password-leak", source=label,
                       message="the admin password appeared in this source; pass_mgr is locked "
                               "until a human runs: pass_mgr admin init")


def output_guard(redactor: Any, source: str, *, settings: Any = None,
                 new_redactor: Callable[[list[str]], Any] | None = None) -> Any:
    """``redactor`` (a ``StreamRedactor`` or None) followed by the admin-password scan.

    What a command prints passes through this before anyone sees it (pcexec and
    ``paddedcell process`` output, streamed partials, the displayed command): a hit
    is masked and locks the vault, once per stream. Without an admin password
    (uninitialized) there is nothing to find: ``redactor`` comes back as is. While the
    guard waits for a human (``vault/guard.py``) the stream passes its bytes on and
    starts scanning at the first read after a human authenticates.
    ``new_redactor(values)`` builds a redactor when secrets are added to a stream
    that had none (``add_secrets``).
    """
    settings = _load_settings(settings)
    paths = AdminPaths.of(settings)
    if _detector(paths) is None and not os.path.lexists(paths.admin_file):
        return redactor
    from . import guard
    from .leak import LeakStream

    def on_hit() -> None:
        # Runs where the output is pumped (the daemon's event loop): wait for the admin
        # lock briefly, not vault.lock_timeout_seconds.
        found = guard.detector()
        try:
            if found is not None:
                _lock_after_leak(settings, paths, found, source, wait=0.2)
        except (OSError, VaultError):
            pass  # the output is masked either way; the lock is best effort here

    return LeakStream(guard.detector, redactor, on_hit,
                      VaultSettings.of(settings).mask.encode("utf-8"), new_redactor)


__all__ = [
    "Change", "InitReport", "agent_secret_values", "arm_guard", "borrow_guard", "check_leak",
    "find_leaks", "generate_secret", "guard_state", "lend_guard", "output_guard",
    "reload_guard",
    "get_secret", "init_admin", "key_history", "list_keys", "random_value", "recover",
    "rotate_secret", "rotate_store", "set_secret", "unset_secret", "vault_status",
]
