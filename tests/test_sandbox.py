"""The namespace sandbox (supervisor/sandbox.py, docs/design.md §1): on by default where the
host allows it, it hides PADDEDCELL_HOME, the agent stores and other processes.

Each test is something an agent command could do on a host without it: read
the host key, call the package's vault API, read the daemon's environment,
see another agent's value in ``ps``, unmount what hides the keys.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time

import pytest

from paddedcell.supervisor import sandbox
from supervisor_helpers import BIN, Daemon, base_env, give_workspace, init_vault, two_agent_home

pytestmark = pytest.mark.skipif(not sandbox.available()[0],
                                reason="this host has no unprivileged user namespaces: "
                                       + sandbox.available()[1])

ADMIN = "admin-pw-for-tests-1"
A1_DB = "A1-sandbox-value-0000-aaaa"
VICTIM_DB = "VICTIM-sandbox-value-9999-vv"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("sandbox")
    home, ws, wv = two_agent_home(root, A1_DB, VICTIM_DB, ADMIN)
    daemon = Daemon(home)
    yield {"home": home, "ws": ws, "wv": wv, "daemon": daemon}
    daemon.stop()


def run(world, command, agent="a1", timeout=60, **env):
    """A command in agent's daemon session; its result (waits for the end)."""
    ws = world["ws"] if agent == "a1" else world["wv"]
    return world["daemon"].call("/exec", {"command": command, "agentId": agent,
                                          "agentWorkspace": str(ws), "awaitResults": True,
                                          "timeoutSeconds": timeout, **env})


def text(result):
    return result["content"][0]["text"]


def test_the_host_key_and_the_vault_files_are_not_there(world):
    home = shlex.quote(str(world["home"]))
    out = text(run(world, f"cat {home}/keys/host.key; ls -A {home}; "
                          f"ls -A {home}/vault; ls -A {shlex.quote(str(world['wv']))}/.paddedcell"
                          "/secrets/victim; echo END"))
    assert "END" in out
    assert "host.key" not in out.replace(f"{world['home']}/keys/host.key", "")
    assert "No such file" in out
    # And the agent stores: victim's directory is an empty tmpfs.
    assert "store" not in out.split("secrets/victim")[-1].replace("END", "")


def test_the_package_vault_api_finds_no_key(world):
    code = ("from paddedcell.vault import get_secret\n"
            f"print(get_secret('victim', {str(world['wv'])!r}, 'db'))\n")
    out = text(run(world, f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} 2>&1; echo rc=$?"))
    assert VICTIM_DB not in out
    assert "rc=0" not in out


def test_the_daemon_and_other_sessions_are_invisible(world):
    daemon = world["daemon"]
    sid = daemon.call("/exec", {"command": 'exec -a "psql --password=$(pass_mgr get db)" sleep 20',
                                "agentId": "victim", "agentWorkspace": str(world["wv"]),
                                "background": True})["details"]["sessionId"]
    try:
        time.sleep(0.5)
        out = text(run(world, f"ps -eo args; cat /proc/{daemon.pid}/environ; "
                              "echo COUNT=$(ls /proc | grep -c '^[0-9]')"))
        assert "COUNT=" in out
        assert VICTIM_DB not in out and "psql" not in out
        assert "PADDEDCELL_HOME" not in out  # the daemon's environment
        # Only the session's own processes: init, the shell, ps/ls/grep.
        count = int(out.split("COUNT=")[-1].split()[0])
        assert count <= 5, out
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "victim"})


def test_what_hides_the_keys_cannot_be_unmounted(world):
    home = shlex.quote(str(world["home"]))
    out = text(run(world, f"umount {home}; echo rc1=$?; "
                          f"unshare -Urm sh -c 'umount {home} || umount -l {home}; "
                          f"ls {home}/keys'; echo rc2=$?; cat /proc/1/maps >/dev/null; echo rc3=$?; "
                          f"ls {home}"))
    assert "rc1=0" not in out
    assert "host.key" not in out
    assert "rc3=0" not in out  # init is a copy of the supervisor: its memory is off limits


def test_the_working_directory_cannot_lead_into_the_home(world):
    result = world["daemon"].call("/exec", {"command": "cat keys/host.key; ls", "agentId": "a1",
                                            "agentWorkspace": str(world["ws"]),
                                            "workdir": str(world["home"]),
                                            "awaitResults": True})
    out = text(result)
    assert "host.key" not in out.replace("keys/host.key", "")
    assert "outside the sandbox" in out and "BEGIN" not in out, out


def test_inside_agent_session_without_any_variable(world):
    code = "from paddedcell.agent_session import inside_agent_session as f; print('INSIDE', f())"
    out = text(run(world, f"env -i {shlex.quote(sys.executable)} -c {shlex.quote(code)}"))
    assert "INSIDE True" in out


