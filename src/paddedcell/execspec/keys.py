"""Bytes for ``process send-keys``, ``paste`` and ``submit``: the same as OpenClaw's.

Every table and rule here is copied from OpenClaw 2026.9.6,
``dist/bash-tools-*.mjs`` region ``src/agents/pty-keys.ts`` (``namedKeyMap``,
``modifiableNamedKeys``, ``DECCKM_SS3_KEYS``, ``encodeKeyToken``,
``parseModifiers``, ``applyCharModifiers``, ``toCtrlChar``, ``xtermModifier``,
``parseHexByte``, ``encodePaste``), so an agent that learnt OpenClaw's
``process send-keys`` gets byte-identical input with ``pcprocess``.

Tokens are tmux-like: ``Enter``, ``C-c``, ``M-x``, ``S-Tab``, ``^D``, ``Up``,
``F5``, ``kp7``. A token that names no key and carries no modifier is sent as
literal text (``"ls"`` sends ``ls``), as in OpenClaw. Cursor keys depend on the
terminal's cursor-key mode (DECCKM): a full-screen program that sent
``ESC[?1h`` wants ``ESC O A`` for Up instead of ``ESC [ A``;
:class:`CursorKeyTracker` follows that mode from the session's output.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Sequence

__all__ = [
    "BRACKETED_PASTE_END",
    "BRACKETED_PASTE_START",
    "CursorKeyMode",
    "CursorKeyTracker",
    "KeyEncoding",
    "SUBMIT",
    "decode_hex",
    "encode_key_request",
    "encode_keys",
    "encode_paste",
    "has_cursor_mode_sensitive_keys",
]

CursorKeyMode = Literal["normal", "application", "unknown"]

ESC = "\x1b"
CR = "\r"
TAB = "\t"
BACKSPACE = "\x7f"

#: What ``process submit`` writes (OpenClaw: ``writeProcessStdin(stdin, "\r")``).
SUBMIT: bytes = b"\r"

BRACKETED_PASTE_START = f"{ESC}[200~"
BRACKETED_PASTE_END = f"{ESC}[201~"

#: SS3 sequences for DECCKM application cursor-key mode (smkx).
DECCKM_SS3_KEYS: dict[str, str] = {
    "up": f"{ESC}OA",
    "down": f"{ESC}OB",
    "right": f"{ESC}OC",
    "left": f"{ESC}OD",
    "home": f"{ESC}OH",
    "end": f"{ESC}OF",
}

NAMED_KEYS: dict[str, str] = {
    "enter": CR,
    "return": CR,
    "tab": TAB,
    "escape": ESC,
    "esc": ESC,
    "space": " ",
    "bspace": BACKSPACE,
    "backspace": BACKSPACE,
    "up": f"{ESC}[A",
    "down": f"{ESC}[B",
    "right": f"{ESC}[C",
    "left": f"{ESC}[D",
    "home": f"{ESC}[1~",
    "end": f"{ESC}[4~",
    "pageup": f"{ESC}[5~",
    "pgup": f"{ESC}[5~",
    "ppage": f"{ESC}[5~",
    "pagedown": f"{ESC}[6~",
    "pgdn": f"{ESC}[6~",
    "npage": f"{ESC}[6~",
    "insert": f"{ESC}[2~",
    "ic": f"{ESC}[2~",
    "delete": f"{ESC}[3~",
    "del": f"{ESC}[3~",
    "dc": f"{ESC}[3~",
    "btab": f"{ESC}[Z",
    "f1": f"{ESC}OP",
    "f2": f"{ESC}OQ",
    "f3": f"{ESC}OR",
    "f4": f"{ESC}OS",
    "f5": f"{ESC}[15~",
    "f6": f"{ESC}[17~",
    "f7": f"{ESC}[18~",
    "f8": f"{ESC}[19~",
    "f9": f"{ESC}[20~",
    "f10": f"{ESC}[21~",
    "f11": f"{ESC}[23~",
    "f12": f"{ESC}[24~",
    "kp/": f"{ESC}Oo",
    "kp*": f"{ESC}Oj",
    "kp-": f"{ESC}Om",
    "kp+": f"{ESC}Ok",
    "kp7": f"{ESC}Ow",
    "kp8": f"{ESC}Ox",
    "kp9": f"{ESC}Oy",
    "kp4": f"{ESC}Ot",
    "kp5": f"{ESC}Ou",
    "kp6": f"{ESC}Ov",
    "kp1": f"{ESC}Oq",
    "kp2": f"{ESC}Or",
    "kp3": f"{ESC}Os",
    "kp0": f"{ESC}Op",
    "kp.": f"{ESC}On",
    "kpenter": f"{ESC}OM",
}

MODIFIABLE_NAMED_KEYS = frozenset(
    {
        "up", "down", "left", "right", "home", "end",
        "pageup", "pgup", "ppage", "pagedown", "pgdn", "npage",
        "insert", "ic", "delete", "del", "dc",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Mods:
    ctrl: bool = False
    alt: bool = False
    shift: bool = False

    @property
    def any(self) -> bool:
        return self.ctrl or self.alt or self.shift


@dataclass(frozen=True, slots=True)
class KeyEncoding:
    """Bytes to write, plus OpenClaw's warnings (``Invalid hex byte: zz``)."""

    data: bytes
    warnings: tuple[str, ...] = ()


