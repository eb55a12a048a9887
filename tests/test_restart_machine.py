"""The pure restart state machine: every (state, event) pair, then the seed's flows."""

import pytest
from hypothesis import given, settings, strategies as st

from paddedcell.restart.machine import (FREEZE_FAMILY, TRANSITIONS, AgentRecord, Answer, Event,
                                        Fleet, IllegalTransition, NoticeKind, RestartStatus,
                                        RestartStatusError, State, Verdict, step)

# Written out by hand from seed §1.4.1/§1.4.2/§1.4.6, independently of TRANSITIONS.
# Columns: start, start-foreign, start-exempt, start-notice, heartbeat, end, drained,
# workflow-open, workflow-close, query-restart, unfreeze, restarted. "x" = illegal.
# A trailing P / RB / RF is the verdict: proceed, reject-busy, reject-frozen.
EXPECTED = """
idle         busy/P  x         x        busy/P  idle/P   idle  idle    focus  idle  freeze  idle   idle
busy         busy/P  x         x        busy/P  busy/P   busy  idle    focus  busy  pf      busy   idle
focus        focus/P focus/RB  x        focus/P focus/P  focus focus   focus  busy  pff     focus  idle
freeze       freeze/RF freeze/RF freeze/P pf/P freeze/RF freeze freeze x   freeze freeze busy   idle
pre-freeze   pf/RF   pf/RF     pf/P     pf/P    pf/RF    pf    freeze  pff    pf    pf      busy   idle
pre-freeze-focus pff/RF pff/RF pff/P    pff/P   pff/RF   pff   freeze  pff    pf    pff     focus  idle
"""
COLUMNS = [Event.START, Event.START_FOREIGN, Event.START_EXEMPT, Event.START_NOTICE,
           Event.HEARTBEAT, Event.END,
           Event.DRAINED, Event.WORKFLOW_OPEN, Event.WORKFLOW_CLOSE, Event.QUERY_RESTART,
           Event.UNFREEZE, Event.RESTARTED]
SHORT = {"pf": State.PRE_FREEZE, "pff": State.PRE_FREEZE_FOCUS}
VERDICTS = {"P": Verdict.PROCEED, "RB": Verdict.REJECT_BUSY, "RF": Verdict.REJECT_FROZEN}


def _expected():
    table = {}
    for line in EXPECTED.strip().splitlines():
        name, *cells = line.split()
        assert len(cells) == len(COLUMNS), line
        for event, cell in zip(COLUMNS, cells):
            if cell == "x":
                table[(State(name), event)] = None
                continue
            target, _, verdict = cell.partition("/")
            next_state = SHORT.get(target) or State(target)
            table[(State(name), event)] = (next_state, VERDICTS.get(verdict, Verdict.NONE))
    return table


PAIRS = sorted(_expected().items(), key=lambda kv: (kv[0][0].value, kv[0][1].value))


def test_expected_table_covers_every_pair():
    assert len(PAIRS) == len(State) * len(Event)


@pytest.mark.parametrize(("pair", "expected"), PAIRS, ids=[f"{s.value}+{e.value}" for (s, e), _ in PAIRS])
def test_every_state_event_pair(pair, expected):
    state, event = pair
    workflow = "wf" if state in (State.FOCUS, State.PRE_FREEZE_FOCUS) else None
    # "other" keeps a counted session active, so the derived drained event does
    # not fire and the result is the table's own entry.
    agent = AgentRecord("a", state, workflow=workflow, active_sessions=("other",),
                        frozen_at=1.0 if state in FREEZE_FAMILY else None)
    if expected is None:
        with pytest.raises(IllegalTransition) as info:
            step(agent, event, now=5.0, session="s1", workflow="wf2")
        assert state.value in str(info.value) and event.value in str(info.value)
        assert agent.state is state  # records are frozen; nothing changed
        return
    new, verdict, _ = step(agent, event, now=5.0, session="s1", workflow="wf2")
    assert (new.state, verdict) == expected
    assert TRANSITIONS[state][event] == expected


def test_illegal_event_in_fleet_changes_nothing():
    fleet = Fleet()
    fleet.message_start("a", "s1", now=1)
    fleet.query_restart("r", "rs", now=2)
    fleet.message_end("a", "s1", now=3)
    fleet.take_dirty()
    before = (dict(fleet.agents), fleet.glob)
    with pytest.raises(IllegalTransition, match="'a' is freeze; workflow-open"):
        fleet.workflow_open("a", "wf", now=4)
    assert (dict(fleet.agents), fleet.glob) == before
    assert fleet.take_dirty() == ([], False)


