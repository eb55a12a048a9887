"""Vault errors: each carries the ``pass_mgr`` exit code and a one-line message.

Exit codes (DESIGN §4.3): 0 ok, 1 other error, 2 usage, 3 not initialized or
locked, 4 no such key, 5 forbidden, 6 integrity failure, 10 leak found.
"""

from __future__ import annotations

NOT_INITIALIZED_MESSAGE = "pass_mgr is not initialized; a human must run: pass_mgr admin init"
LOCKED_MESSAGE = ("pass_mgr is locked because the admin password leaked; "
                  "a human must run: pass_mgr admin init")


class VaultError(Exception):
    """Base class; ``str()`` is one line that says what to do."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class NotInitialized(VaultError):
    exit_code = 3

    def __init__(self, message: str = NOT_INITIALIZED_MESSAGE):
        super().__init__(message)


class Locked(VaultError):
    exit_code = 3

    def __init__(self, message: str = LOCKED_MESSAGE):
        super().__init__(message)


class NoSuchKey(VaultError):
    exit_code = 4


class Forbidden(VaultError):
    exit_code = 5


class IntegrityError(VaultError):
    """A file was tampered with or is corrupt; never says which check failed how."""

    exit_code = 6


class UnsafePermissions(VaultError):
    """A vault file or directory is reachable by other users; the message has the chmod."""

    exit_code = 1


class Busy(VaultError):
    """Another pass_mgr held the store's lock for longer than vault.lock_timeout_seconds."""

    exit_code = 1
