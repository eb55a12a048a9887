"""Suite-wide hygiene: every process a test run leaves behind is stopped when the run ends.

`pcexec --background` starts a detached daemon on demand, the e2e suite starts gateways,
and a test that fails half-way never stops what it started. Left running, they load the
shared machine for the next run and hold ports and files. Each run marks its processes
with an environment variable (children inherit it, detached or not); at the end of the
run every process of this user that still carries the run's mark, or whose
PADDEDCELL_HOME lies under the run's temporary directory, is stopped. Processes of other
runs (another checkout's tests, a user's own daemon) carry neither, and are left alone.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

RUN_MARK = "PADDEDCELL_TEST_RUN"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # one mark per run, shared by xdist workers
        os.environ.setdefault(RUN_MARK, uuid.uuid4().hex)
    _let_agents_enter(config.rootpath)


def _let_agents_enter(checkout: Path) -> None:
    """As root, let other uids enter (not list) the checkout. Many tests run a command
    without naming a workspace, so it runs in the test's working directory, the
    checkout; under root that command runs as the agent's own uid (supervisor/
    sandbox_plan.py), which must be able to enter it. A clean clone made by
    ``git clone . "$(mktemp -d)"`` is 0700 at its top; ``$d/main`` would be 0755."""
    if os.geteuid() != 0:
        return
    mode = checkout.stat().st_mode
    if not mode & 0o001:
        checkout.chmod(mode | 0o001)


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _left_behind(mark: str, base: Path) -> list[int]:
    """Processes of this user marked by this run, or homed under its temporary directory."""
    mine, uid, own = [], os.getuid(), {os.getpid(), os.getppid()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        env = _environ(int(entry.name))
        home = env.get("PADDEDCELL_HOME", "")
        if env.get(RUN_MARK) == mark or (home and Path(home).is_relative_to(base)):
            mine.append(int(entry.name))
    return mine


def _stop(pids: list[int], grace: float = 3.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    mark = os.environ.get(RUN_MARK)
    factory = getattr(config, "_tmp_path_factory", None)
    if not mark or factory is None:
        return
    try:
        base = factory.getbasetemp()
    except (OSError, ValueError):
        return
    _stop(_left_behind(mark, base.resolve()))
