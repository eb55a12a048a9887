"""The vault's settings, typed once: ``VaultSettings.of(settings)``.

Call sites read ``vs.lock_timeout`` (a float) instead of casting
``settings["vault.lock_timeout_seconds"]`` each time; a value of the wrong type is
one :class:`~.errors.VaultError` naming the setting, here, not a ``ValueError`` deep
in an operation. A plain class (no dataclass): ``pass_mgr get`` builds one.
"""

from __future__ import annotations

from .errors import VaultError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_FIELDS = (
    # attribute, setting, type
    ("path_template", "vault.path_template", str),
    ("history_depth", "vault.history_depth", int),
    ("generate_length", "vault.generate_length", int),
    ("lock_timeout", "vault.lock_timeout_seconds", float),
    ("min_length", "vault.min_length", int),
    ("admin_password_min_length", "vault.admin_password_min_length", int),
    ("retired_mask_days", "vault.retired_mask_days", float),
    ("kdf_iterations", "vault.kdf_iterations", int),
    ("kdf_lanes", "vault.kdf_lanes", int),
    ("kdf_memory_kib", "vault.kdf_memory_kib", int),
    ("scrypt_n", "vault.scrypt_n", int),
    ("mask", "redactor.mask", str),
    ("variant_min_length", "redactor.variant_min_length", int),
)


class VaultSettings:
    """The ``vault.*`` (and the two ``redactor.*``) settings the vault uses, typed."""

    __slots__ = tuple(name for name, _, _ in _FIELDS)

    path_template: str
    history_depth: int
    generate_length: int
    lock_timeout: float
    min_length: int
    admin_password_min_length: int
    retired_mask_days: float
    kdf_iterations: int
    kdf_lanes: int
    kdf_memory_kib: int
    scrypt_n: int
    mask: str
    variant_min_length: int

    def __init__(self, settings: Any):
        for name, key, kind in _FIELDS:
            raw = settings[key]
            if kind is not str and isinstance(raw, bool):
                raise VaultError(f"setting {key}={raw!r} is not a number; fix or unset it")
            try:
                value = kind(raw)
            except (TypeError, ValueError, OverflowError):
                raise VaultError(f"setting {key}={raw!r} is not a valid {kind.__name__}; "
                                 "fix or unset it") from None
            setattr(self, name, value)

    @classmethod
    def of(cls, settings: Any) -> "VaultSettings":
        """The typed view of ``settings``, built once per settings object."""
        cached = getattr(settings, "_vault_settings", None)
        if cached is None:
            cached = cls(settings)
            try:
                settings._vault_settings = cached
            except AttributeError:  # a settings object that takes no attributes
                pass
        return cached
