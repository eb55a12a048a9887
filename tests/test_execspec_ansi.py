"""The output sanitizer against OpenClaw 2026.9.6's own answers.

``CASES`` is the output of OpenClaw's ``createStreamingBinaryOutputSanitizer``
(``dist/shell-utils-*.mjs``) over these chunk lists, one sanitizer per case
(generated with Node 24 from the installed ``dist/``; see the module docstring
of :mod:`paddedcell.execspec.ansi`).
"""

from __future__ import annotations

import json

import pytest

from paddedcell.execspec.ansi import (
    AnsiStripper,
    OutputSanitizer,
    sanitize_stripped,
    sanitize_text,
    show_controls,
)

CASES = json.loads(r'''[{"chunks":["\u001b[31mred\u001b[0m plain"],"out":"red plain"},{"chunks":["a\u001b]0;title\u0007b"],"out":"ab"},{"chunks":["a\u001b]8;;http://x\u001b\\link\u001b]8;;\u001b\\b"],"out":"alinkb"},{"chunks":["1mX"],"out":"X"},{"chunks":["x\u001b[","31my"],"out":"xy"},{"chunks":["bell\u0007 nul\u0000 del"],"out":"bell\\x07 nul\\x00 del\\x7f"},{"chunks":["zw​j﻿k­"],"out":"zwjk"},{"chunks":["\u001b(Bok"],"out":"ok"},{"chunks":["\u001b7save\u001b8"],"out":"ave"},{"chunks":["\u001b[?25l\u001b[2J\u001b[Hhome"],"out":"home"},{"chunks":["tab\there\r\nline"],"out":"tab\there\r\nline"},{"chunks":["\u001b[1;31;42mmulti\u001b[m"],"out":"multi"},{"chunks":["csi with nl \u001b[3\n1m after"],"out":"csi with nl \n after"},{"chunks":["\u001b[12345678m long"],"out":" long"},{"chunks":["\u001b]unterminated"," still osc\u0007out"],"out":"out"},{"chunks":["\u001bc reset"],"out":" reset"},{"chunks":["\u001b#8x"],"out":"x"},{"chunks":["éü"],"out":"é\\x85ü"}]''')


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr("".join(c["chunks"]))[:40])
def test_text_sanitizer_matches_openclaw(case):
    stripper = AnsiStripper()
    assert sanitize_stripped("".join(stripper.write(c) for c in case["chunks"])) == case["out"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr("".join(c["chunks"]))[:40])
def test_byte_sanitizer_matches_openclaw_at_every_split(case):
    data = "".join(case["chunks"]).encode("utf-8")
    for cut in range(len(data) + 1):
        s = OutputSanitizer()
        got = s.feed(data[:cut]) + s.feed(memoryview(data)[cut:]) + s.flush()
        assert show_controls(got.decode("utf-8")) == case["out"], cut


def test_plain_ascii_passes_through_unchanged():
    s = OutputSanitizer()
    chunk = b"hello world\n" * 1000
    assert s.feed(chunk) == chunk


def test_csi_callback_sees_cursor_mode_and_position_queries():
    seen = []
    s = OutputSanitizer(seen.append)
    assert s.feed(b"\x1b[?1h") + s.feed(b"x\x1b[6") + s.feed(b"n\x1b[?1l") == b"x"
    assert seen == ["?1h", "6n", "?1l"]


def test_controls_are_shown_when_read_not_in_the_stream():
    s = OutputSanitizer()
    assert s.feed(b"a\x07b\n") == b"a\x07b\n"  # plain ASCII: untouched, one C scan
    assert show_controls("a\x07b\n\t\r") == "a\\x07b\n\t\r"
    assert show_controls(show_controls("\x00")) == "\\x00"  # idempotent


def test_invalid_utf8_becomes_replacement_characters():
    s = OutputSanitizer()
    assert (s.feed(b"a\xffb\xe2\x82") + s.flush()).decode() == "a\ufffdb\ufffd"


def test_escape_sequences_inside_a_secret_are_gone_before_the_redactor():
    """Stripping runs first, so the redactor sees the secret whole."""
    from paddedcell.redactor import StreamRedactor

    redactor = StreamRedactor(["hunter2-secret"])
    s = OutputSanitizer()
    raw = "".join(f"{ch}\x1b[0m" for ch in "hunter2-secret").encode() + b"\n"
    out = redactor.feed(s.feed(raw) + s.flush()) + redactor.flush()
    assert b"hunter2" not in out and b"######" in out


def test_sanitize_text_one_shot():
    assert sanitize_text("\x1b[31mred\x1b[0m") == "red"


def test_a_plain_read_buffer_passes_as_it_is_not_copied():
    """A masking pump hands its read buffer over as a memoryview: plain ASCII without
    ESC comes back as that very view (the redactor makes the one copy)."""
    buffer = bytearray(b"hello world\n" * 1000)
    view = memoryview(buffer)[:5000]
    assert OutputSanitizer().feed(view) is view


@pytest.mark.parametrize("native", [True, False], ids=["c", "copy"])
def test_a_read_buffer_is_sanitized_as_its_bytes_are(native, monkeypatch):
    """A memoryview with an ESC or a non-ASCII byte anywhere (each side of a 64-byte
    step) is sanitized as bytes are, in C and in the Python fallback."""
    from paddedcell.execspec import ansi

    monkeypatch.setattr(ansi, "_plain_view", None if native else ansi._plain_copy)
    for bad in (b"\x1b[31m", "\u200b".encode(), b"\x9b", b"\x80"):  # each changes the text
        for at in (0, 1, 62, 63, 64, 65, 127, 128, 199):
            data = bytes(range(32, 127)) * 2 + b"\n"
            data = data[:at] + bad + data[at:]
            buffer = bytearray(data)
            got = OutputSanitizer().feed(memoryview(buffer))
            assert bytes(got) == OutputSanitizer().feed(data), (bad, at)
            assert bytes(got) != data, (bad, at)


def test_the_c_plain_test_is_its_definition():
    """``_native.plain_ascii``: no byte >= 0x80 and no ESC, at every length and position
    around its 64-byte steps."""
    native = pytest.importorskip("paddedcell.redactor._native")
    assert native.plain_ascii(b"") and native.plain_ascii(bytearray(b"\x00\x7f\x1a\x1c"))
    for n in range(1, 200):
        base = bytes(32 + i % 95 for i in range(n))
        assert native.plain_ascii(memoryview(base)), n
        for at in {0, n // 2, n - 1, min(n - 1, 63), min(n - 1, 64)}:
            for bad in (0x1B, 0x80, 0xFF):
                data = base[:at] + bytes([bad]) + base[at + 1:]
                assert native.plain_ascii(data) is (data.isascii() and b"\x1b" not in data), (n, at, bad)
