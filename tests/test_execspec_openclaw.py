"""PaddedCell's exec contract against OpenClaw's own answers, field by field.

``test_execspec_openclaw_vectors.json`` was produced by
``test_execspec_openclaw_vectors.mjs`` from OpenClaw 2026.9.6's ``dist/``:
its real ``process`` tool (``bash-tools.process.ts``) over fake sessions in its
real registry (``bash-process-registry.ts``), its exec outcome and result
builders (``bash-tools.exec-runtime.ts`` ``buildExecExitOutcome``,
``bash-tools.exec-support.ts`` ``buildExecForegroundResult``), its pty-keys
encoder (``pty-keys.ts``), ``sliceLogLines``/``deriveSessionName``
(``bash-tools.shared.ts``), ``formatDurationCompact`` and the host env guard
(``host-env-security.ts``).

The only differences allowed are the deliberate ones, all in :func:`ours`
and :data:`EXTRA_DETAILS`: our tools are called ``pcprocess``/``pcexec``, and
exec results carry ``details.truncated`` (docs/design.md §4.1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paddedcell.execspec import keys, results
from paddedcell.execspec.request import RequestError, check_env, forbidden_env_keys
from paddedcell.execspec.process import ProcessStep, process_step
from paddedcell.execspec.request import parse_process_action
from paddedcell.execspec.results import SessionView

VECTORS = json.loads(
    (Path(__file__).with_name("test_execspec_openclaw_vectors.json")).read_text(encoding="utf-8")
)
NOW = VECTORS["now"]
#: details keys PaddedCell adds on purpose.
EXTRA_DETAILS = {"truncated"}


def ours(openclaw_text: str) -> str:
    """OpenClaw's text with our tool names (the one intended difference)."""
    return (
        openclaw_text.replace("Use process ", "Use pcprocess ")
        .replace("start it with exec background", "start it with pcexec background")
        .replace("so OpenClaw can register", "so PaddedCell can register")
    )


def assert_same(mine: dict[str, Any], theirs: dict[str, Any], *, extra: set[str] = frozenset()) -> None:
    assert mine["content"] == [{"type": "text", "text": ours(theirs["content"][0]["text"])}]
    mine_details = {k: v for k, v in mine["details"].items() if k not in extra}
    their_details = dict(theirs["details"])
    for key in ("followUp", "output"):  # texts that name the tools
        if key in their_details:
            their_details[key] = ours(their_details[key])
    assert mine_details == their_details


def test_vectors_are_from_the_pinned_openclaw() -> None:
    assert VECTORS["openclaw"] == "2026.9.6"
    assert ours(VECTORS["followUp"]) == results.FOLLOW_UP
    assert VECTORS["noOutputPlaceholder"] == results.EXEC_NO_OUTPUT_PLACEHOLDER


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize("case", VECTORS["keys"], ids=lambda c: json.dumps({k: v for k, v in c.items() if k in ("keys", "hex", "literal", "mode")}))
def test_send_keys_bytes(case: dict[str, Any]) -> None:
    encoded = keys.encode_key_request(
        keys=case.get("keys"), hex=case.get("hex"), literal=case.get("literal"), cursor_mode=case.get("mode")
    )
    assert encoded.data.hex() == case["bytes"]
    assert list(encoded.warnings) == case["warnings"]
    assert keys.has_cursor_mode_sensitive_keys(case.get("keys")) == case["sensitive"]


def test_send_keys_bytes_random_requests() -> None:
    """600 seeded random requests (modifiers x names x modes, hex, literal)."""
    for case in VECTORS["keysRandom"]:
        encoded = keys.encode_key_request(
            keys=case["keys"], hex=case.get("hex"), literal=case.get("literal"), cursor_mode=case["mode"]
        )
        assert (encoded.data.hex(), list(encoded.warnings)) == (case["bytes"], case["warnings"]), case


@pytest.mark.parametrize("case", VECTORS["paste"], ids=lambda c: repr((c["text"], c["bracketed"])))
def test_paste_bytes(case: dict[str, Any]) -> None:
    assert keys.encode_paste(case["text"], case["bracketed"]).hex() == case["bytes"]


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("case", VECTORS["sliceLogLines"])
def test_slice_lines_matches_slice_log_lines(case: dict[str, Any]) -> None:
    # sliceLogLines itself takes offset/limit as given; the 200-line default is
    # resolveLogSliceWindow's, which slice_lines also applies.
    offset, limit = case["offset"], case["limit"]
    if offset is None and limit is None:
        got = results.slice_lines(case["text"], None, None)
        expected = [ln for ln in case["text"].replace("\r\n", "\n").split("\n")]
        if expected and expected[-1] == "":
            expected.pop()
        assert got.text == "\n".join(expected[-200:])
        assert got.default_tail
        return
    got = results.slice_lines(case["text"], offset, limit)
    assert (got.text, got.total_lines, got.total_chars) == (case["slice"], case["totalLines"], case["totalChars"])


