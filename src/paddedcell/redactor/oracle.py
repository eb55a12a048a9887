"""A slow, obviously correct redactor: the reference for tests and benchmarks.

It checks every pattern at every offset of the whole input, marks covered
bytes, and replaces each maximal covered run with the mask. No streaming, no
cleverness; quadratic and fine for test inputs.

Pattern forms (see :mod:`.views`) are defined here independently of the
redactor's tokenizers: each view is built by a byte-by-byte scanner of the
whole input (no regular expression, no window), searched with ``bytes.find``
for every view pattern, and mapped back to raw bytes.
"""

from __future__ import annotations

from typing import Iterable

from .dumps import SQUEEZED, decode_line, may_become, triggers
from .variants import Variants, pattern_set
from .views import view_patterns

_WS = b" \t\n\r\x0b\x0c"
_HEXDIGITS = b"0123456789abcdefABCDEF"


class FormSet(set):
    """The literal patterns (a set of bytes), with the pattern forms' view
    patterns by family in :attr:`views`."""

    views: dict[str, set[bytes]]


def _csi_length(data: bytes, i: int) -> int:
    """Length of the CSI sequence at ``data[i]``; 0 if none; -1 if it may
    still become one when more bytes come (it runs to the end of data)."""
    n = len(data)
    if data[i] != 0x1B:
        return 0
    j = i + 1
    if j == n:
        return -1
    if data[j] != ord("["):
        return 0
    j += 1
    params = 0
    while j < n and 0x30 <= data[j] <= 0x3F:
        params += 1
        j += 1
    if params > 24:
        return 0
    inter = 0
    while j < n and 0x20 <= data[j] <= 0x2F:
        inter += 1
        j += 1
    if inter > 4:
        return 0
    if j == n:
        return -1
    return j + 1 - i if 0x40 <= data[j] <= 0x7E else 0


def scan_view(family: str, data: bytes, final: bool = True) -> tuple[bytes, list[tuple[int, int]], int]:
    """The view of ``data``: its bytes, the raw ``[start, end)`` of each, and
    the length of an incomplete token at the end (read as text when ``final``)."""
    out, where, i, n = bytearray(), [], 0, len(data)
    while i < n:
        c = data[i]
        if family == "space" and c in _WS:
            j = i
            while j < n and data[j] in _WS:
                j += 1
            out.append(0x20)
            where.append((i, j))
            i = j
            continue
        if family == "wrap" and c in b"\r\n":
            i += 1
            continue
        if family == "percent" and c == ord("%"):
            rest = data[i + 1 : i + 3]
            if len(rest) == 2 and all(x in _HEXDIGITS for x in rest):
                out.append(int(rest, 16))
                where.append((i, i + 3))
                i += 3
                continue
            if not final and i + 1 + len(rest) == n and all(x in _HEXDIGITS for x in rest):
                return bytes(out), where, n - i
        if family == "csi" and c == 0x1B:
            length = _csi_length(data, i)
            if length == -1 and not final:
                return bytes(out), where, n - i
            if length > 0:
                i += length
                continue
        out.append(c)
        where.append((i, i + 1))
        i += 1
    return bytes(out), where, 0


def _dump_lines(data: bytes, final: bool, marks: set[bytes] = frozenset()
                ) -> tuple[list[tuple[int, int, tuple | None, bool]], bytes]:
    """Every complete line of the whole stream as ``(start, end without \\r,
    decoded or None, holds one of marks)``, and the partial last line (a line when final)."""
    lines, i = [], 0
    pieces = data.split(b"\n")
    for k, piece in enumerate(pieces):
        if k == len(pieces) - 1 and not final:
            return lines, piece
        if k == len(pieces) - 1 and not piece:
            break
        content = piece.rstrip(b"\r")
        shown = piece if k == len(pieces) - 1 else piece + b"\n"  # a trigger may end with the line break
        lines.append((i, i + len(content), decode_line(piece), any(t in shown for t in marks)))
        i += len(piece) + 1
    return lines, b""


