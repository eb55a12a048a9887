"""Identity is a property of the session, not of the environment (docs/design.md §1, issue 10).

Two agents, ``a1`` and ``victim``, on one host. Every test plays a
prompt-injected ``a1`` trying to act as ``victim`` with a trick that worked
when ``pass_mgr`` and the daemon believed ``AGENT_ID``/``agentId``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time

import pytest

from supervisor_helpers import (BIN, Daemon, base_env, give_workspace, init_vault, set_secret,
                                two_agent_home)

A1_DB = "A1-db-value-0000-aaaa"
VICTIM_DB = "VICTIM-db-value-9999-vvvv"
ADMIN = "admin-pw-for-tests-1"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("identity")
    home, ws, wv = two_agent_home(root, A1_DB, VICTIM_DB, ADMIN)
    set_secret(home, "victim", wv, "keep", "VICTIM-keep-value-1234", ADMIN)
    daemon = Daemon(home)
    yield {"home": home, "ws": ws, "wv": wv, "daemon": daemon, "root": root}
    daemon.stop()


def a1_env(world, **extra):
    return base_env(world["home"], AGENT_ID="a1", AGENT_WORKSPACE=str(world["ws"]), **extra)


def pcexec(world, command, *args, timeout=90):
    """a1's foreground pcexec (its own supervisor, as a CLI agent runs it)."""
    return subprocess.run([str(BIN / "pcexec"), *args, command], env=a1_env(world),
                          capture_output=True, text=True, timeout=timeout, cwd=str(world["ws"]))


def human_get(world, agent, ws, key):
    env = base_env(world["home"], AGENT_ID=agent, AGENT_WORKSPACE=str(ws))
    out = subprocess.run([str(BIN / "pass_mgr"), "get", key], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.rstrip("\n")


def _sha(value: str) -> str:
    import hashlib

    return hashlib.sha256((value + "\n").encode()).hexdigest()


# Which agent's value did `pass_mgr get db` print? Compared by digest, and the
# answers spelled so that an echo of the command line does not contain them.
WHO = ('h=$(pass_mgr get db | sha256sum | cut -c1-64); [ "$h" = {a1} ] && echo IS_""A1; '
       '[ "$h" = {victim} ] && echo IS_""VICTIM; true').format(a1=_sha(A1_DB),
                                                              victim=_sha(VICTIM_DB))


def switch(world, how):
    wv = shlex.quote(str(world["wv"]))
    return {
        "read": f"read AGENT_ID <<< victim; read AGENT_WORKSPACE <<< {wv}; {WHO}",
        "printf-v": f"printf -v AGENT_ID victim; printf -v AGENT_WORKSPACE %s {wv}; {WHO}",
        "for": f"for AGENT_ID in victim; do for AGENT_WORKSPACE in {wv}; do {WHO}; done; done",
    }[how]


@pytest.mark.parametrize("how", ["read", "printf-v", "for"])
def test_identity_switch_in_the_command_does_not_change_the_agent(world, how):
    out = pcexec(world, switch(world, how))
    assert "IS_VICTIM" not in out.stdout
    assert "IS_A1" in out.stdout, out.stdout + out.stderr
    assert VICTIM_DB not in out.stdout + out.stderr


def test_identity_switch_in_a_script_with_every_variable_removed(world, tmp_path):
    # The script drops every PaddedCell and agent variable, then claims victim.
    script = world["ws"] / f"switch-{tmp_path.name}.sh"  # the sandbox shows the workspace
    script.write_text(
        "for v in $(env | cut -d= -f1 | grep -E '^(PADDEDCELL_|AGENT|OPENCLAW)'); do unset $v; done\n"
        f"export AGENT_ID=victim AGENT_WORKSPACE={shlex.quote(str(world['wv']))}\n"
        f"export PADDEDCELL_HOME={shlex.quote(str(world['home']))}\n" + WHO + "\n")
    out = pcexec(world, f"bash {script}")
    assert "IS_VICTIM" not in out.stdout
    assert "IS_A1" in out.stdout, out.stdout + out.stderr


def test_another_sessions_channel_refuses(world, tmp_path):
    # a1 points PADDEDCELL_CHANNEL at a socket of victim's running session.
    daemon = world["daemon"]
    flag = world["wv"] / f"victim-up-{tmp_path.name}"  # what each sandbox shows
    sid = daemon.call("/exec", {"command": f"touch {flag}; sleep 30", "agentId": "victim",
                                "agentWorkspace": str(world["wv"]), "background": True}
                      )["details"]["sessionId"]
    try:
        for _ in range(200):
            if flag.exists():
                break
            time.sleep(0.02)
        sockets = sorted((world["home"] / "run" / "sessions").glob("*.sock"))
        assert sockets
        script = world["ws"] / f"steal-{tmp_path.name}.sh"
        script.write_text("".join(
            f"PADDEDCELL_CHANNEL={shlex.quote(str(s))} pass_mgr get db; echo rc=$?\n"
            for s in sockets))
        out = pcexec(world, f"bash {script}")
        assert VICTIM_DB not in out.stdout + out.stderr
        assert "IS_VICTIM" not in out.stdout
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "victim"})


