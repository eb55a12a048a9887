"""``paddedcell redact`` through real pipes: bytes arrive before EOF, secrets never."""

from __future__ import annotations

import base64
import os
import selectors
import subprocess
import sys
import time

import pytest

M = b"######"


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["PADDEDCELL_HOME"] = str(tmp_path / "home")
    return e


def spawn(args, env):
    return subprocess.Popen(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def read_until(proc, expected: bytes, timeout: float = 20.0) -> bytes:
    """Read stdout until ``expected`` bytes came (the process keeps running)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while len(got) < len(expected) and time.monotonic() < deadline:
            if sel.select(timeout=0.2):
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                got += chunk
    finally:
        sel.close()
    return got


def send(proc, data: bytes) -> None:
    os.write(proc.stdin.fileno(), data)


def test_streams_before_eof_and_holds_only_the_live_prefix(env):
    proc = spawn(["--secret", "password123"], env)
    try:
        send(proc, b"no newline yet, pass")
        # Everything but the live prefix "pass" arrives while stdin is open.
        assert read_until(proc, b"no newline yet, ") == b"no newline yet, "
        send(proc, b"word123 and more")
        assert read_until(proc, M + b" and more") == M + b" and more"
        assert proc.poll() is None  # still running: this was not EOF flushing
        send(proc, b" tail pass")
        proc.stdin.close()
        rest = proc.stdout.read()
        assert rest == b" tail pass"  # flushed at EOF: the prefix never completed
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        proc.wait()


def test_secret_split_across_writes_is_masked(env, tmp_path):
    secrets = tmp_path / "secrets.txt"
    secrets.write_bytes(b"first-secret-value\r\nsecond\xffsecret\n\n")
    proc = spawn(["--secrets-file", str(secrets)], env)
    try:
        for piece in (b"a first-sec", b"ret-va", b"lue b second", b"\xffsecret c "):
            send(proc, piece)
            time.sleep(0.01)
        encoded = base64.b64encode(b"first-secret-value")
        send(proc, encoded + b"\n")
        proc.stdin.close()
        out = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
    assert out == b"a " + M + b" b " + M + b" c " + M + b"\n"


def test_options_mask_and_no_variants(env):
    text = b"x hunter2-long " + b"hunter2-long".hex().encode() + b"\n"
    out = subprocess.run(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", "--secret", "hunter2-long",
         "--mask", "[hidden]", "--no-variants"],
        input=text, capture_output=True, env=env, check=True,
    ).stdout
    assert out == b"x [hidden] " + b"hunter2-long".hex().encode() + b"\n"


def test_short_secret_warning_on_stderr_without_value(env):
    res = subprocess.run(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", "--secret", "Zq9"],
        input=b"aZq9b", capture_output=True, env=env, check=True,
    )
    assert res.stdout == b"a" + M + b"b"
    assert b"3 bytes" in res.stderr and b"Zq9" not in res.stderr


def test_help_warns_about_argv(env):
    res = subprocess.run(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", "--help"],
        capture_output=True, env=env, check=True,
    )
    assert b"argv" in res.stdout


def test_missing_secrets_file_is_one_line_error(env, tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", "--secrets-file",
         str(tmp_path / "nope")],
        input=b"", capture_output=True, env=env,
    )
    assert res.returncode != 0
    assert res.stderr.strip().count(b"\n") == 0 and b"nope" in res.stderr


def test_mask_setting_from_environment(env):
    env["PADDEDCELL_REDACTOR_MASK"] = "<s>"
    res = subprocess.run(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", "--secret", "hunter2-long"],
        input=b"hunter2-long!", capture_output=True, env=env, check=True,
    )
    assert res.stdout == b"<s>!"


def test_empty_mask_is_a_usage_error(env):
    res = subprocess.run(
        [sys.executable, "-m", "paddedcell.cli.main", "redact", "--secret", "hunter2-long", "--mask", ""],
        input=b"x", capture_output=True, env=env,
    )
    assert res.returncode == 2 and b"mask must not be empty" in res.stderr
    assert b"Traceback" not in res.stderr
