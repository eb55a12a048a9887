"""The restart job: wait, restart the gateway, check it came back, else roll back.

The daemon runs this job, not the ``safe-restart`` caller, because the caller
usually lives inside the gateway that is about to restart and would be killed
half-way. Its phases are::

    delay ──▶ restart ──▶ status ──ok──▶ report(ok)
                             └──no success within recover-timeout──▶ rollback ──▶ report(failed)

Before each phase starts, the coordinator persists it (``persist`` callback),
so a daemon killed with SIGKILL and started again resumes from that phase: the
delay keeps its original wall-clock deadline; a restart command that was
already spawned (it runs in its own session, so it outlives the daemon) is
waited for, never run twice, and the status check decides whether it worked;
a status check starts a fresh recovery window; a rollback is run again (rollback
scripts must be idempotent, which is also what makes them safe to run by hand).

Every step is appended to the job's log with a UTC timestamp, and the output
of each command is copied there line by line as it arrives, so a human (or the
interactive ``safe-restart``) can follow it with ``tail -f``.
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import trio

from .. import orphans
from .confine import APPEND, READ, Confinement, ConfinementError, open_confined

PHASES = ("delay", "restart", "status", "rollback", "report", "done")

logger = logging.getLogger("paddedcell.restart")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the caller of ``query-restart`` asked for; fixed for the job's life."""

    rollback: str
    log: str
    delay_seconds: float
    recover_timeout_seconds: float
    restart_cmd: str
    status_cmd: str
    status_interval_seconds: float = 1.0
    command_timeout_seconds: float = 300.0
    rollback_timeout_seconds: float = 300.0
    #: Set when an agent session asked: its files are confined to its workspace and
    #: opened as its uid (``restart/confine.py``); None for a human's or the plugin's job.
    confinement: Confinement | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobSpec":
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if fields.get("confinement") is not None:
            fields["confinement"] = Confinement.from_json(fields["confinement"])
        return cls(**fields)

    def joblog(self, job_id: str) -> "JobLog":
        return JobLog(self.log, job_id, self.confinement)


@dataclass(frozen=True, slots=True)
class JobState:
    """Where the job is; persisted before each phase begins."""

    job_id: str
    phase: str = "delay"
    created_at: float = 0.0
    due_at: float = 0.0
    outcome: str | None = None  # "ok" | "failed" | "cancelled"
    finished_at: float | None = None
    resumed: int = 0
    detail: str = ""
    #: Set once the restart command is spawned: a resumed job then waits for it
    #: instead of restarting the gateway a second time.
    restart_pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobState":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def timestamp(now: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class JobLog:
    """Appends timestamped lines to the job's ``--log`` file.

    With a ``confinement`` (a session's job) every open walks the path again
    without following symlinks, as the session's uid (``restart/confine.py``): the
    agent may swap a directory for a symlink at any time during the job. Under a
    root daemon that open is a fork, and the rollback's output is the agent's to
    choose: so while a :class:`LogWriter` runs (the daemon's coordinator), ``line``
    only queues and the writer appends in batches, off the event loop."""

    path: str
    job_id: str
    confinement: Confinement | None = None

    def line(self, text: str, *, output: bool = False) -> None:
        """Append ``text``; ``output``: a line a command printed (dropped, and counted,
        when the writer is behind; the job's own lines never are)."""
        entry = f"{timestamp()} [restart {self.job_id}] {text}\n"
        if _writer is None:
            self.write([entry])
        else:
            _writer.submit(self, entry, output)

    def write(self, entries: list[str]) -> None:
        """Append ``entries`` with one open (blocking: a worker thread's, or no loop's)."""
        try:
            if self.confinement is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            else:
                fd = open_confined(self.path, self.confinement, APPEND)
        except ConfinementError as exc:
            logger.warning("restart %s: not writing its log: %s", self.job_id, exc)
            return
        except OSError:
            return  # the daemon log still has the outcome
        try:
            os.write(fd, "".join(entries).encode("utf-8", "replace"))
        finally:
            os.close(fd)


