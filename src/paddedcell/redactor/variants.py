"""The forms a secret takes in real terminal output, and the pattern set they make.

A program rarely prints a secret only verbatim: a PTY turns ``\\n`` into
``\\r\\n``, ``base64`` and ``xxd -p`` encode it, ``set -x`` and ``printf %q``
quote it, curl, JSON and HTML serialisers escape it, ``${v:1}`` slices it.
Every form here is a plain byte string, matched exactly like the secret
itself: one literal set per secret set, which keeps three properties of the
redactor free of special cases — any engine that finds literals is exact,
the hold-back (longest tail that is a prefix of a pattern) stays minimal
and exact, and the slow oracle checks it all. Four forms are families with a separator
between characters (any whitespace run, a line break inside base64/hex,
per-byte ``%XX``, CSI escapes): those are matched through views of the
stream, see :mod:`.views`.

Variants apply only to secrets of at least ``variant_min_length`` bytes: the
forms of a short secret are short strings that ordinary output contains by
chance (GitHub's runner masked every ``e`` and ``f`` for that reason, see
actions/runner #326). The secret itself is always matched, whatever its length.

Fragments
---------
With ``fragments`` on, every run of at least ``fragment_min`` bytes of a
secret of at least ``FRAGMENT_SECRET_MIN`` bytes is masked: ``${v:1}``, a tail
cut at a timeout and a half-printed value show nothing useful. The union of
overlapping occurrences is what gets masked, so registering every
``fragment_min``-byte window of the secret masks any longer run too.

A window is registered only if it is *distinctive*, i.e. it identifies this
secret rather than a kind of token:

* it occurs in no other secret of the set (a window shared by two secrets is
  structure they have in common — a JWT's claims, a key format — and masking
  it would mask every token of that kind in a log);
* at least ``DISTINCT_BYTES`` of its bytes lie outside *public structure*:
  a known token prefix (``ghp_``, ``glpat-``, ``sk-``, ``AKIA`` … in
  :data:`PUBLIC_PREFIXES`), a PEM armour line, and for a JWT everything but
  its signature: the header and the payload are base64 of JSON that anyone
  holding the token can read, low in entropy (``"iat":170…`` and
  ``"user-12`` recur in every token of a log), and a slice of them grants
  nothing; the whole token is still masked as a secret, and so is any
  slice of its signature;
* it has at least ``DISTINCT_BYTES`` different byte values (``AAAAAAAAAAAA``
  in base64 of zeros is nobody's secret).

Where a mask meets text
-----------------------
A secret that begins with the end of the mask (``#Tok3n`` under ``######``),
ends with its beginning, or holds the whole mask could reappear in the
output where a mask meets plain text. :func:`joint_pieces` closes the pattern
set: for every pattern ``p = A + m + B`` where ``m`` is mask bytes that an
output mask could supply (a suffix of the mask when ``A`` is empty, a prefix
when ``B`` is empty, the whole mask otherwise), the plain piece next to the
mask (``B`` or ``A``) is a pattern too, recursively. Output is plain input
bytes and masks, and plain bytes that hold a pattern would have been
covered, so such an occurrence of ``p`` cannot exist. The one case left is a
secret made only of mask bytes (``##`` under ``######``): it lies inside the
mask itself.
"""

from __future__ import annotations

import base64
import codecs
import html
import json
import math
import re
import unicodedata
import warnings
from dataclasses import dataclass, fields, replace
from typing import Iterable
from urllib.parse import quote, quote_plus

#: Secrets shorter than this get no fragments.
FRAGMENT_SECRET_MIN = 16
#: A fragment needs this many bytes outside public structure, and this many
#: different byte values (see module docstring).
DISTINCT_BYTES = 8

#: Token prefixes that say which service issued a key, not which key it is.
PUBLIC_PREFIXES = (
    b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"glpat-", b"gldt-", b"glrt-",
    b"xoxb-", b"xoxp-", b"xoxa-", b"xoxs-", b"xapp-", b"sk-proj-", b"sk-ant-api03-", b"sk-ant-",
    b"sk_live_", b"sk_test_", b"pk_live_", b"rk_live_", b"sk-", b"AKIA", b"ASIA", b"AIza",
    b"npm_", b"pypi-", b"hf_", b"SG.", b"dop_v1_", b"shpat_", b"xai-",
)