def _parse_modifiers(token: str) -> tuple[_Mods, str, bool]:
    ctrl = alt = shift = False
    rest = token
    saw = False
    while len(rest) > 2 and rest[1] == "-":
        mod = rest[0].lower()
        if mod == "c":
            ctrl = True
        elif mod == "m":
            alt = True
        elif mod == "s":
            shift = True
        else:
            break
        saw = True
        rest = rest[2:]
    return _Mods(ctrl, alt, shift), rest, saw


def _to_ctrl_char(char: str) -> str | None:
    if len(char) != 1:
        return None
    if char == "?":
        return "\x7f"
    code = ord(char.upper())
    if 64 <= code <= 95:
        return chr(code & 31)
    return None


def _xterm_modifier(mods: _Mods) -> int:
    mod = 1
    if mods.shift:
        mod += 1
    if mods.alt:
        mod += 2
    if mods.ctrl:
        mod += 4
    return mod


def _apply_char_modifiers(char: str, mods: _Mods) -> str:
    value = char
    if mods.shift and re.fullmatch(r"[a-z]", value):
        value = value.upper()
    if mods.ctrl:
        ctrl = _to_ctrl_char(value)
        if ctrl:
            value = ctrl
    if mods.alt:
        value = ESC + value
    return value


def _encode_key_token(raw: str, warnings: list[str], cursor_mode: CursorKeyMode | None) -> str:
    token = raw.strip()
    if not token:
        return ""
    if len(token) == 2 and token.startswith("^"):
        ctrl = _to_ctrl_char(token[1])
        if ctrl:
            return ctrl
    mods, base, has_modifiers = _parse_modifiers(token)
    base_lower = base.strip().lower()
    if base_lower == "tab" and mods.shift:
        return f"{ESC}[Z"
    if base_lower in MODIFIABLE_NAMED_KEYS and cursor_mode == "application" and not mods.any:
        ss3 = DECCKM_SS3_KEYS.get(base_lower)
        if ss3:
            return ss3
    base_seq = NAMED_KEYS.get(base_lower)
    if base_seq:
        if base_lower in MODIFIABLE_NAMED_KEYS and mods.any:
            parameter = base_seq[2:-1] or "1"
            return f"{ESC}[{parameter};{_xterm_modifier(mods)}{base_seq[-1]}"
        return ESC + base_seq if mods.alt else base_seq
    # JS ``base.length === 1`` counts UTF-16 units; one code point below the
    # astral planes is the same thing.
    if len(base) == 1 and ord(base) < 0x10000:
        return _apply_char_modifiers(base, mods)
    if has_modifiers:
        warnings.append(f'Unknown key "{base}" for modifiers; sending literal.')
    return base


def _parse_hex_byte(raw: str) -> int | None:
    lower = raw.strip().lower()
    normalized = lower[2:] if lower.startswith("0x") else lower
    if not re.fullmatch(r"[0-9a-f]{1,2}", normalized):
        return None
    return int(normalized, 16)


