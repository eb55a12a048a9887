"""Streaming redaction of known secrets: secrets in, bytes in, bytes out; no I/O.

The guarantee: no secret byte, nor an enabled encoded variant of a secret,
reaches the output under any chunking of the input. See
:class:`~paddedcell.redactor.stream.StreamRedactor`.
"""

from importlib import import_module

#: Each public name and the module it comes from, imported when first asked for: a run
#: without a secret (``redactor.filters.Passthrough``) loads no engine, view or dump code.
_FROM = {"StreamRedactor": "stream", "redact": "stream", "ShortSecretWarning": "stream",
         "RedactorStateError": "stream", "Variants": "variants", "OutputFilter": "filters",
         "Passthrough": "filters", "new_filter": "filters", "filter_options": "filters"}

__all__ = list(_FROM)


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_FROM[name]}", __name__), name)
    globals()[name] = value
    return value
