"""The small, dull crypto of the vault: AES-256-GCM boxes, GMAC tags, canonical JSON.

Every box is ``{"nonce", "ct"}`` sealed under a fresh 96-bit random nonce, with
associated data that names what the box is for (format version, agent, store,
key name, entry version), so a box copied to another place fails to open.
Whole files are authenticated with GMAC (AES-GCM over empty plaintext, the file
as associated data, a fresh random nonce per tag: NIST SP 800-38D). Any failure
to open or verify is one :class:`IntegrityError` with no reason: :func:`damaged`
gives every such failure the same words, whichever check it was (as Fernet's one
``InvalidToken``), so an error message is no oracle for a forger.

This module is on the ``pass_mgr get`` path, and AES-GCM is all it needs: the
password KDF and the X25519 admin wrap live in :mod:`.admin_crypto`. Why GMAC
and not HMAC: ``hashes``/``hmac`` (or ``hashlib``) would add 5-12 ms to every
``get``; see :func:`_load_aesgcm` for the same reason. Why a small JSON reader and
writer of our own: ``json`` imports ``re`` (and ``re`` imports ``enum``), about
5 ms of every ``get``. They handle only the canonical subset the vault writes
and hand anything else to ``json``, so results and error messages are the same.
"""

from __future__ import annotations

import binascii
import os

from .errors import IntegrityError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


#: cryptography's AES-GCM class, once a box was sealed or opened (:func:`_aesgcm`).
_AESGCM: Any = None


def _aesgcm(key: bytes) -> Any:
    """cryptography's ``AESGCM(key)``."""
    return (_AESGCM or _load_aesgcm())(key)


def _load_aesgcm() -> Any:
    """Import the AES-GCM class at the first box sealed or opened, so that a daemon that
    has not yet touched a vault does not map cryptography's Rust module (~5.5 MiB of its
    idle RSS). Not from the public module (cryptography.hazmat.primitives.ciphers.aead):
    it imports the whole ciphers package and typing first, ~14 ms of a ~40 ms `pass_mgr
    get`. It re-exports this very class; tests/test_vault.py checks they stay identical
    (``crypto.AESGCM``)."""
    global _AESGCM
    try:
        from cryptography.hazmat.bindings._rust import openssl as _rust_openssl

        _AESGCM = _rust_openssl.aead.AESGCM
    except (ImportError, AttributeError):  # another cryptography layout: the public path
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        _AESGCM = AESGCM
    return _AESGCM


def __getattr__(name: str) -> Any:
    """``crypto.AESGCM``: the class, imported now if no box was sealed or opened yet."""
    if name == "AESGCM":
        return _AESGCM or _load_aesgcm()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: What we write. Format 2 files are ``HEADER + tag + "\n" + canonical JSON``: the tag
#: (GMAC under a host subkey) is verified over the raw JSON bytes before they are
#: parsed. Format 1 files (the JSON alone, its MAC a field inside) are still read and
#: become format 2 at their next write.
FORMAT = 2
HEADER = b"paddedcell-vault/2 "
LABEL = "paddedcell-vault/1"
KEY_BYTES = 32
NONCE_BYTES = 12


def damaged(what: str) -> IntegrityError:
    """The one integrity error: names the file, never which check failed."""
    return IntegrityError(f"{what} failed its integrity check: it is corrupt, was tampered "
                          "with, or belongs to another key or agent; restore it from a backup")