def _dump_runs(lines) -> list[list]:
    runs, current = [], []
    for line in lines + [(0, 0, None, False)]:
        if line[2] is None:
            if current:
                runs.append(current)
            current = []
        else:
            current.append(line)
    return runs


def _dump_pieces(run, longest: int) -> list[tuple[list[int], bytes]]:
    """Each reading's pieces in a run: consecutive lines that have it, as
    ``(the line of each byte, the bytes)``; a ``*`` line repeats the bytes of
    the line before it until they are ``longest`` bytes or more."""
    pieces = []
    for key in {k for line in run if line[2] is not SQUEEZED for k in line[2]}:
        owner, data, prev = [], b"", None
        for k, line in enumerate(run + [(0, 0, {}, False)]):
            shown = line[2].get(key) if line[2] is not SQUEEZED else prev
            if shown is not None and line[2] is SQUEEZED:
                while len(shown) < longest:
                    shown += prev
            if shown is None:
                if data:
                    pieces.append((owner, data))
                owner, data = [], b""
            else:
                owner += [k] * len(shown)
                data += shown
            prev = line[2].get(key) if line[2] is not SQUEEZED else prev
        # (the sentinel line ends the last piece)
    return pieces


def _triggers_of(pats: set[bytes], _last: list = []) -> set[bytes]:
    """``triggers(pats)``, remembered for the last pattern set (a test asks the
    oracle about every prefix of one stream with the same patterns)."""
    key = frozenset(pats)
    if not _last or _last[0] != key:
        _last[:] = [key, triggers(key)]
    return _last[1]


def _dump_spans(data: bytes, pats: set[bytes], final: bool) -> list[tuple[int, int]]:
    """Hex dump layouts (see :mod:`.dumps`): each pattern in a reading of a run,
    touching a line with a trigger, masks the lines it touches (one span)."""
    spans = []
    for run in _dump_runs(_dump_lines(data, final, _triggers_of(pats))[0]):
        for owner, decoded in _dump_pieces(run, max(map(len, pats))):
            for p in pats:
                i = decoded.find(p)
                while i >= 0:
                    touched = range(owner[i], owner[i + len(p) - 1] + 1)
                    if any(run[k][3] for k in touched):
                        spans.append((run[touched[0]][0], run[touched[-1]][1]))
                    i = decoded.find(p, i + 1)
    return spans


def _dump_held(stream: bytes, pats: set[bytes]) -> int:
    """The dump view's hold: a partial line that may become a dump line, and
    for each reading of the last run that its last line has, the lines from
    the one holding the longest suffix of its bytes that is a proper prefix of
    a pattern, when the run may continue."""
    lines, pending = _dump_lines(stream, False)
    tail = len(pending) if may_become(pending) else 0
    if (pending and not tail) or not lines or lines[-1][2] is None:
        return tail
    run = _dump_runs(lines)[-1]
    for owner, decoded in _dump_pieces(run, max(map(len, pats))):
        if owner[-1] != len(run) - 1:
            continue  # this reading ended before the last line
        for length in range(len(decoded), 0, -1):
            t = decoded[len(decoded) - length :]
            if any(len(p) > length and p.startswith(t) for p in pats):
                tail = max(tail, len(stream) - run[owner[len(decoded) - length]][0])
                break
    return tail


def _view_spans(data: bytes, views: dict[str, set[bytes]], final: bool) -> list[tuple[int, int]]:
    spans = []
    for family, pats in views.items():
        if family == "dump":
            spans += _dump_spans(data, pats, final)
            continue
        view, where, _ = scan_view(family, data, final)
        for p in pats:
            i = view.find(p)
            while i >= 0:
                spans.append((where[i][0], where[i + len(p) - 1][1]))
                i = view.find(p, i + 1)
    return spans


