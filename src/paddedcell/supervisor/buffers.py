"""Bounded output memory: a global byte budget and per-session ring buffers.

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
sessions out, and with 64 flooding sessions the rings share what is left. Offsets are absolute byte positions in the session's redacted
output since it started, so ``log``/``poll`` cursors stay exact even after
eviction: reading before ``start`` simply returns what is left.

Pure: no I/O, no Trio. Bytes in; decoding happens at the edges.
"""

from __future__ import annotations


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


class OutputBuffer:
    """A ring of redacted output bytes with absolute offsets.

    A true circular buffer: once full, an append overwrites the oldest bytes
    in place (no reallocation, no copying of what is kept). The physical
    array grows by doubling only while the buffer fills up, so an idle or
    quiet session holds little memory.
    """

    __slots__ = ("capacity", "budget", "floor", "reserved", "_buf", "_head", "_len", "start",
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
        self._buf = bytearray()
        self._head = 0  # physical index of the oldest byte
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

    def _span(self, first: int, count: int) -> list[tuple[int, int]]:
        """Physical ``(from, to)`` slices of ``count`` bytes starting ``first`` after head."""
        size = len(self._buf)
        a = (self._head + first) % size if size else 0
        if a + count <= size:
            return [(a, a + count)]
        return [(a, size), (0, a + count - size)]

    def _evict(self, n: int) -> None:
        if n <= 0:
            return
        self._head = (self._head + n) % len(self._buf)
        self._len -= n
        self.start += n

    def _relayout(self, size: int) -> None:
        kept = self.read(self.start)
        self._buf = bytearray(size)
        self._buf[:len(kept)] = kept
        self._head = 0

    def append(self, data: bytes) -> None:
        if not data or self._released:
            return
        n = len(data)
        deficit = self.budget.protected - self.budget.free
        if deficit > 0 and self.reserved > self.floor:
            self._shrink(min(deficit, self.reserved - self.floor))
        need = self._len + n
        if need > self.reserved and self.reserved < self.capacity:
            # Reserve ahead (doubling): growing by each chunk would re-lay out the ring per append.
            target = min(self.capacity, max(need, 2 * self.reserved))
            grow = min(target - self.reserved, self.budget.growth_room)
            if grow > 0 and self.budget.try_reserve(grow):
                self.reserved += grow
        if n >= self.reserved:
            # Only the newest ``reserved`` bytes can survive.
            cut = n - self.reserved
            self._evict(self._len)
            self.start += cut
            data = memoryview(data)[cut:]
            n = len(data)
        else:
            self._evict(need - self.reserved)
        if self._len + n > len(self._buf):
            self._relayout(min(self.reserved, max(self._len + n, 2 * len(self._buf), 4096)))
        view = memoryview(data)  # slices of a view: one copy into the ring, not two
        pos = 0
        for a, b in self._span(self._len, n):
            self._buf[a:b] = view[pos:pos + b - a]
            pos += b - a
        self._len += n

    def _shrink(self, give: int) -> None:
        """Hand ``give`` reserved bytes back (newer sessions need their share)."""
        self.reserved -= give
        self._evict(max(0, self._len - self.reserved))
        if len(self._buf) > self.reserved:
            self._relayout(max(self._len, self.reserved))
        self.budget.release(give)

    def read(self, start: int, end: int | None = None) -> bytes:
        """Bytes in ``[start, end)`` that are still held (clamped to what is left)."""
        stop = self.end if end is None else min(end, self.end)
        first = max(start, self.start)
        if first >= stop:
            return b""
        parts = self._span(first - self.start, stop - first)
        if len(parts) == 1:
            return bytes(self._buf[parts[0][0]:parts[0][1]])
        return b"".join(bytes(self._buf[a:b]) for a, b in parts)

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
            self._buf = bytearray()
            self.start += self._len
            self._head = self._len = 0


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
