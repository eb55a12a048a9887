"""The restart coordinator's state machine: pure data in, pure data out.

This module contains no I/O whatsoever: no files, no Trio, no clock. Every
function takes ``now`` (seconds since the epoch) from its caller, and the fleet
records only which records changed so that a store can persist exactly those.

Theory of operation
===================

Each agent is in one of six states (seed §1.4.1)::

    idle ──start──▶ busy ──(drained)──▶ idle
      │                                   ▲
      └─workflow-open─▶ focus ─workflow-close─▶ busy ─(drained)─┘

    query-restart:  idle → freeze · busy → pre-freeze · focus → pre-freeze-focus
    pre-freeze, pre-freeze-focus ──(drained)──▶ freeze
    freeze ──restarted──▶ idle          (the gateway came back, or was rolled back)
    freeze-family ──unfreeze──▶ busy / focus, then drained   (cancelled, or a stale freeze)

Rule 1: transitions are data. ``TRANSITIONS[state][event]`` is the next state
and the verdict given to a message that asked to start; a pair missing from the
table is illegal, raises :class:`IllegalTransition` naming both, and changes
nothing (records are frozen; a new one is built only after the lookup).

Rule 2: one derived event, ``drained``, is applied after every other event
whenever the agent has no *counted* active session left. It is what turns busy
into idle and the two pre-freeze states into freeze, so message-end itself is
the same in every state. A session is *not counted* when it is a heartbeat run
(never tracked at all) or when it is the requester's own session during a
restart: the agent that asked for the restart is still inside the turn that
asked, and waiting for that turn to end would deadlock.

Rule 3: the fleet (all agents plus the global record of seed §1.4.5) answers
``query-restart`` with OK only when every agent is frozen, and only one
requester at a time owns a restart; everyone else gets ALREADY_SCHEDULED.

Rule 4: freeze and pre-freeze turn every new message away, with one
exception besides the requester's session: a run that delivers one of our own
notices (``start-notice``: "tidy up, a restart is coming" when a focused agent
drains into freeze). It is admitted and counted, so the agent goes back to
pre-freeze and the restart waits for that turn to end; the drain from plain
pre-freeze queues no second notice, so this cannot loop.

Side effects the coordinator must perform (queue a message for a session) come
back as :class:`Notice` values; their texts live in the settings, not here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any, Iterable


class State(str, enum.Enum):
    IDLE = "idle"
    BUSY = "busy"
    FOCUS = "focus"
    FREEZE = "freeze"
    PRE_FREEZE = "pre-freeze"
    PRE_FREEZE_FOCUS = "pre-freeze-focus"


class Event(str, enum.Enum):
    #: A non-heartbeat message begins (inside the focus workflow, if any).
    START = "start"
    #: A message for a workflow other than the one the agent is focused on.
    START_FOREIGN = "start-foreign"
    #: A message on the restart requester's own session while a restart is pending.
    START_EXEMPT = "start-exempt"
    #: A run the gateway started to deliver one of our notices (e.g. "tidy up
    #: before the restart"): admitted even when frozen, and waited for.
    START_NOTICE = "start-notice"
    #: A heartbeat run begins; it never makes an agent busy.
    HEARTBEAT = "heartbeat"
    END = "end"
    DRAINED = "drained"
    WORKFLOW_OPEN = "workflow-open"
    WORKFLOW_CLOSE = "workflow-close"
    QUERY_RESTART = "query-restart"
    #: The restart was cancelled or the freeze went stale: back to work.
    UNFREEZE = "unfreeze"
    #: The gateway restarted (ok or rolled back): every turn it ran is gone.
    RESTARTED = "restarted"


class Verdict(str, enum.Enum):
    """What a message-start is told; ``NONE`` for events that are not starts."""

    PROCEED = "proceed"
    REJECT_BUSY = "reject-busy"
    REJECT_FROZEN = "reject-frozen"
    NONE = "none"


S, E, V = State, Event, Verdict
FREEZE_FAMILY = frozenset({S.FREEZE, S.PRE_FREEZE, S.PRE_FREEZE_FOCUS})

#: state → event → (next state, verdict). Missing pairs are illegal.
TRANSITIONS: dict[State, dict[Event, tuple[State, Verdict]]] = {
    S.IDLE: {
        E.START: (S.BUSY, V.PROCEED),
        E.START_NOTICE: (S.BUSY, V.PROCEED),
        E.HEARTBEAT: (S.IDLE, V.PROCEED),
        E.END: (S.IDLE, V.NONE),
        E.DRAINED: (S.IDLE, V.NONE),
        E.WORKFLOW_OPEN: (S.FOCUS, V.NONE),
        E.WORKFLOW_CLOSE: (S.IDLE, V.NONE),
        E.QUERY_RESTART: (S.FREEZE, V.NONE),
        E.UNFREEZE: (S.IDLE, V.NONE),
        E.RESTARTED: (S.IDLE, V.NONE),
    },
    S.BUSY: {
        E.START: (S.BUSY, V.PROCEED),
        E.START_NOTICE: (S.BUSY, V.PROCEED),
        E.HEARTBEAT: (S.BUSY, V.PROCEED),
        E.END: (S.BUSY, V.NONE),
        E.DRAINED: (S.IDLE, V.NONE),
        E.WORKFLOW_OPEN: (S.FOCUS, V.NONE),
        E.WORKFLOW_CLOSE: (S.BUSY, V.NONE),
        E.QUERY_RESTART: (S.PRE_FREEZE, V.NONE),
        E.UNFREEZE: (S.BUSY, V.NONE),
        E.RESTARTED: (S.IDLE, V.NONE),
    },
    S.FOCUS: {
        E.START: (S.FOCUS, V.PROCEED),
        E.START_FOREIGN: (S.FOCUS, V.REJECT_BUSY),
        E.START_NOTICE: (S.FOCUS, V.PROCEED),
        E.HEARTBEAT: (S.FOCUS, V.PROCEED),
        E.END: (S.FOCUS, V.NONE),
        E.DRAINED: (S.FOCUS, V.NONE),
        E.WORKFLOW_OPEN: (S.FOCUS, V.NONE),
        # busy, then drained → idle when no session is active (seed §1.4.6).
        E.WORKFLOW_CLOSE: (S.BUSY, V.NONE),
        E.QUERY_RESTART: (S.PRE_FREEZE_FOCUS, V.NONE),
        E.UNFREEZE: (S.FOCUS, V.NONE),
        E.RESTARTED: (S.IDLE, V.NONE),
    },
    S.FREEZE: {
        E.START: (S.FREEZE, V.REJECT_FROZEN),
        E.START_FOREIGN: (S.FREEZE, V.REJECT_FROZEN),
        E.START_EXEMPT: (S.FREEZE, V.PROCEED),
        # Back to pre-freeze: OK waits until this turn ends (then drained → freeze).
        E.START_NOTICE: (S.PRE_FREEZE, V.PROCEED),
        E.HEARTBEAT: (S.FREEZE, V.REJECT_FROZEN),
        E.END: (S.FREEZE, V.NONE),
        E.DRAINED: (S.FREEZE, V.NONE),
        E.WORKFLOW_CLOSE: (S.FREEZE, V.NONE),
        E.QUERY_RESTART: (S.FREEZE, V.NONE),
        # busy, then drained → idle unless a session (the requester's own) is active.
        E.UNFREEZE: (S.BUSY, V.NONE),
        E.RESTARTED: (S.IDLE, V.NONE),
    },
    S.PRE_FREEZE: {
        E.START: (S.PRE_FREEZE, V.REJECT_FROZEN),
        # Kept workflow: a frozen focus agent back in pre-freeze for a notice run.
        E.START_FOREIGN: (S.PRE_FREEZE, V.REJECT_FROZEN),
        E.START_EXEMPT: (S.PRE_FREEZE, V.PROCEED),
        E.START_NOTICE: (S.PRE_FREEZE, V.PROCEED),
        E.HEARTBEAT: (S.PRE_FREEZE, V.REJECT_FROZEN),
        E.END: (S.PRE_FREEZE, V.NONE),
        E.DRAINED: (S.FREEZE, V.NONE),
        # A turn still running may open a workflow before it ends.
        E.WORKFLOW_OPEN: (S.PRE_FREEZE_FOCUS, V.NONE),
        E.WORKFLOW_CLOSE: (S.PRE_FREEZE, V.NONE),
        E.QUERY_RESTART: (S.PRE_FREEZE, V.NONE),
        E.UNFREEZE: (S.BUSY, V.NONE),
        E.RESTARTED: (S.IDLE, V.NONE),
    },
    S.PRE_FREEZE_FOCUS: {
        E.START: (S.PRE_FREEZE_FOCUS, V.REJECT_FROZEN),
        E.START_FOREIGN: (S.PRE_FREEZE_FOCUS, V.REJECT_FROZEN),
        E.START_EXEMPT: (S.PRE_FREEZE_FOCUS, V.PROCEED),
        E.START_NOTICE: (S.PRE_FREEZE_FOCUS, V.PROCEED),
        E.HEARTBEAT: (S.PRE_FREEZE_FOCUS, V.REJECT_FROZEN),
        E.END: (S.PRE_FREEZE_FOCUS, V.NONE),
        E.DRAINED: (S.FREEZE, V.NONE),
        E.WORKFLOW_OPEN: (S.PRE_FREEZE_FOCUS, V.NONE),
        E.WORKFLOW_CLOSE: (S.PRE_FREEZE, V.NONE),
        E.QUERY_RESTART: (S.PRE_FREEZE_FOCUS, V.NONE),
        E.UNFREEZE: (S.FOCUS, V.NONE),
        E.RESTARTED: (S.IDLE, V.NONE),
    },
}


class IllegalTransition(Exception):
    """An event that the agent's current state does not allow; nothing changed."""

    def __init__(self, agent_id: str, state: State, event: Event):
        super().__init__(f"agent {agent_id!r} is {state.value}; "
                         f"{event.value} is not allowed in that state")
        self.agent_id = agent_id
        self.state = state
        self.event = event


