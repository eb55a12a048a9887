"""Encrypted per-agent secret stores, the admin password, and the leak lock.

A pure library (no Trio, no click): ``pass_mgr`` is its command line and the
daemon's ``/vault/check-leak`` route its only network face.

What this protects: secrets at rest in files, backups, greps, git and
transcripts — every value is AES-256-GCM sealed and every file authenticated.
What it does not: a hostile process running as the same Unix user, which can
read ``PADDEDCELL_HOME/keys/host.key`` and open every store (that is how
agents' ``pass_mgr get`` works without a password). Use a separate Unix user
for agents when that matters.

The names below are imported when first used (PEP 562), not with the package: a
``pass_mgr get`` imports ``vault.read`` and what it needs, never ``api`` and the
writers it pulls in (``vault/read.py`` says why).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .api import (Change, InitReport, agent_secret_values, agent_values_and_bindings,
                      arm_guard, bind_secret, borrow_guard, check_leak, find_leaks, generate_secret,
                      get_secret, guard_state, init_admin, key_bindings, key_history, lend_guard,
                      list_keys, output_guard, random_value, recover, reload_guard, rotate_secret,
                      rotate_store, set_secret, unset_secret, vault_status)
    from .errors import (Busy, Forbidden, IntegrityError, Locked, NoSuchKey, NotInitialized,
                         UnsafePermissions, VaultError)

_ERRORS = ("Busy", "Forbidden", "IntegrityError", "Locked", "NoSuchKey", "NotInitialized",
           "UnsafePermissions", "VaultError")

__all__ = [
    "Busy", "Change", "Forbidden", "InitReport", "IntegrityError", "Locked", "NoSuchKey",
    "NotInitialized", "UnsafePermissions", "VaultError", "agent_secret_values",
    "agent_values_and_bindings", "arm_guard", "bind_secret", "borrow_guard", "guard_state",
    "lend_guard", "reload_guard",
    "check_leak", "find_leaks", "generate_secret", "get_secret", "init_admin", "key_bindings",
    "key_history", "list_keys",
    "output_guard",
    "random_value", "recover", "rotate_secret", "rotate_store", "set_secret", "unset_secret",
    "vault_status",
]


def __getattr__(name: str):
    """A public name, from ``errors`` or ``api``, at its first use (then a plain attribute)."""
    if name in _ERRORS:
        from . import errors as home
    elif name in __all__:
        from . import api as home
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(home, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
