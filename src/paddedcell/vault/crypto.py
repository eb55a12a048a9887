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
    import binascii  # writers only: a get decodes (b64d) and never loads binascii

    return binascii.b2a_base64(data, newline=False).decode("ascii")


#: Each base64 character as its 6 bits in two octal digits: a text becomes one octal
#: number (``int(..., 8)``, linear time, no digit limit) of exactly its bits.
_OCTAL_OF = {ord(char): f"{value:02o}" for value, char in enumerate(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def b64d(text: Any, what: str = "a vault file") -> bytes:
    """The bytes of a canonical base64 text (what :func:`b64e` writes for them), else
    :func:`damaged`: one text per value, so a flipped bit anywhere, even in the unused
    low bits of the last character, is noticed."""
    if not isinstance(text, str) or len(text) % 4:
        raise damaged(what)
    body = text.rstrip("=")
    if len(text) - len(body) != -len(body) % 4 or len(body) % 4 == 1:
        raise damaged(what)  # "=" only as the padding a canonical text has
    octal = body.translate(_OCTAL_OF)
    if len(octal) != 2 * len(body):  # any other character stays one character
        raise damaged(what)
    size, spare = divmod(6 * len(body), 8)
    value = int(octal, 8) if body else 0
    if value & ((1 << spare) - 1):
        raise damaged(what)  # set bits past the data: not the canonical text
    return (value >> spare).to_bytes(size, "big")


#: CRC-32 (ISO-HDLC, as zlib and binascii) by byte, reflected polynomial 0xEDB88320.
_CRC_TABLE = (
    0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f, 0xe963a535, 0x9e6495a3,
    0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988, 0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91,
    0x1db71064, 0x6ab020f2, 0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
    0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9, 0xfa0f3d63, 0x8d080df5,
    0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172, 0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b,
    0x35b5a8fa, 0x42b2986c, 0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
    0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423, 0xcfba9599, 0xb8bda50f,
    0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924, 0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d,
    0x76dc4190, 0x01db7106, 0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
    0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d, 0x91646c97, 0xe6635c01,
    0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e, 0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457,
    0x65b0d9c6, 0x12b7e950, 0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
    0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7, 0xa4d1c46d, 0xd3d6f4fb,
    0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0, 0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9,
    0x5005713c, 0x270241aa, 0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
    0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81, 0xb7bd5c3b, 0xc0ba6cad,
    0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a, 0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683,
    0xe3630b12, 0x94643b84, 0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
    0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb, 0x196c3671, 0x6e6b06e7,
    0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc, 0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5,
    0xd6d6a3e8, 0xa1d1937e, 0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
    0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55, 0x316e8eef, 0x4669be79,
    0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236, 0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f,
    0xc5ba3bbe, 0xb2bd0b28, 0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
    0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f, 0x72076785, 0x05005713,
    0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38, 0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21,
    0x86d3d2d4, 0xf1d4e242, 0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
    0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69, 0x616bffd3, 0x166ccf45,
    0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2, 0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db,
    0xaed16a4a, 0xd9d65adc, 0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
    0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693, 0x54de5729, 0x23d967bf,
    0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94, 0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
)


def crc32(data: bytes) -> int:
    """``binascii.crc32(data)``, without loading binascii (see the module docstring)."""
    crc, table = 0xFFFFFFFF, _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


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