def test_pass_mgr_works_inside_and_values_are_masked(world):
    out = text(run(world, "pass_mgr get db; pass_mgr list; echo rc=$?"))
    assert "######" in out and "db" in out and "rc=0" in out
    assert A1_DB not in out


def test_exit_codes_and_signals_are_the_commands(world):
    assert run(world, "exit 7")["details"]["exitCode"] == 7
    killed = run(world, "kill -TERM $$")["details"]
    assert killed["exitSignal"] in ("SIGTERM", 15), killed


def test_a_pty_session_gets_ctrl_c(world):
    daemon = world["daemon"]
    sid = daemon.call("/exec", {"command": "sleep 30", "agentId": "a1", "pty": True,
                                "agentWorkspace": str(world["ws"]), "background": True}
                      )["details"]["sessionId"]
    time.sleep(0.5)
    daemon.call("/process", {"action": "send-keys", "sessionId": sid, "agentId": "a1",
                             "keys": ["C-c"]})
    for _ in range(100):
        polled = daemon.call("/process", {"action": "poll", "sessionId": sid, "agentId": "a1"})
        if polled["details"]["status"] != "running":
            break
        time.sleep(0.05)
    assert polled["details"]["status"] != "running", polled


def test_a_daemonised_child_outlives_its_shell(world, tmp_path):
    flag = world["ws"] / f"late-{tmp_path.name}"
    result = run(world, f"(sleep 0.5; touch {shlex.quote(str(flag))}) >/dev/null 2>&1 & echo started")
    assert "started" in text(result)
    for _ in range(60):
        if flag.exists():
            break
        time.sleep(0.05)
    assert flag.exists()


def test_network_none_reaches_nothing_and_writes_land_only_in_the_workspace(tmp_path):
    # Deny by default: a directory nobody gave the sandbox (here beside the workspace)
    # is not there to write to; the workspace is; /tmp is the session's own.
    home, ws, other = tmp_path / "home", tmp_path / "ws", tmp_path / "other"
    for d in (home, ws, other):
        d.mkdir(mode=0o700)
    give_workspace(home, "a1", ws)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    scratch = f"pc-scratch-{tmp_path.name}-{os.urandom(4).hex()}"
    daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX_NETWORK="none")
    try:
        code = ("import socket\ntry:\n    socket.create_connection(('127.0.0.1', %d), 2)\n"
                "    print('NET-OK')\nexcept OSError as e:\n    print('NET-FAIL', e)\n") % port
        command = (f"touch {shlex.quote(str(other))}/x; echo rc1=$?; touch x; echo rc2=$?; "
                   f"touch /tmp/{scratch}; echo rc3=$?; "
                   f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
        out = text(daemon.call("/exec", {"command": command, "agentId": "a1",
                                         "agentWorkspace": str(ws), "workdir": str(ws),
                                         "awaitResults": True}))
        assert "rc1=0" not in out and "rc2=0" in out and "rc3=0" in out, out
        assert "NET-FAIL" in out, out
        assert not (other / "x").exists() and (ws / "x").exists()
        assert not os.path.exists(f"/tmp/{scratch}")  # /tmp was the session's own
    finally:
        listener.close()
        daemon.stop()


def test_sandbox_off_when_asked(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    (home / "marker").write_text("visible")
    out = subprocess.run([str(BIN / "pcexec"), f"cat {shlex.quote(str(home))}/marker"],
                         env=base_env(home, PADDEDCELL_SUPERVISOR_SANDBOX="none"),
                         capture_output=True, text=True, timeout=60, cwd=str(ws))
    assert "visible" in out.stdout
    hidden = subprocess.run([str(BIN / "pcexec"), f"cat {shlex.quote(str(home))}/marker"],
                            env=base_env(home), capture_output=True, text=True, timeout=60,
                            cwd=str(ws))
    assert "visible" not in hidden.stdout


def test_process_kill_ends_what_left_the_session_inside_the_sandbox(world, tmp_path):
    from supervisor_helpers import alive, pid_by_argv0

    marker = f"escapee-{tmp_path.name}"
    daemon = world["daemon"]
    sid = daemon.call("/exec", {"command": f"setsid bash -c '(exec -a {marker} sleep 120 &)' ; sleep 60",
                                "agentId": "a1", "agentWorkspace": str(world["ws"]),
                                "background": True})["details"]["sessionId"]
    pid = pid_by_argv0(marker)
    assert alive(pid)
    daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})
    for _ in range(200):
        if not alive(pid):
            break
        time.sleep(0.05)
    assert not alive(pid)