# -- seed flows ---------------------------------------------------------------------


def test_busy_until_every_non_heartbeat_session_ends():
    fleet = Fleet()
    assert fleet.message_start("a", "s1", now=1)[0] is Verdict.PROCEED
    fleet.message_start("a", "s2", now=2)
    fleet.message_start("a", "hb", now=2, heartbeat=True)
    assert fleet.agents["a"].active_sessions == ("s1", "s2")
    assert fleet.message_end("a", "s1", now=3)[0] is State.BUSY
    assert fleet.message_end("a", "hb", now=3, heartbeat=True)[0] is State.BUSY
    assert fleet.message_end("a", "s2", now=4)[0] is State.IDLE
    assert fleet.agents["a"].last_sessions == ("s1", "s2")


def test_heartbeat_never_makes_busy_and_does_not_block_ok():
    fleet = Fleet()
    fleet.message_start("a", "agent:a:main", now=1, heartbeat=True)
    assert fleet.agents["a"].state is State.IDLE
    assert fleet.query_restart("r", "rs", now=2)[0] is Answer.OK


def test_focus_rejects_messages_outside_its_workflow():
    fleet = Fleet()
    fleet.workflow_open("a", "deploy", now=1)
    assert fleet.message_start("a", "s1", now=2)[0] is Verdict.REJECT_BUSY
    assert fleet.message_start("a", "s2", now=2, workflow="other")[0] is Verdict.REJECT_BUSY
    assert fleet.message_start("a", "s3", now=2, workflow="deploy")[0] is Verdict.PROCEED
    assert fleet.workflow_close("a", now=3)[0] is State.BUSY  # s3 still active
    assert fleet.message_end("a", "s3", now=4)[0] is State.IDLE


def test_workflow_close_without_sessions_is_idle():
    fleet = Fleet()
    fleet.workflow_open("a", "deploy", now=1)
    assert fleet.workflow_close("a", now=2)[0] is State.IDLE


def test_query_restart_mapping_and_ok_when_all_frozen():
    fleet = Fleet()
    fleet.message_start("idle", "x", now=0)
    fleet.message_end("idle", "x", now=0)
    fleet.message_start("busy", "b1", now=1)
    fleet.workflow_open("focus", "wf", now=1)
    fleet.message_start("focus", "f1", now=1, workflow="wf")
    answer, _ = fleet.query_restart("req", "rs", now=2)
    assert answer is Answer.NOT_READY
    assert {a: r.state for a, r in fleet.agents.items()} == {
        "idle": State.FREEZE, "busy": State.PRE_FREEZE, "focus": State.PRE_FREEZE_FOCUS}
    assert fleet.message_start("busy", "b2", now=3)[0] is Verdict.REJECT_FROZEN
    assert fleet.message_start("focus", "f2", now=3, workflow="wf")[0] is Verdict.REJECT_FROZEN
    assert fleet.message_end("busy", "b1", now=4)[0] is State.FREEZE
    state, notices = fleet.message_end("focus", "f1", now=5)
    assert state is State.FREEZE
    assert [(n.session_key, n.kind) for n in notices] == [("f1", NoticeKind.PREPARE_AGENT)]
    assert fleet.query_restart("req", "rs", now=6)[0] is Answer.OK
    assert fleet.glob.restart_status is RestartStatus.RESTARTING


def test_tidy_up_turn_is_admitted_into_a_frozen_agent_and_waited_for():
    fleet = Fleet()
    fleet.workflow_open("a", "wf", now=1)
    fleet.message_start("a", "u1", now=1, workflow="wf")
    fleet.message_start("a", "u2", now=1, workflow="wf")
    fleet.message_end("a", "u1", now=1)
    fleet.query_restart("req", "rs", now=2)
    state, notices = fleet.message_end("a", "u2", now=3)
    assert [(n.session_key, n.kind) for n in notices] == [
        ("u2", NoticeKind.PREPARE_AGENT), ("u1", NoticeKind.PREPARE_SESSION)]
    # Still held by the coordinator while the notice is on its way.
    assert fleet.query_restart("req", "rs", now=4, hold=True)[0] is Answer.NOT_READY
    assert fleet.message_start("a", "u2", now=5, notice=True)[0] is Verdict.PROCEED
    assert fleet.agents["a"].state is State.PRE_FREEZE
    assert fleet.query_restart("req", "rs", now=6)[0] is Answer.NOT_READY
    assert fleet.message_end("a", "u2", now=7)[0] is State.FREEZE  # no second prepare notice
    assert fleet.query_restart("req", "rs", now=8)[0] is Answer.OK


