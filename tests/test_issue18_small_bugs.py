"""Issue 18's small bugs, each through the interface a user touches.

- pcprocess's finished details carry ``noOutputTimedOut: false`` like native
  ``process`` (OpenClaw's markExited records it for every session that ends);
- a waiting poll answers when output arrives, not at the exit;
- a typo in ``PADDEDCELL_HOME/config.toml`` is one line naming the file, the
  setting and the nearest valid name, exit 2, from every CLI and the daemon.
(The plugin's approval text: openclaw-plugin/test/policy.test.js and
tests/e2e/test_openclaw_policy.py.)
"""

from __future__ import annotations

import subprocess
import time

import pytest

from supervisor_helpers import BIN, Daemon, base_env


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    root = tmp_path_factory.mktemp("bugs")
    home, ws = root / "home", root / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o777)
    ws.chmod(0o777)  # shared by a1 and the racers (under root: uids of their own)
    d = Daemon(home)
    d.ws = ws
    yield d
    d.stop()


def _exec(daemon, **body):
    return daemon.call("/exec", {"agentId": "a1", "agentWorkspace": str(daemon.ws), **body})


def _process(daemon, **body):
    return daemon.call("/process", {"agentId": "a1", **body})


def test_finished_details_carry_no_output_timed_out_false(daemon):
    sid = _exec(daemon, command="echo done", background=True)["details"]["sessionId"]
    deadline = time.monotonic() + 30
    while _process(daemon, action="log", sessionId=sid)["details"].get("status") == "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    poll = _process(daemon, action="poll", sessionId=sid)
    log = _process(daemon, action="log", sessionId=sid)
    listed = [s for s in _process(daemon, action="list")["details"]["sessions"]
              if s["sessionId"] == sid]
    for details in (poll["details"], log["details"], listed[0]):
        assert details["status"] == "completed"
        assert details["noOutputTimedOut"] is False, details
    # In OpenClaw's key order: after the exit fields, before the name.
    keys = list(poll["details"])
    assert keys.index("noOutputTimedOut") < keys.index("name")


def test_a_waiting_poll_returns_when_output_arrives(daemon):
    started = time.monotonic()
    running = _exec(daemon, command="sleep 2; echo done; sleep 3", yieldMs=500)
    assert running["details"]["status"] == "running"
    poll = _process(daemon, action="poll", sessionId=running["details"]["sessionId"],
                    timeout=10000)
    answered = time.monotonic() - started
    assert poll["content"][0]["text"] == "done\n\nProcess still running.", poll
    assert poll["details"]["status"] == "running"
    assert answered < 4.5, f"answered after {answered:.1f} s: at the exit, not at 'done'"
    _process(daemon, action="kill", sessionId=running["details"]["sessionId"])


def test_a_waiting_poll_wakes_at_output_however_it_races_the_output(daemon):
    """Many waiting polls, through the daemon route and the CLI, each arriving at another
    moment around the command's output (before it, about when it comes, while the pump
    appends it): each answers with the output while the command still runs. One that
    missed the output would wait for the exit, 12 s later, and say "Process exited"."""
    from concurrent.futures import ThreadPoolExecutor

    from paddedcell import config
    from paddedcell.daemon.client import DaemonClient

    def one(run: int) -> tuple[str, str]:
        cli = bool(run % 2)
        client = DaemonClient(config.load(environ=daemon.env), timeout=60)
        agent = f"racer{run % 3}"  # 4 each, within max_concurrent_execs_per_agent
        # A CLI takes 1-4 s to start on a loaded host: its command speaks later.
        body = {"agentId": agent, "agentWorkspace": str(daemon.ws), "yieldMs": 200,
                "command": f"sleep {3 if cli else 1}; echo done; sleep 12"}
        sid = client.call("POST", "/exec", body, timeout=60)["details"]["sessionId"]
        time.sleep(run % 6 * 0.18)  # 0 to 0.9 s after the yield: before and around 'done'
        try:
            if cli:
                done = subprocess.run(
                    [str(BIN / "paddedcell"), "process", "poll", "--timeout", "30000", "--", sid],
                    env={**daemon.env, "AGENT_ID": agent}, capture_output=True, text=True,
                    timeout=60)
                return "cli", done.stdout
            answer = client.call("POST", "/process", {"agentId": agent, "action": "poll",
                                                      "sessionId": sid, "timeout": 30000})
            return "route", answer["content"][0]["text"] + "\n"
        finally:
            client.call("POST", "/process", {"agentId": agent, "action": "kill", "sessionId": sid})
            client.close()

    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(one, range(12)))
    for via, text in answers:
        assert text == "done\n\nProcess still running.\n", (via, text)


