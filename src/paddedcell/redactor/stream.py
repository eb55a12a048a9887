"""The streaming redactor.

Theory of operation
-------------------
Positions are offsets in the whole stream. The redactor keeps three things:

* ``base``: where its scan buffer starts. Every occurrence that could still be
  completed by future bytes starts at or after ``base``, because ``base`` is
  always the start of the longest tail that is a prefix of some pattern.
* ``pos``: how far output has been decided (emitted). It is at least ``base``;
  it is beyond ``base`` when a mask already covers bytes of the held tail.
* ``open``: whether the output ends in a mask whose run may still grow. A
  future occurrence starting at or before ``pos`` extends that run instead of
  producing a second mask, so that "each maximal masked run is one mask"
  holds across chunk boundaries exactly as in one-shot redaction.

Each ``feed`` appends the data to the buffer, finds every occurrence in it,
computes the cut (``end - hold``), and emits, in order: plain bytes before the
cut that no occurrence covers, and one mask per new run of covered bytes
(including covered bytes after the cut: they are masked whatever comes next).
So ``held`` (``end - pos``) is the live tail, or less when a complete secret
already covers part of it.
"""

from __future__ import annotations

import copy
import hashlib
import threading
import warnings
from collections import OrderedDict
from typing import Iterable

from . import matcher as _matcher
from .variants import Variants, plan
from .views import build as build_viewed, view_patterns


class ShortSecretWarning(UserWarning):
    """A secret is so short that masking it will also mask ordinary output.

    The message gives the length, never the value.
    """


class RedactorStateError(AssertionError):
    """An impossible internal state: nothing was emitted (fail closed)."""


