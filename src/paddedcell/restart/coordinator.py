"""The daemon side of the restart coordinator: state machine + store + job + queue.

Every public method runs one step of :class:`~paddedcell.restart.machine.Fleet`
and persists what changed before it returns, so an answer the daemon gave is
never forgotten by a restarted daemon. Methods that are not ``async`` never
yield to Trio, so two requests can not interleave inside one step.

Notifications (messages to deliver into sessions) sit in a queue in
``global.json`` until a consumer acknowledges them: ``GET /notifications``
returns every unacknowledged one (long-polling while there is none), and
``POST /notifications/ack`` removes them. A consumer that dies between the two
gets the same notifications again, so nothing is lost; one that acks what it
delivered never sees it twice.

A run that delivers a notification says so (``notificationId`` in
message-start): it is admitted even into a frozen agent, which goes back to
pre-freeze until the run ends, and while a "tidy up before the restart" notice
(``prepare_agent``) is undelivered, for up to ``restart.prepare_wait_seconds``,
query-restart answers NOT_READY. So the agent does get to save its progress.

Safety nets, checked every ``restart.watchdog_seconds``:
- a requester that stopped polling for ``restart.abandon_seconds`` while
  waiting abandons its restart, and every agent is unfrozen;
- a freeze older than ``restart.max_freeze_seconds`` is released, with a log
  line, and a restart with no live job that old is dropped.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import secrets
import time
from dataclasses import replace
from typing import Any, Callable

import trio

from .. import AGENT_CONTEXT_VARIABLES, config
from . import confine
from .job import JobSpec, JobState, LogWriter, OperatorLog, drain_logs, run_job, timestamp
from .machine import (FREEZE_FAMILY, AgentRecord, Answer, Fleet, GlobalRecord,
                      IllegalTransition, Notice, RestartStatus, RestartStatusError, State, Verdict)
from .store import Store, boot_id

log = logging.getLogger("paddedcell.restart")


class JobSpecError(ValueError):
    """The ``job`` object of a query-restart is unusable; ``str()`` is one line."""


class CoordinatorError(Exception):
    """A request the coordinator refuses; ``status`` is the HTTP status to use."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _transaction(method: Callable[..., Any]) -> Callable[..., Any]:
    """All of ``method`` or nothing: if it raises, memory is as before the call
    (the fleet by its undo log, the job and queue by saving them: O(1) in the
    number of agents), and nothing was written, because every write comes last."""

    @functools.wraps(method)
    def run(self: "Coordinator", *args: Any, **kwargs: Any) -> Any:
        if self._in_transaction:
            return method(self, *args, **kwargs)
        saved = (self.job if self.job is None else dict(self.job), self.last_job,
                 list(self.pending), self.next_id)
        self._in_transaction = True
        self.fleet.begin()
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            self.fleet.rollback()
            self.job, self.last_job, self.pending, self.next_id = saved
            for notification_id in [i for i in self.issued if i >= saved[3]]:
                del self.issued[notification_id]
            raise
        else:
            self.fleet.commit()
        finally:
            self._in_transaction = False
        return result

    return run


