"""The forms of issue 21, each made by the real tool (base32, bash printf %q
and set -x in the C locale, python3 ascii(), cat -v, iconv, fold, sed), masked
as the oracle says through every single split and byte by byte (held ==
oracle after every byte), on both engines; and left alone with its switch in
redactor.forms_off off."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import unicodedata

import pytest

from paddedcell.redactor import Variants, redact
from paddedcell.redactor.oracle import naive_redact, patterns_for
from redactor_engines import assert_exact_under_every_split, engine  # noqa: F401 (autouse: every test on both engines)

M = b"######"
pytestmark = pytest.mark.filterwarnings("ignore::paddedcell.redactor.ShortSecretWarning")
ASCII = b'Zq8x"v2\\NmP4<t&R7yWb3Kd'
TEXT = "Gehe\u00efm-Schl\u00fcssel-42"  # precomposed (NFC)
UTF8 = TEXT.encode()


def tool(script: str, *args: str | bytes, stdin: bytes | None = None, locale: str = "C.UTF-8") -> bytes:
    name = script.split()[0]
    if shutil.which(name) is None and name not in ("exec", "printf"):  # bash builtins
        pytest.skip(f"{name} is not installed")
    return subprocess.run(["bash", "-c", script, "bash", *args], input=stdin, capture_output=True,
                          check=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": locale}).stdout


def check(secret: bytes, shown: bytes, field: str) -> None:
    """``shown`` (the tool's output) inside other text is one mask, as the oracle
    says, through every split and byte by byte; with ``field`` off, no mask."""
    text = b"<< " + shown + b" >>"
    patterns = patterns_for([secret])
    expected = naive_redact(text, patterns)
    assert expected.count(M) == 1, expected
    assert secret not in expected
    assert_exact_under_every_split(text, secret, expected)
    off = dataclasses.replace(Variants(), **{field: False, "fragments": False})
    assert M not in redact(text, [secret], variants=off), field


@pytest.mark.parametrize("script", ["printf %s \"$1\" | base32", "printf 'KEY=%s' \"$1\" | base32 -w 0",
                                    "printf 'ab%s' \"$1\" | base32 -w 20"])
def test_base32(script):
    check(ASCII, tool(script, ASCII).strip(), "base32")


def test_every_character_as_a_unicode_escape():
    # What Java, JavaScript and Go encoders print with every character escaped.
    for secret in (ASCII, UTF8):
        shown = tool("python3 -c 'import sys; print(\"\".join(\"\\\\u%04x\" % ord(c) for c in sys.argv[1]))' \"$1\"",
                     secret).strip()
        check(secret, shown, "unicode_escapes")


def test_html_safe_json_escapes():
    # Go's encoding/json and gson escape < > & (gson also = and ') as \u003c ...
    go_style = ASCII.replace(b"<", b"\\u003c").replace(b"&", b"\\u0026").replace(b'\\N', b"\\\\N")
    check(ASCII, go_style.replace(b'"', b'\\"'), "unicode_escapes")


@pytest.mark.parametrize("script", ["printf %q \"$1\"", "exec 2>&1; set -x; : \"$1\""])
def test_c_octal_escapes_in_the_c_locale(script):
    shown = tool(script, UTF8, locale="C").strip()
    assert b"\\303\\257" in shown, shown
    inner = shown[shown.index(b"$'") + 2:shown.rindex(b"'")]
    check(UTF8, inner, "octal")


def test_python_ascii():
    shown = tool("python3 -c 'import sys; print(ascii(sys.argv[1]))' \"$1\"", UTF8).strip()
    assert b"\\xef" in shown
    check(UTF8, shown.strip(b"'"), "python_ascii")


def test_cat_v():
    shown = tool("printf %s \"$1\" | cat -v", UTF8)
    assert b"M-CM-/" in shown
    check(UTF8, shown, "caret")


def test_nfd_and_nfc():
    nfd = unicodedata.normalize("NFD", TEXT).encode()
    assert nfd != UTF8
    check(UTF8, nfd, "normalized")
    check(nfd, UTF8, "normalized")  # a secret stored decomposed, printed composed


@pytest.mark.parametrize("target", ["UTF-16LE", "UTF-16BE"])
def test_utf16(target):
    for secret in (ASCII, UTF8):
        check(secret, tool(f"printf %s \"$1\" | iconv -f UTF-8 -t {target}", secret), "utf16")


@pytest.mark.parametrize("source", ["LATIN1", "CP1252"])
def test_mojibake(source):
    shown = tool(f"printf %s \"$1\" | iconv -f {source} -t UTF-8", UTF8)
    assert shown.startswith(b"Gehe\xc3\x83")
    check(UTF8, shown, "mojibake")


@pytest.mark.parametrize("width", [3, 8, 10])
def test_fold(width):
    shown = tool(f"printf %s \"$1\" | fold -w {width}", ASCII)
    assert shown.count(b"\n") >= 2
    check(ASCII, shown, "folded")


def test_the_runner_s_quote_escape():
    shown = tool("printf %s \"$1\" | sed 's/\"/\\\\\"/g'", ASCII)
    assert shown == ASCII.replace(b'"', b'\\"')
    check(ASCII, shown, "runner_quote")
