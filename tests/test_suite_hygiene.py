"""The suite stops what its tests leave behind (tests/conftest.py): a detached process a
test started, still running when the run ends, is gone after it; another run's is not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_detached_process_left_by_a_test_is_stopped_at_the_end_of_the_run(pytester, tmp_path):
    pid_file = tmp_path / "pids"
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(f"""
        import os, subprocess, sys
        def test_leaves_two_behind(tmp_path):
            marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                      start_new_session=True)
            # No mark (env -i), but homed under the run's temporary directory.
            homed = subprocess.Popen(["env", "-i", "PADDEDCELL_HOME=" + str(tmp_path / "home"),
                                      sys.executable, "-c", "import time; time.sleep(300)"],
                                     start_new_session=True)
            open({str(pid_file)!r}, "w").write(f"{{marked.pid}} {{homed.pid}}")
    """)
    # Someone else's process: same user, no mark, homed elsewhere.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                             env={k: v for k, v in os.environ.items() if k != "PADDEDCELL_TEST_RUN"},
                             start_new_session=True)
    try:
        env_without_mark = {k: v for k, v in os.environ.items() if k != "PADDEDCELL_TEST_RUN"}
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "--basetemp", str(tmp_path / "inner")],
                                cwd=pytester.path, env=env_without_mark, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        pids = [int(p) for p in pid_file.read_text().split()]
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "the run left its processes running"
        assert _alive(other.pid), "the run stopped a process that was not its own"
    finally:
        other.kill()
        other.wait()
