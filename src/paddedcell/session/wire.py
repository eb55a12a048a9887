"""One JSON line each way over a session's channel, without importing ``json`` or ``socket``.

``pass_mgr get`` inside a session starts a fresh interpreter for one exchange of a few
dozen bytes. The ``json`` package imports ``re`` (and with it ``enum``, ``functools``,
``collections``) and ``socket`` imports ``selectors`` and ``enum``: together more than the
rest of the call. Their C halves, ``_json`` (the same scanner and string encoder ``json``
uses) and ``_socket``, need none of that. Where an interpreter lacks them (not
CPython), the public modules take over with the same results.
"""

from __future__ import annotations

try:
    from _json import encode_basestring as _quote
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - CPython always has _json
    _quote = _make_scanner = None

#: JSON's whitespace, what ``json.loads`` skips around a document.
_BLANKS = " \t\n\r"


class _Reading:
    """What ``_json.make_scanner`` reads off a decoder: ``json.loads``' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name)  # "NaN", "Infinity", "-Infinity", as json.loads reads them


_scan = _make_scanner(_Reading()) if _make_scanner is not None else None


def _flat_scalar(value) -> str | None:
    """The JSON text of a string, whole number, bool or null; None for anything else."""
    if isinstance(value, str):
        return _quote(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    return None


def encode_line(message: dict) -> bytes:
    """``json.dumps(message, ensure_ascii=False)`` and a newline, as UTF-8 bytes.

    A flat request (``pass_mgr``'s: strings, whole numbers, flags) is written here; one
    with a nested body (``pcexec``, ``process``) goes through ``json``.
    """
    if _quote is not None:
        parts = []
        for name, value in message.items():
            text = _flat_scalar(value) if isinstance(name, str) else None
            if text is None:
                break
            parts.append(f"{_quote(name)}: {text}")
        else:
            return ("{" + ", ".join(parts) + "}\n").encode()
    import json

    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


def decode_line(raw: bytes):
    """``json.loads(raw)``: the document in one line; ValueError when it is not one."""
    if _scan is None:  # pragma: no cover - CPython always has _json
        import json

        return json.loads(raw)
    text = raw.decode("utf-8", "surrogatepass")  # as json.loads; a ValueError when not UTF-8
    start = len(text) - len(text.lstrip(_BLANKS))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("no JSON document") from None
    if text[end:].strip(_BLANKS):
        raise ValueError("more than one JSON document")
    return value
