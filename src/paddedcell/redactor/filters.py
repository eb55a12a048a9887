"""The one way a stream gets the filter its output passes through.

Every output a human or an agent sees (a session's stdout/stderr/PTY, the
displayed command line, ``paddedcell redact``, the vault's admin-password
guard around a redactor) is filtered by an :class:`OutputFilter`, built by
:func:`new_filter` from the ``redactor.*`` settings. :class:`StreamRedactor`,
:class:`Passthrough` and the vault's ``LeakStream`` play that role.
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol, runtime_checkable


@runtime_checkable
class OutputFilter(Protocol):
    """Bytes in, the bytes now safe to show out; what it holds back comes out at ``flush``.

    ``feed`` may be given a memoryview of the caller's buffer (a masking pump's read
    buffer, which its next read overwrites): a filter copies what it keeps.

    ``fresh()`` is a new, empty stream with the same secrets (sharing what
    is expensive to build); ``add_secrets(values)`` masks more values from
    the first byte not yet emitted on.
    """

    def feed(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...

    def fresh(self) -> "OutputFilter": ...

    def add_secrets(self, secrets: Iterable[str | bytes]) -> None: ...


def filter_options(settings) -> dict:
    """The ``redactor.*`` settings as keyword arguments of ``StreamRedactor``/``redact``.

    No ShortSecretWarning (``warn_below_length`` 0): in a session it would reach the
    agent's stderr at every run; the human hears about short values at ``pass_mgr
    set`` instead (``paddedcell redact`` overrides it with ``redactor.warn_below_length``).
    """
    from .variants import Variants  # only with a secret: its tables cost a plain run

    variants = Variants.from_settings(settings["redactor.variants"], settings["redactor.forms_off"])
    return {"mask": settings["redactor.mask"], "variants": variants,
            "variant_min_length": int(settings["redactor.variant_min_length"]),
            "warn_below_length": 0,
            "fragment_min": int(settings["redactor.fragment_min"])}


def new_filter(secrets: Iterable[str | bytes], settings, **overrides) -> OutputFilter:
    """The filter for these secrets under ``settings`` (``overrides`` replace
    single options, e.g. ``mask`` or ``variants`` from a command line).

    No secret: a :class:`Passthrough` (no matcher, no Hyperscan import) that
    becomes a redactor built the same way when secrets are added.
    """
    secrets = [s for s in secrets if s]
    if not secrets:
        return Passthrough(lambda values: new_filter(values, settings, **overrides))
    from .stream import StreamRedactor  # the engine import, only with a secret

    return StreamRedactor(secrets, **{**filter_options(settings), **overrides})


class Passthrough:
    """The filter of an empty secret set: every byte is safe at once, until
    ``add_secrets`` (then a redactor from ``build`` takes over; nothing was
    held, so switching loses no byte)."""

    def __init__(self, build: Callable[[list], OutputFilter] | None = None):
        self._build = build
        self._inner: OutputFilter | None = None

    @property
    def idle(self) -> bool:
        """True while it passes every byte unchanged (no work worth a thread)."""
        return self._inner is None

    def feed(self, data: bytes) -> bytes:
        return self._inner.feed(data) if self._inner is not None else bytes(data)

    def flush(self) -> bytes:
        return self._inner.flush() if self._inner is not None else b""

    def fresh(self) -> "Passthrough":
        other = Passthrough(self._build)
        other._inner = self._inner.fresh() if self._inner is not None else None
        return other

    def add_secrets(self, secrets: Iterable[str | bytes]) -> None:
        values = [s for s in secrets if s]
        if not values:
            return
        if self._inner is not None:
            self._inner.add_secrets(values)
        elif self._build is None:
            raise ValueError("this stream cannot mask secrets: it was built without a redactor factory")
        else:
            self._inner = self._build(values)
