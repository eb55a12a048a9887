"""The supervisor with real processes and real PTYs, in this process."""

from __future__ import annotations

import os
import signal

import pytest
import trio

from paddedcell.supervisor import LaunchSpec, LimitReached, Supervisor, become_subreaper
from paddedcell.supervisor.procs import delegated_cgroup

from supervisor_helpers import alive, make_settings, py

MODES = [pytest.param(True, id="pty"), pytest.param(False, id="pipes")]


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    # Orphans of our sessions reparent to pytest, as they would to the daemon;
    # switched off again so other tests' orphans go to init as usual.
    assert become_subreaper()
    yield
    become_subreaper(False)


@pytest.fixture
def settings(tmp_path):
    # The process-tree mechanics without the namespace sandbox: these tests read pids
    # the command writes, which are PID-namespace pids inside it (tests/test_sandbox.py).
    return make_settings(tmp_path / "home", supervisor__kill_grace_seconds=0.5,
                         supervisor__drain_seconds=0.5, supervisor__scan_interval_seconds=0.1,
                         supervisor__sandbox="none")


@pytest.fixture
async def sup(settings, nursery):
    supervisor = Supervisor(settings, nursery)
    nursery.start_soon(supervisor.maintain)
    yield supervisor
    async with trio.open_nursery() as ending:
        for session in supervisor.live_sessions():
            ending.start_soon(session.kill, "manual-cancel")


async def run(sup, command, **kw):
    session = sup.start(LaunchSpec(command=command, timeout_seconds=kw.pop("timeout_seconds", 30), **kw))
    with trio.fail_after(30):
        await session.done.wait()
    return session


@pytest.mark.parametrize("pty", MODES)
async def test_output_and_exit_code(sup, pty):
    s = await run(sup, py("import sys; print('hello'); sys.exit(3)"), pty=pty)
    assert s.outcome.status == "completed"
    assert s.outcome.exit_code == 3
    assert s.text()[0] == ("hello\r\n" if pty else "hello\n")


async def test_pty_translates_newlines_and_echoes_input(sup):
    s = sup.start(LaunchSpec(command=py("s = input(); print('got', s)"), pty=True,
                             timeout_seconds=30))
    await s.write(b"abc\n")
    with trio.fail_after(20):
        await s.done.wait()
    assert s.text()[0] == "abc\r\ngot abc\r\n"


async def test_pipes_interleave_stdout_and_stderr_in_arrival_order(sup):
    # Gaps long enough that a loaded machine still reads each write before the next.
    code = ("import sys, time\nfor i in range(3):\n"
            "    sys.stdout.write(f'out{i}\\n'); sys.stdout.flush(); time.sleep(0.15)\n"
            "    sys.stderr.write(f'err{i}\\n'); sys.stderr.flush(); time.sleep(0.15)")
    s = await run(sup, py(code))
    assert s.text()[0] == "out0\nerr0\nout1\nerr1\nout2\nerr2\n"


@pytest.mark.parametrize("pty", MODES)
async def test_fast_exit_loses_no_output(sup, pty):
    # Desktop Commander #395: a fast exit lost stderr. Exit and drain are both awaited.
    for _ in range(20):
        s = await run(sup, "printf out; printf err >&2", pty=pty)
        assert sorted(s.text()[0]) == sorted("outerr")


@pytest.mark.parametrize("pty", MODES)
async def test_signal_is_reported(sup, pty):
    s = await run(sup, "kill -TERM $$", pty=pty)
    assert s.outcome.status == "failed"
    assert (s.outcome.exit_signal, s.outcome.signal_number, s.outcome.exit_reason) == (
        "SIGTERM", signal.SIGTERM, "signal")


@pytest.mark.parametrize("pty", MODES)
async def test_command_not_found_is_127(sup, pty):
    s = await run(sup, "definitely-not-a-command-xyz", pty=pty)
    assert (s.outcome.status, s.outcome.exit_code) == ("failed", 127)


def _tree_script(tmp_path):
    """A shell that starts a child, a setsid grandchild ignoring SIGTERM, and a double fork."""
    setsid_child = py(
        "import os, signal, sys, time\n"
        "os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(tmp_path / 'setsid.pid')!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(300)")
    double_fork = py(
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(tmp_path / 'daemon.pid')!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        "os.wait()")
    return f"{setsid_child} & {double_fork}; sleep 300 & echo started; wait"


