"""The admin password in what a command prints: masked, and the vault locks.

``pcexec`` and ``paddedcell process`` output (and streamed partials, which come
from the same session buffer) pass through ``vault.output_guard`` after the
agent's own secrets are masked. A password split across two reads is still
found; the class-pattern prefilter and the older window-sum path agree.
"""

from __future__ import annotations

import os
import random
import subprocess

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from paddedcell.vault.leak import HOLD_BYTES, LeakDetector, LeakStream
from supervisor_helpers import BIN, Daemon, base_env, give_workspace, init_vault

PW = "Adm1n-leak-output-pw-77"


def stream(pw: str = PW):
    hits = []
    detector = LeakDetector.create(pw)
    return LeakStream(detector, None, lambda: hits.append(1)), hits


@given(st.binary(max_size=300), st.binary(max_size=300), st.lists(st.integers(1, 64), max_size=12))
@hsettings(max_examples=150, deadline=None)
def test_a_password_split_across_reads_is_masked_once(before, after, cuts):
    guard, hits = stream()
    data = before + PW.encode() + after
    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(data[pos:pos + cut])
        pos += cut
    pieces.append(data[pos:])
    out = b"".join(guard.feed(piece) for piece in pieces) + guard.flush()
    assert PW.encode() not in out
    assert out.count(b"######") >= 1
    assert hits == [1]


def test_output_that_cannot_begin_the_password_shows_at_once():
    # Native exec shows "hi" while the command runs: the guard must not sit on it.
    # After a newline nothing can begin the password (it holds none), nor from whitespace.
    guard, _ = stream()
    assert guard.feed(b"hi\n") == b"hi\n"
    assert guard.feed(b"a line\nmore " * 3 + b"\n") == b"a line\nmore " * 3 + b"\n"
    assert guard.feed(b"   \t ") == b"   \t "


def test_the_hold_is_exactly_the_tail_that_could_begin_the_password():
    # After every byte, what is held is the longest tail of at most HOLD_BYTES after the
    # last newline that starts with neither whitespace nor "#" (PW starts with neither).
    detector = LeakDetector.create(PW)
    rng = random.Random(11)
    for _ in range(40):
        text = bytes(rng.choice(b"Adm1n-leak \n\tz#") for _ in range(rng.randrange(1, 40)))
        text += PW.encode()[:rng.randrange(0, len(PW))]
        guard = LeakStream(detector, None, lambda: None)
        shown = b""
        for i in range(len(text)):
            shown += guard.feed(text[i:i + 1])
            seen = text[:i + 1]
            want = 0
            for size in range(min(len(seen), HOLD_BYTES), 0, -1):
                tail = seen[-size:]
                if b"\n" not in tail and tail[0] not in b" \t\n\r\x0b\x0c#":
                    want = size
                    break
            # ... and, from a line start, the complete lines before it that look like an
            # encoding (16+ base64 characters: ENCODED_LINE_MIN), within HOLD_BYTES.
            start = len(seen) - want
            if not seen[seen.rfind(b"\n", 0, start) + 1:start].strip(b" \t"):
                lines = seen[:seen.rfind(b"\n", 0, start) + 1].split(b"\n")[:-1]
                while lines and len(lines[-1]) >= 16 and all(
                        chr(c).isalnum() or c in b"+/_-=" for c in lines[-1]) \
                        and want + len(lines[-1]) + 1 <= HOLD_BYTES:
                    want += len(lines.pop()) + 1
            assert len(seen) - len(shown) == want, (seen, shown)
        assert shown + guard.flush() == text


def test_the_held_tail_is_the_same_for_passwords_of_different_lengths():
    """Issue 20: 200 and 2,000 characters without a newline, then a poll: two passwords of
    8 and 60 characters hold the same tail (it told the length, len - 1, before)."""
    # Also the longest password admin init takes (128 bytes, its JSON/%XX forms near 3x) and
    # one from before that cap (600 bytes: it held 1,799 bytes, which told its length).
    passwords = ("8chars-!", "a much longer admin password of sixty characters, 0123456",
                 "\u00e9" * 64, "p" * 600)
    for text in (b"x" * 200, b"y" * 2000, b"ab cd " * 300, b"z" * 3000 + b" #abc",
                 b"q" * 700 + b"######", b"%41" * 400):
        shown = {LeakStream(LeakDetector.create(pw), None, lambda: None).feed(text)
                 for pw in passwords}
        assert len(shown) == 1, text[:10]


def test_admin_init_refuses_a_password_that_would_change_the_hold(tmp_path):
    """A password may not start with '#' (a mask's end, which guards never hold from), so
    what is held tells nothing about the password's first character either."""
    from paddedcell import config
    from paddedcell.vault import VaultError, init_admin

    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)},
                           {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64,
                            "vault.kdf_lanes": 1})
    with pytest.raises(VaultError, match="must not start with '#'"):
        init_admin("#starts-with-a-hash-1", settings)
    with pytest.raises(VaultError, match="at most 128"):
        init_admin("p" * 129, settings)