def has_cursor_mode_sensitive_keys(keys: Sequence[str] | None) -> bool:
    """True when an unmodified cursor key's bytes depend on the DECCKM mode."""
    for raw in keys or ():
        token = raw.strip()
        if not token:
            continue
        mods, base, _ = _parse_modifiers(token)
        if mods.any:
            continue
        if base.strip().lower() in DECCKM_SS3_KEYS:
            return True
    return False


def encode_key_request(
    keys: Sequence[str] | None = None,
    hex: Sequence[str] | None = None,  # noqa: A002 - OpenClaw's parameter name
    literal: str | None = None,
    cursor_mode: CursorKeyMode | None = None,
) -> KeyEncoding:
    """One ``send-keys`` payload: ``literal``, then ``hex`` bytes, then ``keys``.

    The order (literal, hex, keys) is OpenClaw's ``encodeKeySequence``.
    Invalid hex values are skipped with a warning, as there.
    """
    warnings: list[str] = []
    hex_bytes = bytearray()
    for raw in hex or ():
        byte = _parse_hex_byte(raw)
        if byte is None:
            warnings.append(f"Invalid hex byte: {raw}")
            continue
        hex_bytes.append(byte)
    mode = None if cursor_mode == "unknown" else cursor_mode
    encoded = "".join(_encode_key_token(t, warnings, mode) for t in keys or ())
    data = (literal or "").encode("utf-8") + bytes(hex_bytes) + encoded.encode("utf-8")
    return KeyEncoding(data, tuple(warnings))


def encode_keys(keys: Sequence[str], cursor_mode: CursorKeyMode | None = None) -> bytes:
    """Bytes for named key tokens (warnings dropped; see :func:`encode_key_request`)."""
    return encode_key_request(keys=keys, cursor_mode=cursor_mode).data


def decode_hex(values: Sequence[str]) -> bytes:
    """Bytes for ``hex`` tokens (``"1b"``, ``"0x03"``); invalid ones are skipped."""
    return encode_key_request(hex=values).data


def encode_paste(text: str, bracketed: bool = True) -> bytes:
    """``ESC[200~ text ESC[201~`` (bracketed paste), or the bare text."""
    if not bracketed:
        return text.encode("utf-8")
    return f"{BRACKETED_PASTE_START}{text}{BRACKETED_PASTE_END}".encode("utf-8")


# DECCKM set/reset (``ESC[?1h`` / ``ESC[?1l``) and cursor-position queries
# (``ESC[6n`` / ``ESC[?6n``), as OpenClaw's output sanitizer watches for them.
_WATCHED = re.compile(rb"\x1b\[(\?1h|\?1l|\??6n)")
#: OpenClaw answers a PTY program's cursor-position query with row 1, column 1,
#: so programs that wait for the answer (some REPLs and TUIs) do not hang.
CURSOR_POSITION_REPLY = b"\x1b[1;1R"


@dataclass(slots=True)
class CursorKeyTracker:
    """Follows a PTY session's cursor-key mode from its output bytes.

    Starts ``"unknown"`` for a PTY (``"normal"`` for pipes), as OpenClaw does;
    ``send-keys`` with a bare cursor key is refused while the mode is unknown
    (see :func:`paddedcell.execspec.results.process_send_keys`).
    ``feed`` returns how many cursor-position replies the caller should write
    to the PTY. Sequences split across reads are found: the last few bytes are
    kept for the next call.
    """

    mode: CursorKeyMode = "unknown"
    _carry: bytes = field(default=b"", repr=False)

    def feed(self, data: bytes) -> int:
        buf = self._carry + data
        replies = 0
        for match in _WATCHED.finditer(buf):
            seq = match.group(1)
            if seq == b"?1h":
                self.mode = "application"
            elif seq == b"?1l":
                self.mode = "normal"
            else:
                replies += 1
        # Keep a possible partial sequence (at most ``ESC [ ? 6`` = 4 bytes)
        # that is not already part of a complete match.
        tail_start = max(len(buf) - 4, 0)
        last_end = 0
        for match in _WATCHED.finditer(buf):
            last_end = match.end()
        start = max(tail_start, last_end)
        esc = buf.rfind(b"\x1b", start)
        self._carry = buf[esc:] if esc != -1 else b""
        return replies