TYPOS = [
    ("[egres]\nmode = \"off\"\n", "unknown section [egres]; did you mean [egress]?"),
    ("[supervisor]\nmax_live_sesions = 3\n",
     "unknown setting supervisor.max_live_sesions; did you mean supervisor.max_live_sessions?"),
]
COMMANDS = [
    ["pcexec", "true"],
    ["pass_mgr", "get", "k"],
    ["pass_mgr", "list"],
    ["paddedcell", "status"],
    ["paddedcell", "serve"],  # the daemon
    ["paddedcell", "process", "list"],
    ["safe-restart", "--rollback", "/bin/true", "--log", "{log}"],
]


@pytest.mark.parametrize("text, message", TYPOS, ids=["section", "key"])
@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_typo_in_config_toml_is_one_line_and_exit_2(tmp_path, text, message, argv):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(text)
    argv = [a.format(log=tmp_path / "restart.log") for a in argv]
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(tmp_path))
    done = subprocess.run([str(BIN / argv[0]), *argv[1:]], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done
    assert done.stderr == f"{argv[0]}: {home / 'config.toml'}: {message}\n", done.stderr


#: Each kind of bad setting, with the line every command must print for it.
BAD = {
    "enum": ('[egress]\nmode = "sometimes"\n',
             'egress.mode = "sometimes" must be one of auto, always, off; fix or unset it'),
    "type": ('[supervisor]\nmax_live_sessions = "3"\n',
             'supervisor.max_live_sessions = "3" must be an integer; fix or unset it'),
    "range": ("[supervisor]\nkill_grace_seconds = -1\n",
              "supervisor.kill_grace_seconds = -1 must be at least 0; fix or unset it"),
    "not-toml": ('{"egress": {"mode": "off"}}\n', "not valid TOML (Invalid statement "
                 "(at line 1, column 1)); fix the file"),
    "outside": ('mode = "off"\n', 'mode = "off" is outside any [section]; did you mean '
                "egress.mode (under [egress])?"),
    "section": TYPOS[0],
}
EVERY_COMMAND = COMMANDS + [
    ["pass_mgr", "admin", "status"],
    ["paddedcell", "stop"],
    ["paddedcell", "process", "poll", "--timeout", "10", "some-id"],
    ["paddedcell", "mcp"],  # the MCP server
    ["paddedcell", "doctor", "--json"],
    ["paddedcell", "redact"],
    ["paddedcell", "remote", "status"],
]
#: Every command with one kind (the kinds in turn; they share config.load, whose unit
#: tests hold every kind for every setting), and every kind with the daemon.
CASES = [(argv, kind) for argv, kind in zip(EVERY_COMMAND, list(BAD) * 3)]
CASES += [(["paddedcell", "serve"], kind) for kind in BAD
          if (["paddedcell", "serve"], kind) not in CASES]


@pytest.mark.parametrize("argv, kind", CASES, ids=[f"{' '.join(a[:2])}-{k}" for a, k in CASES])
def test_every_bad_setting_is_one_line_and_exit_2_from_every_command(tmp_path, argv, kind):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    text, message = BAD[kind]
    (home / "config.toml").write_text(text)
    argv = [a.format(log=tmp_path / "restart.log") for a in argv]
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(tmp_path))
    done = subprocess.run([str(BIN / argv[0]), *argv[1:]], env=env, capture_output=True,
                          text=True, timeout=60, input="")
    assert done.returncode == 2, done
    assert done.stderr == f"{argv[0]}: {home / 'config.toml'}: {message}\n", done.stderr
    assert done.stdout == ""


def test_a_bad_environment_variable_is_one_line_and_exit_2(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(tmp_path),
                   PADDEDCELL_SUPERVISOR_SANDBOX="jail")
    done = subprocess.run([str(BIN / "pcexec"), "true"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stderr) == (2, (
        'pcexec: PADDEDCELL_SUPERVISOR_SANDBOX: supervisor.sandbox = "jail" must be one of '
        "auto, namespaces, user, none, rlimits, bwrap; fix or unset it\n")), done


def test_session_ids_never_start_with_a_dash(monkeypatch):
    """A random id starting with "-" read as an option (test_identity failed 1 run in 64)."""
    from paddedcell.supervisor import session

    drawn = iter(["-leading", "--double", "fine-id"])
    monkeypatch.setattr(session._secrets, "token_urlsafe", lambda n: next(drawn))
    assert session.new_session_id() == "fine-id"
    monkeypatch.undo()
    ids = {session.new_session_id() for _ in range(4000)}
    assert len(ids) == 4000 and not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)  # still 128 random bits, URL-safe


def test_the_process_cli_takes_any_id_after_a_double_dash(daemon):
    sid = _exec(daemon, command="echo hi", background=True)["details"]["sessionId"]
    env = {**daemon.env, "AGENT_ID": "a1"}
    for session_id, expected in ((sid, "hi"), ("-not-an-option", "No session found for "
                                                                  "-not-an-option")):
        done = subprocess.run([str(BIN / "paddedcell"), "process", "log", "--", session_id],
                              env=env, capture_output=True, text=True, timeout=60)
        assert expected in done.stdout, done
        assert "No such option" not in done.stderr, done