class Coordinator:
    def __init__(self, settings: config.Settings, *, clock: Callable[[], float] = time.time):
        self.settings = settings
        self.clock = clock
        self.store = Store(settings.home, fsync_agents=bool(settings["restart.fsync_agents"]))
        self.fleet = Fleet()
        self.job: dict[str, Any] | None = None  # {"spec": ..., "state": ...} or {"external": True}
        self.last_job: dict[str, Any] | None = None
        self.pending: list[dict[str, Any]] = []
        self.next_id = 1
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._job_scope: trio.CancelScope | None = None
        self._job_running = False
        self._loaded_job_id: str | None = None
        self.boot_id: str | None = None
        #: id → (agent, session) of recent notifications, acked or not, so that a
        #: run delivering one is recognised (bounded; rebuilt from the queue on load).
        self.issued: dict[int, tuple[str, str | None]] = {}
        self._in_transaction = False
        self._compact = trio.Event()  # set: the journal is due for compaction

    def _remember(self, notification_id: int, agent_id: str, session: str | None) -> None:
        self.issued[notification_id] = (agent_id, session)
        while len(self.issued) > 4096:
            del self.issued[next(iter(self.issued))]

    # -- persistence -------------------------------------------------------------

    def load(self) -> None:
        """Read the store and repair what a crash between two writes can leave."""
        doc = self.store.load_global()
        self.fleet.glob = GlobalRecord.from_json(doc.get("global") or {})
        self.job = doc.get("job")
        self._loaded_job_id = (self.job or {}).get("jobId")
        self.last_job = doc.get("lastJob")
        queue = doc.get("notifications") or {}
        self.pending = list(queue.get("pending") or [])
        self.next_id = int(queue.get("nextId") or 1)
        for n in self.pending:
            self._remember(n["id"], n["agentId"], n["sessionKey"])
        for raw in self.store.load_agents().values():
            try:
                record = AgentRecord.from_json(raw)
            except (KeyError, ValueError, TypeError):
                log.error("ignoring a malformed agent record: %r", raw)
                continue
            self.fleet.agents[record.agent_id] = record
        now = self.clock()
        if self.fleet.glob.last_query_at is not None:
            # Polls are not persisted; give the requester a fresh abandon window.
            self.fleet.glob = replace(self.fleet.glob, last_query_at=now)
        self.boot_id = boot_id()
        if doc.get("bootId") and self.boot_id and doc["bootId"] != self.boot_id:
            # The machine rebooted: the gateway and every turn it ran are gone,
            # and agent files (not fsynced) may be older than global.json.
            log.warning("the machine rebooted since the last daemon run; every agent that is "
                        "not frozen for a pending restart is reset to idle")
            self.fleet.restarted([a.agent_id for a in self.fleet.agents.values()
                                  if a.state not in FREEZE_FAMILY], now=now)
        if not self.fleet.restart_pending:
            # Global was written (restart over) but the agents were not, yet.
            # Frozen before the last restart ended: that restart ended its turns.
            # Frozen after (a cancelled restart): back to its work.
            finished = (self.last_job or {}).get("finishedAt") or 0
            stuck = [a for a in self.fleet.agents.values() if a.state in FREEZE_FAMILY]
            self.fleet.restarted([a.agent_id for a in stuck
                                  if a.frozen_at is not None and a.frozen_at <= finished], now=now)
            self.fleet.cancel(now=now, agent_ids=[a.agent_id for a in stuck
                                                  if a.agent_id in self.fleet.agents
                                                  and self.fleet.agents[a.agent_id].state
                                                  in FREEZE_FAMILY])
            for record in stuck:
                log.info("agent %s was left frozen with no restart pending; released",
                         record.agent_id)
        self._persist((), force_global=doc.get("bootId") != self.boot_id)

    def _global_doc(self) -> dict[str, Any]:
        return {"global": self.fleet.glob.to_json(), "job": self.job, "lastJob": self.last_job,
                "bootId": self.boot_id,
                "notifications": {"nextId": self.next_id, "pending": self.pending}}

    def _persist(self, notices: tuple[Notice, ...] | list[Notice], *, force_global: bool = False) -> None:
        """Queue ``notices`` and write what changed: global first, then agents."""
        now = self.clock()
        for notice in notices:
            self.pending.append({
                "id": self.next_id, "agentId": notice.agent_id, "sessionKey": notice.session_key,
                "kind": notice.kind.value, "text": self.settings[f"messages.{notice.kind.value}"],
                "createdAt": now})
            self._remember(self.next_id, notice.agent_id, notice.session_key)
            self.next_id += 1
        agents, glob = self.fleet.take_dirty()
        if glob or notices or force_global:
            self.store.save_global(self._global_doc())
        if agents and self.store.save_agents(
                [self.fleet.agents[agent_id].to_json() for agent_id in agents],
                agent_count=len(self.fleet.agents)):
            if self._nursery is None:  # no background task (load, tests): now
                self.store.compact([a.to_json() for a in self.fleet.agents.values()])
            elif not self.store.compacting:
                self._compact.set()
        if notices:
            self._wake.set()
            self._wake = trio.Event()

    # -- lifecycle -------------------------------------------------------------------

    def _guard(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except IllegalTransition as exc:
            self.fleet.take_dirty()  # nothing changed; keep the flags clean
            raise CoordinatorError(409, str(exc)) from exc

    @_transaction
    def message_start(self, agent_id: str, session: str, *, heartbeat: bool = False,
                      workflow: str | None = None,
                      notification_id: int | None = None) -> dict[str, Any]:
        """``notification_id``: this run delivers that notification (it is admitted
        even while the agent is frozen, and a restart waits for it to end)."""
        notice = notification_id is not None and self.issued.get(notification_id) == (
            agent_id, session)
        verdict, notices = self._guard(lambda: self.fleet.message_start(
            agent_id, session, now=self.clock(), heartbeat=heartbeat, workflow=workflow,
            notice=notice))
        self._persist(notices)
        if verdict is Verdict.PROCEED:
            return {"action": "proceed"}
        reply = self.settings["messages.busy_reply" if verdict is Verdict.REJECT_BUSY
                              else "messages.frozen_reply"]
        return {"action": "reject", "reply": reply}

    @_transaction
    def message_end(self, agent_id: str, session: str, *, heartbeat: bool = False) -> dict[str, Any]:
        state, notices = self._guard(lambda: self.fleet.message_end(
            agent_id, session, now=self.clock(), heartbeat=heartbeat))
        self._persist(notices)
        return {"state": state.value}

    @_transaction
    def workflow_open(self, agent_id: str, workflow: str) -> dict[str, Any]:
        state = self._guard(lambda: self.fleet.workflow_open(agent_id, workflow, now=self.clock()))
        self._persist(())
        return {"state": state.value}

    @_transaction
    def workflow_close(self, agent_id: str) -> dict[str, Any]:
        state, notices = self._guard(lambda: self.fleet.workflow_close(agent_id, now=self.clock()))
        self._persist(notices)
        return {"state": state.value}

    # -- restart -----------------------------------------------------------------------

    @_transaction
    def query_restart(self, agent_id: str, session: str,
                      job: JobSpec | None = None) -> dict[str, Any]:
        """Seed §1.4.2; on OK with a ``job`` the daemon runs the restart job itself."""
        now = self.clock()
        answer, notices = self.fleet.query_restart(agent_id, session, now=now,
                                                   hold=self._tidy_up_pending(now))
        result: dict[str, Any] = {"result": answer.value}
        if answer is Answer.OK:
            job_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}-{secrets.token_hex(3)}"
            if job is None:
                self.job = {"jobId": job_id, "external": True, "createdAt": now}
            else:
                state = JobState(job_id, "delay", created_at=now, due_at=now + job.delay_seconds)
                self.job = {"jobId": job_id, "spec": job.to_json(), "state": state.to_json()}
            result.update(jobId=job_id, dueAt=now + (job.delay_seconds if job else 0))
            log.info("restart %s scheduled by %s/%s", job_id, agent_id, session)
        elif answer is Answer.NOT_READY:
            result["blocking"] = self.fleet.blocking()[:20]
        self._persist(notices, force_global=answer is Answer.OK)
        if answer is Answer.OK and job is not None:
            # After the write: a failure before it must leave no trace.
            job.joblog(result["jobId"]).line(
                f"restart requested by agent {agent_id} (session {session}); every agent "
                f"is frozen; restart in {job.delay_seconds:g} s")
            self._start_job()
        return result

    def _tidy_up_pending(self, now: float) -> bool:
        """A "tidy up before the restart" notice not yet delivered (for a while)."""
        wait = float(self.settings["restart.prepare_wait_seconds"])
        return any(n["kind"] == "prepare_agent" and now - n["createdAt"] < wait
                   for n in self.pending)

    @_transaction
    def restart_result(self, status: str, log_path: str | None) -> dict[str, Any]:
        """``POST /restart-result`` from an external restart script (seed §1.4.7)."""
        if self.job is not None and not self.job.get("external"):
            raise CoordinatorError(409, "the daemon runs this restart job itself and reports its "
                                        "outcome; do not post /restart-result for it")
        try:
            self._finish(status == "ok", outcome=status, log_path=log_path)
        except RestartStatusError as exc:
            self.fleet.take_dirty()
            raise CoordinatorError(409, str(exc)) from exc
        return {"ok": True}

    @_transaction
    def cancel(self, agent_id: str, session: str, reason: str = "cancelled") -> dict[str, Any]:
        """Undo a restart that has not reached the gateway yet (Ctrl-C in safe-restart)."""
        g = self.fleet.glob
        if not self.fleet.restart_pending:
            return {"cancelled": False, "reason": "no restart is pending"}
        if (g.restart_scheduled_by, g.restart_session) != (agent_id, session):
            raise CoordinatorError(409, f"the pending restart belongs to agent "
                                        f"{g.restart_scheduled_by}; only it can cancel")
        phase = None
        if self.job is not None:
            phase = "external" if self.job.get("external") else self.job["state"]["phase"]
            if phase not in ("delay", "external"):
                raise CoordinatorError(409, f"the restart command already started (phase {phase}); "
                                            "it can not be cancelled, wait for its outcome")
        self._drop(reason=reason)
        return {"cancelled": True, "phase": phase or "waiting"}

    def _drop(self, *, reason: str) -> None:
        """Forget the pending restart and unfreeze everyone (no restart happened)."""
        if self._job_scope is not None:
            self._job_scope.cancel()
            self._job_scope = None
        now = self.clock()
        if self.job is not None:
            if not self.job.get("external"):
                try:
                    spec = JobSpec.from_json(self.job["spec"])
                except (KeyError, TypeError, ValueError):
                    log.error("the pending restart job's spec is unreadable: %r", self.job)
                else:
                    spec.joblog(self.job["jobId"]).line(f"restart cancelled ({reason}); "
                                                             "every agent unfrozen")
            self.last_job = {"jobId": self.job["jobId"], "outcome": "cancelled",
                             "finishedAt": now, "detail": reason}
        released = self.fleet.cancel(now=now)
        self.job = None
        log.info("restart dropped (%s); %d agents unfrozen", reason, len(released))
        self._persist((), force_global=True)

    def _finish(self, ok: bool, *, outcome: str, log_path: str | None = None,
                detail: str = "") -> None:
        now = self.clock()
        notices = self.fleet.restart_finished(ok, now=now)
        job_id = (self.job or {}).get("jobId")
        self.last_job = {"jobId": job_id, "outcome": outcome, "finishedAt": now,
                         "detail": detail, "log": log_path}
        self.job = None
        log.info("restart %s finished: %s %s", job_id, outcome, detail)
        self._persist(notices, force_global=True)

    # -- the job -------------------------------------------------------------------

    def _start_job(self) -> None:
        if self._nursery is None or self._job_running:
            return
        self._job_running = True
        self._nursery.start_soon(self._job_task)

    async def _job_task(self) -> None:
        assert self.job is not None and not self.job.get("external")
        job_id = self.job["jobId"]
        spec = JobSpec.from_json(self.job["spec"])
        state = JobState.from_json(self.job["state"])
        joblog = spec.joblog(job_id)

        def persist(new: JobState) -> None:
            if self.job is not None and self.job.get("jobId") == job_id:
                self.job["state"] = new.to_json()
                self._persist((), force_global=True)

        def on_rollback() -> None:
            if self.fleet.glob.restart_status is RestartStatus.RESTARTING:
                self.fleet.begin_rollback(now=self.clock())
                self._persist(())

        env = {k: v for k, v in os.environ.items() if k not in AGENT_CONTEXT_VARIABLES}
        operator_log = None
        try:
            # The operator's commands run as the daemon: a session's path is never theirs.
            if spec.confinement is not None:
                operator_log = await trio.to_thread.run_sync(
                    OperatorLog.create, str(self.store.root / "logs"), job_id)
            env.update(PADDEDCELL_RESTART_LOG=operator_log.path if operator_log else spec.log,
                       PADDEDCELL_RESTART_JOB=job_id)
            with trio.CancelScope() as scope:
                self._job_scope = scope
                final = await run_job(spec, state, persist=persist, log=joblog,
                                      on_rollback=on_rollback, env=env, clock=self.clock,
                                      operator_log=operator_log)
            if scope.cancelled_caught or self.job is None or self.job.get("jobId") != job_id:
                return
            self._job_scope = None
            ok = final.outcome == "ok"
            # Logged first: whoever follows the log stops at the outcome.
            joblog.line("restart finished: every agent unfrozen" if ok else
                        "restart failed and was rolled back: every agent unfrozen")
            await drain_logs()
            if self.job is None or self.job.get("jobId") != job_id:
                return
            self._finish(ok, outcome=final.outcome or "failed", log_path=spec.log,
                         detail=final.detail)
        except Exception:
            # A bug here must not leave the fleet frozen: resolve as failed.
            log.exception("restart job %s crashed", job_id)
            joblog.line("the restart job crashed (see the daemon log); every agent unfrozen")
            if self.job is not None and self.job.get("jobId") == job_id:
                self._finish(False, outcome="failed", log_path=spec.log, detail="job crashed")
        finally:
            self._job_running = False
            if operator_log is not None and (self.job or {}).get("jobId") != job_id:
                operator_log.remove()  # copied into the job's log; the job is over

    # -- background ----------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Resume a persisted job, then watch for abandoned and stale freezes and
        compact the agent journal. Each background task that raises is logged
        and started again: a bad record can not end the daemon."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                self._resume_job()
            except Exception:
                log.exception("could not resume the persisted restart job; the watchdog "
                              "releases its freeze after restart.max_freeze_seconds")
            nursery.start_soon(LogWriter(float(self.settings["restart.log_flush_seconds"]),
                                         int(self.settings["restart.log_buffer_bytes"])).run)
            nursery.start_soon(self._keep_running, "watchdog", self._watch)
            nursery.start_soon(self._keep_running, "journal compaction", self._compactor)
            task_status.started()

    def _resume_job(self) -> None:
        if self.job is not None and not self.job.get("external"):
            state = JobState.from_json(self.job["state"])
            if self.job["jobId"] == self._loaded_job_id and state.phase == "report":
                self._finish(state.outcome == "ok", outcome=state.outcome or "failed",
                             log_path=self.job["spec"]["log"], detail=state.detail)
            else:
                if self.job["jobId"] == self._loaded_job_id:
                    self.job["state"] = {**self.job["state"], "resumed": state.resumed + 1}
                    self._persist((), force_global=True)
                self._start_job()

    @staticmethod
    async def _keep_running(name: str, task: Callable[[], Any]) -> None:
        while True:
            try:
                await task()
                return
            except Exception:
                log.exception("restart coordinator: the %s task failed; starting it again", name)
                await trio.sleep(1.0)

    async def _watch(self) -> None:
        interval = float(self.settings["restart.watchdog_seconds"])
        while True:
            await trio.sleep(interval)
            self.watchdog()

    async def _compactor(self) -> None:
        """Snapshot every agent when the journal is due: the records are taken
        here (immutable, a list of references), serialised and written in a
        worker thread; appends go on meanwhile and become the new journal."""
        while True:
            await self._compact.wait()
            self._compact = trio.Event()
            seq = self.store.begin_compaction()
            records = list(self.fleet.agents.values())
            try:
                await trio.to_thread.run_sync(self.store.write_snapshot, seq, records)
            except BaseException:
                self.store.end_compaction(failed=True)
                raise
            self.store.end_compaction()
            if self.store.compaction_due(len(self.fleet.agents)):
                self._compact.set()  # appends during this one made it due again

    @_transaction
    def watchdog(self) -> None:
        now = self.clock()
        g = self.fleet.glob
        abandon = float(self.settings["restart.abandon_seconds"])
        if (g.restart_status is RestartStatus.WAITING and g.last_query_at is not None
                and now - g.last_query_at > abandon):
            log.warning("restart requested by %s abandoned: no query-restart for %.0f s; "
                        "unfreezing every agent", g.restart_scheduled_by, now - g.last_query_at)
            self._drop(reason=f"requester stopped polling for {abandon:g} s")
            return
        max_age = float(self.settings["restart.max_freeze_seconds"])
        if (self.fleet.restart_pending and not self._job_running and g.requested_at is not None
                and now - g.requested_at > max_age):
            log.warning("restart requested by %s has no live job after %.0f s; dropping it",
                        g.restart_scheduled_by, now - g.requested_at)
            self._drop(reason=f"no outcome within restart.max_freeze_seconds={max_age:g}")
            return
        stale = self.fleet.stale_freezes(now=now, max_age=max_age)
        if stale:
            self.fleet.cancel(now=now, agent_ids=stale)
            for agent_id in stale:
                log.warning("agent %s was frozen for over %g s (restart.max_freeze_seconds); "
                            "released", agent_id, max_age)
            self._persist(())

    # -- reading ------------------------------------------------------------------------

    def view(self) -> dict[str, Any]:
        g = self.fleet.glob.to_json()
        if self.job is not None:
            g["job"] = ({"jobId": self.job["jobId"], "external": True} if self.job.get("external")
                        else {"jobId": self.job["jobId"], **self.job["state"],
                              "log": self.job["spec"]["log"]})
        g["lastJob"] = self.last_job
        g["now"] = self.clock()
        agents = [a.to_json() for a in sorted(self.fleet.agents.values(), key=lambda a: a.agent_id)]
        return {"agents": agents, "global": g}

    def _matching(self, agent_id: str | None) -> list[dict[str, Any]]:
        return [n for n in self.pending if agent_id is None or n["agentId"] == agent_id]

    async def notifications(self, wait: float, agent_id: str | None = None) -> list[dict[str, Any]]:
        """Unacknowledged notifications; waits up to ``wait`` seconds for the first."""
        deadline = trio.current_time() + max(0.0, min(wait, float(self.settings["restart.max_poll_seconds"])))
        while True:
            found = self._matching(agent_id)
            if found or trio.current_time() >= deadline:
                return found
            with trio.move_on_at(deadline):
                await self._wake.wait()

    @_transaction
    def ack(self, ids: list[int]) -> dict[str, Any]:
        wanted = set(ids)
        before = len(self.pending)
        self.pending = [n for n in self.pending if n["id"] not in wanted]
        if len(self.pending) != before:
            self._persist((), force_global=True)
        return {"ok": True, "acked": before - len(self.pending)}


