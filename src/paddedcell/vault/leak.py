"""Find the admin password in any text without keeping the password.

The detector keeps, per encoded form of the password (its UTF-8 bytes, and its
JSON-escaped bytes when those differ): the length ``L``, 16 bits of a keyed BLAKE2b digest,
and a *window sum*: the sum of 256 secret random 16-bit weights, one per byte
value, over the password's bytes. A scan computes the weight sum of every
window of ``L`` bytes from prefix sums and confirms the rare windows whose sum
matches with the digest. Everything per byte runs inside C (``map``,
``accumulate``, ``list.index``), so the scan is linear and ~3x faster than a
Python-level rolling hash; memory stays bounded by scanning in chunks.

Which windows can match: every occurrence of the password (no false negatives),
rearrangements of its bytes, and random collisions (about one window in 2**18);
each costs one BLAKE2b call, so even hostile text stays linear.

``spans(text)`` says where: the confirmed windows of every form, overlapping
ones merged into one run, as ``[start, end)`` offsets in the caller's own units
(code points into a ``str``, bytes into ``bytes``); ``redact`` masks them, and
``utf16_spans`` converts them for JavaScript, whose strings count UTF-16 units.

A detector made since format "classes" also keeps a *class pattern* per form: a
secret random split of the 256 byte values into two classes, and the password's
bytes written as their classes ("0"/"1"). A scan translates the text to classes
once (``bytes.translate``) and finds the pattern with ``bytes.find``: both in C
at hundreds of MB/s, ~50x faster than the window sums, which stay the path of
older detectors. A random window matches the pattern with probability 2**-L.

Where a detector lives (issue 20): in memory, built from the password when a human
gives it (``vault/guard.py``); only its filter, sealed, waits on tmpfs for daemons that
start later (``vault/guard_runtime.py``); nothing of it is on disk. ``to_json`` is
a *filter*, never a test: each form keeps only ``DIGEST_BYTES`` (16 bits) of its keyed
BLAKE2b beside the class pattern (one bit per byte under a secret split), ``L + 16``
bits in all. That is what a daemon lends a foreground ``pcexec`` (``guard.adopt``),
which confirms a window that passes the filter by the admin KDF against admin.json's
verifier (``confirm``, from ``admin.password_confirmer``), as ``admin init`` checks a
password. The detector ``create`` makes confirms by a full keyed BLAKE2b of the
password kept in memory. Confirmations are cached per window (per-process key), so a
repeated leak costs one KDF; the filter passes a random window with probability
``2**-(L + 16)``, so ordinary output almost never pays one.

Where the redactor's C module is built, the scans of a text and of its decoded views run
in C without the GIL (``_native.leak_hits``, ``leak_runs``, ``percent_decode``; the Python
below is the same result, for hosts without a compiler): a daemon runs the guard over
every command's output in its filter threads, and a step per run or per byte in Python
there held the GIL its event loop waits for.

:class:`LeakStream` runs a detector over a byte stream (command output), holding
back only a tail that could begin the password (at most ``HOLD_BYTES``, the same
for every password, none after a newline), so a password split across two reads
is found and output that cannot be one shows at once.
"""

from __future__ import annotations

import binascii
import bisect
import hashlib
import json
import re
import secrets
from itertools import accumulate, chain, islice
from operator import sub
from typing import Any, Callable, Iterator, NamedTuple
from urllib.parse import unquote_to_bytes

#: The redactor's C module (``leak_runs``, ``leak_hits``: the scans below without the GIL),
#: or None: the same spans in Python, slower, holding the GIL (no compiler at install,
#: ``PADDEDCELL_NATIVE=0``, or pass_mgr's binary, which leaves the redactor out).
try:
    from ..redactor.holds import _native
except ImportError:
    _native = None

