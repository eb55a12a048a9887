"""admin init and admin recover killed at every step leave a vault that still works.

``PADDEDCELL_TEST_CRASH_AT=N`` makes pass_mgr ``os._exit(86)`` at its N-th journaled
step (``vault.api.crash_point``): no clean-up, like a kill. After each crash every
agent still gets its values through the host key, the password a human knows
recovers every store after the host key is lost, and running the command again
finishes the job.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
OLD, NEW = "crash test old admin pw", "crash test new admin pw"
FAST_ENV = {"PADDEDCELL_VAULT_KDF_ITERATIONS": "1", "PADDEDCELL_VAULT_KDF_MEMORY_KIB": "64",
            "PADDEDCELL_VAULT_KDF_LANES": "1"}
MARKERS = ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL")
CRASHED = 86


class Vault:
    def __init__(self, root: Path):
        self.home = root / "home"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in MARKERS and not k.startswith("PADDEDCELL_")}
        self.env.update(FAST_ENV, PADDEDCELL_HOME=str(self.home))
        self.values = {}
        for agent, key, value in (("a1", "db", "a1-db-value-0001"), ("a1", "api", "a1-api-value-02"),
                                  ("b2", "db", "b2-db-value-0003")):
            ws = root / f"ws-{agent}"
            ws.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.values[(agent, str(ws), key)] = value

    def run(self, *args, input=None, crash_at=None, **extra):
        env = dict(self.env, **extra)
        if crash_at is not None:
            env["PADDEDCELL_TEST_CRASH_AT"] = str(crash_at)
        return subprocess.run([str(BIN / "pass_mgr"), *args], env=env, input=input,
                              capture_output=True, text=True, timeout=60)

    def setup(self):
        assert self.run("admin", "init", "--password-stdin", input=OLD + "\n").returncode == 0
        for (agent, ws, key), value in self.values.items():
            done = self.run("set", agent, ws, key, value, OLD)
            assert done.returncode == 0, done.stderr

    def assert_every_value(self):
        for (agent, ws, key), value in self.values.items():
            got = self.run("get", key, AGENT_ID=agent, AGENT_WORKSPACE=ws)
            assert (got.returncode, got.stdout) == (0, value + "\n"), got.stderr

    def lose_host_key_and_recover(self, passwords):
        os.unlink(self.home / "keys" / "host.key")
        answers = [self.run("admin", "recover", "--password-stdin", input=pw + "\n")
                   for pw in passwords]
        assert any(a.returncode == 0 for a in answers), [a.stderr for a in answers]
        self.assert_every_value()


def crash_steps(make, argv, input):
    """Yield (N, vault) for every N at which the command crashes, after setting up."""
    n = 1
    while True:
        vault = make(n)
        done = vault.run(*argv, input=input, crash_at=n)
        if done.returncode == 0:
            assert n > 3, "the command has journaled steps"
            return
        assert done.returncode == CRASHED, done.stderr
        yield n, vault
        n += 1


@pytest.mark.parametrize("then", ["recover-by-password", "init-again"])
def test_admin_init_killed_at_every_step(tmp_path, then):
    def make(n):
        vault = Vault(tmp_path / f"n{n}")
        vault.setup()
        return vault

    for n, vault in crash_steps(make, ["admin", "init", "--password-stdin"], f"{NEW}\n{OLD}\n"):
        vault.assert_every_value()
        status = vault.run("admin", "status")
        journal = (vault.home / "vault" / "admin.next.json").exists()
        assert ("interrupted" in status.stderr) == journal, (n, status.stderr)
        if then == "recover-by-password":
            vault.lose_host_key_and_recover([NEW, OLD])  # the human knows both
        else:
            answers = [vault.run("admin", "init", "--password-stdin", input=f"{NEW}\n{pw}\n")
                       for pw in (OLD, NEW)]
            assert any(a.returncode == 0 for a in answers), (n, [a.stderr for a in answers])
            vault.assert_every_value()
            vault.lose_host_key_and_recover([NEW])  # done: the new password alone recovers
        assert not (vault.home / "vault" / "admin.next.json").exists() or then == "recover-by-password"


def test_admin_recover_killed_at_every_step(tmp_path):
    def make(n):
        vault = Vault(tmp_path / f"r{n}")
        vault.setup()
        os.unlink(vault.home / "keys" / "host.key")
        return vault

    for n, vault in crash_steps(make, ["admin", "recover", "--password-stdin"], OLD + "\n"):
        again = vault.run("admin", "recover", "--password-stdin", input=OLD + "\n")
        assert again.returncode == 0, (n, again.stderr)
        vault.assert_every_value()
