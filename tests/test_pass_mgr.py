"""pass_mgr's command-line contract (docs/design.md §4.3), run against the console script
and the PyInstaller onedir binary alike: every command, every exit code."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = Path(sys.prefix) / "bin" / "pass_mgr"
BINARY = ROOT / "dist" / "pass_mgr" / "pass_mgr"
AGENT_MARKERS = ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL")
FAST_KDF = {"PADDEDCELL_VAULT_KDF_ITERATIONS": "1", "PADDEDCELL_VAULT_KDF_MEMORY_KIB": "64",
            "PADDEDCELL_VAULT_KDF_LANES": "1"}
PW = "admin pw for tests"
NOT_INIT = "pass_mgr is not initialized; a human must run: pass_mgr admin init"


class PassMgr:
    """One pass_mgr executable with a private PADDEDCELL_HOME and one agent workspace."""

    def __init__(self, exe: Path, tmp: Path, fast_kdf: bool = True):
        self.exe = str(exe)
        self.home = tmp / "home"
        self.workspace = tmp / "ws"
        self.workspace.mkdir(mode=0o700, parents=True)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in AGENT_MARKERS and not k.startswith("PADDEDCELL_")}
        self.env["PADDEDCELL_HOME"] = str(self.home)
        if fast_kdf:
            self.env.update(FAST_KDF)

    def agent_env(self, agent_id: str = "agent1") -> dict[str, str]:
        return {"AGENT_ID": agent_id, "AGENT_WORKSPACE": str(self.workspace),
                "PADDEDCELL_AGENT": "1"}

    def run(self, *args: str, input: str | bytes | None = None, agent: bool = False,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        full = dict(self.env, **(self.agent_env() if agent else {}), **(env or {}))
        data = input.encode() if isinstance(input, str) else input
        return subprocess.run([self.exe, *args], input=data, capture_output=True, env=full,
                              timeout=60, stdin=None if data is not None else subprocess.DEVNULL)

    def ok(self, *args: str, **kwargs) -> str:
        result = self.run(*args, **kwargs)
        assert result.returncode == 0, (args, result.returncode, result.stderr)
        return result.stdout.decode()

    def init(self, password: str = PW) -> None:
        self.ok("admin", "init", "--password-stdin", input=password + "\n")

    def set(self, key: str, value: str, password: str = PW, agent_id: str = "agent1"):
        return self.run("set", agent_id, str(self.workspace), key, value, password)

    @property
    def store_file(self) -> Path:
        return self.workspace / ".paddedcell" / "secrets" / "agent1" / "store.json"


def _executables():
    yield pytest.param(CONSOLE, id="console")
    yield pytest.param(BINARY, id="binary")


@pytest.fixture(params=list(_executables()))
def exe(request) -> Path:
    path = request.param
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built; run: make binary")
    return path


@pytest.fixture
def pm(exe, tmp_path) -> PassMgr:
    return PassMgr(exe, tmp_path)


@pytest.fixture
def ready(pm) -> PassMgr:
    pm.init()
    assert pm.set("db", "s3cret value!").returncode == 0
    return pm


def test_before_init_everything_but_status_refuses(pm):
    assert pm.ok("admin", "status") == "uninitialized\n"
    for args in (["get", "K"], ["generate", "K"], ["unset", "K"], ["rotate", "K"], ["rotate"],
                 ["list"], ["history", "K"]):
        result = pm.run(*args, agent=True)
        assert result.returncode == 3, args
        assert result.stderr.decode().strip() == NOT_INIT
    result = pm.set("K", "v-long-enough")
    assert result.returncode == 3 and NOT_INIT in result.stderr.decode()


def test_set_then_get_in_agent_context(ready):
    assert ready.ok("admin", "status") == "ready\n"
    result = ready.run("get", "db", agent=True)
    assert (result.returncode, result.stdout) == (0, b"s3cret value!\n")
    assert result.stderr == b""
    # --version forms go through the same fast path and through click.
    assert ready.ok("get", "db", "--version", "1", agent=True) == "s3cret value!\n"
    assert ready.ok("get", "--version=1", "db", agent=True) == "s3cret value!\n"


def test_a_direct_get_loads_neither_the_channel_client_nor_binascii(ready):
    """Outside a session, with no daemon: the session decision comes from agent_session
    alone and the read from vault.read; a module costs a start ~0.1 ms, binascii ~0.4 ms."""
    if ready.exe != str(CONSOLE):
        pytest.skip("-X importtime is the console script's (the binary has no site)")
    result = ready.run("get", "db", agent=True, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert (result.returncode, result.stdout) == (0, b"s3cret value!\n")
    loaded = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.decode().splitlines()
              if line.startswith("import time:")}
    assert {"paddedcell.agent_session", "paddedcell.vault.read"} <= loaded, loaded
    for module in ("paddedcell.session", "paddedcell.session.client", "binascii", "zlib",
                   "paddedcell.cli.pass_mgr_click", "click"):
        assert module not in loaded, module


#: ``pass_mgr get db`` through the console script's own entry (``main()``, argv from
#: sys.argv), reporting at its ``os._exit`` whether cryptography loaded OpenSSL's legacy
#: provider and what the variable that stops it held.
_GET_REPORTING_THE_PROVIDERS = """\
import os, sys