WEIGHT_BITS = 16
#: Bytes a password never starts with (``str.strip`` whitespace that is ASCII).
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")
CHUNK = 1 << 14  # window sums are built for this many positions at a time
MASK = "######"
#: The longest admin password ``admin init`` accepts, in UTF-8 bytes, and what a stream
#: holds back of an unfinished line: the same for every password (the hold is visible to
#: an agent that prints, then polls; a hold of ``len - 1`` told it the password's length).
#: Every encoded form of a password of MAX_PASSWORD_BYTES fits (JSON and %XX triple it).
MAX_PASSWORD_BYTES = 128
#: Bytes of the keyed BLAKE2b digest kept per form: a 16-bit filter, not a test of a guess
#: (a hit is confirmed: ``LeakDetector.confirm``); longer digests are truncated on load.
DIGEST_BYTES = 2
HOLD_BYTES = 3 * MAX_PASSWORD_BYTES + 127

Span = tuple[int, int]


def encoded_forms(password: str) -> list[bytes]:
    """The byte strings whose presence means the password leaked."""
    raw = password.encode("utf-8")
    forms = [raw]
    for escaped in (json.dumps(password)[1:-1].encode("ascii"),
                    json.dumps(password, ensure_ascii=False)[1:-1].encode("utf-8")):
        if escaped not in forms:
            forms.append(escaped)
    return forms


class _Form(NamedTuple):
    length: int
    window_sum: int
    digest: bytes
    pattern: bytes = b""  # the form's bytes as classes; empty in older detectors


def _class_table(split: bytes) -> bytes:
    """``bytes.translate`` table: byte value b becomes b"1" when bit b of ``split`` is set."""
    return bytes(0x31 if split[b >> 3] >> (b & 7) & 1 else 0x30 for b in range(256))


