"""The vault's own canonical JSON reader and writer agree with ``json`` byte for byte.

``pass_mgr get`` avoids importing ``json`` (and the ``re`` it pulls in), so
``crypto.canonical`` and ``crypto.parse_canonical`` have a fast path for the
simple subset the vault writes; anything else must go to ``json`` and come out
exactly as before, errors included.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paddedcell.vault import crypto
from paddedcell.vault.errors import IntegrityError


def reference_canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def reference_parse(raw: bytes, what: str):
    """parse_canonical as it was, on json alone: (result, None) or (None, message).

    NaN and Infinity are json extensions, not JSON: they are invalid, as in the vault."""
    def not_json(name):
        raise ValueError(name)

    try:
        obj = json.loads(raw, parse_constant=not_json)
    except (ValueError, UnicodeDecodeError):
        return None, str(crypto.damaged(what))
    if not isinstance(obj, dict) or reference_canonical(obj) != raw:
        return None, str(crypto.damaged(what))
    return obj, None


def parse(raw: bytes, what: str = "f"):
    try:
        return crypto.parse_canonical(raw, what), None
    except IntegrityError as exc:
        return None, str(exc)


scalars = (st.none() | st.booleans() | st.integers() | st.integers(-10**20, 10**20)
           | st.floats(allow_nan=False) | st.text(max_size=12)
           | st.text(alphabet="ab+/=-_:.\"\\ \x7f\x1f\u00e9", max_size=6))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)
documents = st.dictionaries(st.text(max_size=8), values, max_size=6)


@settings(max_examples=400, deadline=None)
@given(values)
def test_canonical_matches_json(obj):
    assert crypto.canonical(obj) == reference_canonical(obj)


@settings(max_examples=400, deadline=None)
@given(documents)
def test_parse_of_canonical_bytes_matches_json(doc):
    raw = reference_canonical(doc)
    assert parse(raw) == reference_parse(raw, "f")


@settings(max_examples=600, deadline=None)
@given(documents, st.data())
def test_parse_of_damaged_bytes_matches_json(doc, data):
    """Flip, drop or insert a byte anywhere: the same object or the same error as json."""
    raw = bytearray(reference_canonical(doc))
    index = data.draw(st.integers(0, len(raw) - 1))
    action = data.draw(st.sampled_from(["flip", "drop", "insert"]))
    if action == "flip":
        raw[index] ^= 1 << data.draw(st.integers(0, 7))
    elif action == "drop":
        del raw[index]
    else:
        raw.insert(index, data.draw(st.sampled_from(b' ,:{}[]"\\-0123456789.eEtfn\x00\xff')))
    raw = bytes(raw)
    assert parse(raw) == reference_parse(raw, "f")


@pytest.mark.parametrize("raw", [
    b'{"a":1,"a":2}', b'{"b":1,"a":2}', b'{"a":01}', b'{"a":-0}', b'{"a":1.0}', b'{"a":1e3}',
    b'{"a":"\\u0041"}', b'{"a":"x\\"y"}', b'{"a":"\x7f"}', b'{"a":"\xc3\xa9"}', b' {"a":1}',
    b'{"a":1} ', b'{"a" :1}', b'{"a":[1,]}', b'{"a":[,1]}', b'{}', b'{"":[]}', b'[]', b'"a"',
    b'{"a":NaN}', b'{"a":Infinity}', b'{"a":true,"b":false,"c":null}', b'{"a":tru}',
    b'{"a":-}', b'{"a":1234567890123456789012}', b'\xef\xbb\xbf{"a":1}', b'{"a":{"b":{}}}',
    b'{"a"}', b'{"a":', b'{', b'', b'{"a":"b}', b'{"a":1}x',
])
def test_edge_cases_match_json(raw):
    assert parse(raw) == reference_parse(raw, "f")


def test_vault_documents_take_the_fast_path(monkeypatch):
    """What the vault writes never needs json (that is the point: get must not import it)."""
    doc = {"format": 1, "agent_id": "a.b@c", "store_id": "0" * 32, "generation": 7,
           "wrap_host": {"nonce": "AAAA", "ct": "ab+/=="}, "wrap_admin": None,
           "entries": {"db/x:y": {"next": 2, "length": 32, "symbols": True,
                                  "versions": [{"v": 1, "created": "2026-11-30T05:00:00Z",
                                                "nonce": "n", "ct": "c"}]}}}
    raw = reference_canonical(doc)
    monkeypatch.setattr(json, "loads", None)
    monkeypatch.setattr(json, "dumps", None)
    assert crypto.canonical(doc) == raw
    assert crypto.parse_canonical(raw, "f") == doc


@pytest.mark.parametrize("depth", [1200, 100_000])
def test_deeply_nested_input_is_one_integrity_error_not_a_crash(depth):
    """Nesting past the recursion limit is malformed input like any other: exit 6, no traceback."""
    raw = b'{"a":' + b"[" * depth + b"]" * depth + b"}"
    obj, message = parse(raw)
    assert obj is None and message == str(crypto.damaged("f"))


# -- base64 and CRC-32 without binascii (crypto.b64d, crypto.crc32) ----------------------


def reference_b64d(text):
    """b64d as it was, on binascii: the bytes, or None where it raised."""
    import binascii

    try:
        data = binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
    return data if binascii.b2a_base64(data, newline=False).decode("ascii") == text else None


def ours_b64d(text):
    try:
        return crypto.b64d(text, "x")
    except IntegrityError as exc:
        assert str(exc) == str(crypto.damaged("x"))
        return None


B64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80), st.data())
def test_b64d_reads_what_binascii_strictly_reads_and_nothing_else(data, draw):
    text = crypto.b64e(data)
    assert ours_b64d(text) == data
    # One character changed, dropped or added: both accept or refuse alike.
    alphabet = draw.draw(st.sampled_from([B64_CHARS, B64_CHARS + " \n-_.é\x00"]))
    at = draw.draw(st.integers(0, len(text)))
    char = draw.draw(st.sampled_from(alphabet))
    for mutant in (text[:at] + char + text[at + 1:], text[:at] + text[at + 1:],
                   text[:at] + char + text[at:]):
        assert ours_b64d(mutant) == reference_b64d(mutant), mutant


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=B64_CHARS + " \n-_é", max_size=14))
def test_b64d_on_any_short_text_matches_binascii(text):
    assert ours_b64d(text) == reference_b64d(text)


def test_b64d_refuses_what_is_not_text_and_every_discarded_bit():
    for bad in (None, b"AAAA", 12, ["AAAA"]):
        assert ours_b64d(bad) is None
    assert ours_b64d("") == b""
    for data in (b"\xff", b"\xff\xff"):
        text = crypto.b64e(data)
        last = B64_CHARS.index(text.rstrip("=")[-1])
        for low in range(1, 16):  # the same first bits, some discarded bit set
            twin = text.rstrip("=")[:-1] + B64_CHARS[last | low]
            twin += "=" * (len(text) - len(text.rstrip("=")))
            if twin != text:
                assert ours_b64d(twin) is None, twin


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_crc32_is_binascii_crc32(data):
    import binascii

    assert crypto.crc32(data) == binascii.crc32(data)
