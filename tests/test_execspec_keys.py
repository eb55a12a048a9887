"""send-keys / paste / submit bytes (the full OpenClaw comparison is in
test_execspec_openclaw.py) and the cursor-key-mode tracker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paddedcell.execspec import keys
from paddedcell.execspec.keys import CURSOR_POSITION_REPLY, CursorKeyTracker


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (["Enter"], b"\r"),
        (["C-c"], b"\x03"),
        (["C-d"], b"\x04"),
        (["^C"], b"\x03"),
        (["Escape"], b"\x1b"),
        (["Tab"], b"\t"),
        (["S-Tab"], b"\x1b[Z"),
        (["BSpace"], b"\x7f"),
        (["Up", "Down", "Right", "Left"], b"\x1b[A\x1b[B\x1b[C\x1b[D"),
        (["Home", "End"], b"\x1b[1~\x1b[4~"),
        (["PageUp", "PageDown"], b"\x1b[5~\x1b[6~"),
        (["F1", "F12"], b"\x1bOP\x1b[24~"),
        (["C-Up"], b"\x1b[1;5A"),
        (["S-Delete"], b"\x1b[3;2~"),
        (["M-x"], b"\x1bx"),
        (["M-Enter"], b"\x1b\r"),
        (["ls", "Enter"], b"ls\r"),
        (["  "], b""),
    ],
)
def test_encode_keys(tokens, expected) -> None:
    assert keys.encode_keys(tokens) == expected


def test_application_cursor_mode() -> None:
    assert keys.encode_keys(["Up", "Home"], cursor_mode="application") == b"\x1bOA\x1bOH"
    assert keys.encode_keys(["Up"], cursor_mode="unknown") == b"\x1b[A"
    # Modified keys ignore DECCKM, as in OpenClaw.
    assert keys.encode_keys(["C-Up"], cursor_mode="application") == b"\x1b[1;5A"


def test_hex_literal_order_and_warnings() -> None:
    enc = keys.encode_key_request(keys=["Enter"], hex=["0x1b", "zz", "5B"], literal="é")
    assert enc.data == "é".encode() + b"\x1b\x5b" + b"\r"
    assert enc.warnings == ("Invalid hex byte: zz",)
    assert keys.decode_hex(["00", "ff", "0xFF", "100", ""]) == b"\x00\xff\xff"


def test_unknown_modified_key_warns() -> None:
    enc = keys.encode_key_request(keys=["C-Foo"])
    assert enc.data == b"Foo"
    assert enc.warnings == ('Unknown key "Foo" for modifiers; sending literal.',)


def test_paste_and_submit() -> None:
    assert keys.encode_paste("a\nb") == b"\x1b[200~a\nb\x1b[201~"
    assert keys.encode_paste("a", bracketed=False) == b"a"
    assert keys.SUBMIT == b"\r"


def test_cursor_mode_sensitivity() -> None:
    assert keys.has_cursor_mode_sensitive_keys(["Up"])
    assert keys.has_cursor_mode_sensitive_keys(["x", " end "])
    assert not keys.has_cursor_mode_sensitive_keys(["C-Up", "PageUp", "Enter"])
    assert not keys.has_cursor_mode_sensitive_keys(None)


# --------------------------------------------------------------------------- tracker


def test_tracker_follows_decckm() -> None:
    t = CursorKeyTracker()
    assert t.mode == "unknown"
    assert t.feed(b"hello") == 0 and t.mode == "unknown"
    t.feed(b"\x1b[?1h\x1b=")
    assert t.mode == "application"
    t.feed(b"text \x1b[?1l more")
    assert t.mode == "normal"
    assert CursorKeyTracker(mode="normal").mode == "normal"


def test_tracker_counts_cursor_position_queries() -> None:
    t = CursorKeyTracker()
    assert t.feed(b"\x1b[6n prompt \x1b[?6n") == 2
    assert CURSOR_POSITION_REPLY == b"\x1b[1;1R"


SEQUENCES = [b"\x1b[?1h", b"\x1b[?1l", b"\x1b[6n", b"\x1b[?6n"]


@given(
    st.lists(st.sampled_from(SEQUENCES + [b"abc", b"\x1b", b"\x1b[", b"\x1b[0m", b"[?1h", b"\n"]), max_size=20),
    st.lists(st.integers(min_value=0, max_value=200), max_size=10),
)
def test_tracker_is_split_safe(parts, cuts) -> None:
    """Any chunking gives the same mode and reply count as one feed."""
    data = b"".join(parts)
    whole = CursorKeyTracker()
    whole_replies = whole.feed(data)
    split = CursorKeyTracker()
    points = sorted({min(c, len(data)) for c in cuts})
    replies, last = 0, 0
    for p in points + [len(data)]:
        replies += split.feed(data[last:p])
        last = p
    assert (split.mode, replies) == (whole.mode, whole_replies)