def test_typed_input_into_a_background_shell_keeps_its_agent(world):
    # The plugin starts a1's background shell; text typed into it claims victim.
    daemon = world["daemon"]
    sid = daemon.call("/exec", {"command": "bash", "agentId": "a1", "pty": True,
                                "agentWorkspace": str(world["ws"]), "background": True}
                      )["details"]["sessionId"]
    try:
        typed = (f"export AGENT_ID=victim AGENT_WORKSPACE={shlex.quote(str(world['wv']))}; "
                 f"{WHO}; echo DONE-''TYPED\n")
        daemon.call("/process", {"action": "write", "sessionId": sid, "agentId": "a1",
                                 "data": typed})
        text = ""
        for _ in range(300):
            text = daemon.call("/process", {"action": "log", "sessionId": sid,
                                            "agentId": "a1"})["content"][0]["text"]
            if "DONE-TYPED" in text:
                break
            time.sleep(0.05)
        assert "IS_A1" in text and "IS_VICTIM" not in text, text
        assert VICTIM_DB not in text
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})


def test_nested_pcexec_cannot_claim_another_agent(world):
    wv = shlex.quote(str(world["wv"]))
    out = pcexec(world, f"pcexec --agent-id victim --agent-workspace {wv} "
                        "'K=db; pass_mgr get $K | rev'; echo rc=$?")
    assert "rc=5" in out.stdout, out.stdout + out.stderr
    assert VICTIM_DB[::-1] not in out.stdout and VICTIM_DB not in out.stdout
    unset = pcexec(world, f"pcexec --agent-id victim --agent-workspace {wv} "
                          "'pass_mgr unset keep'; echo rc=$?")
    assert "rc=5" in unset.stdout, unset.stdout + unset.stderr
    assert human_get(world, "victim", world["wv"], "keep") == "VICTIM-keep-value-1234"


def test_nested_pcexec_acts_for_the_sessions_agent(world):
    # Without a claim, a nested pcexec runs (in the daemon) for the session's agent.
    out = pcexec(world, "pcexec 'pass_mgr get db'; echo rc=$?")
    assert "rc=0" in out.stdout, out.stdout + out.stderr
    assert A1_DB not in out.stdout and "######" in out.stdout


def test_request_agent_id_is_refused(world, tmp_path):
    request = world["ws"] / f"req-{tmp_path.name}.json"
    request.write_text(json.dumps({"command": "pass_mgr get db", "agentId": "victim",
                                   "agentWorkspace": str(world["wv"])}))
    out = pcexec(world, f"pcexec --request {request}; echo rc=$?")
    assert "rc=5" in out.stdout, out.stdout + out.stderr
    assert VICTIM_DB not in out.stdout