@pytest.mark.parametrize("pty", MODES)
async def test_timeout_kills_the_whole_tree_including_setsid_and_double_fork(sup, pty, tmp_path):
    command = _tree_script(tmp_path)
    s = sup.start(LaunchSpec(command=command, pty=pty, timeout_seconds=4))
    with trio.fail_after(30):
        await s.done.wait()
    pids = [int((tmp_path / name).read_text()) for name in ("setsid.pid", "daemon.pid")]
    assert s.outcome.status == "failed" and s.outcome.exit_reason == "overall-timeout"
    assert s.outcome.timed_out
    survivors = [pid for pid in pids if alive(pid)]
    assert survivors == []


async def test_manual_kill_ends_the_tree(sup, tmp_path):
    s = sup.start(LaunchSpec(command=_tree_script(tmp_path), timeout_seconds=0))
    with trio.fail_after(20):
        while not (tmp_path / "daemon.pid").exists() or not (tmp_path / "setsid.pid").exists():
            await trio.sleep(0.05)
        await trio.sleep(0.2)
        await s.kill()
        await s.done.wait()
    assert (s.outcome.status, s.outcome.exit_reason) == ("killed", "manual-cancel")
    for name in ("setsid.pid", "daemon.pid"):
        assert not alive(int((tmp_path / name).read_text()))


async def test_unrelated_process_is_never_signalled(sup, tmp_path):
    # A process we did not start, even one that is our child, survives every kill.
    import subprocess
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        s = sup.start(LaunchSpec(command=_tree_script(tmp_path), timeout_seconds=1))
        with trio.fail_after(30):
            await s.done.wait()
        assert alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


async def test_drain_is_bounded_when_a_grandchild_keeps_the_output_open(sup):
    s = sup.start(LaunchSpec(command="sleep 300 & echo parent-done", timeout_seconds=0))
    with trio.fail_after(20):
        await s.done.wait()
    assert s.outcome.status == "completed" and "parent-done" in s.text()[0]
    leftover = [pid for pid in s.tree.members if alive(pid)]
    assert leftover  # the background sleep was left running, as a shell would
    s.tree.signal(signal.SIGKILL)


@pytest.mark.parametrize("pty", MODES)
async def test_secret_split_across_reads_is_still_masked(sup, pty):
    secret = "split-secret-ABCDEFGH-1234"
    code = ("import sys, time\n"
            f"s = {secret!r}\n"
            "sys.stdout.write('before ' + s[:9]); sys.stdout.flush(); time.sleep(0.3)\n"
            "sys.stdout.write(s[9:] + ' after\\n'); sys.stdout.flush()")
    chunks: list[bytes] = []
    s = sup.start(LaunchSpec(command=py(code), pty=pty, secrets=[secret], timeout_seconds=30,
                             on_output=lambda stream, data: chunks.append(data)))
    with trio.fail_after(20):
        await s.done.wait()
    assert "before ###### after" in s.text()[0]
    everything = b"".join(chunks) + s.buffer.held()
    assert secret.encode() not in everything and secret[:9].encode() not in b"".join(chunks)


async def test_command_display_is_masked(sup):
    s = await run(sup, "echo nothing  # sekret-value-123", secrets=["sekret-value-123"])
    assert "sekret-value-123" not in s.command


async def test_environment_has_identity_request_env_and_pass_mgr(sup, tmp_path):
    code = ("import os, shutil\n"
            "print(os.environ['AGENT_ID'], os.environ['AGENT_WORKSPACE'], "
            "os.environ['PADDEDCELL_AGENT'], os.environ['EXTRA'], bool(shutil.which('pass_mgr')))")
    s = await run(sup, py(code), agent_id="ag", agent_workspace=str(tmp_path),
                  env={"EXTRA": "x y"})
    assert s.text()[0] == f"ag {tmp_path} 1 x y True\n"


async def test_pipes_give_an_empty_closed_stdin_like_openclaw(sup):
    # OpenClaw's exec without a PTY: stdin is a pipe ended at once ("pipe-closed").
    s = sup.start(LaunchSpec(command="cat; echo rc=$?; read x; echo read=$?",
                             timeout_seconds=30))
    assert not s.stdin_writable
    with pytest.raises(BrokenPipeError):
        await s.write(b"abc", eof=True)
    with trio.fail_after(5):
        await s.done.wait()
    assert s.text()[0] == "rc=0\nread=1\n"