def report(code):
    openssl = sys.modules["cryptography.hazmat.bindings._rust"].openssl
    sys.stderr.write(f"legacy={openssl._legacy_provider_loaded} "
                     f"variable={os.environ.get('CRYPTOGRAPHY_OPENSSL_NO_LEGACY')}\\n")
    sys.stderr.flush()
    exit_now(code)

exit_now, os._exit = os._exit, report
sys.argv = ["pass_mgr", "get", "db"]
from paddedcell.cli.pass_mgr import main

main()
"""


@pytest.mark.parametrize("given, legacy, variable", [
    (None, False, "1"),
    ("0", True, "0"),  # the caller's value stands
])
def test_a_direct_get_leaves_openssls_legacy_provider_unloaded(tmp_path, given, legacy,
                                                               variable):
    """A get opens AES-256-GCM boxes only (the default provider): the legacy one
    (RC4, DES, MD4, ...) is not loaded, ~0.3 ms of its start."""
    env = {k: v for k, v in os.environ.items() if k != "CRYPTOGRAPHY_OPENSSL_NO_LEGACY"}
    probe = subprocess.run([sys.executable, "-c", "from cryptography.hazmat.bindings._rust "
                            "import openssl; print(openssl._legacy_provider_loaded)"],
                           env=env, capture_output=True, text=True, timeout=60)
    if probe.stdout != "True\n":
        pytest.skip(f"this cryptography does not load the legacy provider: {probe}")
    pm = PassMgr(CONSOLE, tmp_path)
    pm.init()
    assert pm.set("db", "s3cret value!").returncode == 0
    env = dict(pm.env, **pm.agent_env())
    env.pop("CRYPTOGRAPHY_OPENSSL_NO_LEGACY", None)
    if given is not None:
        env["CRYPTOGRAPHY_OPENSSL_NO_LEGACY"] = given
    result = subprocess.run([sys.executable, "-c", _GET_REPORTING_THE_PROVIDERS], env=env,
                            capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (0, b"s3cret value!\n"), result.stderr
    assert result.stderr.decode() == f"legacy={legacy} variable={variable}\n"


def _get_without_settings(pm: PassMgr, env: dict[str, str] | None = None,
                          config_toml: str | None = None) -> subprocess.CompletedProcess:
    """``get db`` as an agent with no ``PADDEDCELL_<SECTION>_...`` variable (the fixture's
    fast-KDF ones dropped) unless ``env`` sets one, and ``config_toml`` as the home's file."""
    config_file = pm.home / "config.toml"
    if config_toml is None:
        config_file.unlink(missing_ok=True)
    else:
        config_file.write_text(config_toml)
    full = {k: v for k, v in pm.env.items() if k not in FAST_KDF}
    full.update(pm.agent_env(), **(env or {}))
    return subprocess.run([pm.exe, "get", "db"], capture_output=True, env=full, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_a_get_with_nothing_set_reads_the_defaults_without_the_settings_table(ready):
    """No config.toml and no setting's variable: the get's settings are their declared
    defaults (config_base), and the table of every setting (config, ~0.7 ms) stays unread."""
    result = _get_without_settings(ready, {"PYTHONPROFILEIMPORTTIME": "1"})
    assert (result.returncode, result.stdout) == (0, b"s3cret value!\n"), result.stderr
    if ready.exe == str(CONSOLE):  # -X importtime needs site (the binary has none)
        loaded = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.decode().splitlines()
                  if line.startswith("import time:")}
        assert "paddedcell.config_base" in loaded and "paddedcell.config" not in loaded, loaded
    # Whatever could set a setting makes the get read and check them all, as before.
    result = _get_without_settings(ready, {"PADDEDCELL_VAULT_LOCK_TIMEOUT_SECONDS": "7",
                                           "PYTHONPROFILEIMPORTTIME": "1"})
    assert (result.returncode, result.stdout) == (0, b"s3cret value!\n"), result.stderr
    if ready.exe == str(CONSOLE):
        assert b"| paddedcell.config\n" in result.stderr