@pytest.mark.parametrize("action", ["list", "log", "write", "kill"])
def test_process_cannot_reach_another_agents_sessions(world, action, tmp_path):
    daemon = world["daemon"]
    sid = daemon.call("/exec", {"command": "cat", "agentId": "victim", "background": True,
                                "pty": True, "agentWorkspace": str(world["wv"])}
                      )["details"]["sessionId"]
    try:
        args = {"list": "list", "log": f"log {sid}", "write": f"write {sid} --data hello",
                "kill": f"kill {sid}"}[action]
        out = pcexec(world, f"paddedcell process {args} --agent-id victim; echo rc=$?")
        assert "rc=5" in out.stdout, out.stdout + out.stderr
        assert sid not in out.stdout
        state = daemon.call("/process", {"action": "poll", "sessionId": sid, "agentId": "victim"})
        assert state["details"]["status"] == "running"
        assert "hello" not in daemon.call("/process", {"action": "log", "sessionId": sid,
                                                       "agentId": "victim"})["content"][0]["text"]
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "victim"})


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_daemon_refuses_a_body_agent_id_from_inside_a_session(world, tmp_path, sandbox):
    # Straight to the main socket with a forged body (no CLI): the peer decides.
    # Unsandboxed the daemon maps the peer's pid to a1's session and refuses;
    # sandboxed the main socket is not even there.
    code = ("from paddedcell.daemon.client import DaemonClient, DaemonError\n"
            "c = DaemonClient()\n"
            "try:\n"
            "    c.call('POST', '/process', {'action': 'list', 'agentId': 'victim'})\n"
            "    print('ANSWERED')\n"
            "except DaemonError as e:\n"
            "    print('REFUSED', e.status)\n"
            "try:\n"  # an admin password guess through the leak check
            "    c.call('POST', '/vault/check-leak', {'text': 'guess-1', 'source': 'x'})\n"
            "    print('GUESSED')\n"
            "except DaemonError as e:\n"
            "    print('LEAK-CHECK-REFUSED', e.status)\n"
            "job = {'rollback': '/bin/true', 'log': %r, 'restartCmd': 'touch %s'}\n"
            "for path, body in (('/workflow/open', {'agentId': 'victim', 'workflow': 'w'}),\n"
            "                   ('/restart-cancel', {'requesterAgentId': 'victim',\n"
            "                                        'requesterSessionKey': 'k'}),\n"
            "                   ('/query-restart', {'requesterAgentId': 'a1',\n"
            "                                       'requesterSessionKey': 'k', 'job': job})):\n"
            "    try:\n"
            "        c.call('POST', path, body)\n"
            "        print('ROUTE-ANSWERED', path)\n"
            "    except DaemonError as e:\n"
            "        print('ROUTE-REFUSED', e.status)\n")
    marker = tmp_path / "operator-command-ran"
    code = code % (str(tmp_path / "restart.log"), marker)
    script = world["ws"] / f"forge-{tmp_path.name}.py"
    script.write_text(code)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    daemon = Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX=sandbox)
    try:
        sid = daemon.call("/exec", {"command": f"{BIN / 'python'} {script}", "agentId": "a1",
                                    "agentWorkspace": str(world["ws"]), "background": True}
                          )["details"]["sessionId"]
        text = ""
        for _ in range(200):
            text = daemon.call("/process", {"action": "log", "sessionId": sid,
                                            "agentId": "a1"})["content"][0]["text"]
            if text.count("ROUTE-") >= 3:
                break
            time.sleep(0.05)
        assert "ANSWERED" not in text and "GUESSED" not in text
        from paddedcell.supervisor.sandbox import available

        status = "None" if sandbox == "auto" and available()[0] else "403"
        assert f"REFUSED {status}" in text and f"LEAK-CHECK-REFUSED {status}" in text, text
        # (sandboxed, /restart-cancel goes through the channel, which refuses it: 403)
        assert "ROUTE-ANSWERED" not in text and text.count("ROUTE-REFUSED") == 3, text
        # a restart job's restartCmd/statusCmd are the operator's, never a session's
        routes = [line.strip() for line in text.splitlines() if line.startswith("ROUTE-")]
        assert routes[2] == "ROUTE-REFUSED 403", routes
        time.sleep(0.5)
        assert not marker.exists()
    finally:
        daemon.stop()


def test_values_obtained_during_a_run_are_masked(world):
    out = pcexec(world, 'pass_mgr rotate db && echo "Bearer $(pass_mgr get db)"; '
                        'pass_mgr generate fresh; K=fresh; pass_mgr get "$K"')
    assert out.returncode == 0, out.stdout + out.stderr
    rotated = human_get(world, "a1", world["ws"], "db")
    fresh = human_get(world, "a1", world["ws"], "fresh")
    assert rotated != A1_DB
    assert rotated not in out.stdout + out.stderr
    assert fresh not in out.stdout + out.stderr
    assert "Bearer ######" in out.stdout
    # Put the original back for the other tests.
    subprocess.run([str(BIN / "pass_mgr"), "set", "a1", str(world["ws"]), "db", A1_DB, ADMIN],
                   env=base_env(world["home"]), check=True, capture_output=True)