class NoticeKind(str, enum.Enum):
    """Which configured message a notice carries (``messages.*`` settings)."""

    PREPARE_AGENT = "prepare_agent"
    PREPARE_SESSION = "prepare_session"
    RESTART_DONE = "restart_done"
    RESTART_FAILED = "restart_failed"


@dataclass(frozen=True, slots=True)
class Notice:
    """A message to queue: ``session_key`` None means the agent itself."""

    agent_id: str
    session_key: str | None
    kind: NoticeKind


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """Seed §1.4.5 ``AgentState``, plus ``resumeSessions`` and ``frozenAt``.

    ``last_sessions`` are the sessions worked in since the agent last left idle;
    ``resume_sessions`` is that list captured when a restart found the agent
    busy or in focus: they are told "restart 结束了，我们继续" afterwards.
    """

    agent_id: str
    state: State = State.IDLE
    workflow: str | None = None
    active_sessions: tuple[str, ...] = ()
    last_sessions: tuple[str, ...] = ()
    resume_sessions: tuple[str, ...] = ()
    updated_at: float = 0.0
    frozen_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"agentId": self.agent_id, "state": self.state.value, "workflow": self.workflow,
                "activeSessions": list(self.active_sessions),
                "lastSessions": list(self.last_sessions),
                "resumeSessions": list(self.resume_sessions),
                "updatedAt": self.updated_at, "frozenAt": self.frozen_at}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AgentRecord":
        return cls(agent_id=str(data["agentId"]), state=State(data["state"]),
                   workflow=data.get("workflow"),
                   active_sessions=tuple(data.get("activeSessions") or ()),
                   last_sessions=tuple(data.get("lastSessions") or ()),
                   resume_sessions=tuple(data.get("resumeSessions") or ()),
                   updated_at=float(data.get("updatedAt") or 0.0),
                   frozen_at=data.get("frozenAt"))


