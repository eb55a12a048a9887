"""The restart coordinator through a real daemon (`paddedcell serve`) and `safe-restart`.

The restart, status and rollback commands are small shell scripts that append
to ``ran`` what they did, so each test checks what actually ran, in order.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddedcell import config
from paddedcell.daemon.client import DaemonClient, DaemonError
from supervisor_helpers import daemon_cwd

FAST = {
    "PADDEDCELL_RESTART_WATCHDOG_SECONDS": "0.1",
    "PADDEDCELL_RESTART_STATUS_INTERVAL_SECONDS": "0.1",
}
SAFE_RESTART = [sys.executable, "-m", "paddedcell.cli.safe_restart"]


class Daemon:
    """One `paddedcell serve` in a temporary PADDEDCELL_HOME; SIGKILL-able."""

    def __init__(self, home: Path, extra_env: dict[str, str] | None = None):
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
        self.env.update(PADDEDCELL_HOME=str(home), **FAST, **(extra_env or {}))
        for name in ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL"):
            self.env.pop(name, None)
        self.settings = config.load(self.env)
        self.proc: subprocess.Popen | None = None
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log = home / "daemon-test.log"

    def start(self) -> "Daemon":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "serve"],
                                         env=self.env, stdout=log, stderr=log,
                                         cwd=daemon_cwd(self.home), start_new_session=True)
        client = DaemonClient(self.settings, timeout=5)
        deadline = time.monotonic() + 15
        while not client.healthy():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "daemon did not start"
            time.sleep(0.05)
        client.close()
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=15)

    def client(self) -> DaemonClient:
        return DaemonClient(self.settings, timeout=30)

    def call(self, method: str, path: str, body=None):
        with self.client() as client:
            return client.call(method, path, body)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "home").start()
    yield d
    d.kill(signal.SIGTERM)


@pytest.fixture
def scripts(tmp_path):
    """Fake restart/status/rollback commands that record what ran into ``ran``."""
    ran = tmp_path / "ran"

    def script(name: str, body: str) -> str:
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return str(path)

    class S:
        pass

    s = S()
    s.ran = ran
    s.log = tmp_path / "restart.log"
    s.restart = script("restart.sh", f'echo "gateway restarting"; echo restart >> {ran}')
    s.slow_restart = script("slow_restart.sh", f"echo restart-start >> {ran}; sleep 1.5; "
                                               f"echo restart-end >> {ran}")
    s.status_ok = script("status_ok.sh", f'echo "Runtime: running"; echo status >> {ran}')
    s.status_bad = script("status_bad.sh", f'echo "Runtime: stopped (probe failed)"; '
                                           f"echo status-failed >> {ran}; exit 1")
    s.rollback = script("rollback.sh", f'echo "restoring config"; echo rollback >> {ran}')
    s.lines = lambda: ran.read_text().split() if ran.exists() else []
    return s


def safe_restart_args(s, *, delay=0.2, status=None, restart=None, agent="req", session="req:s",
                      extra=()):
    return [*SAFE_RESTART, "--rollback", s.rollback, "--log", str(s.log),
            "--agent-id", agent, "--session-key", session, "--interval", "0.1",
            "--delay", str(delay), "--recover-timeout", "0.5",
            "--restart-cmd", restart or s.restart, "--status-cmd", status or s.status_ok,
            "--no-interactive", *extra]


def wait_for(predicate, timeout=20.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(interval)


def last_job(daemon):
    return daemon.call("GET", "/agents")["global"].get("lastJob") or {}


def states(daemon):
    return {a["agentId"]: a["state"] for a in daemon.call("GET", "/agents")["agents"]}


def start(daemon, agent, session, **kw):
    return daemon.call("POST", "/lifecycle/message-start", {"agentId": agent, "sessionKey": session, **kw})


def end(daemon, agent, session, **kw):
    return daemon.call("POST", "/lifecycle/message-end", {"agentId": agent, "sessionKey": session, **kw})


# -- the OK path and the failure path -------------------------------------------------


def test_ok_path_waits_for_busy_agent_then_restarts_and_notifies(daemon, scripts):
    start(daemon, "worker", "worker:chat")
    start(daemon, "idler", "idler:x")
    end(daemon, "idler", "idler:x")
    proc = subprocess.Popen(safe_restart_args(scripts), env=daemon.env, stdout=subprocess.PIPE,
                            text=True)
    first = proc.stdout.readline()
    assert first.startswith("NOT_READY") and "worker" in first
    assert states(daemon) == {"worker": "pre-freeze", "idler": "freeze"}
    assert start(daemon, "worker", "worker:other") == {
        "action": "reject", "reply": daemon.settings["messages.frozen_reply"]}
    end(daemon, "worker", "worker:chat")
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "OK:" in out
    job = wait_for(lambda: last_job(daemon).get("outcome") and last_job(daemon))
    assert job["outcome"] == "ok"
    assert scripts.lines() == ["restart", "status"]
    assert set(states(daemon).values()) == {"idle"}
    notes = daemon.call("GET", "/notifications")["notifications"]
    assert {(n["agentId"], n["sessionKey"], n["text"]) for n in notes} == {
        ("worker", "worker:chat", "restart 结束了，我们继续"),
        ("req", "req:s", "restart 结束了，我们继续")}
    log = scripts.log.read_text()
    for needle in ("restart requested by agent req", "running restart command",
                   "restart| gateway restarting", "status check 1 succeeded", "restart finished"):
        assert needle in log
    # The delay line says what is LEFT of the 0.2 s delay when the job reaches it: less on
    # a loaded machine (a clean-clone CI run logged "waiting 0.1 s").
    waited = re.search(r"waiting (\d+\.\d) s before the restart command", log)
    assert waited and 0.0 <= float(waited.group(1)) <= 0.2
    assert all(line[:4].isdigit() and line[10] == "T" for line in log.splitlines())


def test_failing_status_rolls_back_and_tells_the_requester(daemon, scripts):
    start(daemon, "worker", "worker:chat")
    end(daemon, "worker", "worker:chat")
    out = subprocess.run(safe_restart_args(scripts, status=scripts.status_bad), env=daemon.env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("OK")
    job = wait_for(lambda: last_job(daemon).get("outcome") and last_job(daemon))
    assert job["outcome"] == "failed" and "rollback exited with code 0" in job["detail"]
    lines = scripts.lines()
    assert lines[0] == "restart" and lines[-1] == "rollback"
    assert set(lines[1:-1]) == {"status-failed"} and len(lines) >= 3
    notes = daemon.call("GET", "/notifications")["notifications"]
    assert [(n["agentId"], n["sessionKey"], n["text"]) for n in notes] == [
        ("req", "req:s", "restart 失败，已经 rollback，请参考 log 调查。")]
    log = scripts.log.read_text()
    assert "did not recover within 0.5 s; last status output:" in log
    assert "status| Runtime: stopped (probe failed)" in log
    assert "rollback| restoring config" in log
    assert set(states(daemon).values()) == {"idle"}


def test_twenty_concurrent_callers_one_ok(daemon, scripts):
    procs = [subprocess.Popen(safe_restart_args(scripts, delay=60, agent=f"agent{i}",
                                                session=f"agent{i}:main"),
                              env=daemon.env, stdout=subprocess.PIPE, text=True)
             for i in range(20)]
    outs = [(p.communicate(timeout=60)[0], p.returncode) for p in procs]
    assert all(code == 0 for _, code in outs)
    firsts = [out.split(":")[0] for out, _ in outs]
    assert firsts.count("OK") == 1 and firsts.count("ALREADY_SCHEDULED") == 19
    owner = firsts.index("OK")
    g = daemon.call("GET", "/agents")["global"]
    assert g["restartStatus"] == "restarting" and g["restartScheduledBy"] == f"agent{owner}"
    assert g["job"]["phase"] == "delay"
    # The owner cancels before the delay ends: nothing ran, everyone is free.
    answer = daemon.call("POST", "/restart-cancel", {"requesterAgentId": f"agent{owner}",
                                                     "requesterSessionKey": f"agent{owner}:main"})
    assert answer["cancelled"] is True
    assert last_job(daemon)["outcome"] == "cancelled"
    assert scripts.lines() == []


@pytest.mark.parametrize("kill_in", ["delay", "restart"])
def test_daemon_sigkilled_mid_job_resumes_and_unfreezes(tmp_path, scripts, kill_in):
    daemon = Daemon(tmp_path / "home").start()
    try:
        start(daemon, "worker", "worker:chat")
        end(daemon, "worker", "worker:chat")
        delay = 3.0 if kill_in == "delay" else 0.1
        out = subprocess.run(safe_restart_args(scripts, delay=delay, restart=scripts.slow_restart),
                             env=daemon.env, capture_output=True, text=True, timeout=30)
        assert out.stdout.startswith("OK")
        if kill_in == "restart":
            wait_for(lambda: "restart-start" in scripts.lines())
        daemon.kill(signal.SIGKILL)
        assert states_from_disk(daemon) == {"worker": "freeze"}
        daemon.start()
        job = wait_for(lambda: last_job(daemon).get("outcome") and last_job(daemon))
        assert job["outcome"] == "ok"
        assert states(daemon) == {"worker": "idle"}
        log = scripts.log.read_text()
        assert f"daemon restarted; resuming in phase {kill_in}" in log
        lines = scripts.lines()
        # Never restarted twice; the status check came after the restart ended.
        assert lines == ["restart-start", "restart-end", "status"]
    finally:
        daemon.kill(signal.SIGTERM)


def states_from_disk(daemon):
    from paddedcell.restart.store import Store

    return {a: r["state"] for a, r in Store(daemon.home).load_agents().items()}


# -- lifecycle details ------------------------------------------------------------------


def test_heartbeat_runs_are_ignored(daemon):
    assert start(daemon, "a", "agent:a:main", heartbeat=True) == {"action": "proceed"}
    assert states(daemon) == {"a": "idle"}
    answer = daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
    assert answer["result"] == "OK"
    # Frozen now: even a heartbeat is turned away until the restart is over.
    assert start(daemon, "a", "agent:a:main", heartbeat=True)["action"] == "reject"
    assert end(daemon, "a", "agent:a:main", heartbeat=True) == {"state": "freeze"}
    assert daemon.call("POST", "/restart-result", {"status": "ok", "log": "/x"}) == {"ok": True}
    assert states(daemon) == {"a": "idle"}


def test_focus_answers_busy_outside_its_workflow(daemon):
    assert daemon.call("POST", "/workflow/open", {"agentId": "a", "workflow": "deploy"}) == {"state": "focus"}
    assert start(daemon, "a", "user:1") == {"action": "reject", "reply": "在忙，无法应答"}
    assert start(daemon, "a", "user:2", workflow="deploy") == {"action": "proceed"}
    assert daemon.call("POST", "/workflow/close", {"agentId": "a", "workflow": "deploy"}) == {"state": "busy"}
    assert end(daemon, "a", "user:2") == {"state": "idle"}


def test_pre_freeze_focus_completion_queues_prepare_messages(daemon):
    daemon.call("POST", "/workflow/open", {"agentId": "a", "workflow": "wf"})
    start(daemon, "a", "user:1", workflow="wf")
    start(daemon, "a", "user:2", workflow="wf")
    answer = daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
    assert answer["result"] == "NOT_READY" and states(daemon) == {"a": "pre-freeze-focus"}
    end(daemon, "a", "user:1")
    assert end(daemon, "a", "user:2") == {"state": "freeze"}
    notes = daemon.call("GET", "/notifications")["notifications"]
    assert [(n["sessionKey"], n["kind"], n["text"]) for n in notes] == [
        ("user:2", "prepare_agent", "整理工作进度准备重启后继续"),
        ("user:1", "prepare_session", "准备重启，重启后继续")]
    query = {"requesterAgentId": "r", "requesterSessionKey": "r:s"}
    # Every agent is frozen, but the tidy-up notice has not reached its agent yet.
    assert daemon.call("POST", "/query-restart", query)["result"] == "NOT_READY"
    # The plugin delivers it as a run: admitted although frozen, and waited for.
    assert start(daemon, "a", "user:2", notificationId=notes[0]["id"]) == {"action": "proceed"}
    # A made-up or mismatched id is an ordinary message: rejected.
    assert start(daemon, "a", "user:1", notificationId=notes[0]["id"])["action"] == "reject"
    daemon.call("POST", "/notifications/ack", {"ids": [n["id"] for n in notes]})
    assert daemon.call("POST", "/query-restart", query)["result"] == "NOT_READY"
    assert states(daemon) == {"a": "pre-freeze"}
    assert end(daemon, "a", "user:2") == {"state": "freeze"}
    assert daemon.call("POST", "/query-restart", query)["result"] == "OK"


def test_errors_are_one_line_with_the_fix(daemon, tmp_path):
    daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
    start(daemon, "a", "s")
    with pytest.raises(DaemonError) as info:
        daemon.call("POST", "/workflow/open", {"agentId": "a", "workflow": "wf"})
    assert info.value.status == 409 and "'a' is freeze; workflow-open" in info.value.message
    with pytest.raises(DaemonError) as info:
        daemon.call("POST", "/query-restart", {"requesterAgentId": "x", "requesterSessionKey": "y",
                                               "job": {"rollback": "/nope", "log": str(tmp_path / "l"),
                                                       "speed": 1}})
    assert info.value.status == 400 and "unknown job field" in info.value.message
    with pytest.raises(DaemonError) as info:
        daemon.call("POST", "/restart-cancel", {"requesterAgentId": "x", "requesterSessionKey": "y"})
    assert info.value.status == 409 and "belongs to agent r" in info.value.message
    with pytest.raises(DaemonError) as info:
        daemon.call("POST", "/notifications/ack", {"ids": ["1"]})
    assert info.value.status == 400


def test_notifications_delivered_once_across_consumer_and_daemon_restart(tmp_path):
    daemon = Daemon(tmp_path / "home").start()
    try:
        for i in range(3):
            start(daemon, f"a{i}", f"a{i}:chat")
        daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
        for i in range(3):
            end(daemon, f"a{i}", f"a{i}:chat")
        assert daemon.call("POST", "/query-restart", {"requesterAgentId": "r",
                                                      "requesterSessionKey": "r:s"})["result"] == "OK"
        daemon.call("POST", "/restart-result", {"status": "ok", "log": "/x"})

        delivered: list[tuple[str, str]] = []
        # Consumer 1 (the plugin in the old gateway) delivers two, acks one, and dies.
        with daemon.client() as consumer:
            notes = consumer.call("GET", "/notifications?wait=5")["notifications"]
            assert len(notes) == 4  # three sessions plus the requester's
            delivered += [(n["agentId"], n["sessionKey"]) for n in notes[:1]]
            consumer.call("POST", "/notifications/ack", {"ids": [notes[0]["id"]]})
        daemon.kill(signal.SIGKILL)  # and the daemon with it, for good measure
        daemon.start()
        # Consumer 2 (the plugin in the new gateway) gets only what was not acked.
        with daemon.client() as consumer:
            notes = consumer.call("GET", "/notifications?wait=5")["notifications"]
            delivered += [(n["agentId"], n["sessionKey"]) for n in notes]
            assert consumer.call("POST", "/notifications/ack",
                                 {"ids": [n["id"] for n in notes]})["acked"] == 3
            assert consumer.call("GET", "/notifications?wait=0.2")["notifications"] == []
        assert sorted(delivered) == sorted([("a0", "a0:chat"), ("a1", "a1:chat"),
                                            ("a2", "a2:chat"), ("r", "r:s")])
    finally:
        daemon.kill(signal.SIGTERM)


def test_long_poll_wakes_on_a_new_notification(daemon):
    import threading

    got = {}

    def poll():
        with daemon.client() as consumer:
            got["answer"] = consumer.call("GET", "/notifications?wait=20&agentId=a")

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)
    daemon.call("POST", "/workflow/open", {"agentId": "a", "workflow": "wf"})
    start(daemon, "a", "u", workflow="wf")
    daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
    end(daemon, "a", "u")
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert [n["kind"] for n in got["answer"]["notifications"]] == ["prepare_agent"]


# -- safety nets ----------------------------------------------------------------------------


def test_abandoned_requester_unfreezes_everyone(tmp_path):
    # Long enough that a loaded CI host (the unprivileged pass) cannot let the
    # window pass between the query and the first look at the states.
    daemon = Daemon(tmp_path / "home", {"PADDEDCELL_RESTART_ABANDON_SECONDS": "6"}).start()
    try:
        start(daemon, "busy", "b")
        start(daemon, "idle", "i")
        end(daemon, "idle", "i")
        answer = daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
        assert answer["result"] == "NOT_READY"
        assert states(daemon) == {"busy": "pre-freeze", "idle": "freeze"}
        wait_for(lambda: states(daemon) == {"busy": "busy", "idle": "idle"})
        assert daemon.call("GET", "/agents")["global"]["restartStatus"] == "idle"
        assert "abandoned" in daemon.log.read_text()
    finally:
        daemon.kill(signal.SIGTERM)


def test_stale_freeze_is_released_with_a_log_line(tmp_path):
    daemon = Daemon(tmp_path / "home", {"PADDEDCELL_RESTART_MAX_FREEZE_SECONDS": "6"}).start()
    try:
        start(daemon, "a", "s")
        end(daemon, "a", "s")
        # An external restart (no job) that never reports its result.
        answer = daemon.call("POST", "/query-restart", {"requesterAgentId": "r", "requesterSessionKey": "r:s"})
        assert answer["result"] == "OK" and states(daemon) == {"a": "freeze"}
        daemon.kill(signal.SIGKILL)
        daemon.start()
        wait_for(lambda: states(daemon) == {"a": "idle"})
        assert daemon.call("GET", "/agents")["global"]["restartStatus"] == "idle"
        assert "restart.max_freeze_seconds" in daemon.log.read_text()
    finally:
        daemon.kill(signal.SIGTERM)


def test_state_survives_a_daemon_restart(tmp_path):
    daemon = Daemon(tmp_path / "home").start()
    try:
        start(daemon, "a", "s1")
        daemon.call("POST", "/workflow/open", {"agentId": "b", "workflow": "wf"})
        daemon.kill(signal.SIGKILL)
        daemon.start()
        agents = {a["agentId"]: a for a in daemon.call("GET", "/agents")["agents"]}
        assert agents["a"]["state"] == "busy" and agents["a"]["activeSessions"] == ["s1"]
        assert agents["b"]["state"] == "focus" and agents["b"]["workflow"] == "wf"
    finally:
        daemon.kill(signal.SIGTERM)


def test_restart_result_is_refused_while_the_daemon_runs_the_job(daemon, scripts):
    out = subprocess.run(safe_restart_args(scripts, delay=30), env=daemon.env,
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.startswith("OK")
    with pytest.raises(DaemonError) as info:
        daemon.call("POST", "/restart-result", {"status": "ok", "log": "/x"})
    assert info.value.status == 409
    daemon.call("POST", "/restart-cancel", {"requesterAgentId": "req", "requesterSessionKey": "req:s"})
    assert "restart cancelled" in scripts.log.read_text()


def test_simultaneous_raw_queries_schedule_exactly_one(daemon, scripts):
    import threading

    barrier = threading.Barrier(20)
    answers = [None] * 20

    def ask(i):
        with daemon.client() as c:
            c.call("GET", "/healthz")  # connect first, so the queries race
            barrier.wait()
            answers[i] = c.call("POST", "/query-restart", {
                "requesterAgentId": f"r{i}", "requesterSessionKey": f"r{i}:s",
                "job": {"rollback": scripts.rollback, "log": str(scripts.log), "delaySeconds": 60}})

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    results = [a["result"] for a in answers]
    assert results.count("OK") == 1 and results.count("ALREADY_SCHEDULED") == 19
    owner = results.index("OK")
    assert daemon.call("POST", "/restart-cancel", {"requesterAgentId": f"r{owner}",
                                                   "requesterSessionKey": f"r{owner}:s"})["cancelled"]


def _zombie_children(pid: int) -> list[int]:
    zombies = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            stat = Path(f"/proc/{child}/stat").read_bytes().rsplit(b")", 1)[1].split()
            if stat[0] == b"Z":
                zombies.append(int(child))
    return zombies


def test_a_restart_commands_daemonised_child_is_reaped_not_left_a_zombie(tmp_path, scripts):
    """The daemon is a subreaper: what a restart command leaves behind comes back to it."""
    d = Daemon(tmp_path / "home", {"PADDEDCELL_SUPERVISOR_ORPHAN_SWEEP_SECONDS": "0.2"}).start()
    try:
        daemonising = tmp_path / "daemonising_restart.sh"
        daemonising.write_text(f"#!/bin/sh\n(setsid sleep 0.5 &)\necho restart >> {scripts.ran}\n")
        daemonising.chmod(0o755)
        done = subprocess.run(safe_restart_args(scripts, restart=str(daemonising)), env=d.env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert wait_for(lambda: last_job(d).get("outcome")) == "ok"
        assert scripts.lines() == ["restart", "status"]
        time.sleep(1.0)  # the orphan exits after 0.5 s; two sweeps of 0.2 s follow
        wait_for(lambda: _zombie_children(d.proc.pid) == [], timeout=5)
    finally:
        d.kill(signal.SIGTERM)
