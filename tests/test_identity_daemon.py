"""Daemon hygiene (daemon/hygiene.py): a daemon nobody can reach, or nobody uses, goes.

Test runs used to leave daemons of deleted temporary homes running for hours.
"""

from __future__ import annotations

import shutil
import time
from contextlib import contextmanager

from supervisor_helpers import Daemon

FAST = {"PADDEDCELL_DAEMON_HYGIENE_CHECK_SECONDS": "0.2"}


@contextmanager
def daemon_in(tmp_path, **env):
    """A daemon (fast hygiene checks, plus ``env``) on a fresh home, stopped at the end."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with Daemon(home, **env, **FAST) as daemon:
        yield daemon


def wait_exit(daemon: Daemon, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if daemon.proc.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def test_a_daemon_whose_home_is_deleted_stops(tmp_path):
    with daemon_in(tmp_path) as daemon:
        daemon.log.close()
        shutil.rmtree(daemon.home)
        assert wait_exit(daemon, 10)


def test_a_daemon_whose_socket_is_removed_stops(tmp_path):
    with daemon_in(tmp_path) as daemon:
        time.sleep(0.5)  # (a socket removed in its first 50 ms is noticed after 5 s)
        (daemon.home / "run" / "paddedcell.sock").unlink()
        assert wait_exit(daemon, 10)


def test_an_on_demand_daemon_stops_when_idle_but_not_while_a_session_runs(tmp_path):
    with daemon_in(tmp_path, PADDEDCELL_DAEMON="on-demand",
                   PADDEDCELL_DAEMON_IDLE_EXIT_MINUTES="0.01") as daemon:  # 0.6 s
        sid = daemon.call("/exec", {"command": "sleep 2", "agentId": "a", "background": True}
                          )["details"]["sessionId"]
        assert sid
        assert not wait_exit(daemon, 1.5)  # busy: the session runs
        assert wait_exit(daemon, 10)  # then idle for 0.6 s: gone


def test_a_daemon_a_person_started_does_not_stop_when_idle(tmp_path):
    with daemon_in(tmp_path, PADDEDCELL_DAEMON_IDLE_EXIT_MINUTES="0.01") as daemon:
        assert not wait_exit(daemon, 1.5)
        assert daemon.client.healthy()