@pytest.mark.parametrize("env, toml, named", [
    ({"PADDEDCELL_VAULT_HISTORY_DEPTH": "many"}, None, "PADDEDCELL_VAULT_HISTORY_DEPTH"),
    # Not a setting the get reads: still every command line's exit 2.
    ({"PADDEDCELL_SUPERVISOR_MAX_LIVE_SESSIONS": "-1"}, None, "supervisor.max_live_sessions"),
    ({"PADDEDCELL_DAEMON_SOCKET_NAME": "a/b"}, None, "daemon.socket_name"),
    ({}, "[vault]\nlock_timeout_seconds = \"soon\"\n", "vault.lock_timeout_seconds"),
    ({}, "[egress]\nmode = \"sometimes\"\n", "egress.mode"),
    ({}, "[nosuch]\n", "unknown section [nosuch]"),
    ({}, "not toml [", "not valid TOML"),
])
def test_a_get_refuses_any_bad_setting_with_one_line_and_exit_2(ready, env, toml, named):
    result = _get_without_settings(ready, env, toml)
    assert result.returncode == 2 and result.stdout == b"", result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pass_mgr: ") and named in lines[0], lines


def test_in_session_is_the_channel_variable_or_the_process_facts(monkeypatch):
    """pass_mgr decides "over the channel" with agent_session.in_session; session.client
    (pcexec, paddedcell process) must decide alike."""
    from paddedcell import agent_session
    from paddedcell.session import client

    monkeypatch.delenv(agent_session.CHANNEL_VARIABLE, raising=False)
    facts = {"inside": False}
    monkeypatch.setattr(agent_session, "inside_agent_session", lambda: facts["inside"])
    for variable in (None, "", "/run/x.sock"):
        for inside in (False, True):
            facts["inside"] = inside
            if variable is None:
                monkeypatch.delenv(agent_session.CHANNEL_VARIABLE, raising=False)
            else:
                monkeypatch.setenv(agent_session.CHANNEL_VARIABLE, variable)
            expected = bool(variable) or inside
            assert agent_session.in_session() is expected, (variable, inside)
            assert client.in_session() is expected, (variable, inside)


def test_set_warns_about_argv_and_checks_the_admin_password(pm):
    pm.init()
    result = pm.set("db", "v1-long-enough")
    assert result.returncode == 0 and b"visible to other processes" in result.stderr
    wrong = pm.set("db", "v2-long-enough", password="not the admin pw")
    assert wrong.returncode == 5
    assert wrong.stderr.decode().splitlines()[-1] == "pass_mgr: wrong admin password"
    assert pm.ok("get", "db", agent=True) == "v1-long-enough\n"


@pytest.mark.parametrize("marker", AGENT_MARKERS)
def test_human_only_commands_refuse_in_agent_context(pm, marker):
    pm.init()
    env = {marker: "x"}
    for args, stdin in ((["set", "a", str(pm.workspace), "K", "v", PW], None),
                        (["admin", "init", "--password-stdin"], "another admin pw\n"),
                        (["admin", "check-leak"], "text"),
                        (["admin", "recover", "--password-stdin"], PW + "\n")):
        result = pm.run(*args, input=stdin, env=env)
        assert result.returncode == 5, (args, result.stderr)
        message = result.stderr.decode()
        assert message.count("\n") == 1 and marker in message and "humans only" in message
    assert pm.ok("admin", "status", env=env) == "ready\n"


@pytest.mark.parametrize("missing", ["AGENT_ID", "AGENT_WORKSPACE"])
def test_agent_commands_name_the_missing_variable(ready, missing):
    env = ready.agent_env()
    del env[missing]
    for args in (["get", "db"], ["generate", "new"], ["list"]):
        result = ready.run(*args, env=env)
        assert result.returncode == 1
        assert f"{missing} is not set" in result.stderr.decode()


