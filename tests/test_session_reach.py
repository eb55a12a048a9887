"""Issue 20: nothing an agent sends the daemon reaches past it.

Each case is played as a hostile agent would: a command in a daemon session speaks
the session channel protocol (one JSON line to ``$PADDEDCELL_CHANNEL``) or runs the
CLIs; sandboxed and not.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddedcell.restart import confine
from supervisor_helpers import BIN, Daemon, base_env, init_vault

ADMIN = "admin-pw-for-tests-1"

#: One channel request per argument (a JSON line); prints one answer line per request.
CHANNEL_CLIENT = """
import json, os, socket, sys
for line in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["PADDEDCELL_CHANNEL"])
    s.sendall(line.encode() + b"\\n")
    data = b""
    while not data.endswith(b"\\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print("ANSWER", data.decode().strip(), flush=True)
print("DONE", flush=True)
"""


def run_in_session(daemon: Daemon, ws: Path, script: str, *args: str,
                   agent: str = "a1") -> list[dict]:
    """Run ``script`` with ``args`` in a1's session; the JSON answers it printed."""
    path = ws / "client.py"
    path.write_text(script)
    command = " ".join([str(BIN / "python"), str(path)] + [f"'{a}'" for a in args])
    text = daemon.call("/exec", {"command": command, "agentId": agent,
                                 "agentWorkspace": str(ws), "awaitResults": True,
                                 "timeoutSeconds": 120})["content"][0]["text"]
    assert "DONE" in text, text
    return [json.loads(line.split(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("ANSWER ")]


def restart_line(log: str, rollback: str, **job) -> str:
    return json.dumps({"op": "daemon", "method": "POST", "path": "/query-restart",
                       "body": {"requesterSessionKey": "s",
                                "job": {"rollback": rollback, "log": log, "delaySeconds": 0,
                                        **job}}})


@pytest.fixture
def world(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    init_vault(home, ADMIN)
    subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(ws), "db", "a1-db-value-123", ADMIN],
                   env=base_env(home), check=True, capture_output=True)
    return home, ws


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_restart_job_paths_are_the_sessions(world, sandbox):
    """The issue's one line (log = the host key, the lock file, a store) and every way
    around a path check (symlinked file, symlinked directory, hard link, '..', another
    directory) is refused with exit 5; the host key and the vault stay as they were; a
    file of the workspace is used, and written as the session's uid."""
    home, ws = world
    host_key = home / "keys" / "host.key"
    before = host_key.read_bytes()
    store_dir = ws / ".paddedcell" / "secrets" / "a1"
    rollback = ws / "rollback.sh"
    rollback.write_text("#!/bin/sh\necho rolled back\n")
    (ws / "key-link").symlink_to(host_key)
    (ws / "vault-dir").symlink_to(home / "vault")
    os.link(host_key, ws / "hard-link")
    outside = ws.parent / "elsewhere"
    outside.mkdir()
    hostile = [
        (str(host_key), str(rollback)),
        (str(home / "vault" / "locked.json"), str(rollback)),
        (str(store_dir / "store.log"), str(rollback)),
        (str(ws / "key-link"), str(rollback)),
        (str(ws / "vault-dir" / "locked.json"), str(rollback)),
        (str(ws / "hard-link"), str(rollback)),
        (f"{ws}/../home/keys/host.key", str(rollback)),
        (str(outside / "restart.log"), str(rollback)),
        (str(ws / "restart.log"), "/bin/true"),                 # the rollback runs too
        (str(ws / "restart.log"), str(ws / "key-link")),
    ]
    good = restart_line(str(ws / "restart.log"), str(rollback))
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX=sandbox,
                PADDEDCELL_RESTART_RESTART_CMD="true",
                PADDEDCELL_RESTART_STATUS_CMD="true") as daemon:
        answers = run_in_session(daemon, ws, CHANNEL_CLIENT,
                                 *[restart_line(log, rb) for log, rb in hostile], good)
        for (log, rb), answer in zip(hostile, answers):
            assert answer["ok"] is False and answer["exit"] == 5, (log, rb, answer)
        assert answers[-1]["ok"] is True and answers[-1]["result"]["result"] == "OK", answers[-1]
        deadline = time.monotonic() + 20
        while "restart finished" not in (ws / "restart.log").read_text():
            assert time.monotonic() < deadline, (ws / "restart.log").read_text()
            time.sleep(0.1)
    assert host_key.read_bytes() == before
    assert not (home / "vault" / "locked.json").exists()
    assert not (outside / "restart.log").exists() and not store_dir.joinpath("store.log").exists()
    assert (ws / "restart.log").stat().st_uid == os.getuid()
    status = subprocess.run([str(BIN / "pass_mgr"), "admin", "status"], env=base_env(home),
                            capture_output=True, text=True)
    assert status.stdout.strip() == "ready", status


def test_a_lock_file_pass_mgr_did_not_write_is_tampering(world):
    """Any file at vault/locked.json that is not the vault's MACed lock: admin status says
    tampered, get exits 6 (never 3, "locked"), and admin init needs the current password."""
    home, ws = world
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws))
    locked = home / "vault" / "locked.json"
    locked.write_text("appended by a restart job\n")
    status = subprocess.run([str(BIN / "pass_mgr"), "admin", "status"], env=env,
                            capture_output=True, text=True)
    assert status.stdout.strip() == "tampered", status
    for binary in (BIN / "pass_mgr", Path(__file__).parents[1] / "dist" / "pass_mgr" / "pass_mgr"):
        if not os.access(binary, os.X_OK):
            continue
        got = subprocess.run([str(binary), "get", "db"], env=env, capture_output=True, text=True)
        assert got.returncode == 6 and "tampered" in got.stderr, (binary, got)
    human = base_env(home)
    without_current = subprocess.run([str(BIN / "pass_mgr"), "admin", "init", "--password-stdin"],
                                     input="a new admin password\nnot the admin pw\n", env=human,
                                     capture_output=True, text=True)
    assert without_current.returncode == 5 and locked.exists(), without_current
    with_current = subprocess.run([str(BIN / "pass_mgr"), "admin", "init", "--password-stdin"],
                                  input=f"a new admin password\n{ADMIN}\n", env=human,
                                  capture_output=True, text=True)
    assert with_current.returncode == 0, with_current
    assert not locked.exists()


