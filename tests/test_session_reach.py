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
from supervisor_helpers import BIN, Daemon, base_env, give_workspace, init_vault

ADMIN = "admin-pw-for-tests-1"

#: One channel request per argument (a JSON line); prints one answer line per request.
#: (A long channel path is reached through its directory's /proc/self/fd entry, as the
#: CLIs do: sun_path holds 108 bytes.)
SHORT_PATH = """
def short(path):
    if len(path.encode()) < 100:
        return path
    directory, name = os.path.split(path)
    return "/proc/self/fd/%d/%s" % (os.open(directory, os.O_PATH), name)
"""

CHANNEL_CLIENT = """
import json, os, socket, sys
""" + SHORT_PATH + """
channel = short(os.environ["PADDEDCELL_CHANNEL"])
for line in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(channel)
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
    if os.geteuid() == 0:
        # A root daemon's sandbox runs the session as the agent's own uid, and the job's
        # files are walked from / as that uid: not under pytest's 0700 basetemp.
        import shutil
        import tempfile

        tmp_path = Path(tempfile.mkdtemp(prefix="pc-session-reach-", dir="/tmp"))
        tmp_path.chmod(0o711)
        yield from _world(tmp_path)
        shutil.rmtree(tmp_path, ignore_errors=True)
    else:
        yield from _world(tmp_path)


def _world(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    init_vault(home, ADMIN)
    subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(ws), "db", "a1-db-value-123", ADMIN],
                   env=base_env(home), check=True, capture_output=True)
    give_workspace(home, "a1", ws)
    yield home, ws


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
    if sandbox == "auto":  # the agent's own file (under a root daemon: its uid's)
        os.chown(rollback, ws.stat().st_uid, ws.stat().st_gid)
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
            # (under a root daemon's sandbox the hard link, which keeps the host key's
            # owner, is already closed to the agent's uid: permission denied, exit 1)
            denied = log.endswith("hard-link") and "Permission denied" in json.dumps(answer)
            assert answer["ok"] is False and (answer["exit"] == 5 or denied), (log, rb, answer)
        assert answers[-1]["ok"] is True and answers[-1]["result"]["result"] == "OK", answers[-1]
        deadline = time.monotonic() + 20
        while "restart finished" not in (ws / "restart.log").read_text():
            assert time.monotonic() < deadline, (ws / "restart.log").read_text()
            time.sleep(0.1)
    assert host_key.read_bytes() == before
    assert not (home / "vault" / "locked.json").exists()
    assert not (outside / "restart.log").exists() and not store_dir.joinpath("store.log").exists()
    # Written as the session's uid: ours, or the agent's own under a root daemon's sandbox
    # (which owns the workspace); never the host key's owner through the hard link.
    session_uid = os.getuid() if sandbox == "none" else ws.stat().st_uid
    assert (ws / "restart.log").stat().st_uid == session_uid
    assert host_key.stat().st_uid == os.getuid()
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


# -- the admin password's encoded forms -----------------------------------------------------


ENCODERS = ("cat", "base64 -w0", "base64", "base64 -w 17", "xxd", "xxd -p", "hexdump -C",
            "od -An -tx1",
            # every byte as %XX (URL encoding), then only what urllib.parse.quote escapes
            "python3 -c \"import sys; print(''.join('%%%02X' % b for b in "
            "open(sys.argv[1], 'rb').read()))\"",
            "python3 -c \"import sys, urllib.parse; print(urllib.parse.quote("
            "open(sys.argv[1]).read(), safe=''))\"")


def test_the_admin_password_in_a_readable_file_is_masked_in_every_encoding(world):
    """A shell history holding the admin password (the argv form of pass_mgr set): what
    a session shows of it through cat, base64, a hex dump or URL encoding never decodes
    to it."""
    import base64
    import re
    import urllib.parse

    home, ws = world
    history = ws / ".bash_history"
    history.write_text(f"ls\npass_mgr set a1 {ws} KEY value-123 {ADMIN}\nexit\n")
    middle = ADMIN.encode()[4:14]
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        for tool in ENCODERS:
            plain = subprocess.run(f"{tool} {history}", shell=True,
                                   capture_output=True).stdout.decode()
            shown = daemon.call("/exec", {"command": f"{tool} {history}", "agentId": "a1",
                                          "agentWorkspace": str(ws)})["content"][0]["text"]
            locked = home / "vault" / "locked.json"
            assert locked.exists(), tool  # each form is a leak: it locks the vault
            locked.unlink()  # (a human's admin init, for the next form)
            assert "######" in shown and shown != plain, (tool, shown)
            assert middle.hex() not in "".join(shown.split()).lower() and ADMIN not in shown
            assert ADMIN[4:14] not in urllib.parse.unquote(shown), (tool, shown)
            for run in re.findall(r"[A-Za-z0-9+/=]{8,}", shown.replace("\n", "")):
                for offset in range(4):
                    part = run[offset:]
                    try:
                        decoded = base64.b64decode(part[:len(part) - len(part) % 4])
                    except ValueError:
                        continue
                    assert middle not in decoded, (tool, shown)


# -- the channel survives any client -------------------------------------------------------

#: Opens argv[1] processes x argv[2] connections to the channel, each sent argv[3] bytes of a
#: line that never ends, and holds them; prints FLOODING n once they are made.
FLOODER = """
import os, socket, sys, time
""" + SHORT_PATH + """
channel = short(os.environ["PADDEDCELL_CHANNEL"])
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))  # more than the daemon
procs, per, partial = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
made = 0
r, w = os.pipe()
for _ in range(procs):
    if os.fork() == 0:
        held, until = [], time.monotonic() + 8
        try:
            while len(held) < per and time.monotonic() < until:
                try:
                    s = socket.socket(socket.AF_UNIX)
                except OSError:
                    break  # out of descriptors here
                try:
                    s.setblocking(False)  # a full backlog answers EAGAIN at once: retry
                    s.connect(channel)
                    s.settimeout(2)
                    if partial:
                        s.sendall(b"x" * partial)
                    held.append(s)
                except BlockingIOError:
                    s.close()
                    time.sleep(0.005)
                except OSError:
                    s.close()
        finally:
            os.write(w, b"%d\\n" % len(held))
        time.sleep(600)
        os._exit(0)
