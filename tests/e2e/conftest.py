"""Fixtures for the end-to-end suite: a real OpenClaw gateway with the plugin linked.

One gateway for the whole run (starting one takes 10-20 s), one fake model, one
paddedcell daemon in its own PADDEDCELL_HOME with an initialised vault. The
gateway's exec policy is `tools.exec.mode: deny` with per-agent overrides, so one
gateway serves every scenario: agent `main` runs with mode `full`, `denier`
inherits `deny`, `asker` has `ask` (allowlist + approval on a miss). These tests are not skipped when OpenClaw is missing: the
fixture installs it (scripts/openclaw-env.sh) and fails with the reason if it
cannot.
"""

from __future__ import annotations

import os
import shlex
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from paddedcell.egress.ca import CertificateAuthority

sys.path.insert(0, str(Path(__file__).parent))

from fake_model import FakeModelServer  # noqa: E402
from harness import Gateway, PaddedcellDaemon, SetupError, openclaw_path  # noqa: E402

ADMIN_PASSWORD = "Adm1n-e2e-correct-horse-42"
SECRET = "s3cr3t-db-pw-Qx7Lm9Zr"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failed e2e test, attach the tails of the gateway's and the daemon's logs."""
    outcome = yield
    report = outcome.get_result()
    stack = item.funcargs.get("stack") if hasattr(item, "funcargs") else None
    if report.failed and isinstance(stack, Stack) and stack.gateway is not None:
        lines = [line[:400] for line in stack.gateway.output().splitlines()
                 if "paddedcell" in line.lower() or '"logLevelName":"ERROR"' in line
                 or '"logLevelName":"WARN"' in line]
        report.sections.append(("gateway log (paddedcell and errors, last 40)", "\n".join(lines[-40:])))
        daemon_log = stack.daemon.home / "daemon.log"
        if daemon_log.exists():
            report.sections.append(("paddedcell daemon log (last 40)",
                                    "\n".join(daemon_log.read_text(errors="replace").splitlines()[-40:])))


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def openclaw_bin_path() -> str:
    try:
        return openclaw_path()
    except SetupError as exc:
        pytest.fail(f"cannot install or find OpenClaw for the e2e suite: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def fake_model():
    with FakeModelServer() as server:
        yield server


@dataclass
class Stack:
    gateway: Gateway
    daemon: PaddedcellDaemon
    model: FakeModelServer
    root: Path

    @property
    def workspace(self) -> Path:
        return self.gateway.workspace

    def pass_mgr(self, *args: str, input: str | None = None):
        return self.daemon.run_cli(str(Path(self.daemon.python).parent / "pass_mgr"), *args, input=input)

    def init_vault(self) -> None:
        """``pass_mgr admin init`` with ADMIN_PASSWORD (also what unlocks a locked vault)."""
        init = self.pass_mgr("admin", "init", "--password-stdin", input=ADMIN_PASSWORD + "\n")
        assert init.returncode == 0, f"pass_mgr admin init failed: {init.stderr}"

    def ensure_unlocked(self) -> None:
        """Re-initialise the vault if an earlier leak case locked it (the stack is shared)."""
        if "locked" in self.pass_mgr("admin", "status").stdout:
            self.init_vault()


@contextmanager
def running_stack(root: Path, openclaw_bin_path: str, fake_model: FakeModelServer,
                  daemon: PaddedcellDaemon, before_gateway: Callable[[Stack], None] | None = None,
                  gateway_class: type[Gateway] = Gateway, **gateway_options: Any) -> Iterator[Stack]:
    """Starts ``daemon``, initialises its vault, runs ``before_gateway``, then starts a
    gateway (``gateway_class``, ``gateway_options`` as for Gateway); stops the gateway and
    the daemon at the end."""
    gateway = None
    try:
        daemon.start()
        s = Stack(None, daemon, fake_model, root)  # type: ignore[arg-type]
        s.init_vault()
        if before_gateway is not None:
            before_gateway(s)
        gateway = gateway_class(root, openclaw_bin_path, fake_model.port, daemon, **gateway_options)
        gateway.prepare()
        gateway.start()
        s.gateway = gateway
        yield s
    finally:
        if gateway is not None:
            gateway.stop()
        daemon.stop()


def venv_python() -> str:
    # Not resolved: the venv's python is a symlink, and resolving it leaves the venv.
    return os.path.abspath(sys.executable)


EXEC_MODE = "deny"
# The legacy `agents.list` form: OpenClaw 2026.9.6 migrates it to `agents.entries`
# with ownership on start (written directly, entries need more ownership keys).
GATEWAY_CONFIG = {"agents": {"list": [
    {"id": "main", "default": True, "tools": {"exec": {"mode": "full"}}},
    {"id": "denier"},
    {"id": "asker", "tools": {"exec": {"mode": "ask"}}},
]}}
PLUGIN_CONFIG = {"approvalTimeoutMs": 3000}


@pytest.fixture(scope="session")
def stack(tmp_path_factory, openclaw_bin_path, fake_model) -> Stack:
    exec_mode, extra_config, plugin_config = EXEC_MODE, GATEWAY_CONFIG, PLUGIN_CONFIG
    root = tmp_path_factory.mktemp("openclaw")
    # The restart job runs the real default commands against this gateway
    # (`openclaw gateway restart` restarts a foreground gateway in process, same PID),
    # with the gateway's HOME; only the delay is short and the window generous.
    gateway_env = f"env HOME={shlex.quote(str(root / 'home'))} PATH={shlex.quote(openclaw_bin_path)}"
    # Egress (test_openclaw_egress.py): TLS upstreams on 127.0.0.2, signed by a test CA
    # the session proxies trust through the test-only setting.
    egress_ca = CertificateAuthority("PaddedCell e2e upstream CA")
    (root / "egress-upstream-ca.pem").write_bytes(egress_ca.certificate_pem)
    daemon = PaddedcellDaemon(root / "paddedcell-home", python=venv_python(), extra_env={
        "PADDEDCELL_SUPERVISOR_SANDBOX_ALLOW_LOCAL": "127.0.0.2",
        "PADDEDCELL_EGRESS_EXTRA_UPSTREAM_CA_FILE": str(root / "egress-upstream-ca.pem"),
        "PADDEDCELL_RESTART_DELAY_SECONDS": "1",
        "PADDEDCELL_RESTART_RESTART_CMD": f"{gateway_env} openclaw gateway restart",
        "PADDEDCELL_RESTART_STATUS_CMD": f"{gateway_env} openclaw gateway status --require-rpc",
        "PADDEDCELL_RESTART_RECOVER_TIMEOUT_SECONDS": "90",
    })
    workspace = root / "workspace"
    workspace.mkdir()

    def set_db(s: Stack) -> None:
        put = s.pass_mgr("set", "main", str(workspace), "db", SECRET, ADMIN_PASSWORD)
        assert put.returncode == 0, f"pass_mgr set failed: {put.stderr}"

    with running_stack(root, openclaw_bin_path, fake_model, daemon, before_gateway=set_db,
                       exec_mode=exec_mode, plugin_config=plugin_config,
                       extra_config=extra_config) as s:
        s.egress_ca = egress_ca  # type: ignore[attr-defined]
        yield s