def patterns_for(
    secrets: Iterable[str | bytes],
    variants: bool | Variants = True,
    variant_min_length: int = 8,
    fragment_min: int = 12,
    mask: bytes = b"######",
) -> set[bytes]:
    """Every byte string the redactor must mask for these secrets."""
    raw = [s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s) for s in secrets]
    variants = Variants.coerce(variants)
    out = FormSet(pattern_set(raw, variants, variant_min_length, fragment_min, mask))
    out.views = view_patterns([s for s in raw if s], variants, variant_min_length)
    return out


def covered(data: bytes, patterns: Iterable[bytes]) -> list[bool]:
    """Which bytes of ``data`` lie inside some occurrence of some pattern."""
    cover = [False] * len(data)
    for s, t in _view_spans(data, getattr(patterns, "views", {}), True):
        cover[s:t] = [True] * (t - s)
    for p in patterns:
        i = data.find(p)
        while i >= 0:
            cover[i : i + len(p)] = [True] * len(p)
            i = data.find(p, i + 1)  # i + 1, not i + len(p): occurrences may overlap
    return cover


def naive_redact(data: bytes, patterns: Iterable[bytes], mask: bytes = b"######") -> bytes:
    """One mask per maximal run of covered bytes (runs of touching occurrences join)."""
    cover = covered(data, patterns)
    # Touching occurrences join into one run: e.g. "ab"+"cd" in "abcd" is one
    # run; covered() already makes those bytes contiguous.
    out = bytearray()
    i = 0
    while i < len(data):
        if cover[i]:
            out += mask
            while i < len(data) and cover[i]:
                i += 1
        else:
            out.append(data[i])
            i += 1
    return bytes(out)


def _occurrences(data: bytes, p: bytes):
    """Every start of ``p`` in ``data``, overlapping ones included."""
    i = data.find(p)
    while i >= 0:
        yield i
        i = data.find(p, i + 1)


def _by_first_byte(patterns) -> dict[int, list[bytes]]:
    """Patterns by their first byte: only those can start with a given tail."""
    out: dict[int, list[bytes]] = {}
    for p in patterns:
        if p:
            out.setdefault(p[0], []).append(p)
    return out


def naive_held(stream: bytes, patterns: Iterable[bytes]) -> int:
    """How many trailing bytes an exact, minimal streaming redactor must withhold.

    The longest tail that is a proper prefix of a pattern may still become an
    occurrence; bytes before it are decided, and so are bytes after it that a
    complete occurrence covers (they are masked whatever follows).
    """
    views = getattr(patterns, "views", {})
    patterns = [p for p in set(patterns) if p]
    n = len(stream)
    tail = 0
    by_first = _by_first_byte(patterns)
    longest = max(map(len, patterns), default=0)
    for length in range(min(n, longest - 1), 0, -1):  # a proper prefix is shorter than its pattern
        t = stream[n - length :]
        if any(len(p) > length and p.startswith(t) for p in by_first.get(t[0], ())):
            tail = length
            break
    # A pattern form: the longest view suffix that is a proper prefix of a
    # view pattern, from its first byte's token on, and at least an
    # incomplete token at the end.
    for family, pats in views.items():
        if family == "dump":
            tail = max(tail, _dump_held(stream, pats))
            continue
        view, where, incomplete = scan_view(family, stream, final=False)
        tail = max(tail, incomplete)
        by_first = _by_first_byte(pats)
        longest = max(map(len, pats), default=0)
        for length in range(min(len(view), longest - 1), 0, -1):
            t = view[len(view) - length :]
            if any(len(p) > length and p.startswith(t) for p in by_first.get(t[0], ())):
                tail = max(tail, n - where[len(view) - length][0])
                break
    decided = n - tail
    spans = [(i, i + len(p)) for p in patterns for i in _occurrences(stream, p)]
    spans += _view_spans(stream, views, False)
    grew = True
    while grew:
        grew = False
        for s, t in spans:
            if s <= decided < t:
                decided = t
                grew = True
    return n - decided
