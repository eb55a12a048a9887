"""The registry of sessions: admission limits, retention, orphan reaping.

One :class:`Supervisor` per process (the daemon, or a foreground ``pcexec``).
Admission is decided before anything is spawned, and every refusal is a
:class:`LimitReached` with one line naming the setting to change:

- ``supervisor.max_live_sessions`` running sessions in all;
- ``supervisor.max_concurrent_execs_per_agent`` running sessions per agent;
- ``supervisor.global_buffer_bytes``: the output budget must hold another
  session's floor; finished sessions give up their buffers (oldest first)
  before a new one is refused. Never an out-of-memory. Live buffers grow
  only into what the floors of still-admissible sessions leave free, so with
  consistent settings (max_live_sessions x floor <= budget) floods never
  lock new sessions out.

Finished background sessions stay listable for
``supervisor.finished_session_ttl_seconds`` (30 min), at most
``supervisor.max_finished_sessions`` (50). A foreground run that finished
before its yield is not a background session and is dropped once answered.
"""

from __future__ import annotations

import logging
import os
import secrets as _secrets
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Awaitable, Callable, Mapping, Protocol

import trio

from . import procs, zygote
from .buffers import BudgetExhausted, BufferBudget, OutputBuffer
from .channel import CHANNEL_VARIABLE, Forward, SessionChannel, channel_dir
from ..redactor.filters import OutputFilter, new_filter
from .session import OutputCallback, Session, new_session_id
from .settings import SupervisorSettings
from .sandbox import receive_listener
from .stores import StoreWatch
from .sandbox_plan import Prepared, prepare
from .spawn import PtyUnavailable, Sandbox, SpawnError, child_environment, pick_shell, spawn

log = logging.getLogger("paddedcell.supervisor")

#: Memory a live session costs outside its ring: objects, the redactor's held
#: tail, heap fragmentation from its read chunks (64 flooding sessions measured
#: ~10-15 MiB above their rings). Ring growth leaves this much of the budget free.
IN_FLIGHT_BYTES = 256 * 1024
#: Give freed heap pages back once this much output went by since the last tick.
TRIM_AFTER_BYTES = 4 * 1024 * 1024
#: A finished foreground run nobody collected is dropped after this long.
UNCOLLECTED_SECONDS = 60.0
#: A long session lets the next sandbox spares be built after this long.
REFILL_AFTER_SECONDS = 0.5


class LimitReached(Exception):
    """A session was refused by an admission limit; ``str()`` is one line."""


class Audit(Protocol):
    def record(self, event: str, **fields: Any) -> None: ...


@dataclass
class LaunchSpec:
    """What to run, for whom, and what must be masked in its output."""

    command: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    pty: bool = False
    timeout_seconds: float = 0
    agent_id: str | None = None
    agent_workspace: str | None = None
    session_key: str | None = None
    name: str | None = None
    #: Plaintext values to mask; the Session keeps them only inside its redactors.
    secrets: list[str] = field(default_factory=list)
    #: The output filter already built for ``secrets`` (else built here).
    redactor: OutputFilter | None = None
    #: The agent's egress side (``egress.session.ProxySession``) when egress is on for it
    #: (``secretflow.Prepared.egress``); used where the sandbox gives the session a proxy.
    egress: Any = None
    on_output: OutputCallback | None = None
    #: Pipes only: give the child this fd as stdin instead of a writable pipe.
    stdin_fd: int | None = None
    rows: int | None = None
    columns: int | None = None