class LogWriter:
    """Appends queued job log lines in a worker thread, at most one batch per
    ``flush_seconds`` (one open of each log per batch), holding at most
    ``max_bytes`` unwritten (more is dropped, and the log says how many lines):
    a rollback printing a million lines costs the daemon a few opens a second,
    never its event loop (issue 20)."""

    def __init__(self, flush_seconds: float, max_bytes: int):
        self.flush_seconds, self.max_bytes = flush_seconds, max_bytes
        #: (log, line), or (log, [count]): where lines were dropped, how many (so far).
        self._queue: list[tuple[JobLog, str | list[int]]] = []
        self._bytes = 0
        self._dropping: dict[int, list[int]] = {}
        self._wake = trio.Event()
        #: Entries queued and written so far (drain() waits for the one to reach the other).
        self._queued = self._written = 0
        self._wrote = trio.Event()

    def submit(self, log: JobLog, entry: str, output: bool) -> None:
        if output and self._bytes + len(entry) > self.max_bytes:
            count = self._dropping.get(id(log))
            if count is None:  # the note takes the place of the first line dropped
                count = self._dropping[id(log)] = [0]
                self._queue.append((log, count))
            count[0] += 1
            return
        self._queue.append((log, entry))
        self._queued += 1
        self._bytes += len(entry)
        self._wake.set()

    async def drain(self) -> None:
        """Return once every line queued before the call is in its log."""
        target = self._queued
        while self._written < target:
            await self._wrote.wait()

    def _batches(self) -> list[tuple[JobLog, list[str]]]:
        """The queue as consecutive runs per log, in order; each run of dropped lines
        as one line that says how many."""
        queue, self._queue, self._bytes, self._dropping = self._queue, [], 0, {}
        batches: list[tuple[JobLog, list[str]]] = []
        for log, entry in queue:
            if isinstance(entry, list):
                entry = (f"{timestamp()} [restart {log.job_id}] {entry[0]} lines not logged "
                         "(restart.log_buffer_bytes full)\n")
            if batches and batches[-1][0] is log:
                batches[-1][1].append(entry)
            else:
                batches.append((log, [entry]))
        return batches

    @staticmethod
    def write_all(batches: list[tuple[JobLog, list[str]]]) -> None:
        for log, entries in batches:
            log.write(entries)

    async def run(self) -> None:
        global _writer
        _writer = self
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                await trio.sleep(self.flush_seconds)  # gather what follows into one batch
                # Taken here, on the loop's thread, where submit() appends.
                queued = self._queued
                await trio.to_thread.run_sync(self.write_all, self._batches(),
                                              limiter=_write_limiter)
                self._written = queued
                self._wrote.set()
                self._wrote = trio.Event()
        finally:
            if _writer is self:
                _writer = None
            self.write_all(self._batches())


async def drain_logs() -> None:
    """Return once every job log line queued so far is written (an answer or an outcome
    that follows a log line must not overtake it: whoever follows the log stops there)."""
    if _writer is not None:
        await _writer.drain()


#: The daemon's writer of job logs while its coordinator runs (None: write at once).
_writer: LogWriter | None = None
#: One thread writes job logs (each confined open under root is a fork).
_write_limiter = trio.CapacityLimiter(1)


#: The most of what the operator's commands wrote to their log that one relay copies.
RELAY_MAX_BYTES = 1 << 20