def b64e(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def b64d(text: Any, what: str = "a vault file") -> bytes:
    if not isinstance(text, str):
        raise damaged(what)
    try:
        data = binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise damaged(what) from None
    # Strict mode still ignores the unused low bits of the last character, so two
    # texts decode alike; a flipped bit there in a MAC field would go unnoticed.
    if b64e(data) != text:
        raise damaged(what)
    return data


def aad(*parts: object) -> bytes:
    """Associated data: the label and the parts, joined with '|' (parts never contain '|')."""
    return "|".join((LABEL, *map(str, parts))).encode("utf-8")


def canonical(obj: Any) -> bytes:
    """``json.dumps`` with sorted keys, no spaces and ASCII only, as bytes."""
    parts: list[str] = []
    try:
        _dump(obj, parts)
    except (_NotSimple, RecursionError):
        import json

        return json.dumps(obj, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True).encode("ascii")
    return "".join(parts).encode("ascii")


def parse_canonical(raw: bytes, what: str) -> dict[str, Any]:
    """Parse a vault JSON file and insist it is byte-for-byte canonical.

    The canonical check means a flipped byte anywhere (even in whitespace-like
    spots) is noticed, because the MACs cover the canonical form.
    """
    try:
        obj = _StrictReader(raw.decode("ascii")).document()
    except (_NotSimple, RecursionError, UnicodeDecodeError, AttributeError):
        pass  # not in the simple canonical subset: json decides, with its messages
    else:
        return obj
    import json

    try:
        obj = json.loads(raw, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nesting past the stack: malformed
        raise damaged(what) from None
    try:
        same = isinstance(obj, dict) and canonical(obj) == raw
    except RecursionError:
        same = False
    if not same:
        raise damaged(what)
    return obj


def _not_json(name: str) -> Any:
    """``json`` accepts NaN and Infinity, which are not JSON (RFC 8259); neither is a vault file."""
    raise ValueError(f"{name} is not JSON")


# -- canonical JSON without the json module ---------------------------------------------
#
# The subset: objects with str keys, arrays, str of printable ASCII without '"' or
# '\\', int (at most 18 digits), true, false, null. For these, json.dumps(sort_keys,
# compact, ensure_ascii) writes each character as is, so the encoding is one exact
# string; the writer produces it and the reader accepts nothing else. Anything
# outside the subset raises _NotSimple and the caller falls back to json.

_INT_DIGITS = 18


class _NotSimple(Exception):
    pass


def _plain_text(text: str) -> bool:
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def _dump(obj: Any, out: list[str]) -> None:
    kind = type(obj)
    if kind is str:
        if not _plain_text(obj):
            raise _NotSimple
        out.append(f'"{obj}"')
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif obj is None:
        out.append("null")
    elif kind is int:
        text = str(obj)
        if len(text) > _INT_DIGITS:
            raise _NotSimple
        out.append(text)
    elif kind is dict:
        if not all(type(key) is str for key in obj):
            raise _NotSimple
        out.append("{")
        for index, key in enumerate(sorted(obj)):
            if not _plain_text(key):
                raise _NotSimple
            out.append(f',"{key}":' if index else f'"{key}":')
            _dump(obj[key], out)
        out.append("}")
    elif kind is list or kind is tuple:
        out.append("[")
        for index, item in enumerate(obj):
            if index:
                out.append(",")
            _dump(item, out)
        out.append("]")
    else:
        raise _NotSimple


class _StrictReader:
    """Reads exactly the text ``_dump`` writes (the document must be an object)."""

    __slots__ = ("text", "pos")

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def document(self) -> dict[str, Any]:
        if self.text[:1] != "{":
            raise _NotSimple
        obj = self.value()
        if self.pos != len(self.text):
            raise _NotSimple
        return obj

    def string(self) -> str:
        text, start = self.text, self.pos + 1
        end = text.find('"', start)
        if end < 0:
            raise _NotSimple
        value = text[start:end]
        if "\\" in value or not value.isprintable():
            raise _NotSimple
        self.pos = end + 1
        return value

    def value(self) -> Any:
        text, pos = self.text, self.pos
        char = text[pos:pos + 1]
        if char == '"':
            return self.string()
        if char == "{":
            obj: dict[str, Any] = {}
            self.pos = pos + 1
            if text[self.pos:self.pos + 1] == "}":
                self.pos += 1
                return obj
            previous = None
            while True:
                if text[self.pos:self.pos + 1] != '"':
                    raise _NotSimple
                key = self.string()
                if (previous is not None and key <= previous) or text[self.pos:self.pos + 1] != ":":
                    raise _NotSimple
                self.pos += 1
                obj[key] = self.value()
                previous = key
                char = text[self.pos:self.pos + 1]
                self.pos += 1
                if char == "}":
                    return obj
                if char != ",":
                    raise _NotSimple
        if char == "[":
            items: list[Any] = []
            self.pos = pos + 1
            if text[self.pos:self.pos + 1] == "]":
                self.pos += 1
                return items
            while True:
                items.append(self.value())
                char = text[self.pos:self.pos + 1]
                self.pos += 1
                if char == "]":
                    return items
                if char != ",":
                    raise _NotSimple
        for word, result in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                self.pos = pos + len(word)
                return result
        end = pos + (char == "-")
        while text[end:end + 1].isdigit():  # ASCII text: isdigit is 0-9 only
            end += 1
        digits = text[pos + (char == "-"):end]
        if not digits or len(digits) > _INT_DIGITS or (digits[0] == "0" and len(digits) > 1) \
                or text[pos:end] == "-0" or text[end:end + 1] in (".", "e", "E"):
            raise _NotSimple
        self.pos = end
        return int(text[pos:end])


def _nonce() -> bytes:
    """A fresh random 96-bit nonce. The one seam for known-answer tests: they replace
    this function to make ``seal`` and ``tag`` deterministic."""
    return os.urandom(NONCE_BYTES)


def seal(key: bytes, plaintext: bytes, associated: bytes) -> dict[str, str]:
    nonce = _nonce()
    return {"nonce": b64e(nonce), "ct": b64e(_aesgcm(key).encrypt(nonce, plaintext, associated))}


def unseal(key: bytes, box: Any, associated: bytes, what: str) -> bytes:
    if not isinstance(box, dict):
        raise damaged(what)
    nonce = b64d(box.get("nonce"), what)
    if len(nonce) != NONCE_BYTES:
        raise damaged(what)
    try:
        return _aesgcm(key).decrypt(nonce, b64d(box.get("ct"), what), associated)
    except Exception:  # InvalidTag, or a malformed input: either way the box is bad
        raise damaged(what) from None


def tag(key: bytes, data: bytes) -> str:
    """GMAC of ``data``: base64 of nonce (12 bytes) + tag (16 bytes)."""
    nonce = _nonce()
    return b64e(nonce + _aesgcm(key).encrypt(nonce, b"", data))


def verify_tag(key: bytes, data: bytes, expected: Any, what: str) -> None:
    raw = b64d(expected, what)
    try:
        if len(raw) != NONCE_BYTES + 16:
            raise ValueError("bad tag length")
        _aesgcm(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], data)
    except Exception:
        raise damaged(what) from None


def seal_file(key: bytes, body: bytes, context: bytes) -> bytes:
    """A format-2 file: the header line with the tag of ``context + body``, then ``body``."""
    return HEADER + tag(key, context + body).encode("ascii") + b"\n" + body


def split_file(raw: bytes, what: str) -> tuple[str | None, bytes]:
    """(tag text, body) of a format-2 file; (None, raw) for a format-1 file. Bytes only:
    nothing is parsed here."""
    if not raw.startswith(HEADER):
        return None, raw
    end = raw.find(b"\n", len(HEADER))
    if end < 0:
        raise damaged(what)
    try:
        return raw[len(HEADER):end].decode("ascii"), raw[end + 1:]
    except UnicodeDecodeError:
        raise damaged(what) from None


def open_file(raw: bytes, key: bytes, context: bytes, what: str) -> dict[str, Any]:
    """A verified document: format 2 checks its tag over the raw body *before* parsing;
    format 1 (older files) is parsed and its ``mac`` field checked."""
    tag_text, body = split_file(raw, what)
    if tag_text is None:
        doc = parse_canonical(body, what)
        if doc.get("format") != 1:
            raise damaged(what)
        verify_document(key, doc, context, what)
        return doc
    verify_tag(key, context + body, tag_text, what)
    doc = parse_canonical(body, what)
    if doc.get("format") != FORMAT:
        raise damaged(what)
    return doc


def sign_document(key: bytes, body: dict[str, Any], context: bytes) -> bytes:
    """Canonical bytes of ``body`` plus a ``mac`` field over the rest (and ``context``)."""
    return canonical({**body, "mac": tag(key, context + canonical(body))})


def verify_document(key: bytes, doc: dict[str, Any], context: bytes, what: str) -> None:
    body = {k: v for k, v in doc.items() if k != "mac"}
    verify_tag(key, context + canonical(body), doc.get("mac"), what)