def _add(items: tuple[str, ...], item: str) -> tuple[str, ...]:
    return items if item in items else items + (item,)


def step(agent: AgentRecord, event: Event, *, now: float, session: str | None = None,
         workflow: str | None = None, exempt: str | None = None,
         ) -> tuple[AgentRecord, Verdict, tuple[Notice, ...]]:
    """Apply ``event`` (then ``drained`` when due) to one agent.

    ``exempt`` is the requester's session while this agent owns a pending
    restart; it never counts as active. Raises :class:`IllegalTransition`.
    """
    record, verdict, notices = _apply(agent, event, now, session, workflow)
    counted = [s for s in record.active_sessions if s != exempt]
    if event is not Event.DRAINED and not counted:
        record, _, more = _apply(record, Event.DRAINED, now, None, None)
        notices += more
    return record, verdict, notices


def _apply(agent: AgentRecord, event: Event, now: float, session: str | None,
           workflow: str | None) -> tuple[AgentRecord, Verdict, tuple[Notice, ...]]:
    try:
        new_state, verdict = TRANSITIONS[agent.state][event]
    except KeyError:
        raise IllegalTransition(agent.agent_id, agent.state, event) from None
    old = agent.state
    changes: dict[str, Any] = {"state": new_state}
    notices: tuple[Notice, ...] = ()

    if (event in (Event.START, Event.START_NOTICE) and verdict is Verdict.PROCEED
            and session is not None):
        changes["active_sessions"] = _add(agent.active_sessions, session)
        last = () if old is State.IDLE else agent.last_sessions
        changes["last_sessions"] = _add(last, session)
    elif event is Event.END and session is not None:
        changes["active_sessions"] = tuple(s for s in agent.active_sessions if s != session)
    elif event is Event.WORKFLOW_OPEN:
        changes["workflow"] = workflow
        if old is State.IDLE:
            changes["last_sessions"] = ()
    elif event is Event.WORKFLOW_CLOSE:
        changes["workflow"] = None
    elif event is Event.QUERY_RESTART and old in (State.BUSY, State.FOCUS):
        changes["resume_sessions"] = agent.last_sessions
    elif (event is Event.DRAINED and old is State.PRE_FREEZE_FOCUS and new_state is State.FREEZE
          and agent.last_sessions):
        # The agent is told in the session it worked in last; its other sessions
        # get the short notice. (No session worked in: nobody to tell.)
        *others, latest = agent.last_sessions
        notices = (Notice(agent.agent_id, latest, NoticeKind.PREPARE_AGENT),) + tuple(
            Notice(agent.agent_id, s, NoticeKind.PREPARE_SESSION) for s in others)
    elif event is Event.UNFREEZE:
        changes["resume_sessions"] = ()
    elif event is Event.RESTARTED:
        changes.update(active_sessions=(), workflow=None, resume_sessions=())

    if new_state in FREEZE_FAMILY:
        if agent.frozen_at is None:
            changes["frozen_at"] = now
    else:
        changes["frozen_at"] = None
    record = replace(agent, **changes)
    if record != agent:
        record = replace(record, updated_at=now)
    return record, verdict, notices