async def test_stdout_and_stderr_share_one_pipe_so_their_order_holds(sup):
    for _ in range(20):
        s = await run(sup, "echo out; echo err >&2; echo out2")
        assert s.text()[0] == "out\nerr\nout2\n"


async def test_live_session_limit(settings, nursery):
    settings = make_settings(settings.home, supervisor__max_live_sessions=2)
    sup = Supervisor(settings, nursery)
    sessions = [sup.start(LaunchSpec(command="sleep 30", agent_id=f"a{i}")) for i in range(2)]
    with pytest.raises(LimitReached, match="max_live_sessions"):
        sup.start(LaunchSpec(command="sleep 30", agent_id="a9"))
    for s in sessions:
        await s.kill()


async def test_per_agent_limit(settings, nursery):
    settings = make_settings(settings.home, supervisor__max_concurrent_execs_per_agent=1)
    sup = Supervisor(settings, nursery)
    first = sup.start(LaunchSpec(command="sleep 30", agent_id="a"))
    with pytest.raises(LimitReached, match="max_concurrent_execs_per_agent"):
        sup.start(LaunchSpec(command="sleep 30", agent_id="a"))
    other = sup.start(LaunchSpec(command="sleep 30", agent_id="b"))
    await first.kill()
    await other.kill()


async def test_buffer_budget_refuses_instead_of_growing(settings, nursery):
    settings = make_settings(settings.home, supervisor__global_buffer_bytes=1 << 20,
                             supervisor__session_buffer_floor_bytes=512 << 10)
    sup = Supervisor(settings, nursery)
    live = [sup.start(LaunchSpec(command="sleep 30")) for _ in range(2)]
    with pytest.raises(LimitReached, match="global_buffer_bytes"):
        sup.start(LaunchSpec(command="sleep 30"))
    for s in live:
        await s.kill()


async def test_finished_sessions_give_their_buffers_back(settings, nursery):
    settings = make_settings(settings.home, supervisor__global_buffer_bytes=1 << 20,
                             supervisor__session_buffer_floor_bytes=512 << 10)
    sup = Supervisor(settings, nursery)
    for _ in range(5):  # each finished background session is evicted for the next one
        s = sup.start(LaunchSpec(command="echo hi"))
        s.backgrounded = True
        with trio.fail_after(20):
            await s.done.wait()
    assert sup.budget.used <= sup.budget.total


@pytest.mark.parametrize("pty", MODES)
async def test_flood_stays_in_the_ring(settings, nursery, pty):
    sup = Supervisor(settings, nursery)
    total = 64 << 20 if not pty else 8 << 20
    code = ("import os\nb = b'0123456789abcde\\n' * 4096\n"
            f"for _ in range({total} // len(b)): os.write(1, b)")
    s = sup.start(LaunchSpec(command=py(code), pty=pty, timeout_seconds=120))
    with trio.fail_after(120):
        await s.done.wait()
    assert s.buffer.end >= total
    assert len(s.buffer) <= int(settings["supervisor.ring_buffer_bytes"])
    assert sup.budget.used <= sup.budget.total
    text, truncated = s.text()
    assert truncated and len(text) == 200_000


async def test_finished_background_sessions_are_capped(settings, nursery):
    settings = make_settings(settings.home, supervisor__max_finished_sessions=2)
    sup = Supervisor(settings, nursery)
    for _ in range(4):
        s = sup.start(LaunchSpec(command="true"))
        s.backgrounded = True
        with trio.fail_after(20):
            await s.done.wait()
        await trio.sleep(0.05)
    assert len(sup.sessions) == 2


def test_this_machine_has_no_delegated_cgroup_v2_so_we_fall_back(tmp_path):
    # cgroup v1 here: detection must say "none" and the supervisor tracks processes itself.
    cg = tmp_path / "cgroup"
    (tmp_path / "self").write_text("4:memory:/x\n0::/\n")
    assert delegated_cgroup(str(tmp_path / "self"), str(cg)) is None
    unified = cg / "user.slice" / "me"
    unified.mkdir(parents=True)
    (cg / "cgroup.controllers").write_text("")
    (unified / "cgroup.procs").write_text("")
    (tmp_path / "self").write_text("0::/user.slice/me\n")
    assert delegated_cgroup(str(tmp_path / "self"), str(cg)) == unified
    os.chmod(unified / "cgroup.procs", 0o444)
    if os.geteuid() != 0:
        assert delegated_cgroup(str(tmp_path / "self"), str(cg)) is None


