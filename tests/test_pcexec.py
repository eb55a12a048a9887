"""``pcexec`` end to end: secrets resolved before running, masked in output, exit codes."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from supervisor_helpers import (BIN, Daemon, alive, base_env, give_workspace, init_vault, py, set_secret,
                                wait_for_file)

AGENT = "agent-one"
SECRETS = {"db_pass": "Db-Pa55word-0001", "api_key": "ApiKey-zzz-9876-qq", "dyn": "Dynamic-Value-4321"}


@pytest.fixture(scope="module")
def vault_home(tmp_path_factory):
    root = tmp_path_factory.mktemp("pcexec")
    home, workspace = root / "home", root / "ws"
    home.mkdir(mode=0o700)
    workspace.mkdir(mode=0o700)
    init_vault(home)
    for key, value in SECRETS.items():
        set_secret(home, AGENT, workspace, key, value)
    give_workspace(home, AGENT, workspace)
    return home, workspace


def pcexec(home, workspace, *args, agent=True, input=None, timeout=60):
    extra = {"AGENT_ID": AGENT, "AGENT_WORKSPACE": str(workspace)} if agent else {}
    return subprocess.run([str(BIN / "pcexec"), *args], env=base_env(home, **extra),
                          capture_output=True, text=True, input=input, timeout=timeout,
                          cwd=str(workspace))


PASS_MGR = str(BIN / "pass_mgr")
SYNTAXES = {
    "dollar-paren": "echo $(pass_mgr get {k})",
    "backticks": "echo `pass_mgr get {k}`",
    "double-quoted": 'echo "value=$(pass_mgr get {k})"',
    "single-quoted-key": "echo $(pass_mgr get '{k}')",
    "path-before": "echo $(" + PASS_MGR + " get {k})",
    "double-dash": "echo $(pass_mgr get -- {k})",
    "pipe": "pass_mgr get {k} | cat",
    "semicolon-two": "pass_mgr get api_key; echo; pass_mgr get {k}",
    "and-or": "true && pass_mgr get {k} || echo never",
    "newline": "echo first\npass_mgr get {k}",
    "assignment-prefix": "X=1 pass_mgr get {k}",
    "nested": 'echo "$(echo "$(pass_mgr get {k})")"',
}


@pytest.mark.parametrize("template", SYNTAXES.values(), ids=SYNTAXES.keys())
def test_secret_resolution_in_every_syntax(vault_home, template, tmp_path):
    home, ws = vault_home
    ok = pcexec(home, ws, template.format(k="db_pass"))
    assert ok.returncode == 0, ok.stderr
    assert "######" in ok.stdout
    assert SECRETS["db_pass"] not in ok.stdout + ok.stderr
    # The same syntax with a missing key fails before anything runs.
    marker = tmp_path / "ran"
    bad = pcexec(home, ws, template.format(k="no_such_key") + f"; touch {marker}")
    assert bad.returncode == 3, bad.stdout + bad.stderr
    assert "no_such_key" in bad.stderr
    assert not marker.exists()


def test_resolution_failure_runs_nothing_at_all(vault_home, tmp_path):
    home, ws = vault_home
    marker = tmp_path / "marker"
    result = pcexec(home, ws, f"touch {marker}; echo $(pass_mgr get missing_key)", "--json")
    assert result.returncode == 3
    details = json.loads(result.stdout)["details"]
    assert details["status"] == "failed" and details["failureKind"] == "secret-resolution"
    assert not marker.exists()


def test_dynamic_key_and_file_contents_are_masked(vault_home, tmp_path):
    home, ws = vault_home
    leak = ws / f"leak-{tmp_path.name}.txt"  # the sandbox shows the workspace, not tmp_path
    leak.write_text(f"from a file: {SECRETS['api_key']}\n")
    result = pcexec(home, ws, f'K=dy; pass_mgr get "${{K}}n"; echo; cat {leak}')
    assert result.returncode == 0, result.stderr
    assert SECRETS["dyn"] not in result.stdout and SECRETS["api_key"] not in result.stdout
    assert result.stdout.count("######") == 2


def test_mask_in_command_is_refused(vault_home, tmp_path):
    home, ws = vault_home
    marker = tmp_path / "m"
    result = pcexec(home, ws, f"curl -u user:###### example.invalid; touch {marker}")
    assert result.returncode == 2
    assert "$(pass_mgr get KEY)" in result.stderr
    assert not marker.exists()


@pytest.mark.parametrize("command", ["pass_mgr set a b c d e", "pass_mgr admin init"])
def test_pass_mgr_set_and_admin_are_refused(vault_home, command):
    home, ws = vault_home
    result = pcexec(home, ws, command)
    assert result.returncode == 2 and result.stderr.startswith("pcexec: ")


def test_static_get_needs_an_identity(vault_home):
    home, ws = vault_home
    result = pcexec(home, ws, "echo $(pass_mgr get db_pass)", agent=False)
    assert result.returncode == 3 and "AGENT_ID" in result.stderr


@pytest.mark.parametrize("pty", [True, False], ids=["pty", "pipes"])
def test_exit_codes(vault_home, pty):
    home, ws = vault_home
    flags = ["--pty"] if pty else []
    assert pcexec(home, ws, *flags, "exit 7").returncode == 7
    assert pcexec(home, ws, *flags, "kill -TERM $$").returncode == 128 + 15
    timed_out = pcexec(home, ws, *flags, "--timeout-seconds", "0.5", "sleep 30")
    assert timed_out.returncode == 124
    assert "timed out after 0.5 seconds" in timed_out.stderr


def test_live_streams_stay_separate_and_stdin_is_passed(vault_home):
    home, ws = vault_home
    result = pcexec(home, ws, py("import sys; d = sys.stdin.read(); print(d.upper()); "
                                 "print('to-err', file=sys.stderr)"), input="abc")
    assert result.stdout == "ABC\n" and result.stderr == "to-err\n"


def test_env_guard(vault_home):
    home, ws = vault_home
    result = pcexec(home, ws, "--env", "PATH=/tmp", "true")
    assert result.returncode == 2 and "PATH" in result.stderr
    result = pcexec(home, ws, "--env", "LD_PRELOAD=/x.so", "true")
    assert result.returncode == 2 and "LD_PRELOAD" in result.stderr
    ok = pcexec(home, ws, "--env", "GREETING=hi there", "echo $GREETING")
    assert ok.stdout == "hi there\n"


@pytest.fixture(scope="module")
def daemon(vault_home):
    home, _ = vault_home
    d = Daemon(home)
    yield d
    d.stop()


def test_request_file_answers_an_exec_result(vault_home, daemon, tmp_path):
    home, ws = vault_home
    request = {"command": "echo $(pass_mgr get db_pass); exit 5", "yieldMs": 5000,
               "workdir": str(ws)}
    result = pcexec(home, ws, "--request", "-", input=json.dumps(request))
    answer = json.loads(result.stdout)
    assert answer["details"]["status"] == "completed"
    assert answer["details"]["exitCode"] == 5 and result.returncode == 5
    assert answer["details"]["aggregated"].startswith("######")
    assert SECRETS["db_pass"] not in result.stdout


def test_request_file_ignores_unknown_fields_like_openclaw(vault_home, daemon):
    home, ws = vault_home
    result = pcexec(home, ws, "--request", "-", input=json.dumps({"command": "echo hi", "bogus": 1}))
    assert result.returncode == 0 and json.loads(result.stdout)["details"]["aggregated"] == "hi"


def test_background_then_process_poll(vault_home, daemon):
    home, ws = vault_home
    started = pcexec(home, ws, "--background", "--json", "sleep 0.3; echo $(pass_mgr get api_key)")
    details = json.loads(started.stdout)["details"]
    assert details["status"] == "running"
    poll = subprocess.run([str(BIN / "paddedcell"), "process", "poll", details["sessionId"],
                           "--timeout", "5000", "--json"],
                          env=base_env(home, AGENT_ID=AGENT), capture_output=True, text=True)
    text = json.loads(poll.stdout)["content"][0]["text"]
    for _ in range(20):
        if "Process exited" in text:
            break
        poll = subprocess.run([str(BIN / "paddedcell"), "process", "poll", details["sessionId"],
                               "--timeout", "2000", "--json"],
                              env=base_env(home, AGENT_ID=AGENT), capture_output=True, text=True)
        text += json.loads(poll.stdout)["content"][0]["text"]
    assert "######" in text and SECRETS["api_key"] not in text
    assert "Process exited with code 0." in text


def test_yield_ms_finishes_in_time_like_a_foreground_run(vault_home, daemon):
    home, ws = vault_home
    result = pcexec(home, ws, "--yield-ms", "5000", "echo quick")
    assert result.returncode == 0 and result.stdout == "quick\n"


def test_audit_log_has_events_and_no_plaintext(vault_home, daemon, tmp_path):
    home, ws = vault_home
    value = SECRETS["db_pass"]
    pcexec(home, ws, f"echo $(pass_mgr get db_pass) {value}")  # even typed into the command
    pcexec(home, ws, f"echo {value} ######")  # refused: denied event
    pcexec(home, ws, "--background", f"echo {value}; sleep 0.2")
    time.sleep(1.0)
    lines = [json.loads(line) for line in (home / "audit.jsonl").read_text().splitlines()]
    events = {entry["event"] for entry in lines}
    assert {"exec.started", "exec.finished", "exec.denied"} <= events
    text = (home / "audit.jsonl").read_text()
    for secret in SECRETS.values():
        assert secret not in text
    assert any(e.get("command", "").startswith("echo $(pass_mgr get db_pass) ######") for e in lines)


def test_sigterm_to_pcexec_ends_the_command_tree(vault_home, tmp_path):
    home, ws = vault_home
    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen(
        [str(BIN / "pcexec"), py("import os, time\nif os.fork() == 0:\n    os.setsid()\n"
                                 f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                                 "    time.sleep(120)\nos.wait()")],
        # The written pid is a host pid only without the namespace sandbox.
        env=base_env(home, PADDEDCELL_SUPERVISOR_SANDBOX="none"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    child = int(wait_for_file(pidfile))
    assert alive(child)
    proc.terminate()
    assert proc.wait(30) == 128 + 15
    for _ in range(400):
        if not alive(child):
            break
        time.sleep(0.05)
    assert not alive(child)


def test_a_reader_that_goes_away_ends_the_command_quietly(vault_home):
    """`pcexec CMD | head -2`: when stdout's reader is gone, pcexec ends the command as
    a shell's SIGPIPE would and exits 128 + SIGPIPE, with no traceback (it used to print
    the supervisor's BrokenPipeError and wait for the command's TERM)."""
    home, ws = vault_home
    env = base_env(home, AGENT_ID=AGENT, AGENT_WORKSPACE=str(ws))
    for pty in ([], ["--pty"]):
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", f'{BIN / "pcexec"} {" ".join(pty)} "seq 1 100000000" | head -2; '
                           'echo "rc=${PIPESTATUS[0]}" >&2'],
            env=env, capture_output=True, text=True, timeout=60, cwd=str(ws))
        assert done.stdout.split() == ["1", "2"], (pty, done.stdout[:200])
        assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr
        assert f"rc={128 + 13}" in done.stderr, (pty, done.stderr)
        assert time.monotonic() - started < 30


def test_locked_vault_fails_closed(tmp_path):
    # After an admin-password leak the agent's store cannot be read, so its
    # secrets cannot be masked: nothing runs for that agent.
    from paddedcell import config, vault
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    password = init_vault(home)
    set_secret(home, AGENT, ws, "k", "Locked-Secret-Value-1")
    settings = config.load(environ={"PADDEDCELL_HOME": str(home)})
    vault.arm_guard(password, settings)  # a human gave this process the password
    assert vault.check_leak(f"oops {password}", "test", settings=settings)
    marker = tmp_path / "ran"
    result = pcexec(home, ws, f"touch {marker}")
    assert result.returncode == 3 and "locked" in result.stderr
    assert not marker.exists()


def test_await_results_waits_for_the_whole_command_not_the_yield(tmp_path):
    # --request with awaitResults: the daemon answers only when the command
    # ends; the client gave up after the default yield + 60 s and reported a
    # daemon timeout while the command still ran.
    from paddedcell import config
    from paddedcell.cli.pcexec import answer_within

    settings = config.load(environ={"PADDEDCELL_HOME": str(tmp_path)})
    assert answer_within({"command": "x", "awaitResults": True, "timeoutSeconds": 600},
                         settings) > 600
    assert answer_within({"command": "x", "awaitResults": True}, settings) > 1800
    assert answer_within({"command": "x", "awaitResults": True, "timeoutSeconds": 0},
                         settings) > 86400
    assert answer_within({"command": "x", "yieldMs": 2000}, settings) == 62.0


def test_an_escape_sequence_inside_a_secret_does_not_unmask_it(vault_home):
    # The model's text has escape sequences stripped (as OpenClaw's); stripping runs
    # before the redactor, so colour codes between a secret's characters hide nothing.
    home, ws = vault_home
    result = pcexec(home, ws, "--json", "pass_mgr get api_key | sed 's/./&\\x1b[0m/g'")
    aggregated = json.loads(result.stdout)["details"]["aggregated"]
    assert aggregated == "######", aggregated
    assert SECRETS["api_key"] not in result.stdout


def test_pcexec_imports_trio_without_running_ldconfig():
    """Trio looks up libpthread at import (to name its threads); under glibc pcexec answers
    that lookup itself instead of letting ctypes fork ``ldconfig -p`` at every start, and
    Trio still names its threads."""
    import os
    import sys

    if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
        pytest.skip("the lookup is answered only under glibc")
    probe = """