def test_what_is_held_does_not_depend_on_the_password():
    # An agent sees what is held (print, then poll): two passwords of one length, and two
    # detectors of one password, hold exactly the same bytes of any output.
    rng = random.Random(3)
    guards = [LeakStream(LeakDetector.create(pw), None, lambda: None)
              for pw in (PW, PW, "Zq9-" + PW[4:])]
    for _ in range(300):
        chunk = bytes(rng.choice(b"Adm1n-Zq9 \nxyz") for _ in range(rng.randrange(0, 6)))
        assert len({g.feed(chunk) for g in guards}) == 1


def test_a_mask_the_redactor_wrote_is_never_split_across_reads():
    # "start ######" then "end": a poll must not show "start ####" and the next "##".
    for _ in range(64):  # fresh secret classes each time
        guard, _ = stream()
        shown = guard.feed(b"start ######")
        assert len(shown) - len(shown.rstrip(b"#")) in (0, 6), shown


@given(st.binary(max_size=200), st.binary(max_size=200), st.lists(st.integers(1, 64), max_size=12))
@hsettings(max_examples=100, deadline=None)
def test_a_password_that_starts_with_the_mask_byte_is_still_masked(before, after, cuts):
    pw = "##" + PW
    guard, hits = stream(pw)
    data = before + b"######" + pw.encode() + after
    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(data[pos:pos + cut])
        pos += cut
    pieces.append(data[pos:])
    out = b"".join(guard.feed(piece) for piece in pieces) + guard.flush()
    assert pw.encode() not in out and pw.encode()[2:] not in out
    assert hits == [1]


def test_clean_output_passes_unchanged_and_in_order():
    guard, hits = stream()
    rng = random.Random(5)
    chunks = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))) for _ in range(50)]
    out = b"".join(guard.feed(c) for c in chunks) + guard.flush()
    assert out == b"".join(chunks)
    assert hits == []


def test_the_class_prefilter_agrees_with_the_window_sums():
    detector = LeakDetector.create(PW)
    legacy = LeakDetector.from_json({k: v for k, v in detector.to_json().items() if k != "classes"}
                                    | {"forms": [f[:3] for f in detector.to_json()["forms"]]})
    rng = random.Random(7)
    for _ in range(30):
        text = "".join(rng.choice(["x", " ", PW, PW[:-1], "é", "\\", '"']) for _ in range(40))
        assert detector.spans(text) == legacy.spans(text)


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    init_vault(home, PW)
    return home


def run(home, *argv, cwd=None, input=None, **extra):
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], env=base_env(home, **extra),
                          capture_output=True, text=True, timeout=60, cwd=cwd, input=input)


def test_pcexec_output_holding_the_admin_password_is_masked_and_locks(home, tmp_path):
    # In the agent's workspace: the sandbox shows a session that and no other tmp dir.
    ws = tmp_path / "ws"
    ws.mkdir()
    give_workspace(home, "a1", ws)
    history = ws / "bash_history"
    history.write_text(f"ls\npass_mgr set a1 /ws db value {PW}\nexit\n")
    # The guard lives in the daemon's memory once a human gave the password; a foreground
    # pcexec borrows its filter (vault/guard.py).
    with Daemon(home):
        assert run(home, "pass_mgr", "admin", "guard", "--password-stdin",
                   input=PW + "\n").returncode == 0
        done = run(home, "pcexec",
                   f"cat {history}; printf '%s' '{PW[:9]}'; printf '%s\\n' '{PW[9:]}'",
                   cwd=ws, AGENT_ID="a1", AGENT_WORKSPACE=str(ws))
    assert PW not in done.stdout + done.stderr
    assert "pass_mgr set a1 /ws db value ######" in done.stdout
    assert done.stdout.count("######") == 2
    status = run(home, "pass_mgr", "admin", "status")
    assert status.stdout.strip() == "locked"
    log = (home / "security.log").read_text()
    assert "CRITICAL" in log and PW not in log


def test_pcexec_output_without_the_password_leaves_the_vault_ready(home):
    done = run(home, "pcexec", "echo hello; seq 1 2000 | tail -1")
    assert done.stdout.split() == ["hello", "2000"]
    assert run(home, "pass_mgr", "admin", "status").stdout.strip() == "ready"


def test_no_vault_no_guard(tmp_path):
    home = tmp_path / "bare"
    home.mkdir(mode=0o700)
    done = run(home, "pcexec", f"echo {PW}")
    assert done.stdout.strip() == PW  # no admin password exists: nothing to find
    assert not os.path.exists(home / "vault" / "locked.json")


def test_a_hit_while_the_admin_lock_is_held_locks_at_once(tmp_path):
    """The guard runs in the daemon's event loop: it must not wait lock_timeout_seconds."""
    import time

    from paddedcell import config
    from paddedcell.vault import init_admin, output_guard, vault_status
    from paddedcell.vault.files import FileLock

    s = config.load({"PADDEDCELL_HOME": str(tmp_path / "h")},
                    {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1})
    init_admin(PW, s)
    guard = output_guard(None, "test", settings=s).fresh()
    with FileLock(str(tmp_path / "h" / "vault" / ".lock"), exclusive=True, timeout=1):
        started = time.monotonic()
        out = guard.feed(f"x {PW} y\n".encode()) + guard.flush()
        took = time.monotonic() - started
    assert out == b"x ###### y\n"
    assert took < 2, took
    assert vault_status(s) == "locked"