async def test_rlimits_sandbox_limits_file_size(settings, nursery, tmp_path):
    settings = make_settings(settings.home, supervisor__sandbox="rlimits",
                             supervisor__sandbox_file_size_bytes=4096)
    sup = Supervisor(settings, nursery)
    target = tmp_path / "big"
    s = sup.start(LaunchSpec(command=f"head -c 100000 /dev/zero > {target}", timeout_seconds=30))
    with trio.fail_after(20):
        await s.done.wait()
    # head dies of SIGXFSZ; the shell reports it as a signal or as 128 + 25.
    assert s.outcome.exit_signal == "SIGXFSZ" or s.outcome.exit_code == 128 + signal.SIGXFSZ
    assert target.stat().st_size == 4096


async def test_bwrap_sandbox_without_bwrap_is_a_clear_error(settings, nursery, monkeypatch):
    from paddedcell.supervisor import SandboxUnavailable
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "bwrap" else "/bin/" + name)
    settings = make_settings(settings.home, supervisor__sandbox="bwrap")
    sup = Supervisor(settings, nursery)
    with pytest.raises(SandboxUnavailable, match="apt install bubblewrap"):
        sup.start(LaunchSpec(command="true"))
    assert sup.budget.used == 0 and not sup.sessions


async def test_unknown_sandbox_profile_is_refused(settings, nursery):
    from paddedcell.supervisor import SandboxUnavailable
    sup = Supervisor(make_settings(settings.home, supervisor__sandbox="jail"), nursery)
    with pytest.raises(SandboxUnavailable, match="none, rlimits, bwrap"):
        sup.start(LaunchSpec(command="true"))


async def test_a_failing_output_callback_ends_only_its_own_session(sup):
    def broken(stream, data):
        raise BrokenPipeError("reader went away")

    bad = sup.start(LaunchSpec(command="yes", on_output=broken, timeout_seconds=30))
    good = sup.start(LaunchSpec(command="sleep 0.3; echo fine", timeout_seconds=30))
    with trio.fail_after(20):
        await bad.done.wait()
        await good.done.wait()
    assert bad.outcome.status == "failed" and not alive(bad.pid)
    assert good.text()[0] == "fine\n"


async def test_pass_mgr_resolves_even_when_path_lacks_it(settings, nursery):
    sup = Supervisor(settings, nursery, base_env={"PATH": "/usr/bin:/bin"})
    s = sup.start(LaunchSpec(command="command -v pass_mgr", timeout_seconds=30))
    with trio.fail_after(20):
        await s.done.wait()
    import sys
    from pathlib import Path
    assert s.text()[0].strip() == str(Path(sys.executable).parent / "pass_mgr")


async def test_pty_failure_falls_back_to_pipes_with_openclaws_warning(sup, monkeypatch):
    from paddedcell.supervisor.service import ExecService
    from paddedcell.execspec.request import parse_exec_request

    def no_pty():
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("os.openpty", no_pty)
    request = parse_exec_request({"command": "echo via-pipes", "pty": True}, sup.settings)
    result, session = await ExecService(sup).exec(request)
    assert not session.pty
    assert result["details"]["status"] == "completed"
    assert result["content"][0]["text"].startswith(
        "Warning: PTY spawn failed (Error: Input/output error); retrying without PTY for "
        "`echo via-pipes`.\n\nvia-pipes")


async def test_redactor_settings_reach_the_session_redactors(tmp_path, nursery):
    # An operator who lowers redactor.variant_min_length wants the base64 of a
    # 6-byte secret masked too; the exec path used the library defaults instead.
    settings = make_settings(tmp_path / "home", redactor__variant_min_length=4)
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command="echo c2Vrcjd0", secrets=["sekr7t"], timeout_seconds=30))
    with trio.fail_after(20):
        await s.done.wait()
    assert s.text()[0] == "######\n"