import ctypes.util, subprocess
ran = []
real = subprocess.Popen.__init__
def spy(self, args, *a, **k):
    ran.append(args)
    real(self, args, *a, **k)
subprocess.Popen.__init__ = spy
from paddedcell.cli.pcexec import _import_trio
_import_trio()
from trio._core import _thread_cache
assert _thread_cache.set_os_thread_name is not None, "no thread names"
print(len([a for a in ran if "ldconfig" in str(a)]))
assert ctypes.util.find_library("c")
print(len([a for a in ran if "ldconfig" in str(a)]))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]  # none while importing Trio; the restored lookup ran it


def test_a_secret_across_the_pipe_batches_is_masked_in_the_live_output(vault_home):
    # A masking pipe is read and filtered in batches of up to REDACTED_BATCH (what was
    # ready; what the enlarged pipe holds): a secret placed just before each multiple of
    # the batch and the pipe sizes comes out masked, with every other byte as written.
    from paddedcell.supervisor.session import PIPE_SIZE, REDACTED_BATCH

    home, ws = vault_home
    value = SECRETS["api_key"]
    ends = sorted({n * size for n in (1, 2, 3) for size in (PIPE_SIZE, REDACTED_BATCH)})
    pads, at = [], 0
    for end in ends:
        pads.append(end - 5 - at)  # the secret starts 5 bytes before ``end``
        at = end - 5 + len(value)
    command = ('k=$(pass_mgr get api_key); for n in ' + " ".join(map(str, pads)) +
               '; do head -c "$n" /dev/zero | tr "\\0" x; printf %s "$k"; done; echo end')
    result = pcexec(home, ws, command)
    assert result.returncode == 0, result.stderr
    assert value not in result.stdout
    assert result.stdout == "".join("x" * n + "######" for n in pads) + "end\n"