# -- the confined open itself -------------------------------------------------------------


def test_a_directory_swapped_for_a_symlink_mid_job_is_not_followed(tmp_path):
    """The job log is opened again for every line: a directory that becomes a symlink
    after the request was accepted is refused then."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    (home / "keys").mkdir(parents=True)
    (ws / "logs").mkdir(parents=True)
    target = home / "keys" / "host.key"
    target.write_bytes(b"key")
    conf = confine.Confinement(str(ws), os.getuid(), os.getgid(), (str(home),))
    os.close(confine.open_confined(str(ws / "logs" / "job.log"), conf, confine.APPEND))
    (ws / "logs").rename(ws / "old-logs")
    (ws / "logs").symlink_to(home / "keys")
    with pytest.raises(confine.ConfinementError):
        confine.open_confined(str(ws / "logs" / "host.key"), conf, confine.APPEND)
    fifo = ws / "fifo"
    os.mkfifo(fifo)
    with pytest.raises((confine.ConfinementError, OSError)):  # never blocks the daemon either
        confine.open_confined(str(fifo), conf, confine.APPEND)
    assert target.read_bytes() == b"key"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
def test_as_root_the_file_is_opened_as_the_sessions_uid():
    """A root daemon opens a session's file as the session's uid: it is created owned by
    that uid, and a directory the uid cannot write stays closed to it."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(dir="/tmp"))  # every directory on the way is searchable
    os.chmod(top, 0o755)
    ws = top / "ws"
    ws.mkdir()
    nobody = 65534
    os.chown(ws, nobody, nobody)
    try:
        _opened_as(ws, nobody)
    finally:
        shutil.rmtree(top)


def _opened_as(ws: Path, nobody: int) -> None:
    (ws / "roots").mkdir(mode=0o700)
    conf = confine.Confinement(str(ws), nobody, nobody, ())
    fd = confine.open_confined(str(ws / "job.log"), conf, confine.APPEND)
    os.write(fd, b"line\n")
    os.close(fd)
    st = (ws / "job.log").stat()
    assert (st.st_uid, st.st_gid) == (nobody, nobody) and stat.S_IMODE(st.st_mode) == 0o600
    with pytest.raises(PermissionError):
        confine.open_confined(str(ws / "roots" / "job.log"), conf, confine.APPEND)
    assert not (ws / "roots" / "job.log").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
