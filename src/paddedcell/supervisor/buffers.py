"""Bounded output memory: a global byte budget and per-session output buffers.

The guarantee first: the bytes held by every :class:`OutputBuffer` sharing a
:class:`BufferBudget` never exceed ``budget.total``. A flood cannot grow the
daemon; it only makes old output fall off the front of its own buffer.

Theory of operation. A session starts with ``floor`` bytes reserved (enough to
build OpenClaw's 200,000-character ``aggregated`` tail), which is what admission
control checks. While the budget has room, a buffer grows its reservation up to
``capacity`` (2 MiB by default); when it cannot grow it evicts its own oldest
bytes instead. Growth never eats into ``budget.protected`` (the floors of the
sessions that may still be admitted, and the chunks live sessions have in
flight), and a buffer above its floor gives bytes back on its next append
while the protected part is short. So a few floods cannot lock later
sessions out, and with 64 flooding sessions the buffers share what is left.
Offsets are absolute byte positions in the session's redacted output since it
started, so ``log``/``poll`` cursors stay exact even after
eviction: reading before ``start`` simply returns what is left.

Pure: no I/O, no Trio. Bytes in; decoding happens at the edges.
"""

from __future__ import annotations

from collections import deque


class BudgetExhausted(Exception):
    """No room for another session's buffer floor; ``str()`` is one line."""


class BufferBudget:
    """A shared count of reserved bytes, never above ``total``."""

    __slots__ = ("total", "used", "protected")

    def __init__(self, total: int):
        if total <= 0:
            raise ValueError("buffer budget must be a positive number of bytes")
        self.total = total
        self.used = 0
        #: Bytes growth must leave free (admission may still use them).
        self.protected = 0

    @property
    def free(self) -> int:
        return self.total - self.used

    @property
    def growth_room(self) -> int:
        return max(0, self.free - self.protected)

    def try_reserve(self, n: int) -> bool:
        if n <= self.free:
            self.used += n
            return True
        return False

    def release(self, n: int) -> None:
        if n > self.used:
            # Fail loudly: a double release would let buffers outgrow the budget.
            raise RuntimeError(f"released {n} bytes but only {self.used} are reserved")
        self.used -= n


#: An append of this many bytes or more (a ``bytes`` object) is kept by reference: a
#: pump's 512 KiB batch is never copied into the buffer. Copying it on the event loop
#: while the worker filtered the next one made the worker's filter 1.4x slower and the
#: pipe row 1.7x slower (128 MiB, 10 secrets: 0.43 -> 0.76 GB/s without the copy).
BY_REFERENCE = 16 * 1024
#: Smaller appends (a terminal's 4 KiB reads) are copied into an open piece of up to
#: this many bytes: the per-piece cost (a header and a deque slot, ~40 bytes) stays
#: under 0.3% of what is held, however small the writes.
OPEN_PIECE = 64 * 1024