def test_requester_session_is_not_frozen_and_does_not_block():
    fleet = Fleet()
    fleet.message_start("main", "agent:main:chat", now=1)  # the turn calling safe_restart
    fleet.message_start("main", "agent:main:other", now=1)
    assert fleet.query_restart("main", "agent:main:chat", now=2)[0] is Answer.NOT_READY
    assert fleet.agents["main"].state is State.PRE_FREEZE
    fleet.message_end("main", "agent:main:other", now=3)
    assert fleet.agents["main"].state is State.FREEZE  # its own session does not count
    assert fleet.message_start("main", "agent:main:chat", now=4)[0] is Verdict.PROCEED
    assert fleet.message_start("main", "agent:main:other", now=4)[0] is Verdict.REJECT_FROZEN
    assert fleet.query_restart("main", "agent:main:chat", now=5)[0] is Answer.OK


def test_one_restart_at_a_time():
    fleet = Fleet()
    fleet.message_start("a", "s", now=1)
    assert fleet.query_restart("r1", "s1", now=2)[0] is Answer.NOT_READY
    assert fleet.query_restart("r2", "s2", now=2)[0] is Answer.ALREADY_SCHEDULED
    assert fleet.query_restart("r1", "other", now=2)[0] is Answer.ALREADY_SCHEDULED
    fleet.message_end("a", "s", now=3)
    assert fleet.query_restart("r1", "s1", now=4)[0] is Answer.OK
    # After OK even the owner gets ALREADY_SCHEDULED: one OK per restart.
    assert fleet.query_restart("r1", "s1", now=5)[0] is Answer.ALREADY_SCHEDULED


def test_restart_done_notifies_busy_focus_and_requester_sessions():
    fleet = Fleet()
    fleet.message_start("idle", "i", now=0)
    fleet.message_end("idle", "i", now=0)
    fleet.message_start("busy", "b1", now=1)
    fleet.message_start("busy", "b2", now=1)
    fleet.message_end("busy", "b2", now=1)
    fleet.query_restart("req", "rs", now=2)
    fleet.message_end("busy", "b1", now=3)
    assert fleet.query_restart("req", "rs", now=4)[0] is Answer.OK
    notices = fleet.restart_finished(True, now=5)
    assert {(n.agent_id, n.session_key, n.kind) for n in notices} == {
        ("busy", "b1", NoticeKind.RESTART_DONE), ("busy", "b2", NoticeKind.RESTART_DONE),
        ("req", "rs", NoticeKind.RESTART_DONE)}
    assert all(r.state is State.IDLE and not r.active_sessions for r in fleet.agents.values())
    assert fleet.glob.restart_status is RestartStatus.IDLE


def test_restart_failed_notifies_only_the_requester():
    fleet = Fleet()
    fleet.message_start("busy", "b1", now=1)
    fleet.query_restart("req", "rs", now=2)
    fleet.message_end("busy", "b1", now=3)
    fleet.query_restart("req", "rs", now=4)
    fleet.begin_rollback(now=5)
    assert fleet.glob.restart_status is RestartStatus.ROLLBACK
    notices = fleet.restart_finished(False, now=6)
    assert [(n.agent_id, n.session_key, n.kind) for n in notices] == [
        ("req", "rs", NoticeKind.RESTART_FAILED)]
    assert fleet.agents["busy"].state is State.IDLE


def test_restart_result_without_restart_is_refused():
    with pytest.raises(RestartStatusError, match="no restart is running"):
        Fleet().restart_finished(True, now=1)


def test_cancel_returns_agents_to_their_work():
    fleet = Fleet()
    fleet.message_start("busy", "b1", now=1)
    fleet.workflow_open("focus", "wf", now=1)
    fleet.message_start("focus", "f1", now=1, workflow="wf")
    fleet.message_start("idle", "i", now=1)
    fleet.message_end("idle", "i", now=1)
    fleet.query_restart("req", "rs", now=2)
    assert sorted(fleet.cancel(now=3)) == ["busy", "focus", "idle"]
    assert {a: r.state for a, r in fleet.agents.items()} == {
        "busy": State.BUSY, "focus": State.FOCUS, "idle": State.IDLE}
    assert fleet.agents["busy"].active_sessions == ("b1",)
    assert fleet.glob.restart_status is RestartStatus.IDLE


