"""A secret's bytes (or characters) written as numbers, one after another —
hex with separators or escapes, 0x lists, decimal lists (Node's grouped
arrays too), octal, numeric character references — and quoted-printable,
base32 lower/base32hex, base85/Ascii85 and uuencode: each made by the real
tool (python3, node, od, printf, basenc), masked as the oracle says through
every split and byte by byte on both engines, and left alone with its switch
in redactor.forms_off off; through the ``paddedcell redact`` CLI; ordinary
numbers stay."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from paddedcell.redactor import redact
from paddedcell.redactor.matcher import AhoMatcher
from paddedcell.redactor.oracle import naive_redact, patterns_for
from paddedcell.redactor.variants import Variants, _node_grouped, expand
from redactor_engines import engine  # noqa: F401 (autouse: every test on both engines)
from test_redactor_tool_forms import check, tool

M = b"######"
pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")
SECRET = "Gehe1m-P\u00e4sswort-42xyz".encode()  # the lead's probe
ASCII = b"Zq8x-v2NmP4tR7yWb3Kd"


@functools.cache  # each tool runs once, not once per engine
def py(expr: str, secret: bytes) -> bytes:
    """What python3 prints for ``expr`` (``b`` the secret's bytes, ``s`` its text)."""
    script = ("import sys, base64, binascii, quopri; s = sys.argv[1]; b = s.encode(); "
              f"print({expr})")
    return tool("python3 -c \"$1\" \"$2\"", script, secret).rstrip(b"\n")


@functools.cache
def node(expr: str, secret: bytes) -> bytes:
    """What ``console.log`` prints in node for ``expr`` (``b`` a Buffer of the secret)."""
    return tool("node -e \"$1\" \"$2\"", f"const b = Buffer.from(process.argv[1]); console.log({expr})",
                secret).rstrip(b"\n")


@functools.cache
def node_hex(expr: str, secret: bytes) -> bytes:
    """``node`` for a secret that is not text (passed as hex)."""
    return tool("node -e \"$1\" \"$2\"", f"const b = Buffer.from(process.argv[1], 'hex'); console.log({expr})",
                secret.hex()).rstrip(b"\n")


PYTHON_FORMS = [
    ("b.hex(':')", "hex_separated"), ("b.hex('-').upper()", "hex_separated"),
    ("b.hex(' ')", "hex_separated"), ("' '.join('%02X' % c for c in b)", "hex_separated"),
    ("''.join('\\\\x%02x' % c for c in b)", "hex_escaped"), ("''.join('\\\\x%02X' % c for c in b)", "hex_escaped"),
    ("[hex(c) for c in b]", "hex_prefixed"), ("','.join('0x%02x' % c for c in b)", "hex_prefixed"),
    ("', '.join('0X%02X' % c for c in b)", "hex_prefixed"), ("','.join('0x%02X' % c for c in b)", "hex_prefixed"),
    ("list(b)", "decimal"), ("str(list(b)).replace(' ', '')", "decimal"),
    ("[c - 256 if c > 127 else c for c in b]", "decimal"), ("[ord(c) for c in s]", "decimal"),
    ("''.join('\\\\%03o' % c for c in b)", "octal_bytes"),
    ("''.join('&#%d;' % ord(c) for c in s)", "char_refs"), ("''.join('&#x%x;' % ord(c) for c in s)", "char_refs"),
    ("''.join('&#x%X;' % ord(c) for c in s)", "char_refs"),
    ("s.encode('ascii', 'xmlcharrefreplace').decode()", "char_refs"),
    ("quopri.encodestring(b).decode()", "quoted_printable"),
    ("quopri.encodestring(b'KEY=' + b + b' end', header=True).decode()", "quoted_printable"),
    ("base64.b32encode(b'x' + b).decode().lower()", "base32"), ("base64.b32hexencode(b).decode()", "base32"),
    ("base64.b85encode(b'ab' + b).decode()", "base85"), ("base64.a85encode(b'abc' + b, adobe=True).decode()", "base85"),
    ("binascii.b2a_uu(b'k' + b).decode()", "uuencode"), ("binascii.b2a_uu(b, backtick=True).decode()", "uuencode"),
]


def masked(secret: bytes, shown: bytes, field: str) -> None:
    """``shown`` inside other text is one mask, as the oracle says; with ``field``
    off, no mask (the cheap half of ``check``, for the forms ``check`` does not run)."""
    text = b"<< " + shown + b" >>"
    expected = naive_redact(text, patterns_for([secret]))
    assert expected.count(M) == 1 and redact(text, [secret]) == expected, expected
    off = Variants.from_settings(True, f"{field},fragments")
    assert M not in redact(text, [secret], variants=off), field


@pytest.mark.parametrize("expr,field", PYTHON_FORMS, ids=[e for e, _ in PYTHON_FORMS])
def test_python_prints(expr, field):
    shown = py(expr, SECRET)
    assert shown.strip(b"[]'\"") and shown != SECRET
    masked(SECRET, shown, field)


NODE_FORMS = [("b", "hex_separated"), ("Array.from(b)", "decimal"), ("new Uint8Array(b)", "decimal"),
              ("JSON.stringify(Array.from(b))", "decimal"), ("Array.from(b).join(', ')", "decimal")]


@pytest.mark.parametrize("expr,field", NODE_FORMS, ids=[e for e, _ in NODE_FORMS])
def test_node_prints(expr, field):
    masked(SECRET, node(expr, SECRET), field)


#: One tool output of each family, checked through every split and byte by byte
#: (held == oracle after each byte): a shorter secret keeps that under a second.
SHORT = "P\u00e4ssw0rt-4x".encode()
EXACT = [
    (py, "b.hex(':')", "hex_separated"), (node, "b", "hex_separated"),
    (py, "''.join('\\\\x%02X' % c for c in b)", "hex_escaped"), (py, "[hex(c) for c in b]", "hex_prefixed"),
    (node, "Array.from(b)", "decimal"), (py, "''.join('\\\\%03o' % c for c in b)", "octal_bytes"),
    (py, "''.join('&#x%x;' % ord(c) for c in s)", "char_refs"), (py, "quopri.encodestring(b).decode()", "quoted_printable"),
    (py, "base64.b32encode(b'xy' + b).decode().lower()", "base32"), (py, "base64.b85encode(b'a' + b).decode()", "base85"),
    (py, "binascii.b2a_uu(b'kl' + b).decode()", "uuencode"),
]


@pytest.mark.parametrize("make,expr,field", EXACT, ids=[e for _, e, _ in EXACT])
def test_exact_under_every_split(make, expr, field):
    check(SHORT, make(expr, SHORT), field)


@pytest.mark.parametrize("length", [8, 13, 22, 40, 64, 101, 150])
def test_node_groups_arrays_as_the_form_says(length):
    # Node's util.inspect puts more than six numbers in padded columns whose widths
    # depend on every number: the form is that layout, checked against node itself.
    secret = bytes((7 * i * i + 45) % 256 for i in range(length))
    shown = node_hex("Array.from(b)", secret)
    grouped = _node_grouped(list(secret))
    if b"\n" not in shown:
        assert grouped is None
    else:
        assert grouped is not None and grouped in shown, (grouped, shown)
    assert redact(shown, [secret]).count(M) == 1
    if length > 50:  # <Buffer 2d 34 … 50 bytes … ... 51 more bytes>
        buffer = node_hex("b", secret)
        assert redact(buffer, [secret]).count(M) == 1, buffer


TOOL_FORMS = [
    ("printf %s \"$1\" | od -An -b -w64", "octal_bytes"),
    ("printf %s \"$1\" | od -An -tu1 -w64 | { read -ra cs; for c in \"${cs[@]}\"; do printf '\\\\x%02x' \"$c\"; done; }",
     "hex_escaped"),
    ("printf %s \"$1\" | od -An -tu1 -w64 | { read -ra cs; for c in \"${cs[@]}\"; do printf '%02X:' \"$c\"; done; }",
     "hex_separated"),
    ("printf %s \"$1\" | basenc --base32hex -w 0", "base32"),
]


@pytest.mark.parametrize("script,field", TOOL_FORMS, ids=[s for s, _ in TOOL_FORMS])
def test_shell_tools_print(script, field):
    masked(ASCII, tool(script, ASCII), field)


def test_through_the_cli(tmp_path, engine):  # noqa: F811 (the fixture)
    # `paddedcell redact --secrets-file`: every form above in one stream, none left.
    outputs = [py(expr, SECRET) for expr, _ in PYTHON_FORMS[:16:3]] + [node("b", SECRET), node("Array.from(b)", SECRET)]
    (tmp_path / "s.txt").write_bytes(SECRET + b"\n")
    data = b"".join(b"line %d: %s\n" % (i, o) for i, o in enumerate(outputs))
    env = {k: v for k, v in os.environ.items() if k != "PADDEDCELL_REDACTOR_ENGINE"}
    env["PADDEDCELL_HOME"] = str(tmp_path / "home")
    if engine is AhoMatcher:
        env["PADDEDCELL_REDACTOR_ENGINE"] = "portable"
    res = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "redact", "--secrets-file",
                          str(tmp_path / "s.txt")], input=data, capture_output=True, env=env, check=True)
    assert res.stdout == naive_redact(data, patterns_for([SECRET]))
    lines = res.stdout.split(b"line ")[1:]
    assert len(lines) == len(outputs) and all(M in line for line in lines), res.stdout


