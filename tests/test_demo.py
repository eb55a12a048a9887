"""`make demo` is one of the README's two promises: keep it true."""

import os
import subprocess
import sys


def test_demo_masks_the_secret_and_cleans_up(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "paddedcell.demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "password ######" in done.stdout
    assert "token=###### done" in done.stdout
    assert "exit 3:" in done.stdout and "no-such-key" in done.stdout
    secret = next(word for word in done.stdout.split() if word.startswith("hunter2-"))
    # The human step echoes it once; the agent's output never does.
    assert done.stdout.count(secret) == 1
    assert list(tmp_path.iterdir()) == []