class LeakDetector:
    """``LeakDetector.create(password)`` once; ``contains(text)`` as often as needed."""

    def __init__(self, key: bytes, weights: list[int], forms: list[_Form],
                 split: bytes | None = None, mask_start: bool | None = None,
                 confirm: "Callable[[str], bool] | None" = None):
        if len(weights) != 256 or len(key) != 32 or (split is not None and len(split) != 32):
            raise ValueError("a leak detector needs a 32-byte key, 256 weights and a 32-byte split")
        self._key = key
        self._weights = weights
        self._forms = forms
        self._split = split
        # Does a form start with "#", the mask's byte? One bit, kept so that a stream
        # never holds back (and so splits) the end of a mask the redactor just wrote.
        # None in older detectors: unknown, so such a tail is held as before.
        self._mask_start = mask_start
        self._table = _class_table(split) if split is not None else None
        if self._table is not None and any(len(f.pattern) != f.length for f in forms):
            raise ValueError("a leak detector with classes needs a pattern per form")
        #: Whether a candidate (the password as text) is the password: the admin KDF
        #: against admin.json's verifier (``guard.adopt``). None: a filter hit counts.
        self.confirm = confirm
        self._forms = [f._replace(digest=f.digest[:DIGEST_BYTES]) for f in forms]
        self._patterns = tuple(form.pattern for form in self._forms)
        self._confirmed: dict[bytes, bool] = {}
        self._cache_key = secrets.token_bytes(16)

    @classmethod
    def create(cls, password: str) -> "LeakDetector":
        key = secrets.token_bytes(32)
        weights = [secrets.randbits(WEIGHT_BITS) for _ in range(256)]
        split = secrets.token_bytes(32)
        table = _class_table(split)
        raw_forms = encoded_forms(password)
        forms = [_Form(len(form), sum(weights[byte] for byte in form), cls._digest(key, form),
                       form.translate(table))
                 for form in raw_forms]
        # In memory only (never in to_json): the maker knows the password anyway.
        whole = hashlib.blake2b(raw_forms[0], key=key).digest()
        return cls(key, weights, forms, split, any(form[:1] == b"#" for form in raw_forms),
                   confirm=lambda text: secrets.compare_digest(
                       hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=key).digest(),
                       whole))

    @property
    def longest(self) -> int:
        """Bytes in the longest encoded form (a stream scan holds back one less)."""
        return max(form.length for form in self._forms)

    def pending(self, data: bytes) -> int:
        """How many trailing bytes of ``data`` could still begin a form: hold those back.

        Public rules only, the same for every password: at most ``HOLD_BYTES`` (also for a
        longer password from before ``admin init`` capped them: its length must not show),
        none across a newline (no form holds one), not from whitespace nor from ``#`` (a
        mask's end; a password neither starts with them nor holds a newline:
        ``_check_new_password``; only a detector known to start with ``#``, from before
        that rule, holds from it). Never the class patterns, digests or length: an agent
        can watch what is held (print, then poll).
        """
        budget = HOLD_BYTES
        limit = min(len(data), budget)
        if limit <= 0:
            return 0
        newline = data.rfind(b"\n", len(data) - limit)
        if newline >= 0:
            limit = len(data) - newline - 1
        tail = data[len(data) - limit:]
        held = 0
        for size in range(limit, 0, -1):
            first = tail[-size]
            if first not in _WHITESPACE and not (first == 0x23 and self._mask_start is not True):
                held = size
                break
        return _encoded_lines_before(data, len(data) - held, budget)

    @staticmethod
    def _digest(key: bytes, window: bytes) -> bytes:
        return hashlib.blake2b(window, key=key, digest_size=32).digest()[:DIGEST_BYTES]

    def _is_password(self, form_index: int, window: bytes) -> bool:
        """A window that passed the filter: the password itself? (the admin KDF decides;
        cached per window under a per-process key, so a repeated leak costs one KDF)."""
        if self.confirm is None:
            return True
        try:
            text = window.decode("utf-8", "surrogatepass")
            if form_index:  # the JSON-escaped forms (encoded_forms' order)
                text = json.loads('"' + text + '"')
        except ValueError:
            return False
        if not isinstance(text, str):
            return False
        seen = hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                               key=self._cache_key).digest()
        if seen not in self._confirmed:
            if len(self._confirmed) >= 256:
                self._confirmed.clear()
            self._confirmed[seen] = bool(self.confirm(text))
        return self._confirmed[seen]

    def to_json(self) -> dict[str, Any]:
        if self._split is None:
            return {"key": self._key.hex(), "weights": self._weights,
                    "forms": [[f.length, f.window_sum, f.digest.hex()] for f in self._forms]}
        obj = {"key": self._key.hex(), "weights": self._weights, "classes": self._split.hex(),
               "forms": [[f.length, f.window_sum, f.digest.hex(), f.pattern.decode("ascii")]
                         for f in self._forms]}
        if self._mask_start is not None:
            obj["maskStart"] = self._mask_start
        return obj

    def filter_json(self) -> dict[str, Any]:
        """``to_json`` without the window sums and weights (the class path does not use
        them; they would add ~16 bits per form): what a daemon lends (``guard.adopt``)."""
        if self._split is None:
            raise ValueError("a detector without classes has no filter to lend")
        obj = self.to_json()
        obj["weights"] = [0] * 256
        obj["forms"] = [[n, 0, digest, pattern] for n, _sum, digest, pattern in obj["forms"]]
        return obj

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "LeakDetector":
        split = bytes.fromhex(obj["classes"]) if "classes" in obj else None
        forms = []
        for item in obj["forms"]:
            n, total, d = item[:3]
            pattern = item[3].encode("ascii") if split is not None else b""
            if pattern.strip(b"01"):
                raise ValueError("a class pattern holds only 0 and 1")
            forms.append(_Form(int(n), int(total), bytes.fromhex(d), pattern))
        mask_start = obj.get("maskStart")
        if mask_start is not None and not isinstance(mask_start, bool):
            raise ValueError("maskStart is true or false")
        return cls(bytes.fromhex(obj["key"]), [int(w) for w in obj["weights"]], forms, split,
                   mask_start)

    def contains(self, text: str | bytes) -> bool:
        return bool(self._byte_spans(_encode(text)))

    def _classes(self, data: bytes) -> bytes | None:
        return data.translate(self._table) if self._table is not None else None

    def spans(self, text: str | bytes) -> list[Span]:
        """Every hit as a ``[start, end)`` run, sorted; overlapping hits merge into one run.

        Offsets count code points when ``text`` is a ``str`` (so ``text[start:end]``
        is the hit) and bytes when it is ``bytes``. Adjacent hits stay separate runs.
        A hit in a decoded view (base64, hex, a hex dump, ``%XX``) covers the whole run
        of encoded text it came from (``_view_spans``).
        """
        data = _encode(text)
        merged = self._byte_spans(data)
        return _code_point_spans(data, merged) if isinstance(text, str) else merged

    def _byte_spans(self, data: bytes) -> list[Span]:
        windows = self._form_spans(data) + _view_spans(data, self._form_spans, self.shortest,
                                                       self._candidate_runs)
        runs: list[list[int]] = []
        for start, end in sorted(windows):
            if runs and start < runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], end)
            else:
                runs.append([start, end])
        return [(start, end) for start, end in runs]

    def _form_spans(self, data: bytes) -> list[Span]:
        """The windows of ``data`` that are a stored form, as they are (no view)."""
        if _native is not None and self._table is not None:
            digest, key, forms = self._digest, self._key, self._forms
            return [(start, start + forms[index].length)
                    for index, start in _native.leak_hits(data, self._table, self._patterns)
                    if secrets.compare_digest(digest(key, data[start:start + forms[index].length]),
                                              forms[index].digest)
                    and self._is_password(index, data[start:start + forms[index].length])]
        classes = self._classes(data)
        return [(start, start + form.length)
                for index, form in enumerate(self._forms)
                for start in self._hits(data, form, classes)
                if self._is_password(index, data[start:start + form.length])]

    @property
    def shortest(self) -> int:
        return min(form.length for form in self._forms)

    def _candidate_runs(self, joined: bytes, b64_min: int,
                        hex_min: int) -> tuple[list[Span], list[Span], bool] | None:
        """The base64 and hex runs of ``joined`` whose decodings may hold a form, and
        whether it looks like a hex dump (in C, without the GIL: ``_native.leak_runs``), or
        None where only Python can tell (no C module, or an older detector without class
        patterns): then every run is decoded."""
        if _native is None or self._table is None:
            return None
        return _native.leak_runs(joined, self._table, self._patterns, b64_min, hex_min)

    def _hits(self, data: bytes, form: _Form, classes: bytes | None = None) -> Iterator[int]:
        """Start offsets (bytes) of every window of ``data`` that is this form."""
        if classes is not None:
            digest, key, want, length = self._digest, self._key, form.digest, form.length
            index = classes.find(form.pattern)
            while index >= 0:
                if secrets.compare_digest(digest(key, data[index:index + length]), want):
                    yield index
                index = classes.find(form.pattern, index + 1)
            return
        length, target = form.length, form.window_sum
        weight = self._weights.__getitem__
        for start in range(0, len(data) - length + 1, CHUNK):
            chunk = data[start:start + CHUNK + length - 1]
            prefix = list(accumulate(map(weight, chunk), initial=0))
            # sums[i] is the weight sum of chunk[i:i + length]
            sums = list(map(sub, islice(prefix, length, None), prefix))
            index = 0
            while True:
                try:
                    index = sums.index(target, index)
                except ValueError:
                    break
                window = chunk[index:index + length]
                if secrets.compare_digest(self._digest(self._key, window), form.digest):
                    yield start + index
                index += 1