def test_ordinary_numbers_and_text_stay():
    # Number lists, hex, entities that are not the secret's (or are a few of its
    # bytes), and the forms of a secret shorter than variant_min_length.
    text = (b"[1, 2, 3, 71, 101, 104, 101] 0x47, 0x65, 0x68 47:65:68:65 &#71;&#101;&#104; \\x47\\x65\\x68\n"
            b"<Buffer 47 65 68 65 31 6d> Uint8Array(4) [ 71, 101, 104, 101 ] =C3=A4 \\107\\145\\150\n"
            b"temperature 21.5, 22.0, 19.8; ids 1001,1002,1003; mac 00:1a:2b:3c:4d:5e\n")
    assert redact(text, [SECRET, ASCII]) == text
    short = b"Ab3$x"
    listed = b", ".join(b"%d" % c for c in short) + b" " + short.hex(":").encode()
    assert redact(listed, [short]) == listed


def test_one_switch_per_family_and_the_cost():
    # Each family is its own switch, and for a typical token the families add ~40
    # literals (dedupe: a digit-free hex keeps one case, ASCII one decimal list).
    fields = ("hex_separated hex_escaped hex_prefixed decimal octal_bytes char_refs quoted_printable "
              "base85 uuencode").split()
    full = expand(SECRET, Variants())
    none = expand(SECRET, Variants.from_settings(True, ",".join(fields)))
    assert none < full and len(full - none) <= 45, len(full - none)
    for f in fields:
        assert expand(SECRET, Variants.from_settings(True, f)) < full, f
