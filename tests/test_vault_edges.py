"""Agent-facing edges of pass_mgr: what an agent (or a careless human) can trip on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paddedcell import config
from paddedcell.vault import VaultError, init_admin, random_value, set_secret
from paddedcell.vault.api import SYMBOLS
from supervisor_helpers import give_workspace

BIN = Path(sys.executable).parent
PW = "edges test admin pw"
FAST_ENV = {"PADDEDCELL_VAULT_KDF_ITERATIONS": "1", "PADDEDCELL_VAULT_KDF_MEMORY_KIB": "64",
            "PADDEDCELL_VAULT_KDF_LANES": "1"}
MARKERS = ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL")


@pytest.fixture
def env(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in MARKERS and not k.startswith("PADDEDCELL_")}
    env.update(FAST_ENV, PADDEDCELL_HOME=str(home))
    done = pass_mgr(env, "admin", "init", "--password-stdin", input=PW + "\n")
    assert done.returncode == 0, done.stderr
    give_workspace(home, "a1", ws)
    env["_WS"] = str(ws)
    return env


def pass_mgr(env, *args, input=None, **extra):
    full = {k: v for k, v in env.items() if not k.startswith("_")}
    full.update(extra)
    return subprocess.run([str(BIN / "pass_mgr"), *args], env=full, input=input,
                          capture_output=True, text=True, timeout=60)


def agent(env, **more):
    return {"AGENT_ID": "a1", "AGENT_WORKSPACE": env["_WS"], **more}


def test_generate_print_is_refused_in_an_agent_context(env):
    done = pass_mgr(env, "generate", "tok", "--print", **agent(env, PADDEDCELL_AGENT="1"))
    assert done.returncode == 5
    assert done.stdout == ""
    assert "--print" in done.stderr
    listed = pass_mgr(env, "list", **agent(env, PADDEDCELL_AGENT="1"))
    assert "tok" not in listed.stdout, "refused before storing anything"
    # A human names the store with AGENT_ID/AGENT_WORKSPACE only, and may see the value.
    human = pass_mgr(env, "generate", "tok", "--print", **agent(env))
    assert human.returncode == 0, human.stderr
    assert len(human.stdout.strip()) == 32


def test_generated_values_avoid_the_mask_and_shell_quoting():
    assert "#" not in SYMBOLS
    for char in ",;!^~'\"$`\\*?[]{}()<>|&# ":
        assert char not in SYMBOLS, char
    for _ in range(300):
        value = random_value(24)
        assert value[0].isalnum()
        quoted = subprocess.run(["bash", "-c", 'printf %q "$1"', "_", value], capture_output=True,
                                text=True).stdout
        assert quoted == value, (value, quoted)


def test_set_refuses_short_values_unless_allowed_and_tells_the_human(env):
    done = pass_mgr(env, "set", "a1", env["_WS"], "pin", "4821", PW)
    assert done.returncode == 1
    assert "vault.min_length" in done.stderr and "4821" not in done.stderr
    ok = pass_mgr(env, "set", "a1", env["_WS"], "pin", "4821", PW, "--allow-short")
    assert ok.returncode == 0, ok.stderr
    assert "4 characters" in ok.stderr and "guess" in ok.stderr
    assert pass_mgr(env, "get", "pin", **agent(env)).stdout == "4821\n"


def test_no_short_secret_warning_reaches_the_agent_at_pcexec_time(env):
    assert pass_mgr(env, "set", "a1", env["_WS"], "pin", "4821", PW, "--allow-short").returncode == 0
    full = {k: v for k, v in env.items() if not k.startswith("_")}
    full.update(agent(env))
    done = subprocess.run([str(BIN / "pcexec"), "echo $(pass_mgr get pin) done"], env=full,
                          capture_output=True, text=True, timeout=60, cwd=env["_WS"])
    assert done.returncode == 0, done.stderr
    assert done.stdout == "###### done\n"
    assert "Warning" not in done.stderr and "warn" not in done.stderr.lower(), done.stderr


def test_set_with_key_and_value_swapped_does_not_echo_the_value(env):
    value = "S3cret value/with space!"
    done = pass_mgr(env, "set", "a1", env["_WS"], value, "db", PW)
    assert done.returncode != 0
    assert value not in done.stderr + done.stdout
    assert "argument order" in done.stderr


def test_get_version_0_is_a_usage_error_on_both_paths(env):
    assert pass_mgr(env, "set", "a1", env["_WS"], "db", "value-12345", PW).returncode == 0
    fast = pass_mgr(env, "get", "db", "--version", "0", **agent(env))
    fast_eq = pass_mgr(env, "get", "db", "--version=0", **agent(env))
    slow = pass_mgr(env, "get", "--version", "0", "db", **agent(env))  # options first: click
    assert fast.returncode == fast_eq.returncode == slow.returncode == 2, (fast.stderr, slow.stderr)


def test_library_min_length(tmp_path):
    s = config.load({"PADDEDCELL_HOME": str(tmp_path / "h")},
                    {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1})
    ws = tmp_path / "w"
    ws.mkdir(mode=0o700)
    init_admin(PW, s)
    with pytest.raises(VaultError):
        set_secret("a1", str(ws), "k", "1234567", PW, s)
    set_secret("a1", str(ws), "k", "12345678", PW, s)
    set_secret("a1", str(ws), "k2", "1234", PW, s, allow_short=True)


def test_no_import_circle_and_one_table_of_exit_codes():
    code = ("import sys, paddedcell.cli.pass_mgr_click, paddedcell.cli.pass_mgr_get;"
            "print('paddedcell.cli.pass_mgr' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    from paddedcell import exits
    from paddedcell.vault import errors

    assert (errors.IntegrityError.exit_code, errors.Forbidden.exit_code, errors.Locked.exit_code,
            errors.NoSuchKey.exit_code) == (exits.INTEGRITY, exits.FORBIDDEN, exits.NOT_READY,
                                            exits.NO_SUCH_KEY)


def test_settings_are_typed_once_and_a_bad_value_names_the_setting(tmp_path):
    from paddedcell.vault.settings import VaultSettings

    s = config.load({"PADDEDCELL_HOME": str(tmp_path / "h"),
                     "PADDEDCELL_VAULT_LOCK_TIMEOUT_SECONDS": "2.5"})
    vs = VaultSettings.of(s)
    assert vs is VaultSettings.of(s)
    assert (vs.lock_timeout, vs.history_depth, vs.min_length, vs.retired_mask_days) == (2.5, 5, 8, 30.0)
    bad = config.load({"PADDEDCELL_HOME": str(tmp_path / "h")}, {"vault.history_depth": "lots"})
    with pytest.raises(VaultError, match="vault.history_depth"):
        VaultSettings.of(bad)
