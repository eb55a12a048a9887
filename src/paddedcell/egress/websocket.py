"""WebSocket frames from the client (RFC 6455 §5.2), searched and rewritten as they pass.
Pure.

After an upgrade the proxy no longer sees HTTP, but a session holding a placeholder must
still not let one leave unseen. Client frames are masked (XOR with a per-frame key), so
each payload is unmasked, given to ``replace`` (the request's :class:`~.substitute.
Substituter` for the ``body`` part: swap where the binding allows, else ``Refused``),
masked again with the same key and passed on with its header unchanged (swaps keep the
length). Payload bytes are passed on as they arrive; the last ``window - 1`` of a frame
are held until the frame ends or more arrives, so a placeholder split across reads is
whole when searched. One split across frames cannot be swapped any more (its first part
went out): :class:`FrameError`. Compressed frames (RSV1, permessage-deflate) are refused:
the proxy drops ``Sec-WebSocket-Extensions`` from the handshake so none are negotiated.
"""

from __future__ import annotations

from typing import Callable


class FrameError(Exception):
    """A frame the proxy will not pass; ``line`` says why (the connection is closed)."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


def xor_mask(data: bytes, key: bytes, offset: int) -> bytes:
    """``data`` XOR the 4-byte ``key`` starting ``offset`` bytes into the payload."""
    if not data:
        return data
    turned = key[offset % 4:] + key[:offset % 4]
    stream = (turned * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def payload_length(data: bytes) -> tuple[int, int] | None:
    """A frame's payload length and where its length field ends (None: not all here)."""
    length, at = data[1] & 0x7F, 2
    if length == 126:
        return (int.from_bytes(data[2:4], "big"), 4) if len(data) >= 4 else None
    if length == 127:
        return (int.from_bytes(data[2:10], "big"), 10) if len(data) >= 10 else None
    return length, at


class ClientFrames:
    """Feed client bytes; get the bytes to send upstream (see the module docstring)."""

    def __init__(self, replace: Callable[[bytes], bytes], window: Callable[[], int]):
        """``window()``: the longest form a placeholder can take now (grants may grow)."""
        self._replace = replace
        self._window = window
        self._buffer = b""        # bytes of a frame header not yet complete
        self._key = b""           # the current frame's mask key
        self._left = 0            # payload bytes of the current frame still to come
        self._offset = 0          # payload bytes of the current frame already handled
        self._held = b""          # unmasked payload held back (at most window - 1)
        self._tail = b""          # the last payload bytes passed on (spans frames)
        self._in_payload = False

    def feed(self, data: bytes) -> bytes:
        out = []
        data = self._buffer + data
        self._buffer = b""
        while data:
            if not self._in_payload:
                header = self._header(data)
                if header is None:
                    self._buffer = data
                    break
                head, length, key = header
                out.append(data[:len(head)])
                data = data[len(head):]
                self._key, self._left, self._offset = key, length, 0
                self._in_payload = True
            take = data[:self._left]
            data = data[len(take):]
            self._left -= len(take)
            out.append(self._payload(xor_mask(take, self._key, self._offset + len(self._held)),
                                     end=self._left == 0))
            if self._left == 0:
                self._in_payload = False
        return b"".join(out)

    def _header(self, data: bytes) -> tuple[bytes, int, bytes] | None:
        if len(data) < 2:
            return None
        first, second = data[0], data[1]
        if first & 0x40:
            raise FrameError("egress refused: compressed WebSocket frames cannot be searched "
                             "for placeholders")
        if not second & 0x80:
            raise FrameError("egress: a client WebSocket frame must be masked (RFC 6455)")
        sized = payload_length(data)
        if sized is None:
            return None
        length, at = sized
        if len(data) < at + 4:
            return None
        return data[:at + 4], length, data[at:at + 4]

    def _payload(self, plain: bytes, *, end: bool) -> bytes:
        """Unmasked payload bytes in; masked (searched, maybe swapped) bytes out."""
        keep = max(self._window() - 1, 0)
        whole = self._held + plain
        cut = len(whole) if end else max(0, len(whole) - keep)
        searched = self._replace(whole)
        if searched != whole:  # a swap happened; lengths match, so the cut holds
            whole = searched
        # Across frames: the tail already sent plus this frame's start.
        across = self._tail + whole[:keep]
        if self._tail and self._replace(across) != across:
            raise FrameError("egress refused: a placeholder split across WebSocket frames "
                             "cannot be swapped; send it in one frame")
        sent, self._held = whole[:cut], whole[cut:]
        start = self._offset
        self._offset += len(sent)
        if sent:
            self._tail = (self._tail + sent)[-keep:] if keep else b""
        return xor_mask(sent, self._key, start)


def frame_header(first: int, length: int) -> bytes:
    """An unmasked (server) frame header: ``first`` = FIN/RSV/opcode byte."""
    if length < 126:
        return bytes((first, length))
    if length < 1 << 16:
        return bytes((first, 126)) + length.to_bytes(2, "big")
    return bytes((first, 127)) + length.to_bytes(8, "big")


class ServerFrames:
    """Feed server bytes; get the bytes for the client, each frame's payload through the
    session's masks (``new_stream()``: a fresh mask stream with ``feed``/``flush``; one per
    message, so a value split across a message's frames is masked too). Masking changes
    lengths, so a frame is taken whole (at most ``limit`` bytes) and sent with its new
    length; a frame whose masked bytes are all held back goes out empty."""

    def __init__(self, new_stream: Callable[[], object], limit: int):
        self._new_stream = new_stream
        self._limit = limit
        self._buffer = b""
        self._message = None  # the mask stream of the data message in progress

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = []
        while True:
            frame = self._frame()
            if frame is None:
                return b"".join(out)
            first, payload = frame
            opcode, fin = first & 0x0F, bool(first & 0x80)
            if opcode >= 8:  # control frames: whole, never fragmented
                stream = self._new_stream()
                shown = stream.feed(payload) + stream.flush()  # type: ignore[attr-defined]
                if opcode == 8 and payload[:2] and len(shown) > 125:
                    shown = shown[:125]
            else:
                if self._message is None:
                    self._message = self._new_stream()
                shown = self._message.feed(payload)  # type: ignore[attr-defined]
                if fin:
                    shown += self._message.flush()  # type: ignore[attr-defined]
                    self._message = None
            out.append(frame_header(first, len(shown)) + shown)

    def _frame(self) -> tuple[int, bytes] | None:
        data = self._buffer
        if len(data) < 2:
            return None
        first, second = data[0], data[1]
        if first & 0x40:
            raise FrameError("egress refused: the server sent a compressed WebSocket frame, "
                             "which cannot be masked")
        sized = payload_length(data)
        if sized is None:
            return None
        length, at = sized
        key = b""
        if second & 0x80:  # a masked server frame is a protocol error; unmask it anyway
            if len(data) < at + 4:
                return None
            key, at = data[at:at + 4], at + 4
        if length > self._limit:
            raise FrameError(f"egress refused: a WebSocket frame of {length} bytes is over "
                             f"egress.max_decoded_body_bytes")
        if len(data) < at + length:
            return None
        payload = data[at:at + length]
        self._buffer = data[at + length:]
        return first, xor_mask(payload, key, 0) if key else payload