import select
counts, deadline = b"", time.monotonic() + 40
while counts.count(b"\\n") < procs and time.monotonic() < deadline:
    if select.select([r], [], [], 1)[0]:
        counts += os.read(r, 64)
total = sum(map(int, counts.split()))
print("FLOODING", total, flush=True)
time.sleep(600)
"""

WHOAMI = json.dumps({"op": "whoami"})


def start_flood(daemon: Daemon, ws: Path, procs: int, per: int, partial: int = 0) -> str:
    path = ws / "flood.py"
    path.write_text(FLOODER)
    sid = daemon.call("/exec", {"command": f"{BIN / 'python'} {path} {procs} {per} {partial}",
                                "agentId": "a1", "agentWorkspace": str(ws),
                                "background": True})["details"]["sessionId"]
    deadline = time.monotonic() + 60
    while True:
        text = daemon.call("/process", {"action": "log", "sessionId": sid,
                                        "agentId": "a1"})["content"][0]["text"]
        if "FLOODING" in text:
            return sid
        if time.monotonic() > deadline:
            ps = subprocess.run(["ps", "-o", "pid,stat,wchan:30,args", "--ppid", str(daemon.pid)],
                                capture_output=True, text=True).stdout
            kids = [l.split()[0] for l in ps.splitlines()[1:]]
            more = "".join(subprocess.run(["ps", "-o", "pid,stat,wchan:30,args", "--ppid", k],
                                          capture_output=True, text=True).stdout for k in kids)
            raise AssertionError(text + "\n" + ps + more)
        time.sleep(0.1)


def others_still_served(daemon: Daemon, ws: Path) -> None:
    assert daemon.client.healthy()
    answers = run_in_session(daemon, ws, CHANNEL_CLIENT, WHOAMI, agent="b2")
    assert answers == [{"ok": True, "agentId": "b2", "agentWorkspace": str(ws),
                        "sessionKey": answers[0]["sessionKey"]}], answers


@pytest.mark.parametrize("cap", ["default", "none"])
def test_a_channel_flood_at_a_low_file_limit_ends_only_that_channel(world, cap):
    """3 x 120 idle connections to one session's channel of a daemon limited to 128
    descriptors: with the default per-session cap the daemon's descriptors are never
    exhausted; with no cap accept() fails with EMFILE and backs off instead of ending
    the daemon. Either way other sessions are served, during the flood or after it."""
    home, ws = world
    extra = {} if cap == "default" else {"PADDEDCELL_SUPERVISOR_CHANNEL_MAX_CONNECTIONS": "100000"}
    with Daemon(home, open_files=128, PADDEDCELL_SUPERVISOR_SANDBOX="none", **extra) as daemon:
        sid = start_flood(daemon, ws, 3, 120)
        if cap == "default":
            others_still_served(daemon, ws)
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})
        time.sleep(0.5)
        others_still_served(daemon, ws)
        assert daemon.proc.poll() is None
        if cap == "none":
            assert "EMFILE" in (home / "daemon-test.log").read_text()


SOCKET_FLOODER = """
import os, resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
path, count = sys.argv[1], int(sys.argv[2])
if len(path.encode()) >= 100:
    path = "/proc/self/fd/%d/%s" % (os.open(os.path.dirname(path), os.O_PATH),
                                    os.path.basename(path))
held = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.2)
    try:
        s.connect(path)
        s.sendall(b"POST /exec HTTP/1.1\\r\\nhost: x\\r\\ncontent-length: 99\\r\\n\\r\\n{")
    except OSError:
        s.close()
        continue
    held.append(s)
print("FLOODING", len(held), flush=True)
time.sleep(120)
"""


def test_the_daemon_socket_survives_a_flood_at_a_low_file_limit(world):
    """A process holds 400 idle half-requests to the daemon's own socket, whose daemon has
    128 descriptors: it gets at most daemon.max_connections_per_peer of them (here half of
    half the file limit), so while it floods other clients are answered; after it the
    daemon serves as before."""
    home, ws = world
    with Daemon(home, open_files=128, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        flooder = subprocess.Popen([sys.executable, "-c", SOCKET_FLOODER, daemon.client.path,
                                    "400"], stdout=subprocess.PIPE, text=True)
        try:
            assert flooder.stdout.readline().startswith("FLOODING")
            daemon.client.close()
            others_still_served(daemon, ws)
        finally:
            flooder.kill()
            flooder.wait()
        time.sleep(0.3)
        others_still_served(daemon, ws)
        assert daemon.proc.poll() is None


def test_partial_lines_hold_a_bounded_amount_of_memory(world):
    """128 connections each sending 1 MiB of a line that never ends: the session's channel
    holds at most supervisor.channel_session_buffer_bytes (8 MiB), not 128 MiB."""
    home, ws = world
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        run_in_session(daemon, ws, CHANNEL_CLIENT, WHOAMI)  # warm: first session's costs
        before = daemon.rss_kib()
        start_flood(daemon, ws, 2, 64, 1 << 20)
        time.sleep(0.5)
        grown_mib = (daemon.rss_kib() - before) / 1024
        assert grown_mib < 40, f"the daemon grew {grown_mib:.0f} MiB"
        others_still_served(daemon, ws)


# -- every new value reaches every running session that could print it ---------------------


def session_log(daemon: Daemon, sid: str, agent: str) -> str:
    return daemon.call("/process", {"action": "log", "sessionId": sid, "agentId": agent,
                                    "limit": 100000})["content"][0]["text"]


def wait_for_lines(daemon: Daemon, sid: str, agent: str, needle: str, count: int) -> str:
    deadline = time.monotonic() + 20
    while True:
        text = session_log(daemon, sid, agent)
        if text.count(needle) >= count:
            return text
        assert time.monotonic() < deadline, text[-2000:]
        time.sleep(0.1)


def quietly_set(home: Path, agent: str, ws: Path, key: str, value: str) -> None:
    """Another process writes the store through the vault API and tells no daemon; then
    supervisor.scan_interval_seconds (1 s) passes twice over, for the store check."""
    subprocess.run([sys.executable, "-c", "import sys; from paddedcell.vault import set_secret; "
                    "set_secret(*sys.argv[1:])", agent, str(ws), key, value, ADMIN],
                   env=base_env(home), check=True, capture_output=True)
    time.sleep(2.5)


@pytest.mark.parametrize("sandbox", ["auto"])  # ("none" as well where there is no sandbox)
def test_a_value_changed_elsewhere_is_masked_in_running_sessions(world, sandbox):
    """Background loops (a1's own, and agent b2's) print a1's app.env every 0.2 s; another
    a1 session rotates TOKEN and writes the new value there, then a human sets it with
    pass_mgr set and writes that: the loops only ever show TOKEN=######."""
    home, ws = world
    human = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws))
    subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(ws), "TOKEN", "first-token-value-1",
                    ADMIN], env=base_env(home), check=True, capture_output=True)
    (ws / "app.env").write_text("TOKEN=first-token-value-1\n")
    os.chmod(ws, 0o755)
    loop = f"while :; do cat {ws}/app.env; sleep 0.2; done"
    readers = [("a1", ws), ("b2", ws.parent)]
    from paddedcell.supervisor.sandbox import host_root

    if sandbox == "auto" and host_root():
        # A root daemon's sandbox runs b2 as its own uid: a1's files (the daemon's umask,
        # 077) are not b2's to read at all, which is stronger than masking them for it.
        readers = readers[:1]
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX=sandbox) as daemon:
        loops = [(daemon.call("/exec", {"command": loop, "agentId": agent,
                                        "agentWorkspace": str(where), "background": True}
                              )["details"]["sessionId"], agent)
                 for agent, where in readers]
        for sid, agent in loops:
            wait_for_lines(daemon, sid, agent, "TOKEN=", 2)
        rotate = daemon.call("/exec", {
            "command": f"pass_mgr rotate TOKEN && printf 'TOKEN=%s\\n' \"$(pass_mgr get TOKEN)\" "
                       f"> {ws}/app.env.new && mv {ws}/app.env.new {ws}/app.env && echo rotated",
            "agentId": "a1", "agentWorkspace": str(ws), "awaitResults": True})
        assert "rotated" in rotate["content"][0]["text"], rotate
        rotated = subprocess.run([str(BIN / "pass_mgr"), "get", "TOKEN"], env=human,
                                 check=True, capture_output=True, text=True).stdout.strip()
        assert rotated and rotated != "first-token-value-1"
        for sid, agent in loops:
            seen = session_log(daemon, sid, agent).count("TOKEN=")
            wait_for_lines(daemon, sid, agent, "TOKEN=", seen + 3)
        subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(ws), "TOKEN",
                        "human-set-token-2", ADMIN], env=base_env(home), check=True,
                       capture_output=True)
        (ws / "app.env.new").write_text("TOKEN=human-set-token-2\n")
        (ws / "app.env.new").rename(ws / "app.env")
        for sid, agent in loops:
            seen = session_log(daemon, sid, agent).count("TOKEN=")
            wait_for_lines(daemon, sid, agent, "TOKEN=", seen + 3)
        # Another process writes the store and tells no one: the daemon's store check.
        quietly_set(home, "a1", ws, "TOKEN", "quiet-writer-token-3")
        (ws / "app.env.new").write_text("TOKEN=quiet-writer-token-3\n")
        (ws / "app.env.new").rename(ws / "app.env")
        for sid, agent in loops:
            seen = session_log(daemon, sid, agent).count("TOKEN=")
            text = wait_for_lines(daemon, sid, agent, "TOKEN=", seen + 3)
            assert "quiet-writer-token-3" not in text, (agent, text[-1500:])
            for value in ("first-token-value-1", rotated, "human-set-token-2"):
                assert value not in text, (agent, value, text[-1500:])
            assert "TOKEN=######" in text
            daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": agent})