def test_newcomer_during_restart_starts_frozen():
    fleet = Fleet()
    fleet.query_restart("req", "rs", now=1)
    assert fleet.message_start("new", "n1", now=2)[0] is Verdict.REJECT_FROZEN
    assert fleet.agents["new"].state is State.FREEZE


def test_stale_freezes_are_found_by_age():
    fleet = Fleet()
    fleet.message_start("a", "s", now=0)
    fleet.query_restart("req", "rs", now=10)
    assert fleet.stale_freezes(now=20, max_age=15) == []
    assert fleet.stale_freezes(now=30, max_age=15) == ["a"]
    fleet.cancel(now=30, agent_ids=["a"])
    assert fleet.agents["a"].state is State.BUSY and fleet.agents["a"].frozen_at is None


def test_records_round_trip_through_json():
    fleet = Fleet()
    fleet.workflow_open("a", "wf", now=1)
    fleet.message_start("a", "s", now=2, workflow="wf")
    fleet.query_restart("r", "rs", now=3)
    record = fleet.agents["a"]
    assert AgentRecord.from_json(record.to_json()) == record
    assert type(fleet.glob).from_json(fleet.glob.to_json()) == fleet.glob


# -- invariants under any sequence of events ------------------------------------------

AGENTS = ["a", "b", "r"]
SESSIONS = ["s1", "s2", "rs"]
operations = st.one_of(
    st.tuples(st.just("start"), st.sampled_from(AGENTS), st.sampled_from(SESSIONS),
              st.booleans(), st.sampled_from([None, "wf", "wf2"]), st.booleans()),
    st.tuples(st.just("end"), st.sampled_from(AGENTS), st.sampled_from(SESSIONS)),
    st.tuples(st.just("open"), st.sampled_from(AGENTS), st.sampled_from(["wf", "wf2"])),
    st.tuples(st.just("close"), st.sampled_from(AGENTS)),
    st.tuples(st.just("query"), st.sampled_from(AGENTS), st.sampled_from(SESSIONS)),
    st.tuples(st.just("finish"), st.booleans()),
    st.tuples(st.just("cancel")),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(operations, max_size=40))
def test_invariants_hold_under_any_event_sequence(ops):
    fleet = Fleet()
    for now, op in enumerate(ops):
        try:
            if op[0] == "start":
                fleet.message_start(op[1], op[2], now=now, heartbeat=op[3], workflow=op[4],
                                    notice=op[5])
            elif op[0] == "end":
                fleet.message_end(op[1], op[2], now=now)
            elif op[0] == "open":
                fleet.workflow_open(op[1], op[2], now=now)
            elif op[0] == "close":
                fleet.workflow_close(op[1], now=now)
            elif op[0] == "query":
                answer, _ = fleet.query_restart(op[1], op[2], now=now)
                if answer is Answer.OK:
                    assert all(r.state is State.FREEZE for r in fleet.agents.values())
            elif op[0] == "finish":
                fleet.restart_finished(op[1], now=now)
            else:
                fleet.cancel(now=now)
        except (IllegalTransition, RestartStatusError):
            # Messages come from the gateway whatever our state: they must
            # always get an answer. Only workflow and restart calls may be refused.
            assert op[0] in ("open", "close", "finish")
        exempt = fleet.glob.restart_session if fleet.restart_pending else None
        for record in fleet.agents.values():
            counted = [s for s in record.active_sessions
                       if not (record.agent_id == fleet.glob.restart_scheduled_by and s == exempt)]
            assert (record.frozen_at is not None) == (record.state in FREEZE_FAMILY)
            if record.state is State.IDLE:
                assert not counted and record.workflow is None
            if record.state is State.BUSY:
                assert counted and record.workflow is None
            if record.state in (State.FOCUS, State.PRE_FREEZE_FOCUS):
                assert record.workflow is not None
            if record.state in (State.PRE_FREEZE, State.PRE_FREEZE_FOCUS):
                assert counted and fleet.restart_pending
            if not fleet.restart_pending:
                assert record.state not in FREEZE_FAMILY
