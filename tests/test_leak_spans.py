"""Where the leak detector finds the admin password: spans, redaction, UTF-16 offsets, the API."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from paddedcell import config
from paddedcell.vault import check_leak, find_leaks, init_admin, vault_status
from paddedcell.vault.leak import CHUNK, MASK, LeakDetector, encoded_forms, redact, utf16_spans

FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}
# Two bytes (ö), three (€) and four (😀, two UTF-16 units) per character around the password.
FILLER = "aö €😀 b\n"


def naive_spans(data: bytes, password: str) -> list[tuple[int, int]]:
    """The oracle: every (overlapping) occurrence of every form, overlapping ones merged."""
    windows = []
    for form in encoded_forms(password):
        start = data.find(form)
        while start != -1:
            windows.append((start, start + len(form)))
            start = data.find(form, start + 1)
    merged: list[list[int]] = []
    for start, end in sorted(windows):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


@pytest.mark.parametrize("password", ["plain admin pw", "pä€s 😀 wörd"])
def test_every_position_in_str_and_bytes(password):
    detector = LeakDetector.create(password)
    filler = FILLER * 3
    for i in range(len(filler) + 1):
        text = filler[:i] + password + filler[i:]
        assert detector.spans(text) == [(i, i + len(password))], i
        assert redact(text, detector.spans(text)) == filler[:i] + MASK + filler[i:], i
        data = text.encode()
        start = len(filler[:i].encode())
        assert detector.spans(data) == [(start, start + len(password.encode()))], i
        units = len(filler[:i].encode("utf-16-le")) // 2
        assert utf16_spans(text, detector.spans(text)) == [
            (units, units + len(password.encode("utf-16-le")) // 2)], i
    assert detector.spans(filler) == [] and detector.spans(filler.encode()) == []


def test_repeated_hits_adjacent_and_overlapping():
    detector = LeakDetector.create("xyxyxyxy")
    assert detector.spans("xyxyxyxyxy") == [(0, 10)]  # hits at 0 and 2 overlap: one run
    assert redact("a xyxyxyxyxyxy b", detector.spans("a xyxyxyxyxyxy b")) == f"a {MASK} b"
    again = LeakDetector.create("admin pw 1")
    text = "admin pw 1admin pw 1 ö admin pw 1"  # two adjacent hits stay two runs
    assert again.spans(text) == [(0, 10), (10, 20), (23, 33)]
    assert redact(text, again.spans(text)) == f"{MASK}{MASK} ö {MASK}"


def test_the_json_escaped_forms_are_found_and_masked_whole():
    password = 'pa"ss\\wörd 😀 x'
    detector = LeakDetector.create(password)
    for text in (json.dumps({"t": password}), json.dumps({"t": password}, ensure_ascii=False),
                 f"{password} and {json.dumps(password)}"):
        spans = detector.spans(text)
        assert spans and detector.contains(text)
        out = redact(text, spans)
        assert not detector.contains(out), out
        assert out.count(MASK) == len(spans)
        assert detector.spans(text.encode()) == naive_spans(text.encode(), password)


def test_lone_surrogates_and_astral_characters_count_right():
    password = "surrogate test pw"
    detector = LeakDetector.create(password)
    text = "\ud800 😀" + password + "\udfff"
    assert detector.spans(text) == [(3, 3 + len(password))]
    assert utf16_spans(text, detector.spans(text)) == [(4, 4 + len(password))]
    assert redact(text, detector.spans(text)) == "\ud800 😀" + MASK + "\udfff"


def test_hits_across_chunk_boundaries_keep_their_offsets():
    password = "boundary password"
    detector = LeakDetector.create(password)
    filler = "é" * (2 * CHUNK)  # two bytes each: byte and code-point offsets differ
    for offset in (0, CHUNK // 2 - 3, CHUNK // 2, CHUNK - len(password), CHUNK - 1, CHUNK):
        text = filler[:offset] + password + filler[offset:] + password
        end = len(text) - len(password)
        assert detector.spans(text) == [(offset, offset + len(password)), (end, len(text))], offset


passwords = st.text(min_size=8, max_size=24).filter(lambda p: p == p.strip() and "\0" not in p)


@hsettings(max_examples=150, deadline=None)
@given(password=passwords, pieces=st.lists(st.one_of(st.text(max_size=30), st.just("#")), max_size=8),
       where=st.lists(st.integers(min_value=0, max_value=8), max_size=4))
def test_spans_match_the_oracle_in_every_unit(password, pieces, where):
    detector = LeakDetector.create(password)
    for index in sorted(where, reverse=True):
        pieces.insert(min(index, len(pieces)), password)
    text = "".join(pieces)
    data = text.encode("utf-8", "surrogatepass")
    byte_spans = naive_spans(data, password)
    assert detector.spans(data) == byte_spans
    spans = detector.spans(text)
    assert [(len(text[:a].encode("utf-8", "surrogatepass")), len(text[:b].encode("utf-8", "surrogatepass")))
            for a, b in spans] == byte_spans
    assert detector.contains(text) == bool(spans)
    assert utf16_spans(text, spans) == [(len(text[:a].encode("utf-16-le", "surrogatepass")) // 2,
                                         len(text[:b].encode("utf-16-le", "surrogatepass")) // 2)
                                        for a, b in spans]
    if spans:
        assert password not in redact(text, spans).replace(MASK, "\0")


# -- the API: find_leaks locks and logs once per call; check_leak keeps its contract -------------

@pytest.fixture
def s(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)
    init_admin("api spans admin pw", settings)
    return settings


def critical_lines(s) -> list[str]:
    log = s.home / "security.log"
    return [line for line in log.read_text().splitlines() if "CRITICAL" in line] if log.exists() else []


def test_find_leaks_one_critical_line_per_call_never_the_text(s):
    pw = "api spans admin pw"
    assert find_leaks("nothing to see ö", "x", settings=s) == [] and critical_lines(s) == []
    text = f"ö {pw}{pw} then «{pw}»"
    assert find_leaks(text, "message:out", settings=s) == [(2, 20), (20, 38), (45, 63)]
    assert vault_status(s) == "locked"
    assert find_leaks(text.encode(), "bytes", settings=s) == [(3, 21), (21, 39), (47, 65)]
    assert check_leak(text, "again", settings=s) is True
    assert check_leak("clean", "again", settings=s) is False
    lines = critical_lines(s)
    assert len(lines) == 3 and not any(pw in line or "then" in line for line in lines)


@pytest.mark.parametrize("password", ["route test admin pw", "route test admin pw1",
                                      "route test admin pw12"])
def test_base64_ending_with_the_password_is_found_at_every_alignment(password):
    """``printf %s PASSWORD | base64``: the run ends in padding, and its last quantum holds
    the password's last bytes (they were dropped: 2 alignments in 3 were missed)."""
    import base64

    detector = LeakDetector.create(password)
    for before in ("", "a", "ab"):
        for after in ("", "z", "zz", "\n"):
            data = (before + password + after).encode()
            for shown in (base64.b64encode(data), base64.b64encode(data).rstrip(b"="),
                          base64.urlsafe_b64encode(data)):
                text = b"x " + shown + b" ok"
                assert detector.spans(text) == [(2, 2 + len(shown))], (before, after, shown)