@dataclass(frozen=True, slots=True)
class Variants:
    """Which forms of each (long enough) secret are masked too. All on by default."""

    crlf: bool = True  # "\n" as "\r\n" and "\r\r\n" (PTY), words joined by one space (echo $KEY), each line alone;
    # and any run of whitespace where the secret has whitespace (views.py)
    base64: bool = True  # standard and URL-safe alphabets, all three byte alignments
    url: bool = True  # percent-encoding: every byte, quote(), encodeURIComponent; upper/lower hex; "+";
    # and each byte literal or %XX independently, either case (views.py)
    json: bool = True  # JSON string body, with and without \uXXXX for non-ASCII
    hex: bool = True  # lower- and upper-case hex digits
    shell: bool = True  # set -x '\'' quoting, double-quote escapes (declare -p), printf %q
    escapes: bool = True  # backslash escapes both ways: \t <-> TAB, \xNN (Python bytes repr), C escapes
    entities: bool = True  # XML/HTML entities (&amp; &lt; &gt; &quot; &#39; &#x27; &apos;)
    doubling: bool = True  # '' doubling (SQL, YAML), "" (CSV), $$ (Make, Jenkins); quote-trimmed
    fragments: bool = True  # distinctive runs of >= fragment_min bytes (see module docstring)
    wrapped: bool = True  # base64/hex with \r/\n anywhere inside (any column, any offset; see views.py)
    csi: bool = True  # SGR/CSI escape sequences anywhere inside the secret (grep --color; see views.py)
    base32: bool = True  # RFC 4648 base32 (`base32`), all five byte alignments, wrapped too with `wrapped`;
    # also lower case, and base32hex (§7, `basenc --base32hex`), not wrapped
    unicode_escapes: bool = True  # every character as \uXXXX (either hex case); HTML-safe JSON (Go \u0026 \u003c \u003e, gson also = ')
    octal: bool = True  # C octal escapes as bash prints them in the C locale: printf %q, set -x ($'Gehe\303\257m')
    python_ascii: bool = True  # Python ascii()/repr under ASCII output: \xef, \u20ac, \U0001f600
    caret: bool = True  # cat -v / less notation: M-CM-/ for non-ASCII bytes, ^X for controls
    normalized: bool = True  # a non-ASCII secret in NFC and in NFD (macOS file names, copy-paste)
    utf16: bool = True  # UTF-16LE and UTF-16BE (iconv -t UTF-16LE, Windows tools)
    mojibake: bool = True  # UTF-8 read as Latin-1 or CP1252 and written out as UTF-8 again
    folded: bool = True  # the secret with line breaks anywhere inside (fold -w N; see views.py)
    runner_quote: bool = True  # '"' as '\"' with backslashes left alone (GitHub's runner masks that form)
    hexdump: bool = True  # dump layouts: xxd, hexdump, od in hex, octal, decimal, binary, od -c, xxd -i (dumps.py)
    # Every byte (or character) as a number, one after another (number_forms):
    hex_separated: bool = True  # hex pairs joined by ':', '-', ' ' (bytes.hex(':'), fingerprints, C#
    # BitConverter, '%02X ' loops, Node's <Buffer 47 65 …> also past 50 bytes), upper and lower
    hex_escaped: bool = True  # every byte as \x47 (printf/echo -e scripts), upper and lower
    hex_prefixed: bool = True  # 0x47 lists: ', ' and ',' (C arrays, Rust {:#x?}; 0x4A and 0X4A too),
    # Python's list of hex() ['0x47', '0x65']
    decimal: bool = True  # [71, 101, …] joined by ', ' ',' ' ' (Python list(b), Rust {:?}, JSON, Go %v),
    # Node's console.log of an Array/Uint8Array (grouped in padded columns), Java's signed bytes
    # (Arrays.toString, gson), code points of a non-ASCII secret
    octal_bytes: bool = True  # every byte as \107 (printf '\107' scripts), and as '107 145' (od -b style)
    char_refs: bool = True  # HTML/XML numeric references: every character as &#71; / &#x47; / &#x4A;,
    # and only the non-ASCII ones (xmlcharrefreplace, HTML encoders)
    quoted_printable: bool = True  # MIME quoted-printable (quopri, mail bodies) and RFC 2047 Q (headers)
    base85: bool = True  # base85 (b85encode, RFC 1924 alphabet) and Ascii85 (a85encode, PDF, PostScript),
    # all four byte alignments, whole 4-byte groups only
    uuencode: bool = True  # uuencode body (GNU's ` and Python's space for zero), all three alignments

    @classmethod
    def none(cls) -> "Variants":
        return cls(**{f.name: False for f in fields(cls)})

    @classmethod
    def from_settings(cls, enabled: bool, off: str = "") -> "Variants":
        """``redactor.variants`` (all on or all off) less the comma-separated
        names in ``redactor.forms_off`` (e.g. ``"fragments,url"``)."""
        variants = cls.coerce(bool(enabled))
        names = [n.strip() for n in str(off or "").split(",") if n.strip()]
        known = {f.name for f in fields(cls)}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"redactor.forms_off: unknown form {', '.join(unknown)!s}; "
                             f"known: {', '.join(sorted(known))}")
        return replace(variants, **{n: False for n in names})

    @classmethod
    def coerce(cls, value: "bool | Variants") -> "Variants":
        if isinstance(value, Variants):
            return value
        if isinstance(value, bool):
            return cls() if value else cls.none()
        raise TypeError(f"variants must be a bool or Variants, not {type(value).__name__}")