def test_a_rotation_is_masked_in_a_running_background_session(world):
    daemon = world["daemon"]
    set_secret(world["home"], "a1", world["ws"], "api", "API-first-value-12345", ADMIN)
    sid = daemon.call("/exec", {"command": "while :; do pass_mgr get api; sleep 0.1; done",
                                "agentId": "a1", "agentWorkspace": str(world["ws"]),
                                "background": True})["details"]["sessionId"]
    try:
        time.sleep(0.5)
        rotated = subprocess.run([str(BIN / "pass_mgr"), "rotate", "api"], env=a1_env(world),
                                 capture_output=True, text=True, timeout=30)
        assert rotated.returncode == 0, rotated.stderr
        new = human_get(world, "a1", world["ws"], "api")
        time.sleep(0.8)
        text = daemon.call("/process", {"action": "log", "sessionId": sid,
                                        "agentId": "a1"})["content"][0]["text"]
        assert "######" in text
        assert new not in text and "API-first-value-12345" not in text
    finally:
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})


def test_locked_vault_stops_typing_into_sessions_and_new_values(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    init_vault(home, ADMIN)
    set_secret(home, "a1", ws, "db", A1_DB, ADMIN)
    give_workspace(home, "a1", ws)
    daemon = Daemon(home)
    try:
        sid = daemon.call("/exec", {"command": "bash", "agentId": "a1", "pty": True,
                                    "agentWorkspace": str(ws), "background": True}
                          )["details"]["sessionId"]
        # It asks only once the vault is locked (a file the test makes after the lock, not a
        # sleep: on a loaded host the lock took longer than any sleep chosen here).
        late = daemon.call("/exec", {"command": "until [ -e locked-now ]; do sleep 0.05; done; "
                                                "pass_mgr get db; echo rc=$?",
                                     "agentId": "a1", "agentWorkspace": str(ws),
                                     "background": True})["details"]["sessionId"]
        # The leak: the admin password shows up somewhere, the vault locks.
        subprocess.run([str(BIN / "pass_mgr"), "admin", "check-leak"], input=f"x {ADMIN} y",
                       env=base_env(home), capture_output=True, text=True, timeout=30)
        from paddedcell.daemon.client import DaemonError

        for action, extra in (("write", {"data": "pass_mgr admin init\n"}),
                              ("send-keys", {"keys": ["Enter"]}), ("submit", {}),
                              ("paste", {"text": "echo hi"})):
            with pytest.raises(DaemonError) as refused:
                daemon.call("/process", {"action": action, "sessionId": sid, "agentId": "a1",
                                         **extra})
            assert refused.value.status == 423 and "locked" in refused.value.message
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})
        # A session started before the lock gets no value any more.
        (ws / "locked-now").touch()
        out = daemon.call("/process", {"action": "poll", "sessionId": late, "agentId": "a1",
                                       "timeout": 10000})
        text = out["content"][0]["text"]
        for _ in range(100):
            if "rc=" in text:
                break
            time.sleep(0.05)
            text = daemon.call("/process", {"action": "log", "sessionId": late,
                                            "agentId": "a1"})["content"][0]["text"]
        assert "rc=3" in text and A1_DB not in text, text
    finally:
        daemon.stop()


def test_the_daemon_started_from_a_session_outlives_it(tmp_path):
    # No daemon yet: a1's foreground pcexec runs `pcexec --background`, whose
    # supervisor starts one on demand. The foreground run ends; the daemon stays.
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    give_workspace(home, "a1", ws)
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws))
    out = subprocess.run([str(BIN / "pcexec"), "pcexec --background 'sleep 5'"], env=env,
                         capture_output=True, text=True, timeout=90, cwd=str(ws))
    assert out.returncode == 0, out.stdout + out.stderr
    pid_file = home / "run" / "paddedcell.pid"
    pid = int(pid_file.read_text().strip())
    try:
        time.sleep(1.5)  # a session scan would have ended it with the tree
        os.kill(pid, 0)
        env_raw = open(f"/proc/{pid}/environ", "rb").read()
        assert b"PADDEDCELL_TREE=" not in env_raw and b"PADDEDCELL_DAEMON=on-demand" in env_raw
    finally:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
