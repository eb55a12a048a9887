"""Bounded output memory: a global byte budget and per-session ring buffers.

The guarantee first: the bytes held by every :class:`OutputBuffer` sharing a
:class:`BufferBudget` never exceed ``budget.total``. A flood cannot grow the
daemon; it only makes old output fall off the front of its own buffer.

Theory of operation. A session starts with ``floor`` bytes reserved (enough to
build OpenClaw's 200,000-character ``aggregated`` tail), which is what admission
control checks. While the budget has room, a buffer grows its reservation up to
``capacity`` (2 MiB by default); when it cannot grow it evicts its own oldest
bytes instead. Offsets are absolute byte positions in the session's redacted
output since it started, so ``log``/``poll`` cursors stay exact even after
eviction: reading before ``start`` simply returns what is left.

Pure: no I/O, no Trio. Bytes in; decoding happens at the edges.
"""

from __future__ import annotations


class BudgetExhausted(Exception):
    """No room for another session's buffer floor; ``str()`` is one line."""


class BufferBudget:
    """A shared count of reserved bytes, never above ``total``."""

    __slots__ = ("total", "used")

    def __init__(self, total: int):
        if total <= 0:
            raise ValueError("buffer budget must be a positive number of bytes")
        self.total = total
        self.used = 0

    @property
    def free(self) -> int:
        return self.total - self.used

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
    """A ring of redacted output bytes with absolute offsets."""

    __slots__ = ("capacity", "budget", "reserved", "_data", "start", "dropped_lines", "_released")

    def __init__(self, capacity: int, budget: BufferBudget, floor: int):
        floor = min(floor, capacity)
        if not budget.try_reserve(floor):
            raise BudgetExhausted(
                f"the output buffer budget is used up ({budget.used} of {budget.total} bytes, "
                "supervisor.global_buffer_bytes); kill or remove a session, or raise the setting"
            )
        self.capacity = capacity
        self.budget = budget
        self.reserved = floor
        self._data = bytearray()
        #: Absolute offset of the first byte still held.
        self.start = 0
        #: Newlines in the bytes evicted so far: line numbers stay absolute too.
        self.dropped_lines = 0
        self._released = False

    @property
    def end(self) -> int:
        """Absolute offset just past the newest byte (= total bytes ever appended)."""
        return self.start + len(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def append(self, data: bytes) -> None:
        if not data or self._released:
            return
        if len(data) >= self.capacity:
            # Only the newest ``capacity`` bytes could survive anyway.
            cut = len(data) - self.capacity
            self.dropped_lines += self._data.count(b"\n") + data.count(b"\n", 0, cut)
            self.start += len(self._data) + cut
            self._data.clear()
            data = data[cut:]
        need = len(self._data) + len(data)
        if need > self.reserved:
            grow = min(min(need, self.capacity) - self.reserved, self.budget.free)
            if grow > 0 and self.budget.try_reserve(grow):
                self.reserved += grow
        excess = need - self.reserved
        if excess > 0:
            dropped = min(excess, len(self._data))
            self.dropped_lines += self._data.count(b"\n", 0, dropped)
            # bytearray deletes from the front in O(1) (it moves its start pointer).
            del self._data[:dropped]
            self.start += dropped
            excess -= dropped
            if excess > 0:
                self.dropped_lines += data.count(b"\n", 0, excess)
                data = data[excess:]
                self.start += excess
        self._data += data

    def read(self, start: int, end: int | None = None) -> bytes:
        """Bytes in ``[start, end)`` that are still held (clamped to what is left)."""
        stop = self.end if end is None else min(end, self.end)
        first = max(start, self.start)
        if first >= stop:
            return b""
        return bytes(self._data[first - self.start: stop - self.start])

    def held(self) -> bytes:
        return bytes(self._data)

    def tail(self, n: int) -> bytes:
        return bytes(self._data[-n:]) if n > 0 else b""

    def release(self) -> None:
        """Give the reservation back to the budget; the buffer is empty afterwards."""
        if not self._released:
            self._released = True
            self.budget.release(self.reserved)
            self.reserved = 0
            self._data = bytearray()


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
