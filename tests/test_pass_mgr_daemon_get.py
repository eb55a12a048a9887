"""A human's direct ``pass_mgr get`` asks a running daemon (``POST /vault/get``,
cli/pass_mgr_get.py) and answers exactly as the local read would; the daemon answers
its own uid only, never a process of a session (docs/design.md §4.3, "direct get")."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from supervisor_helpers import BIN, Daemon, base_env, init_vault, set_secret
from test_session_reach import SHORT_PATH, run_in_session

ADMIN = "admin-pw-for-tests-1"


def get(home: Path, ws: Path | str, *args: str, agent: str = "a1", **extra: str):
    env = base_env(home, AGENT_ID=agent, AGENT_WORKSPACE=str(ws),
                   PYTHONPROFILEIMPORTTIME="1", **extra)
    done = subprocess.run([str(BIN / "pass_mgr"), "get", *args], env=env, capture_output=True,
                          text=True, timeout=120)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    stderr = "".join(line + "\n" for line in done.stderr.splitlines()
                     if not line.startswith("import time:"))
    return (done.returncode, done.stdout, stderr), imported


CASES = [("db",), ("db", "--version", "1"), ("missing",), ("db", "--version", "9"), ("bad/key",)]


def answers(home: Path, ws: Path) -> tuple[list, list]:
    results = [get(home, ws, *case) for case in CASES]
    results.append(get(home, ws, "db", agent="a2"))  # no store for a2
    results.append(get(home, "relative/ws", "db"))  # the local read's answer, whatever it is
    return [r for r, _ in results], [i for _, i in results]


def vault_home(tmp_path: Path) -> tuple[Path, Path]:
    """(home with an initialized vault, a workspace)."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir()
    init_vault(home)
    return home, ws


def test_the_daemon_answers_a_direct_get_as_the_local_read_does(tmp_path):
    home, ws = vault_home(tmp_path)
    set_secret(home, "a1", ws, "db", "first value")
    set_secret(home, "a1", ws, "db", "s3cr3t value ü")
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none"):
        through_daemon, imported = answers(home, ws)
    local, local_imported = answers(home, ws)
    assert through_daemon == local
    assert local[0] == (0, "s3cr3t value ü\n", "") and local[1] == (0, "first value\n", "")
    assert [r[0] for r in local[2:6]] == [4, 4, 4, 4], local
    # Found through the daemon: neither the vault nor cryptography was imported.
    assert not {m for m in imported[0] | imported[1]
                if m.startswith(("cryptography", "paddedcell.vault"))}
    assert "cryptography.hazmat.bindings._rust" in local_imported[0]
    # No daemon (no socket file): the local read does not load the client's socket or wire.
    assert not {"_socket", "paddedcell.session.wire"} & local_imported[0], local_imported[0]
    # The local read goes through vault.read: none of the writers (api, admin) is loaded.
    assert "paddedcell.vault.read" in local_imported[0]
    assert not {"paddedcell.vault.api", "paddedcell.vault.admin"} & local_imported[0]

    # A locked vault (an admin-password leak): exit 3 either way, same message.
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        assert daemon.call("/vault/check-leak", {"text": ADMIN, "source": "t"})["leak"]
        locked = get(home, ws, "db")[0]
    assert locked == get(home, ws, "db")[0]
    assert locked[0] == 3 and locked[1] == "", locked


#: Inside a session: the daemon's socket asked directly with forged bodies (own agent and
#: another's), the lean client itself, then pass_mgr get (through the channel).
IN_SESSION = """
import hashlib, json, os, socket, subprocess, sys
""" + SHORT_PATH + """
sock_path, ws = sys.argv[1], sys.argv[2]
for agent in ("a1", "a2"):
    body = json.dumps({"agentId": agent, "agentWorkspace": ws, "key": "db"}).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect(short(sock_path))
    s.sendall(b"POST /vault/get HTTP/1.1\\r\\nhost: x\\r\\ncontent-type: application/json\\r\\n"
              b"content-length: %d\\r\\nconnection: close\\r\\n\\r\\n%s" % (len(body), body))
    raw = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        raw += chunk
    print("ANSWER " + json.dumps({"status": raw.split(b" ", 2)[1].decode(),
                                  "leaked": b"value" in raw}))
from paddedcell import config
from paddedcell.cli.pass_mgr_get import get_via_daemon
os.environ.update(AGENT_ID="a2", AGENT_WORKSPACE=ws)
print("ANSWER " + json.dumps({"lean": get_via_daemon(config.load(), "db", None)}))
os.environ.update(AGENT_ID="a2")
done = subprocess.run(["pass_mgr", "get", "db"], capture_output=True, text=True)
digest = hashlib.sha256(done.stdout.encode()).hexdigest()  # the value itself is masked
print("ANSWER " + json.dumps({"code": done.returncode, "sha256": digest}))
print("DONE")
"""