# ---------------------------------------------------------------------------
# The fleet: every agent plus the global restart record.


class RestartStatus(str, enum.Enum):
    IDLE = "idle"
    #: A requester owns the restart and waits for every agent to freeze.
    WAITING = "waiting"
    #: OK was given; the restart job (or an external script) is running.
    RESTARTING = "restarting"
    ROLLBACK = "rollback"


class Answer(str, enum.Enum):
    OK = "OK"
    NOT_READY = "NOT_READY"
    ALREADY_SCHEDULED = "ALREADY_SCHEDULED"


@dataclass(frozen=True, slots=True)
class GlobalRecord:
    """Seed §1.4.5 ``Global``, plus when the restart was asked for and last polled."""

    restart_scheduled_by: str | None = None
    restart_session: str | None = None
    restart_status: RestartStatus = RestartStatus.IDLE
    updated_at: float = 0.0
    requested_at: float | None = None
    last_query_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"restartScheduledBy": self.restart_scheduled_by,
                "restartSession": self.restart_session,
                "restartStatus": self.restart_status.value, "updatedAt": self.updated_at,
                "requestedAt": self.requested_at, "lastQueryAt": self.last_query_at}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "GlobalRecord":
        return cls(restart_scheduled_by=data.get("restartScheduledBy"),
                   restart_session=data.get("restartSession"),
                   restart_status=RestartStatus(data.get("restartStatus") or "idle"),
                   updated_at=float(data.get("updatedAt") or 0.0),
                   requested_at=data.get("requestedAt"), last_query_at=data.get("lastQueryAt"))


class RestartStatusError(Exception):
    """A restart-level request that the global status does not allow."""


