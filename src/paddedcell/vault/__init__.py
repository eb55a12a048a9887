"""Encrypted per-agent secret stores, the admin password, and the leak lock.

A pure library (no Trio, no click): ``pass_mgr`` is its command line and the
daemon's ``/vault/check-leak`` route its only network face.

What this protects: secrets at rest in files, backups, greps, git and
transcripts — every value is AES-256-GCM sealed and every file authenticated.
What it does not: a hostile process running as the same Unix user, which can
read ``PADDEDCELL_HOME/keys/host.key`` and open every store (that is how
agents' ``pass_mgr get`` works without a password). Use a separate Unix user
for agents when that matters.
"""

from .api import (Change, InitReport, agent_secret_values, agent_values_and_bindings,
                  arm_guard, bind_secret, borrow_guard, check_leak, find_leaks, guard_state,
                  lend_guard, reload_guard,
                  generate_secret, get_secret, init_admin, key_bindings, key_history, list_keys,
                  output_guard,
                  random_value,
                  recover, rotate_secret, rotate_store, set_secret, unset_secret, vault_status)
from .errors import (Busy, Forbidden, IntegrityError, Locked, NoSuchKey, NotInitialized,
                     UnsafePermissions, VaultError)

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
