"""Reparented zombies are reaped; children someone waits for never are.

Each test runs in a fresh interpreter that makes itself a child subreaper, so
the pytest process never collects other tests' orphans.
"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, subprocess, sys, time
    from paddedcell import orphans
    from paddedcell.supervisor.procs import become_subreaper

    assert become_subreaper()
    reaper = orphans.OrphanReaper()

    # A child we wait for ourselves, exiting 7 straight away.
    waited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    orphans.claim(waited.pid)
    # A double fork: the grandchild is reparented to us and exits soon after.
    subprocess.run(["sh", "-c", "(sleep 0.2 &)"], check=True)
    time.sleep(0.6)

    zombies = reaper.unclaimed_zombies()
    assert len(zombies) == 1 and waited.pid not in zombies, zombies
    assert reaper.sweep() == []            # first sighting: only a suspect
    reaped = reaper.sweep()                # second sighting: reaped
    assert reaped == sorted(zombies), (reaped, zombies)
    assert reaper.unclaimed_zombies() == set()
    # The claimed child's exit status was not stolen.
    assert waited.wait() == 7
    orphans.release(waited.pid)
    print("ok")
""")


def test_orphans_reaped_after_two_sweeps_claimed_children_untouched():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_zombie_claimed_between_sweeps_is_left_alone():
    script = textwrap.dedent("""
        import os, subprocess, sys, time
        from paddedcell import orphans
        from paddedcell.supervisor.procs import become_subreaper
        assert become_subreaper()
        reaper = orphans.OrphanReaper()
        child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        time.sleep(0.5)
        assert reaper.sweep() == []        # unclaimed zombie: a suspect now
        orphans.claim(child.pid)           # its spawner claims it late
        assert reaper.sweep() == []
        assert child.wait() == 3
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