def test_a_session_process_is_refused_and_its_get_goes_through_the_channel(tmp_path):
    home, ws = vault_home(tmp_path)
    set_secret(home, "a1", ws, "db", "a1-value")
    set_secret(home, "a2", ws, "db", "a2-victim-value")
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        got = run_in_session(daemon, ws, IN_SESSION, daemon.client.path, str(ws))
    assert got[:2] == [{"status": "403", "leaked": False}] * 2, got
    assert got[2] == {"lean": None}
    # AGENT_ID says a2: the channel answers for the session's agent, a1.
    assert got[3] == {"code": 0, "sha256": hashlib.sha256(b"a1-value\n").hexdigest()}, got


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="another uid needs root (and setpriv)")
def test_another_uid_gets_nothing_from_a_root_daemon(tmp_path):
    """uid 1002 with CAP_DAC_OVERRIDE, so it can even open the 0600 socket: still refused."""
    home, ws = vault_home(tmp_path)
    set_secret(home, "a1", ws, "db", "root-only-value")
    probe = tmp_path / "probe.py"
    probe.write_text("""
import json, socket, sys
body = json.dumps({"agentId": "a1", "agentWorkspace": sys.argv[2], "key": "db"}).encode()
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    s.sendall(b"POST /vault/get HTTP/1.1\\r\\nhost: x\\r\\ncontent-length: %d\\r\\n"
              b"connection: close\\r\\n\\r\\n%s" % (len(body), body))
    raw = b""
    while chunk := s.recv(65536):
        raw += chunk
    print(json.dumps({"connected": True, "raw": raw.decode(errors="replace")}))
except OSError as exc:
    print(json.dumps({"connected": False, "error": str(exc)}))
""")
    os.chmod(tmp_path, 0o755)
    probe.chmod(0o644)
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        done = subprocess.run(
            ["setpriv", "--reuid=paddedcell-test", "--regid=paddedcell-test", "--clear-groups",
             "--inh-caps=+dac_override", "--ambient-caps=+dac_override",
             "/usr/bin/python3", str(probe), daemon.client.path, str(ws)],
            capture_output=True, text=True, timeout=60)
    answer = json.loads(done.stdout)
    assert "root-only-value" not in done.stdout
    assert not answer["connected"] or " 200 " not in answer["raw"].split("\r\n")[0], answer


async def test_the_route_itself_refuses_an_unverified_or_foreign_peer(tmp_path):
    """Past the socket's own uid check and the session guard: the route checks again."""
    import trio

    from paddedcell.daemon.app import DaemonContext, build_router
    from paddedcell.daemon.http import Request
    from supervisor_helpers import make_settings

    settings = make_settings(tmp_path / "home", daemon__hygiene_check_seconds=3600,
                             supervisor__sandbox="none")
    body = {"agentId": "a1", "agentWorkspace": str(tmp_path), "key": "db"}
    async with trio.open_nursery() as nursery:
        router = build_router(DaemonContext(settings, nursery), time.time())
        for uid, pid in ((os.getuid() + 1, os.getpid()), (os.getuid(), None), (None, None)):
            status, answer = await router.dispatch(Request("POST", "/vault/get", {}, body,
                                                           uid, pid))
            assert status == 403 and "value" not in answer, (uid, pid, answer)
        # The same request from a verified peer outside every session reaches the vault
        # (not initialized here: 409, the local read's error, which the client falls back to).
        status, answer = await router.dispatch(Request("POST", "/vault/get", {}, body,
                                                       os.getuid(), os.getpid()))
        assert status == 409, answer
        nursery.cancel_scope.cancel()