def _as_bytes(secret: str | bytes) -> bytes:
    if isinstance(secret, str):
        return secret.encode("utf-8", "surrogateescape")
    if isinstance(secret, (bytes, bytearray, memoryview)):
        return bytes(secret)
    raise TypeError(f"a secret must be str or bytes, not {type(secret).__name__}")


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of half-open spans; touching spans join (one mask for ``ab`` + ``cd``)."""
    spans.sort()
    runs: list[list[int]] = []
    for s, t in spans:
        if runs and s <= runs[-1][1]:
            if t > runs[-1][1]:
                runs[-1][1] = t
        else:
            runs.append([s, t])
    return [(s, t) for s, t in runs]


class StreamRedactor:
    """Mask known secrets in a byte stream: no secret byte reaches the output
    under any chunking.

    ``feed(data)`` returns every byte that can no longer be part of a secret
    (or of an enabled encoded variant), masked; it holds back only the longest
    tail of the stream that is a proper prefix of some secret or variant, so
    output is never delayed beyond what exactness requires, and no timer ever
    releases held bytes (a timer leaks). The union of all occurrences,
    overlapping and nested ones included, is masked, and each maximal masked
    run becomes one ``mask``. Concatenated outputs over any chunking equal
    :func:`redact` of the whole input.

    ``flush()`` means end of stream: held bytes can no longer complete a
    secret, so they are emitted (masked where they already hold a whole one).
    ``add_secrets()`` mid-stream applies the new secrets to every byte not yet
    emitted, the held tail included; bytes already emitted cannot be recalled.

    Secrets shorter than ``warn_below_length`` bytes are masked but raise a
    :class:`ShortSecretWarning`. Variants are added only for secrets of at
    least ``variant_min_length`` bytes, fragments (runs of ``fragment_min``
    bytes) for secrets of at least 16 (see :mod:`.variants`). A secret that
    starts or ends with mask bytes does not reappear where a mask meets plain
    text (the pattern set is closed under that, see
    :func:`.variants.joint_pieces`); only a secret made of mask bytes alone
    (``##`` under ``######``) cannot be kept out of the mask itself.
    """

    def __init__(
        self,
        secrets: Iterable[str | bytes] = (),
        mask: str | bytes = "######",
        variants: bool | Variants = True,
        *,
        variant_min_length: int = 8,
        warn_below_length: int = 6,
        fragment_min: int = 12,
        engine: type | None = None,
    ):
        self.mask = _as_bytes(mask)
        if not self.mask:
            # "ab" + secret + "c" with secret removed could itself spell a secret.
            raise ValueError("the mask must not be empty: use e.g. '######'")
        self.variants = Variants.coerce(variants)
        self.variant_min_length = variant_min_length
        self.warn_below_length = warn_below_length
        if fragment_min < 8:
            raise ValueError("fragment_min must be at least 8: shorter runs of a secret are ordinary text")
        self.fragment_min = fragment_min
        self._engine_class = engine
        self._parts = 1  # matchers searched together (see add_secrets)
        self._secrets: frozenset[bytes] = frozenset()
        self._patterns: tuple[bytes, ...] = ()
        self._engine = _matcher.build((), engine)
        self._buf = b""
        self._base = 0  # stream offset of self._buf[0]
        self._pos = 0  # stream offset up to which output is decided
        self._open = False  # output ends in a mask that may still grow
        self.add_secrets(secrets, _stacklevel=3)

    # -- secrets ---------------------------------------------------------

    def add_secrets(self, secrets: Iterable[str | bytes], *, _stacklevel: int = 2) -> None:
        """Mask these too, from the first byte not yet emitted on."""
        if isinstance(secrets, (str, bytes)):
            raise TypeError("add_secrets takes an iterable of secrets, not one secret")
        new = set()
        for raw in secrets:
            secret = _as_bytes(raw)
            if not secret or secret in self._secrets or secret in new:
                continue
            new.add(secret)
            if len(secret) < self.warn_below_length:
                warnings.warn(
                    ShortSecretWarning(
                        f"a secret of {len(secret)} bytes is shorter than "
                        f"{self.warn_below_length}: it is masked, and so is any ordinary "
                        "output that happens to contain it; use longer secrets"
                    ),
                    stacklevel=_stacklevel,
                )
        if not new:
            return
        options = (self.variants, self.variant_min_length, self.fragment_min, self.mask)
        everything = self._secrets | new
        whole = _cached(everything, options, self._engine_class)
        if whole is None and self._secrets and self._parts < MAX_PARTS:
            # Mid-stream (a session learns a value while its command runs, on
            # the daemon's event loop): build a matcher for the new secrets
            # alone, milliseconds, and search with both; rebuilding the whole
            # set would stall the loop for as long as a cold start.
            patterns, engine = _compiled(frozenset(new), options, self._engine_class)
            self._engine = _matcher.Union(self._engine, engine)
            self._patterns = self._patterns + patterns
            self._parts += 1
        else:
            self._patterns, self._engine = whole or _compiled(everything, options, self._engine_class)
            self._parts = 1
        self._secrets = everything

    def fresh(self) -> "StreamRedactor":
        """A new, empty stream with the same secrets and the same built matcher.

        Building the matcher is the cost of a redactor (milliseconds for a few
        hundred secrets with variants); a supervisor needs one stream per
        output and one for the command line. ``add_secrets`` on either
        redactor afterwards changes only that one.
        """
        other = copy.copy(self)  # the secret and pattern sets are immutable: shared
        other._buf, other._base, other._pos, other._open = b"", 0, 0, False
        return other

    @property
    def secret_count(self) -> int:
        return len(self._secrets)

    @property
    def pattern_count(self) -> int:
        """Secrets plus their distinct enabled variants."""
        return len(self._patterns)

    # -- streaming -------------------------------------------------------

    @property
    def held(self) -> int:
        """Bytes received but not yet emitted (the live tail)."""
        return self._base + len(self._buf) - self._pos

    def feed(self, data: bytes | memoryview) -> bytes:
        """Redact ``data`` and return every byte that is now safe to emit.

        ``data`` may be a memoryview of the caller's buffer (a pump's read buffer):
        it is copied once, together with the held tail, and not kept."""
        if not data:
            return b""
        held = self._buf
        if type(data) is bytes:
            buf = held + data if held else data
        else:  # a memoryview (the pump's read buffer): one copy, with the held tail
            buf = held + data if held else bytes(data)
            data = b"" if held else buf  # (the plain bytes are sliced from buf: see below)
        hold, found, keep = self._engine.scan_keep(buf, False)
        if found:
            return self._apply(buf, data, hold, found, keep)
        # Most feeds (nothing found): _apply's plain case, inline (one frame
        # less a feed); the plain bytes are sliced from data when they lie in
        # it: data itself when nothing was held nor is (no copy).
        base, pos = self._base, self._pos
        end = base + len(buf)
        cut = end - hold
        if pos < cut:
            fresh = end - len(data)  # stream offset of data[0]
            out = data[pos - fresh : cut - fresh] if pos >= fresh else buf[pos - base : cut - base]
            self._pos = cut
            self._open = False
        else:
            out = b""
        self._buf = buf[keep:]
        self._base = base + keep
        return out

    def flush(self) -> bytes:
        """End of stream: emit the held tail (masked where it holds a secret)."""
        out = self._advance(self._buf, final=True)
        self._open = False
        return out

    def _advance(self, buf: bytes, final: bool, data: bytes = b"") -> bytes:
        """Scan ``buf`` (the kept tail plus ``data``, the new bytes) and emit what is decided."""
        # 1.-2. One scan: the cut (bytes before it cannot start an occurrence
        #    any more), every occurrence in the buffer, and where the next
        #    buffer starts (see step 5).
        hold, found, keep = self._engine.scan_keep(buf, final) if buf else (0, [], 0)
        return self._apply(buf, data, hold, found, keep)

    def _apply(self, buf: bytes, data: bytes, hold: int, found: list[tuple[int, int]], keep: int) -> bytes:
        """Steps 3-5 of :meth:`_advance`: emit up to the cut, keep the rest."""
        base, pos, is_open = self._base, self._pos, self._open
        end = base + len(buf)
        cut = end - hold
        if found:  # 3.-4. the occurrences merged into runs
            out, pos, is_open = self._emit(buf, _merge(found), base, pos, is_open, cut)
        elif pos < cut:  # plain bytes alone, sliced from data when they lie in it
            fresh = end - len(data)  # stream offset of data[0]: data itself when nothing is held (no copy)
            out = data[pos - fresh : cut - fresh] if pos >= fresh else buf[pos - base : cut - base]
            pos, is_open = cut, False
        else:
            out = b""
        # 5. Keep the scan buffer from the cut: the live tail, plus any masked
        #    bytes after it, which an occurrence still in progress may overlap.
        #    A pattern form's token (``%XX``, a CSI sequence) that straddles
        #    the cut is kept whole, so that the next scan tokenizes the
        #    stream as a whole-stream scan would (see .views): ``keep`` is
        #    the engine's ``sync`` of the cut (``scan_keep``).
        self._buf = buf[keep:]
        self._base = base + keep
        self._pos = pos
        self._open = is_open
        return out

    def _emit(self, buf: bytes, runs: list[tuple[int, int]], base: int, pos: int, is_open: bool,
              cut: int) -> tuple[bytes, int, bool]:
        """Steps 3-4 of :meth:`_apply` when something was found: the output
        up to the cut (plain bytes and one mask per new run), and the new
        ``pos`` and ``open``."""
        mask = self.mask
        # 3. Emit plain bytes up to each run, one mask per new run. Slices
        #    are memoryviews so that the join below is the only copy.
        out = []
        view = memoryview(buf)
        for s, t in runs:
            s += base
            t += base
            if t <= pos:
                continue  # already masked by an earlier call
            if s <= pos:
                if s < pos and not is_open:
                    raise RedactorStateError(
                        "an occurrence starts inside emitted plain output; nothing emitted"
                    )
                if not is_open:
                    out.append(mask)
                    is_open = True
                pos = t
            elif s <= cut:
                out.append(view[pos - base : s - base])
                out.append(mask)
                is_open = True
                pos = t
            else:
                break
        # 4. Plain bytes between the last run and the cut.
        if pos < cut:
            out.append(view[pos - base : cut - base])
            is_open = False
            pos = cut
        return b"".join(out), pos, is_open


#: Built matchers by secret set: a supervisor redacts every command of an agent
#: with the same secrets, and k = 10 000 secrets take seconds to build.
CACHE_SIZE = 8
#: ... and at most this many patterns in all, the newest set always kept: a
#: built set costs ~1.2 KiB of memory per pattern (k = 1 000 secrets with every
#: form: 46 000 patterns, +51 MiB RSS; k = 10 000: +541 MiB).
CACHE_PATTERNS = 500_000
_cache: OrderedDict[bytes, tuple[tuple[bytes, ...], object]] = OrderedDict()
_cache_lock = threading.Lock()


#: A redactor searches with at most this many matchers after ``add_secrets``
#: mid-stream; one more add rebuilds the whole set.
MAX_PARTS = 4


def _key(secrets: frozenset[bytes], options: tuple, engine) -> bytes:
    h = hashlib.sha256()
    h.update(repr((options, engine.name)).encode())
    for s in sorted(secrets):
        h.update(len(s).to_bytes(8, "big"))
        h.update(s)
    return h.digest()


def _cached(secrets: frozenset[bytes], options: tuple, engine):
    """The cached (patterns, matcher) of this set, or None."""
    return _lookup(_key(secrets, options, engine or _matcher.ENGINE))


def _lookup(key: bytes):
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
        return hit


def _compiled(secrets: frozenset[bytes], options: tuple, engine):
    """The pattern set and built matcher of a secret set, from an LRU keyed by digest.

    The key is a SHA-256 over the sorted secrets (length-prefixed), the
    options and the engine: the cache holds no secret in its keys, and the
    matchers it holds are what every redactor of that set would build anyway.
    """
    engine = engine or _matcher.ENGINE
    key = _key(secrets, options, engine)
    hit = _lookup(key)
    if hit is not None:
        return hit
    variants, variant_min_length, fragment_min, mask = options
    literals, windows = plan(secrets, variants, variant_min_length, fragment_min, mask)
    families = view_patterns(secrets, variants, variant_min_length)
    if families:  # pattern forms (separators inside a secret), see .views
        built_matcher = build_viewed(literals, windows, fragment_min, families, engine)
    else:
        built_matcher = _matcher.build(literals, engine, windows, fragment_min)
    built = (tuple(built_matcher.patterns), built_matcher)
    with _cache_lock:
        _cache[key] = built
        _cache.move_to_end(key)
        total = sum(len(patterns) for patterns, _ in _cache.values())
        while len(_cache) > 1 and (len(_cache) > CACHE_SIZE or total > CACHE_PATTERNS):
            _, (patterns, _) = _cache.popitem(last=False)
            total -= len(patterns)
    return built


def redact(
    data: bytes,
    secrets: Iterable[str | bytes],
    mask: str | bytes = "######",
    variants: bool | Variants = True,
    **options,
) -> bytes:
    """One-shot redaction: what a :class:`StreamRedactor` emits for ``data`` in total."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShortSecretWarning)
        r = StreamRedactor(secrets, mask=mask, variants=variants, **options)
    for w in caught:  # re-raised so that they point at our caller
        warnings.warn(w.message, stacklevel=2)
    return r._advance(bytes(data), final=True)