def test_values_already_stored_are_masked_in_every_session_that_can_read_them(world):
    """b2's background loop prints files in a1's and c3's workspaces (its user can read
    both). a1's value was set before the daemon started (its registry entry in the form
    older releases wrote) and no a1 session ever runs; c3's store is created later by a
    process that tells no one; a human sets a1's value again: b2's log shows none of them."""
    home, ws = world
    top = ws.parent
    b2, c3 = top / "b2", top / "c3"
    b2.mkdir(mode=0o700)
    c3.mkdir(mode=0o700)
    subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(ws), "TOKEN", "a1-set-before-1",
                    ADMIN], env=base_env(home), check=True, capture_output=True)
    (ws / "app.env").write_text("TOKEN=a1-set-before-1\n")
    for entry in (home / "vault" / "stores").iterdir():  # directory only, no workspace
        entry.write_text(json.loads(entry.read_text())["directory"])
    loop = f"while :; do cat {ws}/app.env {c3}/app.env 2>/dev/null; sleep 0.2; done"
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        sid = daemon.call("/exec", {"command": loop, "agentId": "b2", "agentWorkspace": str(b2),
                                    "background": True})["details"]["sessionId"]
        wait_for_lines(daemon, sid, "b2", "TOKEN=", 2)
        quietly_set(home, "c3", c3, "KEY", "c3-quiet-value-2")
        (c3 / "app.env").write_text("KEY=c3-quiet-value-2\n")
        wait_for_lines(daemon, sid, "b2", "KEY=", 3)
        subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(ws), "TOKEN",
                        "a1-human-value-3", ADMIN], env=base_env(home), check=True,
                       capture_output=True)
        (ws / "app.env.new").write_text("TOKEN=a1-human-value-3\n")
        (ws / "app.env.new").rename(ws / "app.env")
        seen = session_log(daemon, sid, "b2").count("TOKEN=")
        text = wait_for_lines(daemon, sid, "b2", "TOKEN=", seen + 3)
        for value in ("a1-set-before-1", "c3-quiet-value-2", "a1-human-value-3"):
            assert value not in text, (value, text[-1500:])
        assert "TOKEN=######" in text and "KEY=######" in text
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "b2"})