def _inner_forms(secret: bytes, encode, bits: int, alignments: int) -> list[bytes]:
    """``encode`` (``bits`` per output character) of ``secret`` preceded by 0 to
    ``alignments - 1`` other bytes, cut to the characters that lie wholly inside
    the secret's bits.

    Preceded by ``a`` bytes, the secret occupies bits ``[8a, 8(a+n))`` of the
    encoded stream; output character ``j`` covers bits ``[bits*j, bits*(j+1))``.
    Only those characters are the same whatever precedes or follows it, so those
    are what we match (GitHub's runner kept the padded tail and missed ``echo $S |
    base64``, actions/runner #291).
    """
    forms = []
    n = len(secret)
    for a in range(alignments):
        encoded = encode(b"\0" * a + secret)
        forms.append(encoded[(8 * a + bits - 1) // bits:(8 * (a + n)) // bits])
    return forms


def base64_inner_forms(secret: bytes) -> list[bytes]:
    """Base64 of ``secret`` at byte offsets 0, 1 and 2, cut to the stable part."""
    return _inner_forms(secret, base64.b64encode, 6, 3)


def base32_inner_forms(secret: bytes) -> list[bytes]:
    """Base32 of ``secret`` at byte offsets 0 to 4, cut to the stable part."""
    return _inner_forms(secret, base64.b32encode, 5, 5)


_PERCENT_HEX = re.compile(rb"%[0-9A-F]{2}")
_URLSAFE = bytes.maketrans(b"+/", b"-_")
#: bash's printf %q puts a backslash before each of these (``#`` and ``~`` only
#: at the start of a word).
_Q_SPECIAL = frozenset(b" \t!\"$&'()*,;<>?[\\]^`{|}")
_C_ESCAPES = {0x5C: b"\\\\", 0x09: b"\\t", 0x0A: b"\\n", 0x0D: b"\\r", 0x0B: b"\\v", 0x0C: b"\\f",
              0x07: b"\\a", 0x08: b"\\b"}


def _lower_percent(encoded: bytes) -> bytes:
    return _PERCENT_HEX.sub(lambda m: m.group(0).lower(), encoded)


def _printf_q(secret: bytes) -> bytes:
    out = bytearray()
    for i, c in enumerate(secret):
        if c in _Q_SPECIAL or (i == 0 and c in b"#~"):
            out += b"\\"
        out.append(c)
    return bytes(out)


def _c_escaped(secret: bytes) -> bytes:
    out = bytearray()
    for c in secret:
        if c in _C_ESCAPES:
            out += _C_ESCAPES[c]
        elif c < 0x20 or c >= 0x7F:
            out += b"\\x%02x" % c
        else:
            out.append(c)
    return bytes(out)


#: bash's ansic_quote: these controls by letter, every other non-printable byte in octal.
_ANSI_C = {0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v", 0x0C: b"\\f",
           0x0D: b"\\r", 0x1B: b"\\E", 0x27: b"\\'", 0x5C: b"\\\\"}
#: Characters JSON encoders escape for HTML safety: Go's encoding/json; gson adds = and '.
_HTML_SAFE = (b"<>&", b"<>&='")


def _ansi_c_quoted(secret: bytes) -> bytes:
    """The inside of bash's ``$'...'`` in the C locale (``printf %q``, ``set -x``)."""
    out = bytearray()
    for c in secret:
        if c in _ANSI_C:
            out += _ANSI_C[c]
        elif 0x20 <= c < 0x7F:
            out.append(c)
        else:
            out += b"\\%03o" % c
    return bytes(out)


def _caret(secret: bytes) -> bytes:
    """``cat -v``: ``M-`` before bytes >= 0x80, ``^X`` for controls but tab and newline."""
    out = bytearray()
    for c in secret:
        if c >= 0x80:
            out += b"M-"
            c -= 0x80
        if c == 0x7F:
            out += b"^?"
        elif c < 0x20 and c not in (0x09, 0x0A):
            out += b"^" + bytes((c + 0x40,))
        else:
            out.append(c)
    return bytes(out)


def _every_char_escaped(text: str, upper: bool) -> bytes:
    units = text.encode("utf-16-be", "surrogatepass")
    fmt = "\\u%04X" if upper else "\\u%04x"
    return "".join(fmt % int.from_bytes(units[i:i + 2], "big") for i in range(0, len(units), 2)).encode()


def _cp1252_read(secret: bytes) -> str:
    """The bytes as a CP1252 reader shows them (its five holes read as Latin-1, as Windows does)."""
    return "".join(bytes((c,)).decode("cp1252", "strict") if c not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
                   else chr(c) for c in secret)


def base85_inner_forms(secret: bytes, encode) -> list[bytes]:
    """``encode`` (base85 or Ascii85) of ``secret`` at byte offsets 0 to 3, cut
    to the 4-byte groups wholly inside it (each group is one number: any
    character of a group depends on all four bytes). Forms of fewer than two
    groups are left out: they show less of a secret than a fragment does."""
    forms = []
    for a in range(4):
        start = (4 - a) % 4
        groups = (len(secret) - start) // 4
        if groups >= 2:  # whole groups: the encoding of the slice is theirs, one after another
            forms.append(encode(secret[start:start + 4 * groups]))
    return forms


#: uuencode's alphabet: six bits v as chr(32 + v), read from base64's alphabet.
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_UU = bytes.maketrans(_B64_ALPHABET, bytes(range(32, 96)))
_UU_BACKTICK = bytes.maketrans(_B64_ALPHABET, b"`" + bytes(range(33, 96)))
#: Node's util.inspect defaults (breakLength, maxArrayLength, compact).
_NODE_BREAK, _NODE_MAX_ITEMS, _NODE_COMPACT = 80, 100, 3


def _node_grouped(numbers: list[int]) -> bytes | None:
    """The entries of ``console.log`` of a numeric Array/Uint8Array holding
    ``numbers`` as Node (12+) prints it when it groups them in padded columns
    (lib/internal/util/inspect.js, groupArrayElements), from the first number
    to the last one shown; None when Node prints them on one line."""
    entries = [str(v) for v in numbers[:_NODE_MAX_ITEMS]]
    count = len(entries) + (len(numbers) > _NODE_MAX_ITEMS)  # "... N more items" counts here
    if count <= 6:
        return None
    lengths = [len(e) for e in entries]
    total = sum(lengths) + 2 * len(entries)
    actual_max = max(lengths) + 2
    if not (actual_max * 3 < _NODE_BREAK and (total / actual_max > 5 or max(lengths) <= 6)):
        return None
    biased_max = max(actual_max - 3 - math.sqrt(actual_max - total / count), 1)
    columns = min(math.floor(math.sqrt(2.5 * biased_max * len(entries)) / biased_max + 0.5),
                  _NODE_BREAK // actual_max, _NODE_COMPACT * 4, 15)
    if columns <= 1:
        return None
    widths = [max(lengths[i::columns]) + 2 for i in range(columns)]
    rows = []
    for i in range(0, len(entries), columns):
        row = entries[i:i + columns]
        rows.append("".join(f"{e}, ".rjust(widths[j]) for j, e in enumerate(row[:-1]))
                    + row[-1].rjust(widths[len(row) - 1] - 2))
    return ",\n  ".join(rows).lstrip(" ").encode("ascii")


def _qp_body(secret: bytes) -> bytes:
    """Quoted-printable (RFC 2045) of the secret, line breaks left out."""
    return b"".join(bytes((c,)) if (33 <= c <= 126 and c != 0x3D) or c in (9, 10, 32) else b"=%02X" % c
                    for c in secret)


def _qp_header(secret: bytes) -> bytes:
    """RFC 2047 "Q" encoding (mail headers): ``_`` for space, ``=XX`` but for
    letters, digits and ``!*+-/``."""
    return b"".join(b"_" if c == 32 else bytes((c,)) if chr(c).isascii() and (chr(c).isalnum() or c in b"!*+-/")
                    else b"=%02X" % c for c in secret)


def number_forms(secret: bytes, text: str | None, variants: Variants) -> set[bytes]:
    """The secret's bytes (or characters) written as numbers one after another:
    hex with separators or escapes, ``0x`` lists, decimal and octal lists,
    numeric character references."""
    forms: set[bytes] = set()
    lower, upper = secret.hex(), secret.hex().upper()
    if variants.hex_separated:
        for sep in ":- ":
            forms.add(secret.hex(sep).encode("ascii"))
            forms.add(secret.hex(sep).upper().encode("ascii"))
        if len(secret) > 50:  # Node's <Buffer …> shows 50 bytes, then "... N more bytes>"
            forms.add(b"%s ... %d more bytes" % (secret[:50].hex(" ").encode("ascii"), len(secret) - 50))
    if variants.hex_escaped:
        forms.add(b"".join(b"\\x%02x" % c for c in secret))
        forms.add(b"".join(b"\\x%02X" % c for c in secret))
    if variants.hex_prefixed:
        for fmt in (b"0x%02x", b"0x%02X"):
            for sep in (b", ", b","):
                forms.add(sep.join(fmt % c for c in secret))
        forms.add(b", ".join(b"0X%02X" % c for c in secret))  # xxd -i -u, printf %#X
        forms.add(b"', '".join(hex(c).encode("ascii") for c in secret))  # Python [hex(b) for b in s]
    if variants.decimal:
        values = list(secret)
        signed = [c - 256 if c > 127 else c for c in secret]
        for numbers, seps in ((values, (", ", ",", " ")), (signed, (", ", ","))):
            for sep in seps:
                forms.add(sep.join(map(str, numbers)).encode("ascii"))
        grouped = _node_grouped(values)
        if grouped:
            forms.add(grouped)
        if text is not None and not secret.isascii():
            forms.add(", ".join(str(ord(ch)) for ch in text).encode("ascii"))  # [ord(c) for c in s]
    if variants.octal_bytes:
        forms.add(b"".join(b"\\%03o" % c for c in secret))
        forms.add(b" ".join(b"%03o" % c for c in secret))
    if variants.char_refs and text is not None:
        for fmt in ("&#%d;", "&#x%x;", "&#x%X;"):
            forms.add("".join(fmt % ord(ch) for ch in text).encode("ascii"))
            if not secret.isascii():
                forms.add("".join(ch if ch.isascii() else fmt % ord(ch) for ch in text)
                          .encode("utf-8", "surrogatepass"))
    return forms


def encoding_forms(secret: bytes, text: str | None, variants: Variants) -> set[bytes]:
    """The forms of issue 21: base32, base85, uuencode, quoted-printable, the
    secret as numbers (:func:`number_forms`), per-character escapes, C octal,
    Python ascii(), cat -v, NFC/NFD, UTF-16, mojibake, the runner's ``\\"``."""
    forms: set[bytes] = set()
    if variants.base32:
        for f in base32_inner_forms(secret):
            forms.update((f, f.lower()))
        forms.update(f for f in _inner_forms(secret, base64.b32hexencode, 5, 5))
    if variants.base85:
        forms.update(base85_inner_forms(secret, base64.b85encode))
        forms.update(base85_inner_forms(secret, base64.a85encode))
    if variants.uuencode:
        for f in base64_inner_forms(secret):
            forms.update((f.translate(_UU), f.translate(_UU_BACKTICK)))
    if variants.quoted_printable:
        forms.update((_qp_body(secret), _qp_header(secret)))
    forms |= number_forms(secret, text, variants)
    if variants.octal and any(c >= 0x7F or (c < 0x20 and c not in _ANSI_C) for c in secret):
        forms.add(_ansi_c_quoted(secret))  # else it is the shell or escapes form
    if variants.caret:
        forms.add(_caret(secret))
    if variants.runner_quote and b'"' in secret:
        forms.add(secret.replace(b'"', b'\\"'))
    if text is None:
        return forms  # not UTF-8: no text serialiser prints it
    if variants.unicode_escapes:
        forms.add(_every_char_escaped(text, upper=False))
        forms.add(_every_char_escaped(text, upper=True))
        for unsafe in _HTML_SAFE:
            if any(c in secret for c in unsafe):
                body = json.dumps(text, ensure_ascii=True)[1:-1].encode("ascii")
                for c in unsafe:
                    body = body.replace(bytes((c,)), b"\\u%04x" % c)
                forms.add(body)
                forms.add(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
                          .replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e"))
    if variants.python_ascii and not secret.isascii():  # else ascii() is repr() (escapes)
        forms.add(ascii(text)[1:-1].encode("ascii"))
    if not secret.isascii():
        if variants.normalized:
            for form in ("NFC", "NFD"):
                forms.add(unicodedata.normalize(form, text).encode("utf-8", "surrogatepass"))
        if variants.mojibake:
            forms.add(secret.decode("latin-1").encode("utf-8"))
            forms.add(_cp1252_read(secret).encode("utf-8"))
    if variants.utf16:
        forms.add(text.encode("utf-16-le", "surrogatepass"))
        forms.add(text.encode("utf-16-be", "surrogatepass"))
    return forms


def expand(secret: bytes, variants: Variants) -> set[bytes]:
    """All enabled forms of ``secret`` except fragments, without the secret itself."""
    forms: set[bytes] = set()
    if variants.crlf and (b"\n" in secret or b"  " in secret or b"\t" in secret):
        if b"\n" in secret:
            forms.add(secret.replace(b"\n", b"\r\n"))
            forms.add(secret.replace(b"\n", b"\r\r\n"))
            for line in secret.split(b"\n"):
                line = line.rstrip(b"\r")
                if len(line) >= 8 and not line.startswith(b"-----"):  # PEM armour is public
                    forms.add(line)
        # echo $KEY unquoted: word splitting, words joined by one space (not
        # when that leaves a short string: "1" + 7 spaces would mask every "1").
        echoed = b" ".join(secret.split())
        if len(echoed) >= 8:
            forms.add(echoed)
    if variants.base64:
        for inner in base64_inner_forms(secret):
            forms.add(inner)
            forms.add(inner.translate(_URLSAFE))
    if variants.url:
        for safe in ("", "/", "-_.!~*'()"):  # every byte; quote() default; encodeURIComponent
            upper = quote(secret, safe=safe).encode("ascii")
            forms.add(upper)
            forms.add(_lower_percent(upper))
        plus = quote_plus(secret, safe="").encode("ascii")
        forms.add(plus)
        forms.add(_lower_percent(plus))
        every = b"".join(b"%%%02X" % c for c in secret)  # even unreserved bytes escaped
        forms.add(every)
        forms.add(every.lower())
    text = None
    try:
        text = secret.decode("utf-8")
    except UnicodeDecodeError:
        pass  # not text: no serialiser of strings prints it
    if variants.json and text is not None:
        forms.add(json.dumps(text, ensure_ascii=True)[1:-1].encode("ascii"))
        forms.add(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass"))
    if variants.hex:
        forms.add(secret.hex().encode("ascii"))
        forms.add(secret.hex().upper().encode("ascii"))
    if variants.wrapped:
        # A tool that encodes the secret alone wraps it at fixed columns from
        # its first character (`printf %s "$S" | base64`, `| xxd -p`). Where
        # the secret starts mid-line (`base64 app.env`) the break falls
        # anywhere: not covered (see the issue 9 note).
        b64 = base64_inner_forms(secret)[0]
        hexed = secret.hex().encode("ascii")
        for encoded, widths in ((b64, (76, 64)), (hexed, (60,)), (hexed.upper(), (60,))):
            for width in widths:
                if len(encoded) > width:
                    lines = [encoded[i : i + width] for i in range(0, len(encoded), width)]
                    forms.add(b"\n".join(lines))
                    forms.add(b"\r\n".join(lines))
    if variants.shell:
        forms.add(secret.replace(b"'", b"'\\''"))  # set -x, bash ${v@Q}
        forms.add(secret.replace(b"'", b"'\"'\"'"))  # the other POSIX idiom
        forms.add(re.sub(rb'([\\"$`])', rb"\\\1", secret))  # declare -p, "..." in set -x
        forms.add(_printf_q(secret))
    if variants.escapes:
        forms.add(_c_escaped(secret))
        forms.add(repr(secret)[2:-1].encode("ascii"))  # Python b'...' repr
        if text is not None:
            forms.add(repr(text)[1:-1].encode("utf-8", "surrogatepass"))
        if b"\\" in secret:  # written with escapes: the program prints the bytes they mean
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # "\d": kept as is
                try:
                    forms.add(codecs.escape_decode(secret)[0])
                except ValueError:
                    pass  # a dangling backslash: no program decodes it either
    if variants.entities and re.search(rb"[&<>\"']", secret):
        xml = secret.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;")
        forms.add(xml)
        for dq in (b"&quot;", b"&#34;"):
            for sq in (b"&#x27;", b"&#39;", b"&apos;"):
                forms.add(xml.replace(b'"', dq).replace(b"'", sq))
        if text is not None:
            forms.add(html.escape(text, quote=True).encode("utf-8", "surrogateescape"))
    if variants.doubling:
        forms.add(secret.replace(b"'", b"''"))
        forms.add(secret.replace(b'"', b'""'))
        forms.add(secret.replace(b"$", b"$$"))
        if len(secret) >= 2 and secret[:1] == secret[-1:] and secret[:1] in (b"'", b'"'):
            forms.add(secret[1:-1])  # quote-trimmed (GitHub's runner)
    forms |= encoding_forms(secret, text, variants)
    forms.discard(secret)
    forms.discard(b"")
    return forms


_JWT = re.compile(rb"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")


def public_mask(secret: bytes) -> bytearray:
    """1 for each byte of ``secret`` that is public structure (see module docstring)."""
    public = bytearray(len(secret))
    for prefix in PUBLIC_PREFIXES:
        if secret.startswith(prefix):
            public[: len(prefix)] = b"\1" * len(prefix)
            break
    for m in re.finditer(rb"-----(BEGIN|END)[ A-Z0-9]*-----", secret):
        public[m.start() : m.end()] = b"\1" * (m.end() - m.start())
    for m in _JWT.finditer(secret):  # header "." payload; the match ends before the second dot
        end = min(len(secret), m.end() + 1)
        public[m.start() : end] = b"\1" * (end - m.start())
    return public


def fragment_windows(secrets: Iterable[bytes], fragment_min: int) -> dict[bytes, list[int]]:
    """Each secret long enough, with the sorted starts of its distinctive
    ``fragment_min``-byte windows (secrets without one are left out)."""
    counts: dict[bytes, int] = {}
    per_secret = []
    for s in set(secrets):
        grams = {s[i : i + fragment_min] for i in range(len(s) - fragment_min + 1)}
        for g in grams:
            counts[g] = counts.get(g, 0) + 1
        if len(s) >= FRAGMENT_SECRET_MIN and len(s) > fragment_min:
            per_secret.append(s)
    out: dict[bytes, list[int]] = {}
    for s in per_secret:
        public = public_mask(s)
        starts = []
        for i in range(len(s) - fragment_min + 1):
            g = s[i : i + fragment_min]
            if counts[g] > 1 or len(set(g)) < DISTINCT_BYTES:
                continue
            if fragment_min - sum(public[i : i + fragment_min]) < DISTINCT_BYTES:
                continue
            starts.append(i)
        if starts:
            out[s] = starts
    return out


def fragments(secrets: Iterable[bytes], fragment_min: int) -> set[bytes]:
    """Distinctive ``fragment_min``-byte windows of every secret long enough."""
    return {s[i : i + fragment_min] for s, starts in fragment_windows(secrets, fragment_min).items()
            for i in starts}


def joint_pieces(patterns: Iterable[bytes], mask: bytes) -> set[bytes]:
    """Plain pieces that keep a pattern from forming where a mask meets text.

    See "Where a mask meets text" in the module docstring.
    """
    out: set[bytes] = set()
    todo = [p for p in patterns if p and (p[0] in mask or p[-1] in mask or mask in p)]
    seen: set[bytes] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        pieces = []
        for j in range(1, min(len(mask), len(p)) + 1):
            if p[:j] == mask[-j:]:
                pieces.append(p[j:])
            if p[-j:] == mask[:j]:
                pieces.append(p[:-j])
        i = p.find(mask, 1)
        while 0 < i and i + len(mask) < len(p):
            pieces.append(p[:i])
            i = p.find(mask, i + 1)
        for piece in pieces:
            if piece and piece not in out:
                out.add(piece)
                todo.append(piece)
    return out


def plan(
    secrets: Iterable[bytes],
    variants: Variants,
    variant_min_length: int = 8,
    fragment_min: int = 12,
    mask: bytes = b"######",
) -> tuple[set[bytes], dict[bytes, list[int]]]:
    """What to mask, in two parts: literals (secrets, their forms, and the
    pieces that close the set where a mask meets text), and fragment windows
    by secret (see :func:`fragment_windows`). A matcher finds the literals
    as such and the windows by sampling (there are ~30 per secret)."""
    secrets = [s for s in set(secrets) if s]
    literals: set[bytes] = set(secrets)
    for s in secrets:
        if len(s) >= variant_min_length:
            literals |= expand(s, variants)
    windows: dict[bytes, list[int]] = {}
    if variants.fragments:
        windows = fragment_windows([s for s in secrets if len(s) >= variant_min_length], fragment_min)
    grams = {s[i : i + fragment_min] for s, starts in windows.items() for i in starts}
    literals |= joint_pieces(literals | grams, mask)
    return literals, windows


def pattern_set(
    secrets: Iterable[bytes],
    variants: Variants,
    variant_min_length: int = 8,
    fragment_min: int = 12,
    mask: bytes = b"######",
) -> set[bytes]:
    """Every byte string the redactor masks for these secrets, as one literal
    set: the definition the oracle uses."""
    literals, windows = plan(secrets, variants, variant_min_length, fragment_min, mask)
    return literals | {s[i : i + fragment_min] for s, starts in windows.items() for i in starts}
