"""A foreground ``pcexec`` starts without cyclic garbage collection: the objects its
imports make live as long as the process (frozen before the command starts)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, os, sys
import trio
from paddedcell.cli import pcexec

seen = []
gc.callbacks.append(lambda phase, info: seen.append(info["generation"]) if phase == "start" else None)
start = []
real_foreground = pcexec._run_foreground
def foreground(*args):
    start.append(len(seen))
    return real_foreground(*args)
pcexec._run_foreground = foreground
def run(*args, **kwargs):
    print(len(seen) - start[0], gc.isenabled(), gc.get_freeze_count() > 1000, flush=True)
    os._exit(0)
trio.run = run
for module in [m for m in sys.modules if m.startswith("paddedcell.supervisor")]:
    del sys.modules[module]  # imported again by the run, as in a fresh pcexec
sys.argv = ["pcexec", "--pty", "true"]
pcexec.main()
"""


def test_a_foreground_run_collects_nothing_while_it_starts(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PADDEDCELL_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    # No collection from the start of the run to the event loop's; on again, start-up frozen.
    assert done.stdout.split() == ["0", "True", "True"], done.stdout