# -- no slow request stalls the daemon ------------------------------------------------------


def test_a_command_no_shell_can_take_is_answered_before_any_work(world):
    """Over MAX_ARG_STRLEN `$SHELL -c COMMAND` can only fail (E2BIG): the daemon says so
    (what to do instead) before resolving, redacting or forking; /healthz is served
    meanwhile (its timing: benchmarks/daemon_edge.py)."""
    home, ws = world
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        result = daemon.call("/exec", {"command": "# " + "x" * (10 << 20) + "\ntrue",
                                       "agentId": "a1", "agentWorkspace": str(ws)})
        assert result["details"]["status"] == "failed", result["details"]
        assert result["details"]["failureKind"] == "runtime-error"
        assert "MAX_ARG_STRLEN" in result["content"][0]["text"]
        small = daemon.call("/exec", {"command": "# " + "x" * 100_000 + "\necho ran",
                                      "agentId": "a1", "agentWorkspace": str(ws)})
        assert "ran" in small["content"][0]["text"], small
        assert daemon.client.healthy()


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
    that uid, and a directory the uid cannot write stays closed to it — also where the
    workspace sits below a 0700 directory of root's (e.g. /root/...), which the uid
    cannot search: the daemon walks to the workspace, the uid only inside it."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(dir="/tmp"))  # 0700, root's: the uid cannot search it
    assert stat.S_IMODE(top.stat().st_mode) == 0o700
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