@pytest.mark.parametrize("case", VECTORS["deriveSessionName"], ids=lambda c: c["command"][:30])
def test_derive_session_name(case: dict[str, Any]) -> None:
    assert results.derive_session_name(case["command"]) == case["name"]


@pytest.mark.parametrize("case", VECTORS["formatDurationCompact"], ids=lambda c: str(c["ms"]))
def test_format_duration_compact(case: dict[str, Any]) -> None:
    assert results.format_duration_compact(case["ms"]) == case["text"]


# --------------------------------------------------------------------------- exec


@pytest.mark.parametrize("case", VECTORS["exec"], ids=lambda c: f"{c['input']['reason']}-{c['input']['exitCode']}-{c['input']['exitSignal']}")
def test_exec_results(case: dict[str, Any]) -> None:
    e = case["input"]
    mine = results.exec_from_exit(
        exit_code=e["exitCode"],
        exit_signal=e["exitSignal"],
        exit_reason=e["reason"],
        duration_ms=e["durationMs"],
        aggregated=e["aggregated"],
        truncated=e.get("dropped", False),
        cwd=e["cwd"],
        timeout_seconds=e.get("timeoutSec"),
        warnings=[e["warningText"]] if e.get("warningText") else (),
        continuation_available=e.get("cont", False),
    )
    assert_same(mine, case["result"], extra=EXTRA_DETAILS)
    assert mine["details"]["truncated"] is e.get("dropped", False)


def test_exec_running_shape() -> None:
    # bash-tools.exec-run.ts: `${warnings}Command still running (session ${id}, pid ${pid ?? "n/a"}). ${FOLLOW_UP}`
    r = results.exec_running(session_id="quiet-rook", pid=77, started_at=NOW, cwd="/w", tail="x" * 3000)
    assert r["content"][0]["text"] == (
        "Command still running (session quiet-rook, pid 77). Use pcprocess "
        "(list/poll/log/write/send-keys/submit/paste/kill/clear/remove) for follow-up."
    )
    assert r["details"] == {
        "status": "running", "sessionId": "quiet-rook", "pid": 77, "startedAt": NOW, "cwd": "/w",
        "tail": "x" * 2000, "followUp": results.FOLLOW_UP,
    }  # fmt: skip
    r = results.exec_running(session_id="s", pid=None, started_at=NOW, cwd=None, tail="", warnings=["Warning: w"])
    assert r["content"][0]["text"].startswith("Warning: w\n\nCommand still running (session s, pid n/a). ")
    assert "pid" not in r["details"]


# --------------------------------------------------------------------------- env guard


@pytest.mark.parametrize("case", VECTORS["env"], ids=lambda c: ",".join(c["env"]) or "-")
def test_env_guard(case: dict[str, Any]) -> None:
    assert forbidden_env_keys(case["env"]) == (case["blocked"], case["invalid"])
    if case["error"] is None:
        check_env(case["env"])
    else:
        with pytest.raises(RequestError) as info:
            check_env(case["env"])
        assert str(info.value) == case["error"]


def test_env_guard_every_policy_name() -> None:
    """Each name of OpenClaw's policy (and its lower-case and suffixed forms) alone."""
    assert len(VECTORS["envEveryName"]) > 700
    for case in VECTORS["envEveryName"]:
        blocked, invalid = forbidden_env_keys({case["name"]: "value"})
        assert (bool(blocked), bool(invalid)) == (case["blocked"], case["invalid"]), case["name"]


# --------------------------------------------------------------------------- process