class OutputBuffer:
    """Redacted output bytes with absolute offsets: a queue of pieces.

    Large appends are held by reference (immutable ``bytes``, no copy), small ones are
    gathered into an open ``bytearray`` piece. Eviction drops whole pieces from the
    front (references only) as long as at least ``floor`` bytes stay held; below that
    it cuts the oldest piece exactly (copying what is kept of it), so the tail a
    finished session shows (``floor`` is sized for OpenClaw's) is never short. The
    bytes held never exceed ``reserved`` (an open piece may have up to an eighth of
    ``OPEN_PIECE`` allocated beyond its length).
    """

    __slots__ = ("capacity", "budget", "floor", "reserved", "_pieces", "_len", "start",
                 "_released")

    def __init__(self, capacity: int, budget: BufferBudget, floor: int):
        floor = min(floor, capacity)
        if not budget.try_reserve(floor):
            raise BudgetExhausted(
                f"the output buffer budget is used up ({budget.used} of {budget.total} bytes, "
                "supervisor.global_buffer_bytes); kill or remove a session, or raise the setting"
            )
        self.capacity = capacity
        self.budget = budget
        self.floor = floor
        self.reserved = floor
        self._pieces: deque[bytes | bytearray] = deque()
        self._len = 0
        #: Absolute offset of the first byte still held.
        self.start = 0
        self._released = False

    @property
    def end(self) -> int:
        """Absolute offset just past the newest byte (= total bytes ever appended)."""
        return self.start + self._len

    def __len__(self) -> int:
        return self._len

    def _evict(self, n: int, coming: int = 0) -> None:
        """Drop at least the oldest ``n`` bytes; whole pieces (no copy) while
        ``floor`` bytes stay with the ``coming`` ones, else exactly ``n``."""
        pieces = self._pieces
        while n > 0:
            head = pieces[0]
            size = len(head)
            if size > n and self._len - size + coming < self.floor:
                # Cut exactly: keep the newest ``size - n`` bytes of the piece.
                with memoryview(head) as view:
                    pieces[0] = bytes(view[n:])
                size = n
            else:
                pieces.popleft()
            self._len -= size
            self.start += size
            n -= size

    def append(self, data: bytes) -> None:
        if not data or self._released:
            return
        n = len(data)
        deficit = self.budget.protected - self.budget.free
        if deficit > 0 and self.reserved > self.floor:
            self._shrink(min(deficit, self.reserved - self.floor))
        need = self._len + n
        if need > self.reserved and self.reserved < self.capacity:
            # Reserve ahead (doubling): a budget round per append would cost more.
            target = min(self.capacity, max(need, 2 * self.reserved))
            grow = min(target - self.reserved, self.budget.growth_room)
            if grow > 0 and self.budget.try_reserve(grow):
                self.reserved += grow
        if n >= self.reserved:
            # Only the newest ``reserved`` bytes can survive (a copy: the rest of
            # ``data`` must not stay referenced).
            cut = n - self.reserved
            self._pieces.clear()
            self.start += self._len + cut
            self._len = 0
            if cut:
                with memoryview(data) as view:
                    data = bytes(view[cut:])
                n = len(data)
        else:
            self._evict(need - self.reserved, n)
        pieces = self._pieces
        if n >= BY_REFERENCE and type(data) is bytes:
            pieces.append(data)
        elif pieces and type(pieces[-1]) is bytearray and len(pieces[-1]) < OPEN_PIECE:
            pieces[-1] += data
        else:
            pieces.append(bytearray(data))
        self._len += n

    def _shrink(self, give: int) -> None:
        """Hand ``give`` reserved bytes back (newer sessions need their share)."""
        self.reserved -= give
        self._evict(self._len - self.reserved)
        self.budget.release(give)

    def read(self, start: int, end: int | None = None) -> bytes:
        """Bytes in ``[start, end)`` that are still held (clamped to what is left)."""
        stop = self.end if end is None else min(end, self.end)
        first = max(start, self.start)
        if first >= stop:
            return b""
        parts, pos = [], self.start  # pos: absolute offset of the piece's first byte
        for piece in self._pieces:
            size = len(piece)
            if pos + size > first:
                a, b = max(first - pos, 0), min(stop - pos, size)
                if a == 0 and b == size and type(piece) is bytes:
                    parts.append(piece)
                else:
                    with memoryview(piece) as view:
                        parts.append(bytes(view[a:b]))
            pos += size
            if pos >= stop:
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def held(self) -> bytes:
        return self.read(self.start)

    def tail(self, n: int) -> bytes:
        return self.read(self.end - n) if n > 0 else b""

    def release(self) -> None:
        """Give the reservation back to the budget; the buffer is empty afterwards."""
        if not self._released:
            self._released = True
            self.budget.release(self.reserved)
            self.reserved = 0
            self._pieces = deque()
            self.start += self._len
            self._len = 0


def decode_tail(data: bytes, max_chars: int, *, complete: bool) -> tuple[str, bool]:
    """The last ``max_chars`` characters of UTF-8 ``data`` and whether text was cut.

    ``complete`` says ``data`` is the whole output from its first byte; when it is
    not, the output was already cut before these bytes. A character split by the
    cut is dropped rather than shown as a replacement character.
    """
    if not complete:
        # Skip continuation bytes of a character whose start was cut off.
        skip = 0
        while skip < min(3, len(data)) and (data[skip] & 0xC0) == 0x80:
            skip += 1
        data = data[skip:]
    text = data.decode("utf-8", errors="replace")
    if len(text) > max_chars:
        return text[-max_chars:], True
    return text, not complete


def complete_utf8_end(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a character."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        byte = data[n - back]
        if byte & 0xC0 == 0x80:
            continue  # continuation byte: look further back for the lead byte
        if byte < 0x80:
            return n
        need = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if byte < 0xF0 else 4
        return n if back >= need else n - back
    return n