@dataclass
class Fleet:
    """All agents and the global record; tracks what changed for the store.

    Methods are the seed's events. After each call, ``dirty_agents`` and
    ``dirty_global`` name what a store must write before answering.
    """

    agents: dict[str, AgentRecord] = field(default_factory=dict)
    glob: GlobalRecord = field(default_factory=GlobalRecord)
    dirty_agents: set[str] = field(default_factory=set)
    dirty_global: bool = False
    #: Between ``begin`` and ``commit``: each changed agent's record before the
    #: first change (None: it was new) and the global record at ``begin``.
    _undo: dict[str, AgentRecord | None] | None = field(default=None, repr=False)
    _undo_glob: GlobalRecord | None = field(default=None, repr=False)

    # -- transactions ----------------------------------------------------------

    def begin(self) -> None:
        """Remember enough to undo what follows; O(1), and O(1) per change."""
        self._undo, self._undo_glob = {}, self.glob

    def commit(self) -> None:
        self._undo, self._undo_glob = None, None

    def rollback(self) -> None:
        """Undo every change since ``begin``; nothing is left dirty."""
        if self._undo is None:
            return
        for agent_id, old in self._undo.items():
            if old is None:
                self.agents.pop(agent_id, None)
            else:
                self.agents[agent_id] = old
        if self._undo_glob is not None:
            self.glob = self._undo_glob
        self.dirty_agents, self.dirty_global = set(), False
        self.commit()

    # -- helpers -----------------------------------------------------------

    @property
    def restart_pending(self) -> bool:
        return self.glob.restart_status is not RestartStatus.IDLE

    def _exempt(self, agent_id: str) -> str | None:
        if self.restart_pending and agent_id == self.glob.restart_scheduled_by:
            return self.glob.restart_session
        return None

    def _put(self, record: AgentRecord) -> None:
        old = self.agents.get(record.agent_id)
        if old != record:
            if self._undo is not None and record.agent_id not in self._undo:
                self._undo[record.agent_id] = old
            self.agents[record.agent_id] = record
            self.dirty_agents.add(record.agent_id)

    def _set_global(self, now: float, **changes: Any) -> None:
        self.glob = replace(self.glob, updated_at=now, **changes)
        self.dirty_global = True

    def _agent(self, agent_id: str, now: float) -> AgentRecord:
        """The agent's record; a newcomer during a restart starts frozen."""
        record = self.agents.get(agent_id)
        if record is None:
            record = AgentRecord(agent_id, updated_at=now)
            if self.restart_pending:
                record, _, _ = step(record, Event.QUERY_RESTART, now=now)
            self._put(record)
        return record

    def _step(self, agent_id: str, event: Event, now: float, **kw: Any) -> tuple[Verdict, tuple[Notice, ...]]:
        record = self._agent(agent_id, now)
        new, verdict, notices = step(record, event, now=now, exempt=self._exempt(agent_id), **kw)
        self._put(new)
        return verdict, notices

    def all_frozen(self) -> bool:
        return all(a.state is State.FREEZE for a in self.agents.values())

    def blocking(self) -> list[str]:
        """Agents that keep query-restart from answering OK."""
        return [a.agent_id for a in self.agents.values() if a.state is not State.FREEZE]

    # -- lifecycle events ----------------------------------------------------

    def message_start(self, agent_id: str, session: str, *, now: float, heartbeat: bool = False,
                      workflow: str | None = None,
                      notice: bool = False) -> tuple[Verdict, tuple[Notice, ...]]:
        """``notice``: the run delivers one of our notices into this session."""
        record = self._agent(agent_id, now)
        if session == self._exempt(agent_id):
            event = Event.START_EXEMPT
        elif notice:
            event = Event.START_NOTICE
        elif heartbeat:
            event = Event.HEARTBEAT
        elif record.workflow is not None and workflow != record.workflow:
            event = Event.START_FOREIGN
        else:
            event = Event.START
        return self._step(agent_id, event, now, session=session)

    def message_end(self, agent_id: str, session: str, *, now: float,
                    heartbeat: bool = False) -> tuple[State, tuple[Notice, ...]]:
        if heartbeat and session not in self._agent(agent_id, now).active_sessions:
            return self.agents[agent_id].state, ()
        _, notices = self._step(agent_id, Event.END, now, session=session)
        return self.agents[agent_id].state, notices

    def workflow_open(self, agent_id: str, workflow: str, *, now: float) -> State:
        self._step(agent_id, Event.WORKFLOW_OPEN, now, workflow=workflow)
        return self.agents[agent_id].state

    def workflow_close(self, agent_id: str, *, now: float) -> tuple[State, tuple[Notice, ...]]:
        _, notices = self._step(agent_id, Event.WORKFLOW_CLOSE, now)
        return self.agents[agent_id].state, notices

    # -- restart -------------------------------------------------------------

    def query_restart(self, agent_id: str, session: str, *, now: float,
                      hold: bool = False) -> tuple[Answer, tuple[Notice, ...]]:
        """Seed §1.4.2: freeze what can be frozen, OK when everything is.

        ``hold`` keeps the answer NOT_READY although every agent is frozen (the
        coordinator still has a "tidy up" notice on its way to an agent).
        """
        g = self.glob
        if g.restart_status is RestartStatus.IDLE:
            self._set_global(now, restart_scheduled_by=agent_id, restart_session=session,
                             restart_status=RestartStatus.WAITING, requested_at=now,
                             last_query_at=now)
        elif (g.restart_status is RestartStatus.WAITING and g.restart_scheduled_by == agent_id
              and g.restart_session == session):
            # Not a change worth a write: a restarted coordinator restarts the clock.
            self.glob = replace(g, last_query_at=now)
        else:
            return Answer.ALREADY_SCHEDULED, ()
        notices: tuple[Notice, ...] = ()
        for record in list(self.agents.values()):
            if record.state not in FREEZE_FAMILY:
                notices += self._step(record.agent_id, Event.QUERY_RESTART, now)[1]
        if hold or not self.all_frozen():
            return Answer.NOT_READY, notices
        self._set_global(now, restart_status=RestartStatus.RESTARTING)
        return Answer.OK, notices

    def begin_rollback(self, *, now: float) -> None:
        if self.glob.restart_status is not RestartStatus.RESTARTING:
            raise RestartStatusError(f"no restart is running (status {self.glob.restart_status.value})")
        self._set_global(now, restart_status=RestartStatus.ROLLBACK)

    def restart_finished(self, ok: bool, *, now: float) -> tuple[Notice, ...]:
        """The gateway was restarted (ok) or rolled back (not ok): unfreeze all.

        Ok: every session that was busy or in focus, and the requester's, is told
        to continue. Failed: the requester's session is told to read the log.
        """
        g = self.glob
        if g.restart_status not in (RestartStatus.RESTARTING, RestartStatus.ROLLBACK):
            raise RestartStatusError(
                f"no restart is running (status {g.restart_status.value}); nothing to report")
        notices: list[Notice] = []
        requester = (g.restart_scheduled_by, g.restart_session)
        if ok:
            for record in self.agents.values():
                notices += [Notice(record.agent_id, s, NoticeKind.RESTART_DONE)
                            for s in record.resume_sessions]
            if requester[0] and requester[1] and not any(
                    (n.agent_id, n.session_key) == requester for n in notices):
                notices.append(Notice(requester[0], requester[1], NoticeKind.RESTART_DONE))
        elif requester[0] and requester[1]:
            notices.append(Notice(requester[0], requester[1], NoticeKind.RESTART_FAILED))
        for agent_id in list(self.agents):
            self._step(agent_id, Event.RESTARTED, now)
        self._set_global(now, restart_scheduled_by=None, restart_session=None,
                         restart_status=RestartStatus.IDLE, requested_at=None, last_query_at=None)
        return tuple(notices)

    def cancel(self, *, now: float, agent_ids: Iterable[str] | None = None) -> list[str]:
        """Undo a restart that never reached the gateway; returns unfrozen agents.

        With ``agent_ids`` only those agents are released (a stale freeze) and the
        global record is left alone.
        """
        released = []
        if agent_ids is None and self.restart_pending:
            # First, so that the requester's own session counts again.
            self._set_global(now, restart_scheduled_by=None, restart_session=None,
                             restart_status=RestartStatus.IDLE, requested_at=None,
                             last_query_at=None)
        for agent_id in list(self.agents if agent_ids is None else agent_ids):
            record = self.agents[agent_id]
            if record.state in FREEZE_FAMILY:
                self._step(agent_id, Event.UNFREEZE, now)
                # A focus agent that drained into freeze is still in its workflow.
                if record.workflow is not None and self.agents[agent_id].state is not State.FOCUS:
                    self._step(agent_id, Event.WORKFLOW_OPEN, now, workflow=record.workflow)
                released.append(agent_id)
        return released

    def restarted(self, agent_ids: Iterable[str], *, now: float) -> None:
        """The gateway went away under these agents (a reboot): idle, no sessions."""
        for agent_id in agent_ids:
            self._step(agent_id, Event.RESTARTED, now)

    def stale_freezes(self, *, now: float, max_age: float) -> list[str]:
        return [a.agent_id for a in self.agents.values()
                if a.frozen_at is not None and now - a.frozen_at > max_age]

    def take_dirty(self) -> tuple[list[str], bool]:
        agents, glob = sorted(self.dirty_agents), self.dirty_global
        self.dirty_agents, self.dirty_global = set(), False
        return agents, glob
