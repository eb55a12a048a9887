"""``POST /exec`` and ``POST /process`` through a real daemon on its Unix socket."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time

import pytest

from paddedcell.daemon.client import DaemonError
from supervisor_helpers import Daemon, alive, py, pid_by_argv0

COMPLETED_KEYS = {"status", "exitCode", "exitSignal", "exitReason", "durationMs", "aggregated",
                  "truncated", "cwd"}
FAILED_KEYS = {"status", "exitCode", "exitSignal", "failureKind", "exitReason", "durationMs",
               "aggregated", "truncated", "timedOut", "cwd"}
#: OpenClaw's newer builds add this one; the rest is docs/design.md §4.1.
OPTIONAL_KEYS = {"noOutputTimedOut"}
RUNNING_KEYS = {"status", "sessionId", "pid", "startedAt", "cwd", "tail", "followUp"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    home = tmp_path_factory.mktemp("daemon-exec") / "home"
    home.mkdir(mode=0o700)
    d = Daemon(home, PADDEDCELL_SUPERVISOR_KILL_GRACE_SECONDS="0.5",
               PADDEDCELL_SUPERVISOR_SCAN_INTERVAL_SECONDS="0.2")
    yield d
    d.stop()


def exec_(daemon, command, agent="a1", **fields):
    return daemon.call("/exec", {"command": command, "agentId": agent, **fields})


def process(daemon, action, agent="a1", **fields):
    return daemon.call("/process", {"action": action, "agentId": agent, **fields})


def poll_until_exit(daemon, session_id, agent="a1"):
    text = ""
    for _ in range(60):
        result = process(daemon, "poll", agent, sessionId=session_id, timeout=1000)
        text += result["content"][0]["text"]
        if result["details"]["status"] != "running":
            return result, text
    raise AssertionError("session did not finish")


def test_completed_result_has_openclaws_fields(daemon):
    result = exec_(daemon, "echo hi; exit 3")
    assert COMPLETED_KEYS <= set(result["details"]) <= COMPLETED_KEYS | OPTIONAL_KEYS
    assert result["details"]["status"] == "completed" and result["details"]["exitCode"] == 3
    assert result["content"] == [{"type": "text", "text": result["content"][0]["text"]}]
    assert result["content"][0]["text"].endswith("(Command exited with code 3)")


def test_failed_result_has_openclaws_fields(daemon):
    result = exec_(daemon, "sleep 10", timeoutSeconds=0.3)
    details = result["details"]
    assert FAILED_KEYS <= set(details) <= FAILED_KEYS | OPTIONAL_KEYS
    assert (details["failureKind"], details["timedOut"], details["exitReason"]) == (
        "overall-timeout", True, "overall-timeout")
    assert "Command timed out after 0.3 seconds." in result["content"][0]["text"]


def test_yield_returns_a_running_handle_and_poll_collects(daemon):
    result = exec_(daemon, "echo one; sleep 0.5; echo two", yieldMs=100)
    details = result["details"]
    assert set(details) == RUNNING_KEYS and details["status"] == "running"
    assert result["content"][0]["text"].startswith(f"Command still running (session {details['sessionId']}, pid {details['pid']}).")
    final, text = poll_until_exit(daemon, details["sessionId"])
    assert "one" in text and "two" in text
    assert final["details"]["exitCode"] == 0


def wait_for_log(daemon, sid, text):
    for _ in range(200):
        log = process(daemon, "log", sessionId=sid)["content"][0]["text"]
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {log!r}")


def test_a_pipe_session_has_no_writable_stdin_like_openclaws(daemon):
    sid = exec_(daemon, "cat; echo rc=$?; sleep 30", background=True)["details"]["sessionId"]
    try:
        wait_for_log(daemon, sid, "rc=0")  # cat saw EOF at once
        assert process(daemon, "write", sessionId=sid, data="x")["content"][0]["text"] == \
            f"Session {sid} stdin is not writable."
        entry = next(e for e in process(daemon, "list")["details"]["sessions"]
                     if e["sessionId"] == sid)
        assert entry["stdinWritable"] is False and entry["waitingForInput"] is False
    finally:
        process(daemon, "kill", sessionId=sid)


def test_background_lifecycle(daemon):
    started = exec_(daemon, "stty -echo; echo ready; " + py(
        "import sys\nfor line in sys.stdin: print('echo:', line.strip(), flush=True)"),
        background=True, pty=True)
    sid = started["details"]["sessionId"]
    listed = process(daemon, "list")
    assert sid in [s["sessionId"] for s in listed["details"]["sessions"]]
    wait_for_log(daemon, sid, "ready")
    wrote = process(daemon, "write", sessionId=sid, data="hello\n")
    assert wrote["content"][0]["text"] == f"Wrote 6 bytes to session {sid}."
    for _ in range(50):
        log = process(daemon, "log", sessionId=sid)
        if "echo: hello" in log["content"][0]["text"]:
            break
        time.sleep(0.05)
    assert "echo: hello" in log["content"][0]["text"]
    process(daemon, "write", sessionId=sid, data="bye\n", eof=True)
    final, text = poll_until_exit(daemon, sid)
    assert final["details"]["exitCode"] == 0
    assert process(daemon, "clear", sessionId=sid)["content"][0]["text"] == f"Cleared session {sid}."
    assert process(daemon, "poll", sessionId=sid)["details"]["status"] == "failed"


def test_kill_and_remove(daemon):
    sid = exec_(daemon, "sleep 60", background=True)["details"]["sessionId"]
    killed = process(daemon, "kill", sessionId=sid)
    assert killed["content"][0]["text"] == f"Termination requested for session {sid}."
    final, text = poll_until_exit(daemon, sid)
    assert "Process stopped by request" in text
    removed = process(daemon, "remove", sessionId=sid)
    assert removed["content"][0]["text"] == f"Removed session {sid}."
    assert sid not in json.dumps(process(daemon, "list"))


def test_another_agents_session_is_not_found(daemon):
    sid = exec_(daemon, "sleep 30", agent="owner", background=True)["details"]["sessionId"]
    try:
        for action, extra, kind in [("poll", {}, ""), ("log", {}, ""), ("write", {"data": "x"}, "active "),
                                    ("kill", {}, "active "), ("remove", {}, ""),
                                    ("send-keys", {"keys": ["C-c"]}, "active ")]:
            result = process(daemon, action, agent="intruder", sessionId=sid, **extra)
            assert result["details"] == {"status": "failed",
                                         "error": f"No {kind}session found for {sid}"}
        assert sid not in json.dumps(process(daemon, "list", agent="intruder"))
        assert process(daemon, "poll", agent="owner", sessionId=sid)["details"]["status"] == "running"
    finally:
        process(daemon, "kill", agent="owner", sessionId=sid)


def test_send_keys_ctrl_c_reaches_the_pty_foreground_job(daemon):
    sid = exec_(daemon, py("import time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
                           "except KeyboardInterrupt:\n    print('interrupted')"),
                pty=True, background=True)["details"]["sessionId"]
    for _ in range(400):  # the handler must be in place before C-c
        if "ready" in process(daemon, "log", sessionId=sid)["content"][0]["text"]:
            break
        time.sleep(0.05)
    sent = process(daemon, "send-keys", sessionId=sid, keys=["C-c"])
    assert sent["content"][0]["text"] == f"Sent 1 bytes to session {sid}."
    final, text = poll_until_exit(daemon, sid)
    assert "interrupted" in text


def test_input_details_are_listed(daemon):
    # OpenClaw's rule: waitingForInput once a writable session is silent for 15 s
    # (tested on the pure view); a fresh prompt is not yet waiting.
    sid = exec_(daemon, py("input('password? ')"), pty=True, background=True)["details"]["sessionId"]
    try:
        wait_for_log(daemon, sid, "password?")
        entry = next(s for s in process(daemon, "list")["details"]["sessions"]
                     if s["sessionId"] == sid)
        assert (entry["stdinWritable"], entry["waitingForInput"]) == (True, False)
        submitted = process(daemon, "submit", sessionId=sid)
        assert submitted["content"][0]["text"] == f"Submitted session {sid} (sent CR)."
        final, _ = poll_until_exit(daemon, sid)
        assert final["details"]["exitCode"] == 0
    finally:
        process(daemon, "remove", sessionId=sid)


def test_requests_without_an_agent_or_with_bad_fields_are_refused(daemon):
    with pytest.raises(DaemonError) as err:
        daemon.call("/exec", {"command": "true"})
    assert err.value.status == 400 and "agentId" in err.value.message
    with pytest.raises(DaemonError) as err:
        exec_(daemon, "true", env={"PATH": "/tmp"})
    assert err.value.status == 400 and "PATH" in err.value.message
    with pytest.raises(DaemonError) as err:
        exec_(daemon, "echo ######")
    assert err.value.status == 400 and "pass_mgr get" in err.value.message


def test_per_agent_limit_is_a_clear_429(daemon):
    sids = [exec_(daemon, "sleep 30", agent="busy", background=True)["details"]["sessionId"]
            for _ in range(8)]
    try:
        with pytest.raises(DaemonError) as err:
            exec_(daemon, "sleep 30", agent="busy", background=True)
        assert err.value.status == 429 and "max_concurrent_execs_per_agent" in err.value.message
    finally:
        for sid in sids:
            process(daemon, "remove", agent="busy", sessionId=sid)


class _Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def stream_exec(daemon, body):
    conn = _Unix(daemon.client.path)
    conn.request("POST", "/exec", body=json.dumps(body), headers={"content-type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("content-type") == "application/x-ndjson"
    assert response.getheader("transfer-encoding") == "chunked"
    lines = [json.loads(line) for line in response.read().decode().splitlines()]
    conn.close()
    return lines


def test_stream_sends_tail_updates_then_the_result(daemon):
    lines = stream_exec(daemon, {"command": "for i in 1 2 3 4; do echo line$i; sleep 0.3; done",
                                 "agentId": "a1", "stream": True})
    updates, last = lines[:-1], lines[-1]
    # OpenClaw's exec partial result (onUpdate), relayed by the plugin as is.
    assert updates and all(set(u) == {"update"} for u in updates)
    first = updates[0]["update"]
    assert set(first["details"]) == {"status", "sessionId", "pid", "startedAt", "cwd", "tail"}
    assert first["details"]["status"] == "running"
    assert first["details"]["tail"].startswith("line1")
    assert first["content"] == [{"type": "text", "text": first["details"]["tail"]}]
    assert last["result"]["details"]["status"] == "completed"
    assert last["result"]["details"]["aggregated"].rstrip() == "line1\nline2\nline3\nline4"


def test_stream_that_yields_ends_with_a_running_result(daemon):
    lines = stream_exec(daemon, {"command": "echo start; sleep 30", "agentId": "a1",
                                 "stream": True, "yieldMs": 600})
    result = lines[-1]["result"]
    assert result["details"]["status"] == "running"
    process(daemon, "remove", sessionId=result["details"]["sessionId"])


def test_a_gigabyte_flood_stays_inside_the_memory_budget(daemon):
    before = daemon.rss_kib("VmHWM")
    code = ("import os\nb = b'x' * (1 << 20)\n"
            "for _ in range(1024): os.write(1, b)")
    result = exec_(daemon, py(code), yieldMs=120000, timeoutSeconds=300)
    details = result["details"]
    assert details["status"] == "completed" and details["truncated"] is True
    assert len(details["aggregated"]) == 200_000
    grown_mib = (daemon.rss_kib("VmHWM") - before) / 1024
    # The budget is 64 MiB; a leak of the flood would be ~1024 MiB.
    assert grown_mib < 64, f"daemon peak RSS grew by {grown_mib:.0f} MiB"


def test_stopping_the_daemon_ends_running_sessions(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    # The pid the command writes is a host pid only without the namespace sandbox
    # (tests/test_sandbox.py covers the sandboxed tree).
    d = Daemon(home, PADDEDCELL_SUPERVISOR_KILL_GRACE_SECONDS="0.5",
               PADDEDCELL_SUPERVISOR_SANDBOX="none")
    pidfile = tmp_path / "child.pid"
    try:
        exec_(d, py("import os, time\nif os.fork() == 0:\n    os.setsid()\n"
                    f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                    "    time.sleep(120)\nos.wait()"), background=True)
        for _ in range(400):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        child = int(pidfile.read_text())
        assert alive(child)
    finally:
        d.stop()
    for _ in range(400):
        if not alive(child):
            break
        time.sleep(0.05)
    assert not alive(child)


def test_await_results_waits_past_the_yield(daemon):
    result = exec_(daemon, "sleep 0.4; echo finished", yieldMs=10, awaitResults=True)
    assert result["details"]["status"] == "completed"
    assert "finished" in result["details"]["aggregated"]


def test_a_session_still_inside_its_yield_is_not_listed(daemon):
    import threading
    from paddedcell.daemon.client import DaemonClient
    holder = {}
    other = DaemonClient(daemon.client.settings)  # a second connection: the client is not thread-safe
    t = threading.Thread(target=lambda: holder.setdefault("r", other.call(
        "POST", "/exec", {"command": "sleep 1", "agentId": "yielder", "yieldMs": 3000}, timeout=60)))
    t.start()
    time.sleep(0.4)
    try:
        assert process(daemon, "list", agent="yielder")["details"]["sessions"] == []
    finally:
        t.join(30)
        other.close()
    assert holder["r"]["details"]["status"] == "completed"


def test_a_stream_whose_caller_leaves_ends_its_foreground_run(daemon, tmp_path):
    marker = f"leaver-{tmp_path.name}"  # found from outside: $$ is a sandbox pid
    body = json.dumps({"command": f"exec -a {marker} sleep 60", "agentId": "leaver",
                       "stream": True, "yieldMs": 60000}).encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(daemon.client.path)
    sock.sendall(b"POST /exec HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n" % len(body) + body)
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    pid = pid_by_argv0(marker)
    assert alive(pid)
    sock.close()  # the tool call was aborted
    for _ in range(400):
        if not alive(pid):
            break
        time.sleep(0.05)
    assert not alive(pid)
    assert process(daemon, "list", agent="leaver")["details"]["sessions"] == []


# --------------------------------------------------------------------------- OpenClaw parity (issue 13)


def test_poll_with_a_timeout_waits_for_the_exit_like_openclaw(daemon):
    sid = exec_(daemon, "sleep 1; echo done", background=True)["details"]["sessionId"]
    result = process(daemon, "poll", sessionId=sid, timeout=10000)
    assert result["content"][0]["text"] == "done\n\nProcess exited with code 0."
    assert result["details"]["exitCode"] == 0


def test_running_polls_carry_retry_in_ms(daemon):
    sid = exec_(daemon, "echo hi; sleep 30", background=True)["details"]["sessionId"]
    try:
        wait_for_log(daemon, sid, "hi")
        first = process(daemon, "poll", sessionId=sid)["details"]
        second = process(daemon, "poll", sessionId=sid)["details"]
        third = process(daemon, "poll", sessionId=sid)["details"]
        assert (first["retryInMs"], second["retryInMs"], third["retryInMs"]) == (5000, 10000, 30000)
    finally:
        process(daemon, "kill", sessionId=sid)


def test_a_conversation_sees_only_its_own_sessions(daemon):
    mine = exec_(daemon, "sleep 30", background=True, sessionKey="agent:a1:one")["details"]["sessionId"]
    try:
        listed = process(daemon, "list", sessionKey="agent:a1:two")
        assert mine not in json.dumps(listed)
        assert process(daemon, "poll", sessionKey="agent:a1:two", sessionId=mine)["content"][0]["text"] \
            == f"No session found for {mine}"
        assert process(daemon, "kill", sessionKey="agent:a1:two", sessionId=mine)["content"][0]["text"] \
            == f"No active session found for {mine}"
        assert mine in json.dumps(process(daemon, "list", sessionKey="agent:a1:one"))
        # Without a session key (the CLI), every session of the agent.
        assert mine in json.dumps(process(daemon, "list"))
    finally:
        process(daemon, "kill", sessionId=mine)


def test_a_foreground_run_that_finished_is_not_found_like_openclaw(daemon):
    done = exec_(daemon, "echo quick")
    assert done["details"]["status"] == "completed"
    listed = process(daemon, "list")
    assert "echo quick" not in json.dumps(listed)


def test_output_reaches_the_model_sanitized_and_in_order(daemon):
    result = exec_(daemon, "printf '\\033[31mred\\033[0m\\n'; echo out; echo err >&2; printf 'a\\007b\\n'")
    assert result["details"]["aggregated"] == "red\nout\nerr\na\\x07b"



def test_exit_events_are_openclaws_notify_on_exit(daemon):
    def events(wait=0):
        return daemon.client.call("GET", f"/exec/events?wait={wait}", timeout=30)["events"]

    for event in events():
        daemon.client.call("POST", "/exec/events/ack", {"ids": [event["id"]]}, timeout=30)
    built = exec_(daemon, "sleep 0.2; echo built", background=True,
                  sessionKey="agent:a1:n")["details"]["sessionId"]
    killed = exec_(daemon, "sleep 30", background=True, sessionKey="agent:a1:n")["details"]["sessionId"]
    quiet = exec_(daemon, "sleep 0.2", background=True, sessionKey="agent:a1:n")["details"]["sessionId"]
    polled = exec_(daemon, "sleep 0.2; echo seen", background=True,
                   sessionKey="agent:a1:n")["details"]["sessionId"]
    process(daemon, "kill", sessionId=killed)
    assert "exited" in process(daemon, "poll", sessionId=polled, timeout=10000)["content"][0]["text"]
    time.sleep(1.5)
    got = [e for e in events(5) if e["sessionId"] in (built, killed, quiet, polled)]
    # A kill, a silent success and an end the model already polled announce nothing.
    assert [(e["sessionId"], e["text"], e["sessionKey"], e["contextKey"]) for e in got] == [
        (built, f"Exec completed ({built[:8]}, code 0) :: built", "agent:a1:n", f"exec:{built}")]
    daemon.client.call("POST", "/exec/events/ack", {"ids": [got[0]["id"]]}, timeout=30)
    assert all(e["sessionId"] != built for e in events())