def job_spec_from_body(body: dict[str, Any], settings: config.Settings,
                       agent_id: str | None = None) -> JobSpec:
    """The optional ``job`` object of ``POST /query-restart``; raises JobSpecError, or
    ConfinementError when a session's job names a file that is not its own to name."""
    if not isinstance(body, dict):
        raise JobSpecError("field 'job' must be an object")
    unknown = set(body) - {"rollback", "log", "delaySeconds", "recoverTimeoutSeconds",
                           "restartCmd", "statusCmd", confine.SESSION_FIELD}
    if unknown:
        raise JobSpecError(f"unknown job field(s) {sorted(unknown)}; allowed: rollback, log, "
                         "delaySeconds, recoverTimeoutSeconds, restartCmd, statusCmd")
    rollback, log_path = body.get("rollback"), body.get("log")
    for name, value in (("rollback", rollback), ("log", log_path)):
        if not isinstance(value, str) or not os.path.isabs(value):
            raise JobSpecError(f"job.{name} must be an absolute path")
    confinement = None
    session = body.get(confine.SESSION_FIELD)
    if session is not None:  # bound by the session's channel or the daemon's session guard
        confinement = _session_confinement(session, settings, agent_id, rollback, log_path)
    elif not os.path.isfile(rollback):
        raise JobSpecError(f"rollback script {rollback} does not exist; give --rollback an existing file")
    elif not os.path.isdir(os.path.dirname(log_path)):
        raise JobSpecError(f"the directory of log file {log_path} does not exist")

    def number(name: str, key: str) -> float:
        value = body.get(name, settings[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                or not math.isfinite(value):
            raise JobSpecError(f"job.{name} must be a number of seconds >= 0")
        return float(value)

    def command(name: str, key: str) -> str:
        value = body.get(name, settings[key])
        if not isinstance(value, str) or not value.strip():
            raise JobSpecError(f"job.{name} must be a non-empty shell command")
        return value

    return JobSpec(
        rollback=rollback, log=log_path,
        delay_seconds=number("delaySeconds", "restart.delay_seconds"),
        recover_timeout_seconds=number("recoverTimeoutSeconds", "restart.recover_timeout_seconds"),
        restart_cmd=command("restartCmd", "restart.restart_cmd"),
        status_cmd=command("statusCmd", "restart.status_cmd"),
        status_interval_seconds=float(settings["restart.status_interval_seconds"]),
        command_timeout_seconds=float(settings["restart.command_timeout_seconds"]),
        rollback_timeout_seconds=float(settings["restart.rollback_timeout_seconds"]),
        confinement=confinement,
    )


def _session_confinement(session: Any, settings: config.Settings, agent_id: str | None,
                         rollback: str, log_path: str) -> confine.Confinement:
    """A session's job: both files inside its workspace, opened the way the job will."""
    if not isinstance(session, dict) or not agent_id:
        raise JobSpecError("job.session is set by the session channel, not by hand")
    workspace, uid, gid = session.get("workspace"), session.get("uid"), session.get("gid")
    if not isinstance(workspace, str) or type(uid) is not int or type(gid) is not int:
        raise JobSpecError("job.session is set by the session channel, not by hand")
    confinement = confine.for_session(settings, agent_id, workspace, uid, gid)
    for path, flags, missing in (
            (rollback, confine.READ, f"rollback script {rollback} does not exist; give "
                                     "--rollback an existing file"),
            (log_path, confine.APPEND, f"the directory of log file {log_path} does not exist")):
        try:
            os.close(confine.open_confined(path, confinement, flags, workspace))
        except FileNotFoundError:
            raise JobSpecError(missing) from None
        except OSError as exc:
            raise JobSpecError(f"cannot open {path}: {exc.strerror or exc}") from None
    return confinement


__all__ = ["Coordinator", "CoordinatorError", "JobSpecError", "job_spec_from_body", "timestamp",
           "State"]
