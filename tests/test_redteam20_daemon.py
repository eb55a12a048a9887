"""Issue 20, played again by a hostile agent: what a session sends must not stall the daemon.

Each case is a command in a daemon session that speaks the session channel protocol;
``/healthz`` is timed on the daemon's socket meanwhile (a stalled event loop stalls every
session and every agent, not only the one that sent it).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from paddedcell.daemon.client import DaemonClient
from supervisor_helpers import BIN, Daemon, needs_sandbox
from test_session_reach import CHANNEL_CLIENT, restart_line, run_in_session, world  # noqa: F401

#: A session's threads each sending, again and again, one line of ``size`` bytes of
#: "[0,0,0,..." (millions of tiny JSON values: the slowest thing to parse per byte).
LINE_FLOOD = """
import os, socket, sys, threading, time
channel = os.environ["PADDEDCELL_CHANNEL"]
if len(channel.encode()) >= 100:
    channel = "/proc/self/fd/%d/%s" % (os.open(os.path.dirname(channel), os.O_PATH),
                                       os.path.basename(channel))
threads, size = int(sys.argv[1]), int(sys.argv[2])
line = b"[" + b"0," * (size // 2 - 2) + b"0]\\n"
def flood():
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.connect(channel)
        s.sendall(line)
        s.recv(100)
        s.close()
for _ in range(threads):
    threading.Thread(target=flood, daemon=True).start()
print("FLOODING", flush=True)
time.sleep(120)
"""


def healthz_times(daemon: Daemon, seconds: float) -> list[float]:
    """/healthz round trips on a fresh client for ``seconds`` (each within 20 s)."""
    client = DaemonClient(daemon.client.settings, timeout=20)
    times, until = [], time.monotonic() + seconds
    try:
        while time.monotonic() < until:
            start = time.perf_counter()
            client.call("GET", "/healthz")
            times.append(time.perf_counter() - start)
            time.sleep(0.02)
    finally:
        client.close()
    return times


def test_long_channel_lines_of_tiny_values_do_not_stall_the_daemon(world):
    """16 connections of one session send 4 MiB lines of "[0,0,..." without pause: each
    used to be parsed on the daemon's event loop (0.3-0.6 s each, holding the GIL), so
    /healthz waited seconds. A long line is parsed in a child process now; and no line may
    hold more than supervisor.channel_max_values values (exit 2, the setting named)."""
    home, ws = world
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        lines = ("import json, sys\n"  # made in the session: no argument holds them
                 "sys.argv[1:] = [json.dumps({'op': 'whoami', 'x': [0] * 30000}),\n"
                 "                '[' * 5000 + ']' * 5000,\n"
                 "                json.dumps({'op': 'whoami', 'pad': 'x' * 200000})]\n")
        answers = run_in_session(daemon, ws, lines + CHANNEL_CLIENT)
        assert answers[0]["ok"] is False and answers[0]["exit"] == 2, answers[0]
        assert "supervisor.channel_max_values" in answers[0]["error"], answers[0]
        assert answers[1]["ok"] is False and answers[1]["exit"] == 2, answers[1]
        assert answers[2]["ok"] is True and answers[2]["agentId"] == "a1", answers[2]
        (ws / "flood.py").write_text(LINE_FLOOD)
        sid = daemon.call("/exec", {"command": f"{BIN / 'python'} {ws / 'flood.py'} 16 "
                                               f"{4 << 20}", "agentId": "a1",
                                    "agentWorkspace": str(ws), "background": True}
                          )["details"]["sessionId"]
        time.sleep(2)
        times = healthz_times(daemon, 4)
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})
        assert max(times) < 1.0, f"/healthz took up to {max(times):.2f} s"
        assert daemon.proc.poll() is None


@pytest.mark.parametrize("sandbox", [pytest.param("auto", marks=needs_sandbox()), "none"])
def test_a_rollback_that_prints_a_flood_does_not_stall_the_daemon(world, sandbox):
    """A session's restart job whose recovery window is 0 s (the agent's to choose) runs
    its rollback, the agent's script, which prints 30,000 lines. Each line used to be one
    open of the job log on the event loop, by a forked child under a root daemon: /healthz
    did not answer for minutes. Lines are appended in batches off the loop now; the log
    still ends with the outcome, and says how many lines it dropped, if any."""
    home, ws = world
    prepare = ("open(os.getcwd() + '/rb.sh', 'w').write("
               "'yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx | head -30000\\n')\n"
               "open(os.getcwd() + '/job.log', 'w').close()\n")
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX=sandbox,
                PADDEDCELL_RESTART_RESTART_CMD="true",
                PADDEDCELL_RESTART_STATUS_CMD="false") as daemon:
        answers = run_in_session(daemon, ws, "import os\n" + prepare + CHANNEL_CLIENT,
                                 restart_line(str(ws / "job.log"), str(ws / "rb.sh"),
                                              recoverTimeoutSeconds=0))
        assert answers[0]["ok"] is True and answers[0]["result"]["result"] == "OK", answers
        log, times = ws / "job.log", []
        deadline = time.monotonic() + 60
        while True:  # at least one sample: on a quiet machine the rollback may be done already
            times += healthz_times(daemon, 0.2)
            if "restart failed" in log.read_text():
                break
            assert time.monotonic() < deadline, log.read_text()[-2000:]
        text = log.read_text()
    assert max(times) < 1.0, f"/healthz took up to {max(times):.2f} s"
    lines = text.count("rollback| xxx")
    dropped = sum(int(l.split("] ")[1].split()[0]) for l in text.splitlines()
                  if "lines not logged" in l)
    assert lines + dropped == 30000 and lines > 0, (lines, dropped)
    assert text.rstrip().endswith("restart failed and was rolled back: every agent unfrozen")
    assert os.stat(log).st_uid == (os.getuid() if sandbox == "none" else ws.stat().st_uid)


def test_a_value_generated_in_a_foreground_pcexec_is_masked_in_the_daemons_sessions(world):
    """A daemon background loop of a1 prints app.env every 20 ms; a foreground pcexec of a1
    (its own supervisor, not the daemon) generates a key and writes it there. Its channel
    used to tell only its own supervisor: the daemon's loop showed the value in clear until
    its next store scan. The pcexec now tells a running daemon (POST /vault/changed) before
    the generate is answered."""
    import subprocess

    from supervisor_helpers import base_env

    home, ws = world
    (ws / "app.env").write_text("nothing yet\n")
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        sid = daemon.call("/exec", {"command": f"while :; do cat {ws}/app.env; sleep 0.02; done",
                                    "agentId": "a1", "agentWorkspace": str(ws),
                                    "background": True})["details"]["sessionId"]
        time.sleep(0.5)
        for key in ("K1",):
            (ws / "gen.sh").write_text(
                f"pass_mgr generate {key} >/dev/null && printf 'K=%s\\n' \"$(pass_mgr get {key})\""
                f" > {ws}/app.env.new && mv {ws}/app.env.new {ws}/app.env && echo written\n")
            done = subprocess.run([str(BIN / "pcexec"), f"sh {ws / 'gen.sh'}"], cwd=str(ws),
                                  env=base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws)),
                                  capture_output=True, text=True, timeout=60)
            assert "written" in done.stdout, done
            time.sleep(0.5)
        text = daemon.call("/process", {"action": "log", "sessionId": sid, "agentId": "a1",
                                        "limit": 100000})["content"][0]["text"]
        daemon.call("/process", {"action": "kill", "sessionId": sid, "agentId": "a1"})
    shown = {line for line in text.splitlines() if line.startswith("K=")}
    assert shown == {"K=######"}, sorted(shown)[:5]


def test_a_session_without_a_workspace_cannot_name_one(world):
    """A session started for agent a1 with no agentWorkspace sends, through its channel,
    an exec naming another directory as its workspace. It was run there: the directory
    became the new session's workspace (its cwd, a1's store created in it; under a root
    daemon's sandbox bound read-write and given to a1's uid). Now it is refused, exit 5."""
    home, ws = world
    victim = ws.parent / "victim"
    victim.mkdir(mode=0o700)
    (victim / "private.txt").write_text("victim-private-file\n")
    before = sorted(p.name for p in victim.iterdir()), victim.stat().st_uid
    line = json.dumps({"op": "exec", "body": {
        "command": "cat private.txt; pass_mgr generate X", "agentWorkspace": str(victim),
        "workdir": str(victim), "awaitResults": True}})
    (ws / "client.py").write_text(CHANNEL_CLIENT)
    with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="none") as daemon:
        text = daemon.call("/exec", {"command": f"{BIN / 'python'} {ws / 'client.py'} '{line}'",
                                     "agentId": "a1", "workdir": str(ws),
                                     "awaitResults": True})["content"][0]["text"]
    answer = json.loads(text.split("ANSWER ", 1)[1].splitlines()[0])
    assert answer["ok"] is False and answer["exit"] == 5, answer
    assert "victim-private-file" not in text
    assert (sorted(p.name for p in victim.iterdir()), victim.stat().st_uid) == before


def _wait_for(path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@needs_sandbox()
def test_the_operators_commands_never_get_the_sessions_log_path(world):
    """The operator's restart and status commands run as the daemon and were handed the
    session's job.log in PADDEDCELL_RESTART_LOG: an operator script appending to it, after
    the agent swapped its log for a symlink, wrote where the agent cannot (here a file
    outside its sandbox). They get a file of the daemon's own now, copied into the agent's
    log as the session's uid."""
    home, ws = world
    handshake = ws.parent / "handshake"
    handshake.mkdir()
    victim = ws.parent / "victim.txt"
    victim.write_text("the operator's\n")
    victim.chmod(0o600)

    def wait(name: str) -> str:  # bounded: the command outlives a failed test otherwise
        flag = handshake / name
        return f"i=0; while [ ! -e {flag} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"

    restart = (f"{wait('swapped')}; echo op-line >> \"$PADDEDCELL_RESTART_LOG\"; "
               f"echo \"env-log=$PADDEDCELL_RESTART_LOG\"; touch {handshake}/wrote; "
               f"{wait('restored')}")
    log = ws / "job.log"
    make_files = ("open(os.getcwd() + '/job.log', 'w').close()\n"
                  "open(os.getcwd() + '/rb.sh', 'w').write('true\\n')\n")
    with Daemon(home, PADDEDCELL_RESTART_RESTART_CMD=f"sh -c '{restart}'",
                PADDEDCELL_RESTART_STATUS_CMD="true") as daemon:
        answers = run_in_session(daemon, ws, "import os\n" + make_files + CHANNEL_CLIENT,
                                 restart_line(str(log), str(ws / "rb.sh")))
        assert answers[0]["ok"] is True and answers[0]["result"]["result"] == "OK", answers
        owner = log.stat().st_uid, log.stat().st_gid
        log.rename(ws / "job.log.kept")  # what the agent may do at any time
        log.symlink_to(victim)
        (handshake / "swapped").touch()
        _wait_for(handshake / "wrote")
        assert victim.read_text() == "the operator's\n"
        log.unlink()
        (ws / "job.log.kept").rename(log)
        (handshake / "restored").touch()
        deadline = time.monotonic() + 30
        while "restart finished" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        text = log.read_text()
        given = text.split("restart| env-log=", 1)[1].split()[0]
        while os.path.exists(given):  # the job is over: copied, then removed
            assert time.monotonic() < deadline, given
            time.sleep(0.05)
    assert given.startswith(str(home) + "/") and not given.startswith(str(ws)), given
    assert "restart> op-line" in text, text  # relayed, into the agent's own log
    assert (log.stat().st_uid, log.stat().st_gid) == owner