def test_generate_hides_the_value_unless_asked(ready):
    result = ready.run("generate", "api", agent=True)
    assert result.returncode == 0 and result.stdout == b""
    value = ready.ok("get", "api", agent=True).rstrip("\n")
    assert len(value) == 32 and value.encode() not in result.stderr
    again = ready.run("generate", "api", agent=True)
    assert again.returncode == 1 and b"--force" in again.stderr
    assert ready.ok("get", "api", agent=True).rstrip("\n") == value
    # --print is for a human naming the store (AGENT_ID/AGENT_WORKSPACE only), never
    # inside an agent session (PADDEDCELL_AGENT set): exit 5, nothing stored.
    assert ready.run("generate", "api", "--force", "--print", agent=True).returncode == 5
    human = {"AGENT_ID": "agent1", "AGENT_WORKSPACE": str(ready.workspace)}
    printed = ready.ok("generate", "api", "--force", "--print", "--length", "12", "--no-symbols",
                       env=human).rstrip("\n")
    assert re.fullmatch(r"[A-Za-z0-9]{12}", printed)
    assert ready.ok("get", "api", agent=True).rstrip("\n") == printed
    assert ready.ok("get", "api", "--version", "1", agent=True).rstrip("\n") == value
    assert ready.run("generate", "x", "--length", "3", agent=True).returncode == 2


def test_rotate_history_and_depth(ready):
    ready.ok("generate", "api", agent=True)
    first = ready.ok("get", "api", agent=True)
    for _ in range(6):
        ready.ok("rotate", "api", agent=True)
    lines = ready.ok("history", "api", agent=True).splitlines()
    assert [line.split("\t")[0] for line in lines] == ["7", "6", "5", "4", "3"]
    assert lines[0].endswith("\tcurrent") and first.strip() not in "".join(lines)
    assert ready.run("get", "api", "--version", "1", agent=True).returncode == 4
    assert ready.ok("get", "api", "--version", "3", agent=True) != first
    current = ready.ok("get", "api", agent=True)
    ready.ok("rotate", agent=True)  # whole store under a fresh data key
    assert ready.ok("get", "api", agent=True) == current
    assert ready.ok("get", "db", agent=True) == "s3cret value!\n"
    assert ready.run("rotate", "missing", agent=True).returncode == 4
    assert ready.run("history", "missing", agent=True).returncode == 4


def test_unset_and_list(ready):
    ready.ok("generate", "b/key", agent=True)
    assert ready.ok("list", agent=True) == "b/key\ndb\n"
    ready.ok("unset", "db", agent=True)
    assert ready.run("get", "db", agent=True).returncode == 4
    assert ready.run("unset", "db", agent=True).returncode == 4
    assert ready.ok("list", agent=True) == "b/key\n"
    # Another agent has its own (empty) store.
    other = ready.run("list", env=ready.agent_env("agent2"))
    assert (other.returncode, other.stdout) == (0, b"")
    assert ready.run("get", "b/key", env=ready.agent_env("agent2")).returncode == 4


def test_leak_locks_and_init_recovers_without_losing_a_secret(ready):
    from supervisor_helpers import Daemon

    ready.ok("generate", "api", agent=True)
    api = ready.ok("get", "api", agent=True)
    assert ready.run("admin", "check-leak", input="x").returncode == 3  # no daemon to ask
    from paddedcell.vault import guard_runtime

    guard_runtime.remove(str(ready.home))  # a reboot: a daemon that starts waits for a human
    with Daemon(ready.home):
        waiting = ready.run("admin", "check-leak", input=f"the admin password is {PW}, ok")
        assert waiting.returncode == 3 and b"pass_mgr admin guard" in waiting.stderr
        ready.ok("admin", "guard", "--password-stdin", input=PW + "\n")
        assert ready.run("admin", "check-leak", input="nothing to see").returncode == 0
        hit = ready.run("admin", "check-leak", "--source", "message:outbound",
                        input=f"the admin password is {PW}, ok")
    assert hit.returncode == 10
    assert ready.ok("admin", "status") == "locked\n"
    for args in (["get", "api"], ["generate", "z"], ["list"], ["rotate"]):
        result = ready.run(*args, agent=True)
        assert result.returncode == 3 and b"locked" in result.stderr
    assert ready.set("k", "v-long-enough").returncode == 3
    log_lines = [json.loads(line) for line in (ready.home / "security.log").read_text().splitlines()]
    critical = [entry for entry in log_lines if entry["level"] == "CRITICAL"]
    assert len(critical) == 1 and critical[0]["source"] == "message:outbound" and critical[0]["time"]
    assert PW not in (ready.home / "security.log").read_text()
    ready.init("a brand new admin pw")
    assert ready.ok("admin", "status") == "ready\n"
    assert ready.ok("get", "api", agent=True) == api
    assert ready.ok("get", "db", agent=True) == "s3cret value!\n"
    assert ready.set("db", "v2-long-enough").returncode == 5  # the leaked password is dead
    assert ready.set("db", "v2-long-enough", password="a brand new admin pw").returncode == 0


