"""The text a model gets from a command's output: OpenClaw's output sanitizer.

OpenClaw 2026.9.6 passes every chunk of a command's output through
``createStreamingBinaryOutputSanitizer`` (``dist/shell-utils-*.mjs``), one per
stream, before it is aggregated, polled, logged or shown:

1. ``AnsiSequenceStripper`` (``packages/terminal-core/src/ansi-sequences.ts``,
   ``dist/ansi-*.mjs``) removes escape sequences — CSI (``ESC [`` / ``0x9b``),
   OSC (``ESC ]`` / ``0x9d`` up to BEL, ST or ``ESC \\``) and the "compat"
   grammar of ``ansi-regex`` — keeping C0 controls found inside a CSI; its
   state carries over from one chunk to the next;
2. ``sanitizeStrippedBinaryOutput`` drops Unicode format characters
   (``\\p{Format}``) and surrogates, and writes every other control character
   except tab, newline and carriage return as the four characters ``\\xNN``.

:class:`AnsiStripper` and :func:`sanitize_stripped` are line-for-line ports.
PaddedCell splits the work in two. What *removes* characters — escape
sequences, format characters — runs on the byte stream *before* the redactor
(:class:`OutputSanitizer`, UTF-8 decoded with replacement as Node decodes the
child's output), so nothing inserted between the characters of a secret can
hide it from the redactor and then vanish. What only *expands* — a control
character shown as ``\\xNN`` — runs when the text is read (:func:`show_controls`),
so a flood of plain ASCII costs one C scan of the pump's read buffer, in place
(``_native.plain_ascii``; on bytes, ``isascii`` and a search for ESC), not a
regular expression over every byte, and passes on as it came, not copied.

Pure: no I/O.
"""

from __future__ import annotations

import codecs
import os
import re
from typing import Callable

__all__ = ["AnsiStripper", "OutputSanitizer", "sanitize_stripped", "sanitize_text",
           "show_controls"]

_INTRODUCER = re.compile("[\x1b\x9b\x9d]")
_OSC_STOP = re.compile("[\x07\x9c\x1b]")
# \p{Format} as Node 24 (Unicode 17) defines it, plus the surrogate block.
_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f\ud800-\udfff]"
)
# \p{Cc} except tab, newline and carriage return.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _compat_prefix(code: int) -> bool:
    return code in (91, 93, 40, 41, 35, 59, 63)


def _compat_parameter(code: int) -> bool:
    return 48 <= code <= 57 or code in (58, 59)


def _digit(code: int) -> bool:
    return 48 <= code <= 57


def _compat_final(code: int) -> bool:
    return (48 <= code <= 57 or 64 <= code <= 90 or code == 99 or 102 <= code <= 110
            or 113 <= code <= 117 or code in (121, 61, 62, 60, 126))