@dataclass
class OperatorLog:
    """``PADDEDCELL_RESTART_LOG`` of the operator's restart and status commands in a
    session's job: a file of the daemon's own under ``PADDEDCELL_HOME/restart/logs``.

    Those commands run as the daemon, so the agent's path there (checked only at each of
    the daemon's own confined opens) would let an operator script that appends to it
    follow a symlink the agent swapped in, and write where the agent cannot. What they
    write here is copied into the agent's log after each command, as the session's uid
    (:class:`JobLog`), as their output is."""

    path: str
    offset: int = 0

    @classmethod
    def create(cls, directory: str, job_id: str) -> "OperatorLog":
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(directory, f"{job_id}.log"),
                     os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            return cls(os.path.join(directory, f"{job_id}.log"), os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def read_new(self) -> list[str]:
        """The lines written since the last call (at most RELAY_MAX_BYTES; the rest is
        skipped and said); blocking."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            end = os.fstat(fd).st_size
            data = os.pread(fd, min(end - self.offset, RELAY_MAX_BYTES), self.offset)
        finally:
            os.close(fd)
        lines = data.decode("utf-8", "replace").splitlines()
        if end - self.offset > len(data):
            lines.append(f"({end - self.offset - len(data)} more bytes not copied)")
        self.offset = max(end, self.offset)
        return lines

    async def relay(self, log: "JobLog", label: str) -> None:
        for text in await trio.to_thread.run_sync(self.read_new):
            log.line(f"{label}> {text}", output=True)

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


@dataclass
class CommandResult:
    returncode: int | None  # None: timed out and killed
    output: str = ""


#: What of a command's output is kept in memory (the last lines, for the status check's
#: report) and the longest line (a longer one is logged in pieces): a rollback is the
#: agent's script and prints what it likes, for up to restart.rollback_timeout_seconds.
OUTPUT_KEPT_LINES = 1000
OUTPUT_LINE_MAX_BYTES = 64 * 1024

#: After a step's command exits, how long its output may still arrive from
#: children that share the pipe (a daemonised gateway may never close it).
OUTPUT_DRAIN_SECONDS = 2.0


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def run_command(argv: list[str] | str, *, timeout: float, log: JobLog, label: str,
                      env: dict[str, str] | None = None,
                      on_spawn: Callable[[int], None] | None = None,
                      preexec_fn: Callable[[], None] | None = None) -> CommandResult:
    """Run one step in its own process group, copy its output to the log line by line.

    The step ends when the command exits (its output read for at most
    ``OUTPUT_DRAIN_SECONDS`` more). On timeout or cancellation the whole group gets SIGTERM, then SIGKILL after
    two seconds: a restart script's children must not outlive the step.
    """
    shell = isinstance(argv, str)
    proc = await trio.lowlevel.open_process(
        argv, shell=shell, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True, env=env, preexec_fn=preexec_fn)
    orphans.claim(proc.pid)
    if on_spawn is not None:
        on_spawn(proc.pid)
    collected: collections.deque[str] = collections.deque(maxlen=OUTPUT_KEPT_LINES)
    pending = b""
    timed_out = False
    assert proc.stdout is not None

    async def copy_output(drained: trio.Event) -> None:
        nonlocal pending
        async for chunk in proc.stdout:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if len(pending) > OUTPUT_LINE_MAX_BYTES:  # a line that never ends: cut it
                lines.append(pending)
                pending = b""
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip("\r")
                collected.append(text)
                log.line(f"{label}| {text}", output=True)
        drained.set()

    try:
        with trio.move_on_after(max(timeout, 0.01)) as scope:
            async with trio.open_nursery() as nursery:
                drained = trio.Event()
                nursery.start_soon(copy_output, drained)
                await proc.wait()
                # A child it daemonised (the gateway) may hold the pipe for ever.
                with trio.move_on_after(OUTPUT_DRAIN_SECONDS):
                    await drained.wait()
                nursery.cancel_scope.cancel()
        timed_out = scope.cancelled_caught
    finally:
        if proc.returncode is None:
            with trio.CancelScope(shield=True):
                _kill_group(proc.pid, signal.SIGTERM)
                with trio.move_on_after(2.0):
                    await proc.wait()
                _kill_group(proc.pid, signal.SIGKILL)
                await proc.wait()
        if pending:
            text = pending.decode("utf-8", "replace").rstrip("\r")
            collected.append(text)
            log.line(f"{label}| {text}", output=True)
        if proc.returncode is not None:
            orphans.release(proc.pid)
        with trio.CancelScope(shield=True):
            await proc.stdout.aclose()
    if timed_out:
        return CommandResult(None, "\n".join(collected))
    return CommandResult(proc.returncode, "\n".join(collected))


def _process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _rollback_argv(path: str) -> list[str]:
    return [path] if os.access(path, os.X_OK) else ["/bin/sh", path]


def _rollback_sandbox(argv: list[str], env: dict[str, str] | None,
                      confinement: Confinement | None = None):
    """The rollback script is the agent's: it runs in the sandbox agent commands get,
    built by the same plan builder from the same settings (docs/design.md §1), its
    directory as the workspace (a session's job: its workspace), or bare where
    ``supervisor.sandbox = "none"``. Under a root daemon it runs as the session's uid,
    else as its script's owner (root only for a script root wrote: the operator's own,
    like the restart command). No proxy serves a rollback: "proxy" means loopback only.
    Restart and status commands are the operator's and run as they are. Returns the
    pre-exec step and the environment to run it with."""
    from .. import config
    from ..supervisor.sandbox_plan import prepare
    from ..supervisor.spawn import Sandbox, SpawnError

    settings = config.load()
    workdir = os.path.dirname(os.path.abspath(argv[-1])) or "/"
    if confinement is not None:
        run_as = (confinement.uid, confinement.gid)
    else:
        st = os.stat(argv[-1])
        run_as = (st.st_uid, st.st_gid)
    try:
        sandbox = Sandbox.from_settings(settings)
        if sandbox.network == "proxy":
            sandbox = replace(sandbox, network="none")
        prepared = prepare(settings, sandbox, agent_id=None,
                           workspace=confinement.workspace if confinement else None,
                           workdir=workdir, argv=argv,
                           env=dict(os.environ if env is None else env), run_as=run_as)
    except SpawnError as exc:  # refused (no sandbox this host can give): do not run it bare
        raise OSError(str(exc)) from None
    return prepared.preexec, prepared.env


Persist = Callable[[JobState], None]


async def run_job(spec: JobSpec, state: JobState, *, persist: Persist, log: JobLog,
                  on_rollback: Callable[[], None], env: dict[str, str] | None = None,
                  clock: Callable[[], float] = time.time,
                  operator_log: OperatorLog | None = None) -> JobState:
    """Drive the job from ``state.phase`` to ``report``; returns the final state.

    ``persist`` is called with each new phase before the phase starts (and must
    make it durable); ``on_rollback`` tells the coordinator a rollback began.
    The caller reports the outcome (``state.outcome``) to the coordinator.
    ``env`` is the operator's commands' (a session's job: ``PADDEDCELL_RESTART_LOG`` is
    ``operator_log``, relayed into ``log`` after each of them); the rollback, the
    agent's script, gets the job's own log path there instead.
    """
    if state.resumed:
        log.line(f"daemon restarted; resuming in phase {state.phase}")

    if state.phase == "delay":
        left = state.due_at - clock()
        log.line(f"waiting {max(left, 0):.1f} s before the restart command")
        await trio.sleep(max(left, 0))
        state = replace(state, phase="restart")
        persist(state)

    if state.phase == "restart" and state.restart_pid is not None:
        # Spawned before the daemon died, in its own session: it may still run.
        log.line(f"the restart command (pid {state.restart_pid}) started before the daemon "
                 "restarted; waiting for it to end, then checking status")
        with trio.move_on_after(spec.command_timeout_seconds):
            while _process_alive(state.restart_pid):
                await trio.sleep(0.1)
        state = replace(state, phase="status")
        persist(state)
    elif state.phase == "restart":
        log.line(f"running restart command: {spec.restart_cmd}")

        def spawned(pid: int) -> None:
            nonlocal state
            state = replace(state, restart_pid=pid)
            persist(state)

        result = await run_command(spec.restart_cmd, timeout=spec.command_timeout_seconds,
                                   log=log, label="restart", env=env, on_spawn=spawned)
        if operator_log is not None:
            await operator_log.relay(log, "restart")
        if result.returncode is None:
            log.line(f"restart command timed out after {spec.command_timeout_seconds} s")
        else:
            log.line(f"restart command exited with code {result.returncode}")
        state = replace(state, phase="status")
        persist(state)

    if state.phase == "status":
        ok, last = await _await_recovery(spec, log, env, clock, operator_log)
        if ok:
            state = replace(state, phase="report", outcome="ok")
        else:
            log.line(f"gateway did not recover within {spec.recover_timeout_seconds} s; "
                     "last status output:")
            for text in (last.output.splitlines() or ["(no output)"]):
                log.line(f"status| {text}")
            state = replace(state, phase="rollback")
        persist(state)

    if state.phase == "rollback":
        on_rollback()
        log.line(f"running rollback: {spec.rollback}")
        try:
            if spec.confinement is not None:  # still the agent's own file, no symlink on the way
                os.close(await trio.to_thread.run_sync(
                    open_confined, spec.rollback, spec.confinement, READ))
            argv = _rollback_argv(spec.rollback)
            preexec, rollback_env = _rollback_sandbox(
                argv, env if env is None else {**env, "PADDEDCELL_RESTART_LOG": spec.log},
                spec.confinement)
            result = await run_command(argv, timeout=spec.rollback_timeout_seconds,
                                       log=log, label="rollback", env=rollback_env,
                                       preexec_fn=preexec)
            detail = ("timed out" if result.returncode is None
                      else f"exited with code {result.returncode}")
        except (OSError, ConfinementError) as exc:
            detail = f"could not start: {exc}"
        log.line(f"rollback {detail}")
        state = replace(state, phase="report", outcome="failed", detail=f"rollback {detail}")
        persist(state)

    return state


async def _await_recovery(spec: JobSpec, log: JobLog, env: dict[str, str] | None,
                          clock: Callable[[], float], operator_log: OperatorLog | None = None
                          ) -> tuple[bool, CommandResult]:
    """Run the status command until it succeeds or the recovery window ends."""
    deadline = clock() + spec.recover_timeout_seconds
    attempt = 0
    while True:
        attempt += 1
        left = deadline - clock()
        log.line(f"status check {attempt}: {spec.status_cmd}")
        result = await run_command(spec.status_cmd, timeout=max(left, 0.5), log=log,
                                   label="status", env=env)
        if operator_log is not None:
            await operator_log.relay(log, "status")
        if result.returncode == 0:
            log.line(f"status check {attempt} succeeded; the gateway is back")
            return True, result
        log.line(f"status check {attempt} failed "
                 f"({'timed out' if result.returncode is None else f'code {result.returncode}'})")
        left = deadline - clock()
        if left <= 0:
            return False, result
        await trio.sleep(min(spec.status_interval_seconds, left))
