"""The restart job under Trio, and the coordinator's store and crash repair, without a daemon."""

import json
import os
import time
from pathlib import Path

import pytest
import trio

from paddedcell import config
from paddedcell.restart import store as store_mod
from paddedcell.restart.coordinator import Coordinator, job_spec_from_body
from paddedcell.restart.job import (JobLog, JobSpec, JobState, _process_alive, run_command,
                                    run_job)
from paddedcell.restart.store import Store, write_atomic


def spec(tmp_path, **kw) -> JobSpec:
    values = dict(rollback=str(tmp_path / "rollback.sh"), log=str(tmp_path / "job.log"),
                  delay_seconds=0.0, recover_timeout_seconds=1.0, restart_cmd="true",
                  status_cmd="true", status_interval_seconds=0.05,
                  command_timeout_seconds=5.0, rollback_timeout_seconds=5.0)
    values.update(kw)
    return JobSpec(**values)


async def test_status_retried_until_it_succeeds_within_the_window(tmp_path):
    counter = tmp_path / "n"
    status = f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]'
    s = spec(tmp_path, status_cmd=status, recover_timeout_seconds=5.0)
    persisted = []
    final = await run_job(s, JobState("j", "delay"), persist=persisted.append,
                          log=JobLog(s.log, "j"), on_rollback=lambda: pytest.fail("no rollback"))
    assert final.outcome == "ok" and counter.read_text().strip() == "3"
    assert [p.phase for p in persisted] == ["restart", "restart", "status", "report"]
    assert persisted[1].restart_pid is not None  # recorded the moment it was spawned
    assert "status check 3 succeeded" in Path(s.log).read_text()


async def test_hung_restart_command_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    s = spec(tmp_path, restart_cmd=f"sleep 30 & echo $! > {pidfile}; wait",
             command_timeout_seconds=0.5)
    final = await run_job(s, JobState("j", "restart"), persist=lambda _: None,
                          log=JobLog(s.log, "j"), on_rollback=lambda: None)
    assert final.outcome == "ok"
    grandchild = int(pidfile.read_text())
    with trio.move_on_after(5):
        while _process_alive(grandchild):  # dead, or a zombie waiting for init
            await trio.sleep(0.05)
    assert not _process_alive(grandchild)
    assert "restart command timed out after 0.5 s" in Path(s.log).read_text()


async def test_non_executable_rollback_runs_under_sh_and_output_is_logged(tmp_path):
    (tmp_path / "rollback.sh").write_text("echo rolled back from $PADDEDCELL_RESTART_JOB\n")
    s = spec(tmp_path, status_cmd="echo probe failed; exit 3", recover_timeout_seconds=0.2)
    rollbacks = []
    final = await run_job(s, JobState("j", "restart"), persist=lambda _: None,
                          log=JobLog(s.log, "j"), on_rollback=lambda: rollbacks.append(1),
                          env={**os.environ, "PADDEDCELL_RESTART_JOB": "j"})
    assert final.outcome == "failed" and rollbacks == [1]
    text = Path(s.log).read_text()
    assert "status| probe failed" in text and "rollback| rolled back from j" in text
    assert final.detail == "rollback exited with code 0"


async def test_command_output_without_trailing_newline_is_kept(tmp_path):
    log = JobLog(str(tmp_path / "l"), "j")
    result = await run_command("printf 'a\\nb'", timeout=5, log=log, label="x")
    assert result.returncode == 0 and result.output == "a\nb"