class AnsiStripper:
    """``AnsiSequenceStripper``: strips escape sequences, state kept across writes.

    ``on_csi`` receives each complete CSI's parameters and final character
    (e.g. ``"?1h"``, ``"6n"``), as OpenClaw uses it to follow the cursor-key
    mode and answer cursor-position queries.
    """

    def __init__(self, on_csi: Callable[[str], None] | None = None):
        self.on_csi = on_csi
        self.state = "text"
        self._csi: str | None = None
        self._csi_compat_prefix_only = False
        self._compat_in_parameters = False
        self._compat_parameter_digits = 0

    def _start_csi(self) -> None:
        self.state = "csi"
        self._csi_compat_prefix_only = True
        self._csi = "" if self.on_csi else None

    def _enter_compat(self, in_parameters: bool) -> None:
        self.state = "compat"
        self._compat_in_parameters = in_parameters
        self._compat_parameter_digits = 1 if in_parameters else 0

    def write(self, text: str) -> str:  # noqa: C901 - a state machine, kept as in OpenClaw
        if self.state == "text" and not _INTRODUCER.search(text):
            return text
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            state = self.state
            if state == "text":
                m = _INTRODUCER.search(text, i)
                if m is None:
                    out.append(text[i:])
                    break
                out.append(text[i:m.start()])
                i = m.start()
                code = ord(text[i])
                if code == 27:
                    self.state = "escape"
                elif code == 155:
                    self._start_csi()
                else:
                    self.state = "osc"
                i += 1
                continue
            if state == "osc":
                m = _OSC_STOP.search(text, i)
                if m is None:
                    break
                i = m.start()
                self.state = "osc-escape" if text[i] == "\x1b" else "text"
                i += 1
                continue
            code = ord(text[i])
            if state == "osc-escape":
                if code in (92, 7, 156):
                    self.state = "text"
                elif code != 27:
                    self.state = "osc"
                i += 1
                continue
            if code in (27, 155, 157):
                if code == 155:
                    self._start_csi()
                else:
                    self.state = "escape" if code == 27 else "osc"
                i += 1
                continue
            if state == "csi":
                if code in (24, 26):
                    self.state = "text"
                    i += 1
                elif code <= 31 or code == 127:
                    out.append(text[i])
                    i += 1
                elif 32 <= code <= 63:
                    if self._csi is not None:
                        self._csi = self._csi + text[i] if len(self._csi) < 64 else None
                    if not _compat_prefix(code):
                        self._csi_compat_prefix_only = False
                    i += 1
                elif code in (91, 93) and self._csi_compat_prefix_only:
                    self._enter_compat(False)
                    i += 1
                elif 64 <= code <= 126:
                    if self._csi is not None and self.on_csi is not None:
                        self.on_csi(self._csi + text[i])
                    self.state = "text"
                    i += 1
                else:
                    self.state = "text"
                continue
            if state == "escape":
                if code == 93:
                    self.state = "osc"
                    i += 1
                elif code == 91:
                    self._start_csi()
                    i += 1
                elif _compat_prefix(code):
                    self._enter_compat(False)
                    i += 1
                elif _digit(code):
                    self._enter_compat(True)
                    i += 1
                else:  # a final ends the sequence; any other character is text again
                    self.state = "text"
                    i += _compat_final(code)
                continue
            # compat
            if code in (24, 26):
                self.state = "text"
                i += 1
            elif not self._compat_in_parameters and _compat_prefix(code):
                i += 1
            elif not self._compat_in_parameters and _digit(code):
                self._enter_compat(True)
                i += 1
            elif self._compat_in_parameters and _compat_parameter(code):
                if code in (58, 59):
                    self._compat_parameter_digits = 0
                    i += 1
                elif self._compat_parameter_digits < 4:
                    self._compat_parameter_digits += 1
                    i += 1
                else:
                    self.state = "text"
                    i += 1
            else:  # as after ESC: a final ends the sequence, any other is text again
                self.state = "text"
                i += _compat_final(code)
        return "".join(out)


def show_controls(text: str) -> str:
    """Every control character but tab, LF and CR as the four characters ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def sanitize_stripped(text: str) -> str:
    """``sanitizeStrippedBinaryOutput``: drop format characters, show controls as ``\\xNN``."""
    return show_controls(_FORMAT.sub("", text))


def sanitize_text(text: str) -> str:
    """One whole text through a fresh sanitizer (tests, one-shot strings)."""
    return sanitize_stripped(AnsiStripper().write(text))


def _plain_copy(data: memoryview) -> bool:
    data = bytes(data)
    return data.isascii() and b"\x1b" not in data


_plain_view: Callable[[memoryview], bool] | None = None


def _plain_buffer(data: memoryview) -> bool:
    """Whether ``data`` is ASCII without ESC: one C pass over the caller's buffer, no
    copy (``_native.plain_ascii``), else two over a copy. The C module is loaded at the
    first call: only a masking pump hands the sanitizer a memoryview (its read buffer),
    and its redactor has loaded it already; a plain ``pcexec`` never pays for it."""
    global _plain_view
    if _plain_view is None:
        _plain_view = _plain_copy
        if os.environ.get("PADDEDCELL_NATIVE", "1") != "0":
            try:
                from ..redactor import _native
            except ImportError:
                pass
            else:
                _plain_view = getattr(_native, "plain_ascii", _plain_copy)
    return _plain_view(data)


class OutputSanitizer:
    """A byte stream in, OpenClaw's sanitized text out as UTF-8, but for the
    control characters, which :func:`show_controls` shows when it is read.

    ASCII without ESC passes through undecoded while no sequence or multi-byte
    character is pending.
    """

    def __init__(self, on_csi: Callable[[str], None] | None = None):
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._ansi = AnsiStripper(on_csi)

    def feed(self, data: bytes | memoryview) -> bytes | memoryview:
        """``data``'s sanitized text as UTF-8: ``data`` itself when there is nothing to
        do (a memoryview too, not a copy: the filter after this one copies what it keeps)."""
        if self._ansi.state == "text" and not self._decoder.getstate()[0] and (
                data.isascii() and b"\x1b" not in data if type(data) is bytes
                else _plain_buffer(data)):
            return data
        return _FORMAT.sub("", self._ansi.write(self._decoder.decode(data))).encode("utf-8")

    def flush(self) -> bytes:
        text = self._decoder.decode(b"", final=True)
        return _FORMAT.sub("", self._ansi.write(text)).encode("utf-8") if text else b""