class Supervisor:
    def __init__(self, settings, nursery: trio.Nursery, *, audit: Audit | None = None,
                 base_env: Mapping[str, str] | None = None, forward: Forward | None = None,
                 store_changed: Callable[[str, str], Awaitable[None]] | None = None):
        self.settings = settings
        procs.pin_malloc_thresholds()  # a pump's batches reused from the heap (see procs)
        #: The supervisor.* settings, typed (built once per settings object).
        self.limits = SupervisorSettings.of(settings)
        self.nursery = nursery
        self.audit = audit
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.budget = BufferBudget(self.limits.global_buffer_bytes)
        self.sessions: dict[str, Session] = {}
        #: Every store on this host and its values: what sessions must mask (stores.py).
        self.stores = StoreWatch(settings)
        #: Trees of finished sessions that left processes behind (reaped when they exit).
        self._leftovers: list[procs.ProcessTree] = []
        self._cgroup_parent = procs.delegated_cgroup()
        #: cgroup v2 limit controllers session cgroups get (empty: rlimits alone).
        self._cgroup_limits = procs.enable_limit_controllers(self._cgroup_parent)
        self._wake = trio.Event()
        #: Where a session's channel sends its daemon requests, bound to the session's agent
        #: (docs/design.md §1): the daemon gives its own routes, a foreground pcexec the
        #: daemon's socket; None refuses them.
        self.forward = forward
        #: A foreground pcexec's word to a running daemon that a session of its changed a
        #: store (``POST /vault/changed``): the daemon's sessions mask the new value before
        #: the change is answered, not a store-scan tick later. None in the daemon.
        self.store_changed = store_changed

    # --- admission and start ------------------------------------------------

    def live_sessions(self, agent_id: str | None = None) -> list[Session]:
        return [s for s in self.sessions.values()
                if s.running and (agent_id is None or s.agent_id == agent_id)]

    def _admit(self, agent_id: str | None) -> None:
        limit = self.limits.max_live_sessions
        if len(self.live_sessions()) >= limit:
            raise LimitReached(f"{limit} sessions are already running (supervisor.max_live_sessions); "
                               "wait for one to finish or end one with process kill")
        per_agent = self.limits.max_concurrent_execs_per_agent
        if len(self.live_sessions(agent_id)) >= per_agent:
            raise LimitReached(f"agent {agent_id or '(local)'} already runs {per_agent} commands "
                               "(supervisor.max_concurrent_execs_per_agent); wait for one or end one "
                               "with process kill")
        floor = min(self.limits.session_buffer_floor_bytes, self.limits.ring_buffer_bytes)
        finished = sorted((s for s in self.sessions.values() if not s.running),
                          key=lambda s: s.ended_at or 0)
        while self.budget.free < floor and finished:
            self._drop(finished.pop(0))

    def start(self, spec: LaunchSpec) -> Session:
        """Admit, spawn and start pumping; raises LimitReached or SpawnError."""
        self._admit(spec.agent_id)
        settings = self.settings
        sandbox = Sandbox.from_settings(settings)
        cwd = spec.cwd or os.getcwd()
        token = _secrets.token_hex(16)
        env = child_environment(self.base_env, agent_id=spec.agent_id,
                                agent_workspace=spec.agent_workspace, extra=spec.env,
                                tree_token=token)
        channel = SessionChannel(None, settings, channel_dir(settings), token, self.forward)
        channel.open()
        env[CHANNEL_VARIABLE] = channel.path
        argv = sandbox.wrap([pick_shell(self.base_env), "-c", spec.command], cwd, spec.pty)
        # Egress (docs/design.md §6.7): where the session gets its own network namespace
        # and proxy, its clients trust the session CA through a bundle beside the channel.
        egress = spec.egress if sandbox.network == "proxy" else None
        try:
            if egress is not None:
                channel.ca_bundle = channel.path[:-len(".sock")] + ".ca.pem"
                egress.write_bundle(channel.ca_bundle)
            prepared = prepare(settings, sandbox, agent_id=spec.agent_id,
                               workspace=spec.agent_workspace, workdir=cwd, argv=argv,
                               env=env, channel=channel.path,
                               ca_bundle=channel.ca_bundle)
        except BaseException:
            channel.close()
            raise
        env, enter_sandbox = prepared.env, prepared.preexec
        if prepared.uid >= 0:
            channel.peer_uids = (prepared.uid,)
        redactor = spec.redactor if spec.redactor is not None else new_filter(spec.secrets, settings)
        # Built once: the command line and every output stream get a fresh()
        # stream of it (the matcher is the expensive part).
        shown = redactor.fresh()
        display = (shown.feed(spec.command.encode()) + shown.flush()).decode("utf-8", "replace")
        try:
            buffer = OutputBuffer(self.limits.ring_buffer_bytes, self.budget,
                                  self.limits.session_buffer_floor_bytes)
        except BudgetExhausted as exc:
            channel.close()
            prepared.close()
            raise LimitReached(str(exc)) from None
        session_id = new_session_id()
        cgroup = procs.open_cgroup_scope(self._cgroup_parent, f"paddedcell-{token[:16]}")
        if cgroup is not None and sandbox.profile != "none":
            # Per session, beside the rlimits (per process), which stay as they are.
            failed = cgroup.limit(procs.limit_files(
                self._cgroup_limits, processes=sandbox.processes,
                memory_bytes=sandbox.memory_bytes,
                cpu_percent=self.limits.sandbox_cpu_percent))
            if failed:
                log.warning("session cgroup %s: cannot write %s; the rlimits still apply",
                            cgroup.path, ", ".join(failed))
        use_pty, warnings = spec.pty, []
        # One pipe for stdout and stderr (their order kept, as OpenClaw's one
        # stream shows it); two only for a live human terminal (the plain CLI).
        separate_stderr = spec.on_output is not None
        try:
            # All but the terminal is the same for a PTY and the pipes it falls back to.
            common = dict(cwd=cwd, env=env, stdin_fd=spec.stdin_fd, rlimits=sandbox.rlimits(),
                          enter_cgroup=cgroup.enter if cgroup else None,
                          cgroup_procs=cgroup.procs if cgroup else None,
                          separate_stderr=separate_stderr, enter_sandbox=enter_sandbox,
                          sandbox_plan=prepared.plan,
                          terminal_owner=prepared.uid if prepared.uid >= 0 else None)
            try:
                spawned = spawn(argv, use_pty=use_pty,
                                rows=spec.rows or self.limits.pty_rows,
                                columns=spec.columns or self.limits.pty_columns,
                                **common)
            except PtyUnavailable as exc:
                # OpenClaw's behaviour and words: run on pipes and say so.
                warnings.append(f"Warning: PTY spawn failed ({exc}); retrying without PTY "
                                f"for `{display}`.")
                use_pty = False
                spawned = spawn(argv, use_pty=False, **common)
        except BaseException:
            buffer.release()
            channel.close()
            prepared.close()
            if cgroup is not None:
                cgroup.remove()
            raise
        prepared.spawned()
        tree = procs.ProcessTree(spawned.proc.pid, token)
        if enter_sandbox is not None:
            tree.adopt_children()  # the sandbox's init (supervisor/sandbox.py)
        session = Session(session_id=session_id, agent_id=spec.agent_id,
                          session_key=spec.session_key, command=spec.command,
                          display_command=display, cwd=cwd, use_pty=use_pty, spawned=spawned,
                          agent_workspace=spec.agent_workspace,
                          tree=tree, buffer=buffer, redactor=redactor, settings=settings,
                          timeout_seconds=spec.timeout_seconds, name=spec.name,
                          on_output=spec.on_output, cgroup=cgroup)
        session.warnings = warnings
        if prepared.uid >= 0:  # the agent's own uid (restart/confine.session_ids reads it)
            session.uid, session.gid = prepared.uid, prepared.gid
        channel.session = session
        if egress is not None and prepared.proxy is not None:
            session.egress = egress  # the channel answers placeholders, the proxy swaps
            egress.audit_sink = lambda event, **fields: self._record(event, session, **fields)
        channel.share = self.share_values
        channel.store_changed = self.store_changed
        # Before its first byte is read: the values of every store it could print (other
        # agents' whose workspace it can read, set before it started too).
        self.stores.learn(spec.agent_id, spec.agent_workspace)
        self.stores.discover()
        session.add_secrets(self.stores.readable_values(spec.agent_id,
                                                        partial(_can_read, session)))
        self.nursery.start_soon(self._serve_channel, session, channel)
        if prepared.proxy is not None:
            self.nursery.start_soon(self._serve_proxy, session, prepared)
        self.sessions[session_id] = session
        self._protect_floors()
        self._record("exec.started", session, pid=session.pid, cwd=cwd, pty=use_pty)
        self.nursery.start_soon(self._run, session)
        if prepared.plan is not None:
            self.nursery.start_soon(self._refill_spares, session)
        self._wake.set()
        return session

    async def _serve_channel(self, session: Session, channel: SessionChannel) -> None:
        """The session's channel lives as long as the session runs."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.serve)
            await session.done.wait()
            nursery.cancel_scope.cancel()

    async def _serve_proxy(self, session: Session, prepared: Prepared) -> None:
        """The session's egress proxy, on the listener its sandbox's init handed over
        (in the session's network namespace), for as long as the session runs."""
        sock = prepared.proxy
        try:
            sock.setblocking(False)
            with trio.move_on_after(30):
                await trio.lowlevel.wait_readable(sock)
            listener = receive_listener(sock)
            if listener is None:
                return  # init failed before listening: the command got the error
            from ..egress.proxy import serve_session_proxy  # light: the rest loads when used

            with listener:
                async with trio.open_nursery() as nursery:
                    # session.egress: the agent's ProxySession where egress is on for it
                    # (secretflow.Prepared.egress, egress/session.session_for), else a
                    # plain proxy.
                    nursery.start_soon(partial(serve_session_proxy, listener, self.settings,
                                               session=session.egress))
                    await session.done.wait()
                    nursery.cancel_scope.cancel()
        except Exception:
            log.exception("session %s: the egress proxy failed", session.id)
        finally:
            prepared.close()

    async def _run(self, session: Session) -> None:
        try:
            await session.run()
        except Exception:
            # One broken session (its tree is already ended, fail closed) must
            # not take the daemon's nursery, and every other session, down.
            log.exception("session %s failed inside the supervisor", session.id)
        finally:
            outcome = session.outcome
            if outcome is not None:
                self._record("exec.killed" if outcome.status == "killed" else "exec.finished",
                             session, status=outcome.status, exitCode=outcome.exit_code,
                             exitSignal=outcome.exit_signal, exitReason=outcome.exit_reason,
                             durationMs=outcome.duration_ms)
            # Whether it left processes behind is for the next tick to find out:
            # a /proc scan here would delay the answer to the waiting request.
            self._leftovers.append(session.tree)
            self._wake.set()
            if session.removed:
                self._drop(session)
            self._protect_floors()
            self._prune()

    async def _refill_spares(self, session: Session) -> None:
        """Sandbox spares are built once the session no longer starts: when it ends or
        has run REFILL_AFTER_SECONDS, so that building them never competes with it."""
        with trio.move_on_after(REFILL_AFTER_SECONDS):
            await session.done.wait()
        zygote.refill()

    def _protect_floors(self) -> None:
        """Keep room for the floors of every session that may still be admitted,
        and for the chunks each live session has in flight (read, redacted)."""
        floor = min(self.limits.session_buffer_floor_bytes, self.limits.ring_buffer_bytes)
        live = len(self.live_sessions())
        admissible = max(0, self.limits.max_live_sessions - live)
        self.budget.protected = admissible * floor + live * IN_FLIGHT_BYTES

    def _record(self, event: str, session: Session, **fields: Any) -> None:
        if self.audit is None:
            return
        try:
            self.audit.record(event, agent=session.agent_id, sessionKey=session.session_key,
                              session=session.id, command=session.command, **fields)
        except OSError as exc:
            log.error("cannot write the audit log: %s", exc)

    # --- lookup -----------------------------------------------------------------

    def get(self, agent_id: str | None, session_id: str) -> Session | None:
        """The session if it exists **and** belongs to this agent (else None: not found)."""
        session = self.sessions.get(session_id)
        if session is None or session.agent_id != agent_id:
            return None
        return session

    def listed(self, agent_id: str | None) -> list[Session]:
        """Sessions ``process list`` shows: this agent's backgrounded ones (OpenClaw's
        ``listRunningSessions`` filters on ``backgrounded`` too), oldest first."""
        return sorted((s for s in self.sessions.values()
                       if s.agent_id == agent_id and s.backgrounded),
                      key=lambda s: s.started_at)

    def forget(self, session: Session) -> None:
        if not session.running:
            self._drop(session)

    def _drop(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        session.buffer.release()

    # --- upkeep -------------------------------------------------------------------

    def _prune(self) -> None:
        now = time.time()
        ttl = self.limits.finished_session_ttl_seconds
        keep = self.limits.max_finished_sessions
        finished = sorted((s for s in self.sessions.values() if not s.running),
                          key=lambda s: s.ended_at or 0)
        background = [s for s in finished if s.backgrounded]
        for session in finished:
            age = now - (session.ended_at or now)
            if session.backgrounded and age > ttl:
                self._drop(session)
            elif not session.backgrounded and age > UNCOLLECTED_SECONDS:
                self._drop(session)
        background = [s for s in background if s.id in self.sessions]
        for session in background[:max(0, len(background) - keep)]:
            self._drop(session)

    def share_values(self, agent_id: str, workspace: str | None, values: list[str]) -> None:
        """Values new to ``agent_id``'s store (set, generated, rotated by anyone) join every
        live session that could print them: the agent's own, and any other whose user can
        read the agent's workspace (where the value may be written, e.g. ``app.env``).
        Synchronous: the caller answers whoever changed the value after this returns."""
        values = [v for v in values if v]
        if not values:
            return
        for session in list(self.sessions.values()):
            if session.running and (session.agent_id == agent_id
                                    or _can_read(session, workspace)):
                session.add_secrets(values)

    async def refresh_store(self, agent_id: str, workspace: str) -> None:
        """Re-read ``agent_id``'s store and share its values (``POST /vault/changed``)."""
        store = self.stores.learn(agent_id, workspace)
        if store is not None:
            values = await trio.to_thread.run_sync(self.stores.read, store)
            self.share_values(store.agent_id, store.workspace, values)

    async def watch_stores(self) -> None:
        """One cheap check (a ``stat`` per known store, a listing when the registry
        changed): a store another process changed or created (a human's ``pass_mgr set``
        when no daemon was told) is re-read and shared with every session that could
        print its values."""
        self.stores.discover()
        for store in self.stores.changed():
            values = await trio.to_thread.run_sync(self.stores.read, store)
            self.share_values(store.agent_id, store.workspace, values)

    async def maintain(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Rescan live trees (so orphans are known), reap them, prune old sessions."""
        interval = self.limits.scan_interval_seconds
        task_status.started()
        produced = 0
        while True:
            total = sum(s.buffer.end for s in self.sessions.values())
            if abs(total - produced) > TRIM_AFTER_BYTES:
                procs.trim_heap()
            produced = total
            trees = [s.tree for s in self.sessions.values() if s.running] + self._leftovers
            if trees:
                try:
                    table = procs.scan()
                except OSError as exc:  # out of descriptors for a moment (a flood): next tick
                    log.warning("process scan skipped: %s", exc)
                    await trio.sleep(interval)
                    continue
                me = os.getpid()
                for tree in trees:
                    tree.refresh(table, me)
                procs.reap_orphans(trees, table, me)
                self._leftovers = [t for t in self._leftovers if t.live(table)]
            self._prune()
            if trees:
                await self.watch_stores()
            if not trees and not any(not s.running for s in self.sessions.values()):
                self._wake = trio.Event()
                await self._wake.wait()
            # Also after a wake-up: the new session's tree was recorded at its spawn, so
            # its first rescan waits a tick. A scan (~15-25 ms for 600 processes) at once
            # would stall its output's start, and a foreground run shorter than a tick
            # needs none.
            await trio.sleep(interval)


def _can_read(session: Session, workspace: str | None) -> bool:
    """Could the session's user read files in ``workspace``? (Its own uid when the
    sandbox gives it one, else the supervisor's: then every session can.)"""
    if not workspace:
        return False
    try:
        st = os.stat(workspace)
    except OSError:
        return False
    uid, gid = getattr(session, "uid", None), getattr(session, "gid", None)
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    if uid in (0, st.st_uid):
        return True
    return bool(st.st_mode & 0o004 or (st.st_gid == gid and st.st_mode & 0o040))


__all__ = ["Supervisor", "LaunchSpec", "LimitReached", "SpawnError", "Session"]