class Registry:
    """One session of a vector's spec, as the daemon's registry would hold it.

    No decision is taken here: every answer comes from :func:`process_step`, the
    function the daemon runs, and this class only keeps what a step asks it to
    keep (pending output delivered, stdin closed, record forgotten, poll count),
    as :meth:`ExecService._apply` does with a real session.
    """

    PENDING_CAP = 30_000

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        everything = "".join(spec.get("outputs") or [])
        cap = spec.get("maxOutputChars", 200_000)
        self.aggregated, cut = results.cap_aggregated(everything, cap)
        pending_cap = min(self.PENDING_CAP, cap)
        self.pending = everything[-pending_cap:] if len(everything) > pending_cap else everything
        self.dropped = len(everything) > pending_cap
        self.total = len(everything)
        self.truncated = cut or self.dropped
        self.stdin_writable = spec.get("stdinWritable", True)
        self.exit = spec.get("exit")
        self.gone = False
        self.poll_count: int | None = None

    def view(self) -> SessionView | None:
        if self.gone:
            return None
        s, x = self.spec, self.exit
        last = s.get("lastOutputAt") or s["startedAt"]
        return SessionView(
            session_id=s["id"], status="running" if x is None else x["status"], pid=s["pid"],
            command=s["command"], cwd=s["cwd"], started_at=s["startedAt"],
            ended_at=s.get("endedAt", None if x is None else NOW),
            exit_code=None if x is None else x["exitCode"],
            exit_signal=None if x is None else x["exitSignal"],
            tail=results.tail(self.aggregated), aggregated=self.aggregated, truncated=self.truncated,
            exit_reason=None if x is None else x["reason"],
            stdin_writable=self.stdin_writable and x is None, idle_ms=NOW - last,
            last_output_at=last, total_output_chars=self.total,
            cursor_mode=s.get("cursorKeyMode", "normal"), poll_count=self.poll_count,
            pending_output=self.pending, pending_dropped=self.dropped,
        )  # fmt: skip

    def act(self, args: dict[str, Any]) -> ProcessStep:
        action = parse_process_action({**args, "sessionId": self.spec["id"], "agentId": "a"})
        step = process_step(action, self.view())
        self.poll_count = step.poll_count
        if step.take_output:
            self.pending, self.dropped = "", False
        if step.close_input:
            self.stdin_writable = False
        if step.forget:
            self.gone = True
        return step


@pytest.mark.parametrize("scenario", VECTORS["process"], ids=lambda s: s["name"])
def test_process_actions(scenario: dict[str, Any]) -> None:
    registry = Registry(scenario["spec"])
    for step in scenario["results"]:
        mine = registry.act(step["args"])
        assert_same(mine.result, step["result"]), step["args"]
        assert mine.send.hex() == step["written"], step["args"]


def test_process_list() -> None:
    views = [Registry(spec).view() for spec in VECTORS["list"]["specs"]]
    assert_same(results.process_list(views, now_ms=NOW), VECTORS["list"]["result"])
    assert_same(results.process_list([], now_ms=NOW), VECTORS["listEmpty"])


def test_process_errors() -> None:
    e = VECTORS["errors"]
    assert_same(results.process_not_found("nope"), e["notFoundPoll"])
    assert_same(results.process_not_found("nope"), e["notFoundLog"])
    assert_same(results.process_not_found("nope"), e["notFoundRemove"])
    assert_same(results.process_not_found("nope", "active"), e["notFoundWrite"])
    assert_same(results.process_not_found("nope", "active"), e["notFoundKill"])
    assert_same(results.process_not_found("nope", "finished"), e["notFoundClear"])
    for body, key in (({"action": "frobnicate"}, "invalidAction"), ({"action": "poll"}, "missingSession")):
        with pytest.raises(RequestError) as info:
            parse_process_action(body)
        assert_same(results.process_failed(str(info.value)), e[key])


# --------------------------------------------------------------------------- live exec


@pytest.mark.parametrize("case", VECTORS["execLive"], ids=lambda c: c["args"]["command"][:30])
def test_exec_matches_a_real_openclaw_run(case: dict[str, Any]) -> None:
    theirs = case["result"]
    d = theirs["details"]
    if d["status"] == "running":
        mine = results.exec_running(
            session_id=d["sessionId"], pid=d["pid"], started_at=d["startedAt"], cwd=d["cwd"], tail=""
        )
        assert_same(mine, theirs)
        return
    raw = case.get("raw", d["aggregated"] + "\n")
    mine = results.exec_from_exit(
        exit_code=d["exitCode"],
        exit_signal=d["exitSignal"],
        exit_reason=d["exitReason"],
        duration_ms=d["durationMs"],
        aggregated=raw,
        cwd=d["cwd"],
        timeout_seconds=case["args"].get("timeoutSeconds"),
    )
    assert_same(mine, theirs, extra=EXTRA_DETAILS)


@pytest.mark.parametrize("case", VECTORS["execErrors"], ids=lambda c: json.dumps(c["args"]))
def test_exec_request_errors_match(case: dict[str, Any]) -> None:
    from paddedcell.execspec.request import parse_exec_request

    with pytest.raises(RequestError) as info:
        parse_exec_request(case["args"])
    assert str(info.value) == case["error"]


def test_workdir_unavailable_matches() -> None:
    case = VECTORS["workdirMissing"]
    assert_same(results.exec_workdir_unavailable(case["workdir"]), case["result"], extra=EXTRA_DETAILS)