def test_job_fields_are_checked(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    rollback = tmp_path / "rb.sh"
    rollback.write_text("true\n")
    good = {"rollback": str(rollback), "log": str(tmp_path / "x.log")}
    assert job_spec_from_body(good, settings).delay_seconds == 60.0
    for bad, message in [({**good, "rollback": "rb.sh"}, "absolute path"),
                         ({**good, "rollback": str(tmp_path / "none")}, "does not exist"),
                         ({**good, "log": str(tmp_path / "no" / "x.log")}, "does not exist"),
                         ({**good, "delaySeconds": -1}, ">= 0"),
                         ({**good, "delaySeconds": True}, ">= 0"),
                         ({**good, "statusCmd": " "}, "non-empty"),
                         ({**good, "shell": "x"}, "unknown job field")]:
        with pytest.raises(ValueError, match=message):
            job_spec_from_body(bad, settings)


# -- store and crash repair ---------------------------------------------------------------


def test_write_atomic_leaves_no_temp_file_and_is_private(tmp_path):
    path = tmp_path / "f.json"
    write_atomic(path, b"old")
    write_atomic(path, b"new", durable=False)
    assert path.read_bytes() == b"new"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_journal_skips_a_torn_line_and_compacts_without_losing_changes(tmp_path):
    store = Store(tmp_path)
    store.save_agents([{"agentId": "a", "state": "busy"}, {"agentId": "b", "state": "idle"}])
    store.save_agents([{"agentId": "a", "state": "idle"}])
    store.close()
    with open(tmp_path / "restart" / "agents.jsonl", "ab") as journal:
        journal.write(b'{"seq": 4, "agent": {"agentId": "a", "sta')  # killed mid-write
    again = Store(tmp_path)
    assert again.load_agents() == {"a": {"agentId": "a", "state": "idle"},
                                   "b": {"agentId": "b", "state": "idle"}}
    # Compaction: snapshot first, then an empty journal. A crash between the two
    # leaves old lines whose sequence numbers the snapshot already covers.
    old_journal = (tmp_path / "restart" / "agents.jsonl").read_bytes()
    again.save_agents([{"agentId": "b", "state": "busy"}])
    again.compact([{"agentId": "a", "state": "idle"}, {"agentId": "b", "state": "busy"}])
    assert (tmp_path / "restart" / "agents.jsonl").read_bytes() == b""
    (tmp_path / "restart" / "agents.jsonl").write_bytes(old_journal)
    assert Store(tmp_path).load_agents()["b"] == {"agentId": "b", "state": "busy"}


def test_journal_compacts_when_it_outgrows_the_agents(tmp_path):
    store = Store(tmp_path)
    latest = {}
    due_at = None
    for i in range(1100):
        latest[f"a{i % 3}"] = {"agentId": f"a{i % 3}", "n": i}
        if store.save_agents([latest[f"a{i % 3}"]], agent_count=3) and due_at is None:
            due_at = i
            store.compact(list(latest.values()))
    assert due_at == 1000  # over 1,000 lines (and twice the 3 agents)
    assert store.journal_lines < 1000 and (tmp_path / "restart" / "agents.json").exists()
    assert Store(tmp_path).load_agents() == latest


def test_appends_during_a_compaction_become_the_new_journal(tmp_path):
    # The coordinator writes the snapshot in a worker thread while requests
    # append: nothing appended meanwhile is lost, old lines are dropped.
    store = Store(tmp_path)
    store.save_agents([{"agentId": "a", "n": 1}, {"agentId": "b", "n": 1}])
    seq = store.begin_compaction()
    store.save_agents([{"agentId": "a", "n": 2}])  # after the snapshot's seq
    store.write_snapshot(seq, [{"agentId": "a", "n": 1}, {"agentId": "b", "n": 1}])
    store.save_agents([{"agentId": "c", "n": 1}])
    store.end_compaction()
    assert store.journal_lines == 2
    assert Store(tmp_path).load_agents() == {"a": {"agentId": "a", "n": 2},
                                             "b": {"agentId": "b", "n": 1},
                                             "c": {"agentId": "c", "n": 1}}
    store.save_agents([{"agentId": "b", "n": 3}])  # the new journal takes appends
    assert Store(tmp_path).load_agents()["b"] == {"agentId": "b", "n": 3}


async def test_frozen_agents_with_no_restart_pending_are_released_on_load(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    store = Store(tmp_path)
    store.save_global({"global": {"restartStatus": "idle"}, "bootId": store_mod.boot_id(),
                       "lastJob": {"jobId": "j", "outcome": "ok", "finishedAt": 100.0}})
    store.save_agents([{"agentId": "old", "state": "freeze", "frozenAt": 50.0,
                        "activeSessions": ["dead-turn"]},
                       {"agentId": "new", "state": "pre-freeze", "frozenAt": 150.0,
                        "activeSessions": ["live-turn"]}])
    store.close()
    c = Coordinator(settings)
    c.load()
    agents = {a["agentId"]: a for a in c.view()["agents"]}
    # Frozen before the last restart finished: that restart ended its turns.
    assert agents["old"]["state"] == "idle" and agents["old"]["activeSessions"] == []
    # Frozen after it (a cancelled restart): back to its work.
    assert agents["new"]["state"] == "busy" and agents["new"]["activeSessions"] == ["live-turn"]
    reloaded = Coordinator(settings)
    reloaded.load()
    assert reloaded.view()["agents"] == c.view()["agents"]  # the repair was persisted


async def test_a_reboot_resets_agents_that_are_not_frozen(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    store = Store(tmp_path)
    store.save_global({"global": {"restartStatus": "idle"}, "bootId": "some-earlier-boot"})
    store.save_agents([{"agentId": "a", "state": "busy", "activeSessions": ["s"],
                        "lastSessions": ["s"]},
                       {"agentId": "f", "state": "focus", "workflow": "wf"}])
    store.close()
    c = Coordinator(settings)
    c.load()
    if store_mod.boot_id() is None:
        pytest.skip("no boot id on this kernel")
    assert {a["agentId"]: (a["state"], a["activeSessions"], a["workflow"]) for a in c.view()["agents"]} \
        == {"a": ("idle", [], None), "f": ("idle", [], None)}
    assert json.loads((tmp_path / "restart" / "global.json").read_text())["bootId"] == store_mod.boot_id()


async def test_the_restart_job_runs_outside_agent_context(tmp_path, monkeypatch):
    # A daemon started from an OpenClaw shell must not hand OPENCLAW_SHELL (or
    # any other agent-context variable, docs/design.md §4.3) to the restart commands:
    # a rollback that runs `pass_mgr admin ...` would be refused.
    for name in ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL"):
        monkeypatch.setenv(name, "1")
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    seen = tmp_path / "seen"
    (tmp_path / "rollback.sh").write_text("true\n")
    c = Coordinator(settings)
    c.load()
    job = spec(tmp_path, restart_cmd=f"env > {seen}")
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        assert c.query_restart("req", "req:s", job)["result"] == "OK"
        with trio.fail_after(20):
            while c.job is not None:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    names = {line.split("=", 1)[0] for line in seen.read_text().splitlines()}
    assert "PADDEDCELL_RESTART_JOB" in names
    assert not names & {"AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT",
                        "OPENCLAW_SHELL"}


async def test_a_command_whose_child_keeps_its_output_open_ends_when_it_exits(tmp_path):
    # `gateway restart` may leave a daemonised gateway holding our pipe: the
    # step ends when the command exits (plus a short drain), not at its timeout.
    log = JobLog(str(tmp_path / "job.log"), "j")
    started = trio.current_time()
    result = await run_command("sleep 12 & echo started", timeout=10.0, log=log, label="restart")
    assert result.returncode == 0 and result.output == "started"  # was None: "timed out"
    assert trio.current_time() - started < 8


@pytest.mark.parametrize("fail", ["global", "agents"])
def test_a_request_whose_write_fails_changes_nothing_in_memory(tmp_path, monkeypatch, fail):
    # State changes only after success: a failed write (disk full, ...) leaves
    # the coordinator as it was, so the next request sees no half-done step.
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    c = Coordinator(settings)
    c.load()
    c.message_start("a", "a:s")
    c.message_end("a", "a:s")
    c.message_start("b", "b:s")
    before = (dict(c.fleet.agents), c.fleet.glob, c.job, list(c.pending), c.next_id)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(c.store, "save_global" if fail == "global" else "save_agents", broken)
    with pytest.raises(OSError):
        c.query_restart("a", "a:s")  # would freeze a, wait for b, queue notices
    if fail == "agents":  # a lifecycle step writes only its agent
        with pytest.raises(OSError):
            c.message_start("new", "new:s")
    assert (dict(c.fleet.agents), c.fleet.glob, c.job, list(c.pending), c.next_id) == before
    assert c.fleet.take_dirty() == ([], False)
    monkeypatch.undo()
    assert c.query_restart("a", "a:s")["result"] == "NOT_READY"
    assert Coordinator(settings).view()["agents"] == []  # a fresh one has not loaded yet
    reloaded = Coordinator(settings)
    reloaded.load()
    assert {a["agentId"]: a["state"] for a in reloaded.view()["agents"]} == \
        {a["agentId"]: a["state"] for a in c.view()["agents"]}


async def test_a_failing_watchdog_is_logged_and_started_again(tmp_path, monkeypatch, caplog):
    # A bad record must not end the daemon through a background task.
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path),
                            "PADDEDCELL_RESTART_WATCHDOG_SECONDS": "0.01"})
    c = Coordinator(settings)
    c.load()
    calls = []

    def watchdog():
        calls.append(trio.current_time())
        if len(calls) <= 2:
            raise KeyError("a record the watchdog cannot read")

    monkeypatch.setattr(c, "watchdog", watchdog)
    monkeypatch.setattr(trio, "sleep", _fast(trio.sleep))  # the 1 s back-off, shortened
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        with trio.fail_after(10):
            while len(calls) < 4:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert sum("watchdog task failed" in r.getMessage() for r in caplog.records) == 2


def _fast(sleep):
    async def shortened(seconds):
        await sleep(min(seconds, 0.01))
    return shortened


async def test_the_journal_is_compacted_in_the_background(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    c = Coordinator(settings)
    c.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        for i in range(1100):
            agent = f"a{i % 5}"
            c.message_start(agent, f"{agent}:s")
            c.message_end(agent, f"{agent}:s")
            if i % 100 == 0:
                await trio.sleep(0)  # the compactor gets its turn, as between requests
        with trio.fail_after(10):
            while c.store.journal_lines > 1000 or c.store.compacting:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert (tmp_path / "restart" / "agents.json").exists()
    reloaded = Coordinator(settings)
    reloaded.load()
    assert reloaded.view()["agents"] == c.view()["agents"]
