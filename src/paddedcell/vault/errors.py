"""Vault errors: each carries the ``pass_mgr`` exit code and a one-line message.

Exit codes: :mod:`paddedcell.exits` (docs/design.md §4.3).
"""

from __future__ import annotations

from .. import exits

NOT_INITIALIZED_MESSAGE = "pass_mgr is not initialized; a human must run: pass_mgr admin init"
LOCKED_MESSAGE = ("pass_mgr is locked because the admin password leaked; "
                  "a human must run: pass_mgr admin init")


class VaultError(Exception):
    """Base class; ``str()`` is one line that says what to do."""

    exit_code = exits.ERROR

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class NotInitialized(VaultError):
    exit_code = exits.NOT_READY

    def __init__(self, message: str = NOT_INITIALIZED_MESSAGE):
        super().__init__(message)


class Locked(VaultError):
    exit_code = exits.NOT_READY

    def __init__(self, message: str = LOCKED_MESSAGE):
        super().__init__(message)


class NoSuchKey(VaultError):
    exit_code = exits.NO_SUCH_KEY


class Forbidden(VaultError):
    exit_code = exits.FORBIDDEN


class IntegrityError(VaultError):
    """A file was tampered with or is corrupt; never says which check failed how."""

    exit_code = exits.INTEGRITY


class UnsafePermissions(VaultError):
    """A vault file or directory is reachable by other users; the message has the chmod."""

    exit_code = exits.ERROR


class Busy(VaultError):
    """Another pass_mgr held the store's lock for longer than vault.lock_timeout_seconds."""

    exit_code = exits.ERROR