def test_changing_a_ready_password_needs_the_current_one(ready):
    result = ready.run("admin", "init", "--password-stdin", input="next admin pw\nwrong current\n")
    assert result.returncode == 5
    assert ready.run("admin", "init", "--password-stdin", input="next admin pw\n").returncode == 2
    ready.ok("admin", "init", "--password-stdin", input=f"next admin pw\n{PW}\n")
    assert ready.set("db", "v3-long-enough", password="next admin pw").returncode == 0
    short = PassMgr(Path(ready.exe), ready.home.parent / "short")
    assert short.run("admin", "init", "--password-stdin", input="short\n").returncode == 1


def _flip(path: Path, index: int) -> None:
    data = bytearray(path.read_bytes())
    data[index] ^= 0x01
    path.write_bytes(bytes(data))


def test_tampering_is_exit_6(ready):
    size = ready.store_file.stat().st_size
    for index in (0, size // 3, size // 2, size - 2):
        _flip(ready.store_file, index)
        assert ready.run("get", "db", agent=True).returncode == 6, index
        _flip(ready.store_file, index)
    assert ready.ok("get", "db", agent=True) == "s3cret value!\n"
    admin_file = ready.home / "vault" / "admin.json"
    _flip(admin_file, admin_file.stat().st_size // 2)
    assert ready.set("db", "x-long-enough").returncode == 6
    assert ready.run("admin", "check-leak", input="x").returncode == 6
    _flip(admin_file, admin_file.stat().st_size // 2)
    _flip(ready.home / "keys" / "host.key", 5)
    assert ready.run("get", "db", agent=True).returncode == 6


def test_loose_permissions_are_refused_with_the_fix(ready):
    os.chmod(ready.store_file, 0o644)
    result = ready.run("get", "db", agent=True)
    assert result.returncode == 1 and f"chmod 600 {ready.store_file}" in result.stderr.decode()
    os.chmod(ready.store_file, 0o600)
    os.chmod(ready.store_file.parent, 0o755)
    assert b"chmod 700" in ready.run("get", "db", agent=True).stderr
    os.chmod(ready.store_file.parent, 0o700)
    host_key = ready.home / "keys" / "host.key"
    os.chmod(host_key, 0o640)
    assert ready.run("get", "db", agent=True).returncode == 1
    os.chmod(host_key, 0o600)
    assert stat.S_IMODE(ready.store_file.stat().st_mode) == 0o600
    assert ready.ok("get", "db", agent=True) == "s3cret value!\n"


def test_usage_errors_are_exit_2(pm):
    for args in (["bogus"], ["get"], ["get", "a", "b"], ["set", "a"], ["generate"],
                 ["get", "k", "--version", "x"],
                 # str.isdigit() is true for these, int() refuses them: no traceback
                 ["get", "k", "--version", "\u00b2"], ["get", "k", "--version=\u00b9"]):
        assert pm.run(*args, agent=True).returncode == 2, args
    assert pm.ok("--help").startswith("Usage: pass_mgr")


def test_invalid_names_are_refused(ready):
    for key in ("../x", "a b", "-x", "a|b"):
        result = ready.run("get", "--", key, agent=True) if key.startswith("-") else \
            ready.run("get", key, agent=True)
        assert result.returncode in (1, 2), key
    assert ready.run("list", env=dict(ready.agent_env(), AGENT_ID="../evil")).returncode == 1
    assert ready.run("list", env=dict(ready.agent_env(), AGENT_WORKSPACE="relative")).returncode == 1


# -- /dev/tty prompts ----------------------------------------------------------------------


def _spawn(pm: PassMgr, *args: str) -> pexpect.spawn:
    return pexpect.spawn(pm.exe, list(args), env=pm.env, timeout=30, encoding="utf-8")


def test_admin_init_and_set_prompt_at_the_terminal(pm):
    child = _spawn(pm, "admin", "init")
    child.expect("New admin password: ")
    child.sendline("tty admin password")
    child.expect("Repeat new admin password: ")
    child.sendline("tty admin password")
    child.expect("initialized")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "tty admin password" not in child.before

    child = _spawn(pm, "set", "agent1", str(pm.workspace), "db", "-", "-")
    child.expect("Secret for db: ")
    child.sendline("typed secret")
    child.expect("Repeat secret for db: ")
    child.sendline("typed secret")
    child.expect("Admin password: ")
    child.sendline("tty admin password")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "typed secret" not in child.before  # echo was off
    assert pm.ok("get", "db", agent=True) == "typed secret\n"

    child = _spawn(pm, "admin", "init")  # ready: a change needs the current password
    child.expect("Current admin password: ")
    child.sendline("tty admin password")
    child.expect("New admin password: ")
    child.sendline("one new password")
    child.expect("Repeat new admin password: ")
    child.sendline("a different one")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1 and "do not match" in child.before


def test_prompts_never_read_piped_stdin_without_a_terminal(pm):
    pm.init()
    full = dict(pm.env)
    for args in (["set", "agent1", str(pm.workspace), "db", "-", PW],
                 ["set", "agent1", str(pm.workspace), "db", "value", "-"],
                 ["admin", "init"]):
        # setsid: no controlling terminal, so /dev/tty cannot be opened; stdin is a pipe
        # that holds an answer, which getpass would have read.
        result = subprocess.run(["setsid", "-w", pm.exe, *args], input=f"{PW}\n{PW}\n".encode(),
                                capture_output=True, env=full, timeout=60)
        assert result.returncode == 1, (args, result.stderr)
        assert b"no terminal" in result.stderr
    assert pm.run("get", "db", agent=True).returncode == 4


def test_real_rfc9106_parameters(exe, tmp_path):
    pm = PassMgr(exe, tmp_path, fast_kdf=False)
    pm.init()
    raw = (pm.home / "vault" / "admin.json").read_bytes()
    kdf = json.loads(raw.split(b"\n", 1)[-1])["kdf"]  # format 2: after the header line
    assert (kdf["alg"], kdf["iterations"], kdf["lanes"], kdf["memory_kib"]) == \
        ("argon2id", 3, 4, 65536)
    assert pm.set("db", "v-long-enough").returncode == 0
    assert pm.set("db", "v-long-enough", password="wrong admin pw").returncode == 5


def test_recover_after_the_host_key_is_lost(ready):
    (ready.home / "keys" / "host.key").unlink()
    result = ready.run("get", "db", agent=True)
    assert result.returncode == 6 and b"pass_mgr admin recover" in result.stderr
    wrong = ready.run("admin", "recover", "--password-stdin", input="not the admin pw\n")
    assert wrong.returncode == 5
    ready.ok("admin", "recover", "--password-stdin", input=PW + "\n")
    assert ready.ok("get", "db", agent=True) == "s3cret value!\n"
    assert ready.set("db", "after-long-enough", password=PW).returncode == 0


def test_the_spec_still_matches_pyinstallers_loader():
    """packaging/pass_mgr.spec and pass_mgr_entry.py shorten the onedir binary's start by
    reading PyInstaller's loader (the bootstrap's .egg walk, its finder and archive names);
    where it changed they quietly do nothing, so a PyInstaller upgrade is caught here, not by
    a slower `get`."""
    import ast

    import PyInstaller

    loader = Path(PyInstaller.__file__).parent / "loader"
    spec = ast.parse((ROOT / "packaging" / "pass_mgr.spec").read_text())
    names: dict = {}
    for node in spec.body:  # the spec's texts: EGG_WALK, then LOADER_EDITS built on it
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] \
                in (["EGG_WALK"], ["LOADER_EDITS"]):
            exec(compile(ast.Module([node], []), "pass_mgr.spec", "exec"), names)
    assert set(names["LOADER_EDITS"]) == {"pyiboot01_bootstrap", "pyimod01_archive"}
    for module, edits in names["LOADER_EDITS"].items():
        source = (loader / f"{module}.py").read_text()
        for old, new in edits:
            assert source.count(old) == 1, (module, old)
            source = source.replace(old, new)
        compile(source, module, "exec")
        if module == "pyimod01_archive":  # what the copy is for
            assert "import struct" not in source and "\nimport zlib" not in source
    importers = (loader / "pyimod02_importers.py").read_text()
    for name in ("class PyiFrozenFinder", "def path_hook", "global pyz_archive"):
        assert name in importers, name
    assert "import ctypes" in (loader / "pyimod03_ctypes.py").read_text()