# -- decoded views: the encodings a secret gets masked in (redactor.variants), found by
# decoding the text instead of storing more forms of the password (each stored form would
# be one more fast test of a guess, see the module doc).

#: Every byte as its class: b"a" for the base64 alphabets (both), b"h" for hex digits,
#: b" " for the rest. Runs are then found with ``bytes.find`` (in C; ``re`` tries every
#: position and was 15x slower than the plain scan over prose).
_BASE64_CLASS = bytes(0x61 if bytes([b]).isalnum() and b < 128 or b in b"+/_-=" else 0x20
                      for b in range(256))
_HEX_CLASS = bytes(0x68 if b in b"0123456789abcdefABCDEF" else 0x20 for b in range(256))
#: xxd (``00000010: 2f77 7320  /ws``), hexdump -C (``00000010  2f 77 73  |/ws|``), od -tx1;
#: and in the hex classes, what one of their lines looks like (the regex runs only then).
_DUMP_LINE = re.compile(
    rb"^(?:[0-9a-f]{6,16}: ((?:[0-9a-f]{2})+(?: (?:[0-9a-f]{2})+)*)(?:  |\r?$)"
    rb"|[0-9a-f]{6,16}  ((?:[0-9a-f]{2} {1,2})+) *\||(?:[0-7]{7})?((?: [0-9a-f]{2})+) *\r?$)",
    re.M)
