"""Result builders beyond the OpenClaw vectors: caps, our failure kind, edge cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paddedcell.execspec import results
from paddedcell.execspec.results import SessionView, ToolResult


def text_of(result) -> str:
    return result.text


def test_shapes_are_json() -> None:
    for r in (
        results.exec_completed(exit_code=0, duration_ms=1, aggregated="x", cwd="/"),
        results.exec_failed(failure_kind="aborted", reason="r"),
        results.exec_running(session_id="s", pid=1, started_at=0, cwd=None, tail=""),
    ):
        assert json.loads(json.dumps(r.to_json())) == r
        assert list(r) == ["content", "details"]
        assert r["content"][0]["type"] == "text"


def test_aggregated_cap_keeps_the_tail_with_the_note() -> None:
    big = "".join(f"{i:07d}\n" for i in range(30_000))  # 240,000 chars
    r = results.exec_completed(exit_code=0, duration_ms=5, aggregated=big, cwd="/w")
    d = r["details"]
    assert d["truncated"] is True
    assert len(d["aggregated"]) <= 200_000
    assert d["aggregated"].endswith("0029999")  # the tail, trimmed
    assert big.rstrip().endswith(d["aggregated"])
    assert text_of(r).startswith(
        "[earlier output was discarded at the retention cap and cannot be recovered]\n\n"
    )


def test_cap_is_a_setting() -> None:
    r = results.exec_completed(exit_code=0, duration_ms=0, aggregated="abcdef", cwd=None, max_chars=3)
    assert r["details"]["aggregated"] == "def" and r["details"]["truncated"]
    r = results.exec_completed(exit_code=0, duration_ms=0, aggregated="abc", cwd=None, max_chars=3)
    assert not r["details"]["truncated"]
    assert text_of(r) == "abc"


def test_exit_code_line_and_no_output() -> None:
    assert text_of(results.exec_completed(exit_code=0, duration_ms=0, aggregated="", cwd=None)) == "(no output)"
    r = results.exec_completed(exit_code=5, duration_ms=0, aggregated="  \n", cwd=None)
    assert text_of(r) == "(no output)\n\n(Command exited with code 5)"
    assert r["details"]["aggregated"] == "(no output)\n\n(Command exited with code 5)"


def test_secret_resolution_failure() -> None:
    reason = results.failure_reason("secret-resolution", error="no such key: db_password")
    r = results.exec_failed(failure_kind="secret-resolution", reason=reason, duration_ms=3, cwd="/w")
    assert text_of(r) == "no such key: db_password"
    assert r["details"] == {
        "status": "failed", "exitCode": None, "exitSignal": None, "failureKind": "secret-resolution",
        "durationMs": 3, "aggregated": "", "timedOut": False, "cwd": "/w", "truncated": False,
    }  # fmt: skip


def test_failure_reasons() -> None:
    assert results.failure_reason("shell-command-not-found") == "Command not found"
    assert results.failure_reason("signal", exit_signal="SIGKILL") == "Command aborted by signal SIGKILL"
    t = results.failure_reason("overall-timeout", timeout_seconds=30)
    assert t.startswith("Command timed out after 30 seconds.\n\nThe command was terminated")
    assert "start it with pcexec background=true or yieldMs so PaddedCell" in t
    assert "pcexec" not in results.failure_reason("overall-timeout", timeout_seconds=0, continuation_available=False)
    assert results.failure_reason("overall-timeout", timeout_seconds=0).startswith("Command timed out.")
    with pytest.raises(ValueError, match="needs the error text"):
        results.failure_reason("runtime-error")
    with pytest.raises(ValueError, match="unknown failure kind"):
        results.failure_reason("bogus")
    with pytest.raises(ValueError, match="unknown failure kind"):
        results.exec_failed(failure_kind="bogus", reason="x")


def test_exit_classification() -> None:
    def kind(**kw):
        base = dict(exit_code=None, exit_signal=None, exit_reason="exit", duration_ms=0, aggregated="", cwd=None)
        base.update(kw)
        d = results.exec_from_exit(**base)["details"]
        return d["status"], d.get("failureKind"), d.get("timedOut")

    assert kind(exit_code=0) == ("completed", None, None)
    assert kind(exit_code=2) == ("completed", None, None)
    assert kind(exit_code=127) == ("failed", "shell-command-not-found", False)
    assert kind(exit_code=126) == ("failed", "shell-not-executable", False)
    assert kind(exit_reason="signal", exit_signal="SIGSEGV") == ("failed", "signal", False)
    assert kind(exit_reason="overall-timeout", exit_signal="SIGKILL", timeout_seconds=1) == ("failed", "overall-timeout", True)
    assert kind(exit_reason="manual-cancel", exit_signal="SIGTERM") == ("failed", "signal", False)
    assert kind(exit_reason="manual-cancel") == ("failed", "aborted", False)


def test_running_tail_is_capped() -> None:
    r = results.exec_running(session_id="s", pid=2, started_at=1, cwd="/", tail="y" * 5000)
    assert r["details"]["tail"] == "y" * 2000


def test_exec_update() -> None:
    r = results.exec_update(session_id="s", pid=None, started_at=1, cwd="/", tail="", warnings=["Warning: w"])
    assert text_of(r) == "Warning: w\n\n(no output)"
    assert r["details"] == {"status": "running", "sessionId": "s", "startedAt": 1, "cwd": "/", "tail": ""}


def test_js_trim_is_javascripts() -> None:
    assert results.js_trim("\ufeff\u00a0 x \u2028\n") == "x"
    assert results.js_trim("\x1cx\x1f") == "\x1cx\x1f"  # Python's strip() would remove these


# --------------------------------------------------------------------------- process


def view(**kw) -> SessionView:
    base = dict(session_id="s1", status="running", pid=9, command="npm run dev", cwd="/w", started_at=1_000)
    base.update(kw)
    return SessionView(**base)


def test_killed_session_poll_says_stopped_by_request() -> None:
    v = view(status="killed", exit_signal="SIGTERM", ended_at=2_000)
    r = results.process_poll(v, "bye\n")
    assert text_of(r) == "bye\n\nProcess stopped by request (signal SIGTERM)."
    assert r["details"]["status"] == "completed"
    assert r["details"]["exitReason"] == "manual-cancel"
    log = results.process_log(v, "bye\n")
    assert text_of(log) == "bye\n\nProcess stopped by request (signal SIGTERM)."


def test_list_shows_killed_status_and_pads() -> None:
    v = view(status="killed", exit_signal="SIGTERM", ended_at=61_000, command="tail -f x")
    r = results.process_list([v], now_ms=99_000)
    assert text_of(r) == "s1 killed    1m :: tail x"  # deriveSessionName skips options
    assert r["details"]["sessions"][0]["status"] == "killed"


def test_remove_running_and_finished() -> None:
    assert text_of(results.process_remove(view())) == "Removed session s1 (termination requested)."
    assert text_of(results.process_remove(view(status="completed", ended_at=5))) == "Removed session s1."


def test_output_dropped_note_when_total_unknown() -> None:
    v = view(truncated=True, aggregated="x")
    assert text_of(results.process_log(v, "x")).startswith("[earlier output was discarded")
    assert not text_of(results.process_log(view(aggregated="x"), "x")).startswith("[earlier")


def test_poll_backoff_schedule() -> None:
    count, got = None, []
    for _ in range(5):
        count, retry = results.poll_retry(count, False)
        got.append(retry)
    assert got == [5_000, 10_000, 30_000, 60_000, 60_000]
    count, retry = results.poll_retry(count, True)
    assert retry == 5_000
    assert results.poll_retry(count, False)[1] == 10_000
    assert results.poll_retry(None, False)[1] == 5_000


@pytest.mark.parametrize("details, tool, code", [
    ({"status": "completed", "exitCode": 3}, "exec", 3),
    ({"status": "running"}, "exec", 0),
    ({"status": "failed", "failureKind": "secret-resolution"}, "exec", 3),
    ({"status": "failed", "failureKind": "overall-timeout", "exitSignal": "SIGKILL"}, "exec", 124),
    ({"status": "failed", "failureKind": "signal", "exitSignal": "SIGTERM"}, "exec", 143),
    ({"status": "failed", "failureKind": "signal", "exitSignal": "SIG34"}, "exec", 162),
    ({"status": "failed", "failureKind": "signal", "exitSignal": 9}, "exec", 137),
    ({"status": "failed", "failureKind": "shell-command-not-found", "exitCode": 127}, "exec", 127),
    ({"status": "failed", "failureKind": "runtime-error", "exitCode": None}, "exec", 1),
    ({"status": "failed", "error": "No session found for x"}, "process", 1),
    ({"status": "completed", "exitCode": 3}, "process", 0),
])
def test_exit_codes_of_results_read_back_from_json(details, tool, code) -> None:
    payload = {"content": [{"type": "text", "text": "t"}], "details": details}
    got = ToolResult.from_json(payload, tool)
    assert (got.exit_code, got.text, got.to_json()) == (code, "t", payload)


def test_builders_set_the_cli_exit_code() -> None:
    assert results.exec_from_exit(exit_code=None, exit_signal="SIGTERM", exit_reason="signal",
                                  duration_ms=1, aggregated="", cwd="/").exit_code == 143
    assert results.exec_from_exit(exit_code=2, exit_signal=None, exit_reason="exit",
                                  duration_ms=1, aggregated="", cwd="/").exit_code == 2
    assert results.exec_workdir_unavailable("/nope").exit_code == 1
    assert results.process_not_found("x").exit_code == 1


def test_exit_event_texts_are_openclaws() -> None:
    event = results.exec_exit_event
    assert event(session_id="abcdefghij", exit_code=0, exit_signal=None, exit_reason="exit",
                 output="") is None  # a silent success says nothing
    assert event(session_id="abcdefghij", exit_code=None, exit_signal="SIGTERM",
                 exit_reason="manual-cancel", output="x") is None  # the agent killed it
    assert event(session_id="abcdefghij", exit_code=0, exit_signal=None, exit_reason="exit",
                 output="  a\n\n b \n") == "Exec completed (abcdefgh, code 0) :: a b"
    assert event(session_id="abcdefghij", exit_code=2, exit_signal=None, exit_reason="exit",
                 output="") == "Exec completed (abcdefgh, code 2)"
    assert event(session_id="abcdefghij", exit_code=127, exit_signal=None, exit_reason="exit",
                 output="y" * 300) == "Exec failed (abcdefgh, code 127) :: " + "y" * 179 + "\u2026"


def test_write_counts_utf8_bytes_and_paste_utf16_units() -> None:
    assert text_of(results.process_write(view(), "é")) == "Wrote 2 bytes to session s1."
    assert text_of(results.process_paste(view(), "😀")) == "Pasted 2 chars to session s1."


@given(st.text(alphabet="ab\n\r", max_size=60), st.one_of(st.none(), st.integers(-3, 70)), st.one_of(st.none(), st.integers(-3, 70)))
def test_slice_lines_properties(text, offset, limit) -> None:
    s = results.slice_lines(text, offset, limit)
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert s.total_lines == (len(lines) if text else 0)
    assert s.total_chars == len(text)
    got = s.text.split("\n") if s.text else []
    if limit is not None and limit >= 0 and s.text:
        assert len(got) <= max(limit, 0) or (limit == 0 and got == [])
    if offset is None and limit is None:
        assert s.default_tail and len(got) <= 200