def test_daemon_routes_a_session_may_use_go_through_its_channel(world, tmp_path):
    # safe-restart run by an agent's command: the daemon's socket is hidden, the
    # channel forwards the allow-listed routes with the session's agent.
    code = ("from paddedcell.daemon.client import DaemonClient, DaemonError\n"
            "c = DaemonClient()\n"
            "print('AGENTS', 'agents' in c.call('GET', '/agents'))\n"
            "for body in ({'requesterAgentId': 'victim', 'requesterSessionKey': 'k'},):\n"
            "    try:\n"
            "        c.call('POST', '/restart-cancel', body)\n"
            "        print('CANCEL-ANSWERED')\n"
            "    except DaemonError as e:\n"
            "        print('CANCEL-REFUSED', e.status)\n"
            "try:\n"
            "    c.call('POST', '/workflow/open', {'agentId': 'victim', 'workflow': 'w'})\n"
            "    print('WORKFLOW-ANSWERED')\n"
            "except DaemonError as e:\n"
            "    print('WORKFLOW-REFUSED', e.status)\n")
    script = world["ws"] / f"routes-{tmp_path.name}.py"
    script.write_text(code)
    out = text(run(world, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"))
    assert "AGENTS True" in out, out
    assert "CANCEL-REFUSED 403" in out, out
    assert "WORKFLOW-ANSWERED" not in out, out


def test_a_restart_rollback_runs_in_the_sandbox(tmp_path):
    # The rollback script is the agent's; the daemon runs it when a restart fails.
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    init_vault(home, ADMIN)
    key_file = home / "keys" / "host.key"
    assert key_file.exists()
    out = ws / "stolen"
    rollback = ws / "rollback.sh"
    rollback.write_text(f"cat {shlex.quote(str(key_file))} > {shlex.quote(str(out))}; "
                        f"ls -A {shlex.quote(str(home))} >> {shlex.quote(str(out))}; "
                        f"touch {shlex.quote(str(ws / 'rolled-back'))}\n")
    daemon = Daemon(home)
    try:
        answer = daemon.call("/query-restart", {
            "requesterAgentId": "a1", "requesterSessionKey": "k",
            "job": {"rollback": str(rollback), "log": str(ws / "restart.log"),
                    "delaySeconds": 0, "recoverTimeoutSeconds": 1,
                    "restartCmd": "true", "statusCmd": "false"}})
        assert answer["result"] == "OK", answer
        for _ in range(300):
            if (ws / "rolled-back").exists():
                break
            time.sleep(0.05)
        assert (ws / "rolled-back").exists()
        stolen = out.read_bytes()
        assert key_file.read_bytes() not in stolen or not key_file.read_bytes()
        assert b"keys" not in stolen and b"vault" not in stolen, stolen
    finally:
        daemon.stop()


def _children_running(pid: int, word: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and word.encode() in cmdline:
            found.append(int(entry))
    return found


def test_sessions_start_from_the_zygote_and_it_ends_with_the_daemon(tmp_path):
    """The sandbox's leader and init are copies of the small zygote, not of the daemon
    (whose memory would cost every start a large fork and hand init a copy of it); the
    zygote and its ready spare leave with the daemon."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir()
    give_workspace(home, "a1", ws)
    daemon = Daemon(home)
    try:
        body = {"command": "tr '\\0' ' ' < /proc/1/cmdline; echo; exit 3", "agentId": "a1",
                "agentWorkspace": str(ws), "awaitResults": True}
        for _ in range(2):  # the first session and one from the spare made after it
            result = daemon.call("/exec", body)
            assert "supervisor/zygote.py" in text(result), result
            assert result["details"]["exitCode"] == 3
        helpers = _children_running(daemon.pid, "zygote.py")
        assert helpers, "no zygote or spare beside the daemon"
        helpers += [kid for pid in helpers for kid in _children_running(pid, "zygote.py")]
    finally:
        daemon.stop()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in helpers if os.path.exists(f"/proc/{pid}")
             and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
    assert not alive, f"zygote processes outlived the daemon: {alive}"


#: What a session sees of its own root: every mount point with its options and source,
#: and when pid 1 (its init) started, against its own shell, in clock ticks.
VIEW = ("awk '{print $5, $6, $9, $10}' /proc/self/mountinfo | sed -E 's/,(uid|gid)=[0-9]+//g' "
        "| sort; stat -c '%n %u %g %a' /tmp /var/tmp /dev/shm /run/user/*; echo uid=$(id -u); "
        "echo init-age=$(( $(cut -d' ' -f22 /proc/$$/stat) - $(cut -d' ' -f22 /proc/1/stat) ))")


def test_a_failed_prebuild_falls_back_to_the_whole_build(tmp_path):
    """A host where building ahead fails (here forced by the test-only
    PADDEDCELL_TEST_FAIL_PREBUILD, read only in the zygote's spare) still runs every
    sandboxed command: the session whose spare failed is built whole, and so are the
    spares after it."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir()
    give_workspace(home, "a1", ws)
    daemon = Daemon(home, PADDEDCELL_TEST_FAIL_PREBUILD="1")
    try:
        for _ in range(3):
            time.sleep(0.3)  # the spare's prebuild has failed by now
            result = daemon.call("/exec", {"command": "echo ran", "agentId": "a1",
                                           "agentWorkspace": str(ws), "awaitResults": True})
            assert result["details"]["exitCode"] == 0, result
            assert "ran" in text(result), result
    finally:
        daemon.stop()


def test_a_spare_built_ahead_gives_the_same_sandbox(tmp_path):
    """After the first session the zygote's spare builds the shared part of the root (the
    system, /dev, the installation, /proc, loopback, the proxy listener) before its session
    arrives, and adds only the session's own entries then: every session sees the same
    mounts with the same options as the first, built whole, did; and its init was ready
    before the request came."""
    home, ws, other = tmp_path / "home", tmp_path / "ws", tmp_path / "ws-b"
    home.mkdir(mode=0o700)
    ws.mkdir()
    other.mkdir()
    give_workspace(home, "a1", ws)
    give_workspace(home, "b2", other)
    daemon = Daemon(home)
    try:
        views = []
        for agent, workspace in (("a1", ws), ("a1", ws), ("b2", other), ("a1", ws)):
            time.sleep(0.5)  # the spare is ready (and older than the request) by now
            result = daemon.call("/exec", {"command": VIEW, "agentId": agent, "pty": True,
                                           "agentWorkspace": str(workspace),
                                           "awaitResults": True})
            assert result["details"]["exitCode"] == 0, result
            view = text(result).replace(str(other), str(ws)).replace("agents/b2/", "agents/a1/")
            uid = view.rsplit("uid=", 1)[1].split()[0]
            view = re.sub(r"sessions/[0-9a-f]+\.sock", "CHANNEL", view)  # before the uid:
            views.append(re.sub(rf"(?<![0-9A-Za-z]){uid}(?![0-9A-Za-z])", "UID", view))  # ids hold digits
        mounts = [v.rsplit("init-age=", 1)[0] for v in views]
        ages = [int(v.rsplit("init-age=", 1)[1].split()[0]) for v in views]
        assert mounts[1] == mounts[0] and mounts[2] == mounts[0] and mounts[3] == mounts[0]
        assert ages[0] < 20 and min(ages[1:]) >= 30, ages  # ticks: built at the request / ahead
        points = {line.split()[0] for line in mounts[0].splitlines() if line.strip()}
        assert "/sys" not in points and str(home) not in points, points  # where it was built
    finally:
        daemon.stop()


def test_a_spare_built_before_a_source_was_replaced_is_not_used(tmp_path):
    """A spare binds the shared sources (the installation, supervisor.sandbox_bind_ro) when
    it is built; a directory replaced since (a virtualenv rebuilt in place) must show its
    new contents to the next session, not the old directory the waiting spare still
    holds."""
    home, ws, tool = tmp_path / "home", tmp_path / "ws", tmp_path / "tool"
    home.mkdir(mode=0o700)
    ws.mkdir()
    give_workspace(home, "a1", ws)
    tool.mkdir(mode=0o755)
    (tool / "marker").write_text("old\n")
    (tool / "marker").chmod(0o644)
    daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX_BIND_RO=str(tool))
    body = {"command": f"cat {shlex.quote(str(tool))}/marker", "agentId": "a1",
            "agentWorkspace": str(ws), "awaitResults": True}
    try:
        for _ in range(2):  # the second from a spare built ahead, the spares after it too
            time.sleep(0.5)
            assert text(daemon.call("/exec", body)).strip() == "old"
        time.sleep(0.5)  # the next spares are built, with the old directory bound
        tool.rename(tmp_path / "tool.old")
        tool.mkdir(mode=0o755)
        (tool / "marker").write_text("new\n")
        (tool / "marker").chmod(0o644)
        for _ in range(2):
            assert text(daemon.call("/exec", body)).strip() == "new"
            time.sleep(0.5)
    finally:
        daemon.stop()


def test_a_probe_started_early_is_collected_once_with_the_same_answer(monkeypatch):
    """pcexec forks the availability probe before its imports (sandbox.start_probe);
    available() then collects that child (reaped, not probed again) and answers as a
    probe of its own does."""
    fresh = sandbox.available()
    monkeypatch.setattr(sandbox, "_AVAILABLE", {})
    monkeypatch.setattr(sandbox, "_PROBES", {})
    sandbox.start_probe()
    sandbox.start_probe()  # one probe at a time
    (pid, _), = sandbox._PROBES.values()
    assert sandbox.available() == fresh
    assert sandbox._PROBES == {}
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped by the collection
    sandbox.finish_probe()  # nothing left: a no-op
    assert sandbox.available() == fresh