_DUMP_HINTS = (b"hhhhhh: hh", b"hhhhhh  hh", b" hh hh hh hh hh hh hh hh")
#: Hex digits as b"h", space and ":" as themselves, the rest b"." (for _DUMP_HINTS).
_DUMP_CLASS = bytes(0x68 if b in b"0123456789abcdefABCDEF" else b if b in b" :" else 0x2E
                    for b in range(256))
#: Bytes of whole lines one findall of _DUMP_LINE reads (~0.6 ms of a dump's lines).
_DUMP_PIECE = 32 * 1024
_PERCENT = re.compile(rb"%[0-9a-fA-F]{2}")
_URLSAFE = bytes.maketrans(b"-_", b"+/")


#: A complete line this long of base64/hex characters, or a hex dump line, may be the
#: first part of a form spread over lines (``base64 FILE``, ``xxd``, ``od``): held too.
ENCODED_LINE_MIN = 16
_BASE64_CHARS = bytes(b for b in range(256) if _BASE64_CLASS[b] == 0x61)


def _looks_encoded(line: bytes) -> bool:
    line = line.rstrip(b"\r")
    return (len(line) >= ENCODED_LINE_MIN and not line.translate(None, _BASE64_CHARS)) \
        or _DUMP_LINE.match(line) is not None


def _encoded_lines_before(data: bytes, start: int, budget: int) -> int:
    """How much to hold when ``data[start:]`` is held: extended back over the complete
    lines before it that look like an encoding, within ``budget`` bytes (a public rule:
    it looks at the output only, never at the password)."""
    line_begin = data.rfind(b"\n", 0, start) + 1
    if data[line_begin:start].strip(b" \t"):
        return len(data) - start  # the held part starts mid-line: nothing before it
    held_from = start
    while line_begin > 0:
        previous = data.rfind(b"\n", 0, line_begin - 1) + 1
        if len(data) - previous > budget or not _looks_encoded(data[previous:line_begin - 1]):
            break
        held_from = line_begin = previous
    return len(data) - held_from


def _runs(classes: bytes, mark: bytes, minimum: int) -> Iterator[Span]:
    """``[start, end)`` of each run of at least ``minimum`` bytes of class ``mark``."""
    needle = mark * minimum
    start = classes.find(needle)
    while start >= 0:
        end = classes.find(b" ", start + minimum)
        end = len(classes) if end < 0 else end
        yield start, end
        start = classes.find(needle, end)