async def test_a_write_blocked_on_a_full_stdin_when_the_session_ends_is_not_writable(sup):
    # Nothing reads stdin, so a big write blocks on the full pipe. The shell
    # exits while a background child still holds the pipe: the session ends,
    # its fd is closed under the waiting writer, and the agent must get
    # OpenClaw's "not writable", not a daemon error (trio raises
    # ClosedResourceError there).
    from paddedcell.execspec.request import parse_process_action
    from paddedcell.supervisor.service import ExecService

    service = ExecService(sup)
    session = sup.start(LaunchSpec(command="stty raw -echo; echo ready; "
                                   + py("import time; time.sleep(30)") + " <&0 & sleep 1",
                                   agent_id="ag", pty=True, timeout_seconds=30))
    session.backgrounded = True
    with trio.fail_after(10):
        while "ready" not in session.text()[0]:
            await trio.sleep(0.02)
    action = parse_process_action({"action": "write", "sessionId": session.id,
                                   "agentId": "ag", "data": "x" * (4 * 1024 * 1024)})
    answers = []

    async def write():
        answers.append(await service.process(action))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await trio.sleep(0.3)
        assert not answers  # blocked on the full pipe
        with trio.fail_after(20):
            await session.done.wait()
    session.tree.signal(signal.SIGKILL)
    assert answers[0]["details"]["status"] == "failed"
    assert "stdin is not writable" in answers[0]["content"][0]["text"]


def test_the_childs_identity_cannot_be_overridden_by_the_launch_env():
    from paddedcell.supervisor.spawn import child_environment

    env = child_environment({"AGENT": "x"}, agent_id="me", agent_workspace="/ws/me",
                            extra={"AGENT_ID": "other", "AGENT_WORKSPACE": "/ws/other",
                                   "AGENT": "other", "KEEP": "1"}, tree_token="t")
    assert (env["AGENT_ID"], env["AGENT_WORKSPACE"], env["KEEP"]) == ("me", "/ws/me", "1")
    assert "AGENT" not in env


async def test_concurrent_writes_to_one_session_do_not_interleave(sup):
    # Two `process write` calls at once (parallel tool calls): each one's bytes
    # must reach the command whole and in order, as OpenClaw's stream writes do
    # (the second one used to die with trio.BusyResourceError: a daemon 500).
    size = 256 * 1024
    code = ("import sys, time\n"
            f"data = b''\n"
            f"while len(data) < {2 * size}:\n"
            "    time.sleep(0.001)\n"
            "    data += sys.stdin.buffer.read1(4096)\n"
            "runs = sum(1 for i in range(1, len(data)) if data[i] != data[i - 1]) + 1\n"
            "print('runs', runs)")
    # A raw PTY (pipes have no writable stdin, as in OpenClaw).
    session = sup.start(LaunchSpec(command="stty raw -echo; echo ready; " + py(code), pty=True,
                                   timeout_seconds=60))
    with trio.fail_after(10):
        while "ready" not in session.text()[0]:
            await trio.sleep(0.02)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.write, b"A" * size)
        nursery.start_soon(session.write, b"B" * size)
    with trio.fail_after(30):
        await session.done.wait()
    assert session.text()[0].endswith("runs 2\n")


# Output sizes around the aggregated cap (100 characters here): at most one character
# per byte, the cap itself, one over, 2-byte characters under and over the cap in
# characters while over it in bytes, and more than text() looks at (cap x 4 bytes).
TRUNCATION_CASES = [("x" * 40, False), ("x" * 100, False), ("x" * 101, True),
                    ("é" * 90, False), ("é" * 101, True), ("x" * 401, True)]


@pytest.mark.parametrize("output,expected", TRUNCATION_CASES,
                         ids=["40", "100", "101", "90x2B", "101x2B", "401"])
async def test_list_tells_truncation_as_the_aggregated_text_does(tmp_path, nursery, output,
                                                                  expected):
    # `process list` shows only a tail and the truncated flag: it no longer decodes
    # every ring (what made the daemon's peak after a 64-session flood); the flag
    # must stay what the aggregated text of poll/log says.
    from paddedcell.execspec.request import parse_process_action
    from paddedcell.supervisor.service import ExecService

    settings = make_settings(tmp_path / "home", supervisor__max_aggregated_chars=100,
                             supervisor__sandbox="none")
    sup = Supervisor(settings, nursery)
    s = sup.start(LaunchSpec(command=py(f"import sys; sys.stdout.write({output!r})"),
                             timeout_seconds=30))
    with trio.fail_after(20):
        await s.done.wait()
    s.backgrounded = True  # what list shows (an exec that yielded)
    assert s.text()[1] is expected
    assert s.truncated() is expected
    listed = await ExecService(sup).process(parse_process_action({"action": "list"}))
    [entry] = [e for e in listed["details"]["sessions"] if e["sessionId"] == s.id]
    assert entry["truncated"] is expected