def _view_spans(data: bytes, find, shortest: int, candidates=None) -> list[Span]:
    """Raw spans of ``data`` whose decoding holds a form (``find(decoded)`` non-empty):
    base64 (both alphabets, every alignment) and hex runs, also wrapped over lines
    (``base64 FILE``, ``xxd -p``), hex dumps (``xxd``, ``hexdump -C``, ``od -tx1``) and
    ``%XX`` escapes. A hit masks the whole encoded run (or the dump's lines).

    ``candidates(joined, b64_min, hex_min)``, when it answers, names the only runs that
    need decoding here (``LeakDetector._candidate_runs``): a step per run in Python held
    the GIL for ~50 ms a 512 KiB read of JWT-like text, in a filter thread, and the
    daemon's event loop waited for it (issue 9's /healthz p99 went from 5 to 300 ms)."""
    found: list[Span] = []
    joined = data.replace(b"\r", b"").replace(b"\n", b"") if (
        b"\n" in data or b"\r" in data) else data
    hits: list[Span] = []
    b64_min, hex_min = max(8, 4 * ((shortest - 2) // 3)), 2 * shortest
    known = candidates(joined, b64_min, hex_min) if candidates is not None else None
    if known is None:
        hex_classes = joined.translate(_HEX_CLASS)
        known = (_runs(joined.translate(_BASE64_CLASS), b"a", b64_min),
                 _runs(hex_classes, b"h", hex_min),
                 _dump_hint(joined))
    b64_runs, hex_runs, dump_hint = known
    for start, end in b64_runs:
        run = joined[start:end].rstrip(b"=").translate(_URLSAFE)
        for offset in range(4):
            part = run[offset:]
            # The last quantum padded again: cut off, it lost the text's last one or two
            # bytes (``printf %s PASSWORD | base64`` ends "...==").
            cut = len(part) % 4
            part = part[:-1] if cut == 1 else part + b"=" * (-cut % 4)
            try:
                decoded = binascii.a2b_base64(part)
            except binascii.Error:
                continue
            if find(decoded):
                hits.append((start, end))
                break
    for start, end in hex_runs:
        run = joined[start:end]
        if find(bytes.fromhex(run[:len(run) & ~1].decode())) or \
                find(bytes.fromhex(run[1:1 + ((len(run) - 1) & ~1)].decode())):
            hits.append((start, end))
    if hits:
        found += [_to_raw(data, joined, a, b) for a, b in hits]
    if dump_hint:
        found += _dump_spans(data, find)
    if b"%" in data and _PERCENT.search(data):
        found += _percent_spans(data, find)
    return found


def _to_raw(data: bytes, joined: bytes, a: int, b: int) -> Span:
    """``joined[a:b]`` (``data`` without line breaks) as raw offsets of ``data``."""
    if joined is data:
        return a, b
    pieces = [m.span() for m in re.finditer(rb"[^\r\n]+", data)]
    starts, at = [], 0
    for start, end in pieces:
        starts.append(at)
        at += end - start
    first = bisect.bisect_right(starts, a) - 1
    last = bisect.bisect_right(starts, max(b - 1, a)) - 1
    return pieces[first][0] + a - starts[first], pieces[last][0] + (b - starts[last])


def _dump_hint(joined: bytes) -> bool:
    """Does ``joined`` hold what starts a hex dump's line (an offset column and the first
    pair, or eight spaced pairs)? Only then are its lines parsed (``_dump_spans``)."""
    classes = joined.translate(_DUMP_CLASS)
    return any(hint in classes for hint in _DUMP_HINTS)


def _dump_spans(data: bytes, find) -> list[Span]:
    """Hex dump lines, consecutive ones decoded together; a hit masks those whole lines.

    First every dump line's digits decoded as one text, with no step per line in Python
    (the line's three groups joined in C; two are empty): only when that holds a form
    are the blocks of consecutive lines told apart (a form spanning two blocks there
    is no hit in either, and finds nothing)."""
    digits = []
    at = 0
    while at < len(data):  # ~32 KiB a findall: re holds the GIL for a whole call
        end = data.find(b"\n", at + _DUMP_PIECE)
        end = len(data) if end < 0 else end + 1
        digits += chain.from_iterable(_DUMP_LINE.findall(data, at, end))
        at = end
    if not find(bytes.fromhex(b"".join(digits).replace(b" ", b"").decode())):
        return []
    found: list[Span] = []
    block: list[re.Match] = []

    def line_end(at: int) -> int:
        end = data.find(b"\n", at)
        return len(data) if end < 0 else end

    def flush() -> None:
        if block:
            digits = b"".join((m.group(1) or m.group(2) or m.group(3)).replace(b" ", b"")
                              for m in block)
            if find(bytes.fromhex(digits.decode())):
                found.append((block[0].start(), line_end(block[-1].end())))
            block.clear()

    for match in _DUMP_LINE.finditer(data):
        if block and match.start() != line_end(block[-1].end()) + 1:
            flush()
        block.append(match)
    flush()
    return found


def _percent_spans(data: bytes, find) -> list[Span]:
    """``%XX`` decoded (each escape one byte), hits mapped back exactly. The view is
    decoded in C first; the map back, a step per byte, is made only for a hit."""
    if not find(_native.percent_decode(data) if _native is not None else unquote_to_bytes(data)):
        return []
    view, starts, pos = bytearray(), [], 0
    for match in _PERCENT.finditer(data):
        for i in range(pos, match.start()):
            starts.append(i)
        view += data[pos:match.start()]
        starts.append(match.start())
        view.append(int(match.group()[1:], 16))
        pos = match.end()
    starts.extend(range(pos, len(data)))
    view += data[pos:]
    ends = starts[1:] + [len(data)]
    return [(starts[a], ends[b - 1]) for a, b in find(bytes(view))]


def _encode(text: str | bytes) -> bytes:
    # surrogatepass: a lone surrogate (JSON "\ud800") is scanned, not an error.
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)


def _code_point_spans(data: bytes, spans: list[Span]) -> list[Span]:
    """Byte runs of UTF-8 ``data`` as code-point runs of the str it encodes.

    Every run starts and ends on a character boundary: each form is whole UTF-8,
    and UTF-8 is self-synchronising. One pass over the text, however many runs.
    """
    out: list[Span] = []
    byte_pos = char_pos = 0

    def advance(to: int) -> int:
        nonlocal byte_pos, char_pos
        char_pos += len(data[byte_pos:to].decode("utf-8", "surrogatepass"))
        byte_pos = to
        return char_pos

    for start, end in spans:
        out.append((advance(start), advance(end)))
    return out


def redact(text: str, spans: list[Span], mask: str = MASK) -> str:
    """``text`` with each run from ``spans(text)`` replaced by ``mask``."""
    pieces, pos = [], 0
    for start, end in spans:
        pieces += [text[pos:start], mask]
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def utf16_spans(text: str, spans: list[Span]) -> list[Span]:
    """Code-point runs of ``text`` as UTF-16 code-unit runs (JavaScript string offsets)."""
    out: list[Span] = []
    pos = units = 0

    def advance(to: int) -> int:
        nonlocal pos, units
        units += len(text[pos:to].encode("utf-16-le", "surrogatepass")) // 2
        pos = to
        return units

    for start, end in spans:
        out.append((advance(start), advance(end)))
    return out


class LeakStream:
    """The detector over a byte stream, after an inner redactor (or none).

    ``feed`` returns the bytes that are safe to show, with every hit replaced by
    ``mask``; it holds back the trailing bytes that could be the start of a
    password the next read completes (``LeakDetector.pending``: at most
    ``HOLD_BYTES``, none after a newline or from whitespace), and ``flush``
    releases them.
    ``on_hit()`` runs once per stream, on its first hit. ``fresh()`` is a new
    stream over the same detector, and ``add_secrets(values)`` masks more values
    from now on (the shape of ``StreamRedactor``); without an inner redactor,
    ``new_inner(values)`` builds one then.
    """

    def __init__(self, detector: "LeakDetector | Callable[[], LeakDetector | None]", inner: Any,
                 on_hit: Any, mask: bytes = b"######", new_inner: Any = None):
        # A detector, or where to find the current one (``guard.detector``: None while the
        # guard waits for a human; the stream then holds nothing back and masks nothing).
        self._detector = (lambda: detector) if isinstance(detector, LeakDetector) else detector
        self._inner = inner
        self._on_hit = on_hit
        self._mask = mask
        self._new_inner = new_inner
        self._held = b""
        self._hit = False

    def fresh(self) -> "LeakStream":
        inner = self._inner.fresh() if self._inner is not None else None
        return LeakStream(self._detector, inner, self._on_hit, self._mask, self._new_inner)

    def add_secrets(self, values: list[str]) -> None:
        if self._inner is not None:
            self._inner.add_secrets(values)
        elif self._new_inner is None:
            raise ValueError("this stream cannot mask more secrets: no redactor factory")
        else:  # nothing was held back by the missing inner redactor: switching loses no byte
            self._inner = self._new_inner(values)

    def feed(self, data: bytes) -> bytes:
        if self._inner is not None:
            data = self._inner.feed(data)
        return self._scan(self._held + bytes(data), final=False)

    def flush(self) -> bytes:
        tail = self._inner.flush() if self._inner is not None else b""
        return self._scan(self._held + tail, final=True)

    def _scan(self, data: bytes, *, final: bool) -> bytes:
        detector = self._detector()
        if detector is None:
            self._held = b""
            return data
        spans = detector.spans(data)
        cut = len(data) if final else len(data) - detector.pending(data)
        for start, end in spans:  # never cut through a hit: show it masked now
            if start < cut < end:
                cut = end
        shown = [(start, end) for start, end in spans if end <= cut]
        self._held = data[cut:]
        if shown and not self._hit:
            self._hit = True
            self._on_hit()
        if not shown:
            return data[:cut]
        pieces, pos = [], 0
        for start, end in shown:
            pieces += [data[pos:start], self._mask]
            pos = end
        pieces.append(data[pos:cut])
        return b"".join(pieces)
