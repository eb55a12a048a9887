"""Exec request and process action parsing: fields, defaults, clamps, refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paddedcell import config
from paddedcell.execspec.request import (
    EXEC_FIELDS,
    PROCESS_ACTIONS,
    ExecRequest,
    ProcessAction,
    RequestError,
    check_env,
    parse_exec_request,
    parse_process_action,
)


@pytest.fixture
def settings(tmp_path):
    return config.load(environ={"PADDEDCELL_HOME": str(tmp_path)})


def parse(settings, **body):
    return parse_exec_request(body, settings)


def one_line_error(func, *args, match: str | None = None) -> str:
    with pytest.raises(RequestError) as info:
        func(*args)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    if match is not None:
        assert match in message, message
    return message


# --------------------------------------------------------------------------- exec


def test_defaults(settings) -> None:
    r = parse(settings, command="ls")
    assert r == ExecRequest(command="ls")
    assert (r.yield_ms, r.timeout_seconds, r.background, r.pty, r.env) == (10_000, 1800, False, False, {})
    assert (r.agent_id, r.session_key, r.agent_workspace, r.title, r.workdir) == (None,) * 5
    assert r.host == "gateway" and not r.sandboxed


def test_every_field(settings) -> None:
    r = parse(
        settings,
        command="make",
        workdir="/src",
        env={"FOO": "1", "TERM": "xterm"},
        yieldMs=2500,
        timeoutSeconds=60,
        pty=True,
        title="build it",
        host="auto",
        ask="off",
        elevated=False,
        awaitResults=True,
        agentId="a1",
        sessionKey="agent:a1:main",
        agentWorkspace="/ws",
        stream=True,
    )
    assert r == ExecRequest(
        command="make", workdir="/src", env={"FOO": "1", "TERM": "xterm"}, yield_ms=2500,
        timeout_seconds=60, pty=True, title="build it", agent_id="a1", session_key="agent:a1:main",
        agent_workspace="/ws", host="gateway", await_results=True, stream=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("given_ms", "expected"),
    [(0, 10), (5, 10), (10, 10), (11.9, 11), (5000, 5000), (120_000, 120_000), (10**9, 120_000), (-3, 10)],
)
def test_yield_is_clamped(settings, given_ms, expected) -> None:
    assert parse(settings, command="x", yieldMs=given_ms).yield_ms == expected


def test_yield_bounds_come_from_settings(tmp_path) -> None:
    s = config.load(
        environ={"PADDEDCELL_HOME": str(tmp_path)},
        overrides={"supervisor.default_yield_ms": 500, "supervisor.min_yield_ms": 100, "supervisor.max_yield_ms": 1000},
    )
    assert parse_exec_request({"command": "x"}, s).yield_ms == 500
    assert parse_exec_request({"command": "x", "yieldMs": 1}, s).yield_ms == 100
    assert parse_exec_request({"command": "x", "yieldMs": 5000}, s).yield_ms == 1000
    s2 = config.load(environ={"PADDEDCELL_HOME": str(tmp_path)}, overrides={"supervisor.default_yield_ms": 10**7})
    assert parse_exec_request({"command": "x"}, s2).yield_ms == 120_000


def test_no_settings_means_builtin_defaults() -> None:
    r = parse_exec_request({"command": "x"})
    assert (r.yield_ms, r.timeout_seconds) == (10_000, 1800)


def test_background_returns_at_once(settings) -> None:
    r = parse(settings, command="server", background=True, yieldMs=5000)
    assert r.background and r.yield_ms == 0


def test_timeout(settings) -> None:
    assert parse(settings, command="x", timeoutSeconds=0).timeout_seconds == 0  # no timeout
    assert parse(settings, command="x", timeoutSeconds=2.5).timeout_seconds == 2.5
    assert parse(settings, command="x", timeoutSeconds=3.0).timeout_seconds == 3
    with pytest.raises(RequestError, match="timeoutSeconds"):
        parse(settings, command="x", timeoutSeconds=-1)
    with pytest.raises(RequestError, match="timeoutSeconds"):
        parse(settings, command="x", timeoutSeconds=float("inf"))


def test_default_timeout_from_settings(tmp_path) -> None:
    s = config.load(environ={"PADDEDCELL_HOME": str(tmp_path), "PADDEDCELL_SUPERVISOR_DEFAULT_TIMEOUT_SECONDS": "7"})
    assert parse_exec_request({"command": "x"}, s).timeout_seconds == 7


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "Provide a command to start."),
        ({"command": ""}, "Provide a command to start."),
        ({"command": None}, "Provide a command to start."),
        ({"command": 5}, '"command" must be a string'),
        ({"command": "a\x00b"}, "NUL"),
        ({"command": "x", "timeout": 5}, 'use "timeoutSeconds" instead'),
        ({"command": "x", "yieldMs": "10"}, '"yieldMs" must be a number, not string'),
        ({"command": "x", "yieldMs": True}, '"yieldMs" must be a number, not boolean'),
        ({"command": "x", "yieldMs": float("nan")}, '"yieldMs" must be a number'),
        ({"command": "x", "background": "yes"}, '"background" must be true or false'),
        ({"command": "x", "pty": 1}, '"pty" must be true or false'),
        ({"command": "x", "env": ["A=1"]}, '"env" must be an object of strings, not array'),
        ({"command": "x", "env": {"A": 1}}, '"env" must map names to strings; "A" is number'),
        ({"command": "x", "env": {"A=B": "1"}}, 'entry "A=B" is not a valid variable'),
        ({"command": "x", "workdir": 3}, '"workdir" must be a string'),
        ({"command": "x", "title": "t" * 121}, "longer than 120 characters"),
        ({"command": "x", "host": "node"}, "exec host not allowed (requested node;"),
        ({"command": "x", "host": "mars"}, 'Invalid exec host "mars". Allowed values: auto, sandbox, gateway, node.'),
        ({"command": "x", "host": 7}, "Invalid exec host value type number."),
        ({"command": "x", "node": "n1"}, '"node" needs host=node'),
        ({"command": "x", "ask": "always"}, "ask=always cannot be honoured"),
        ({"command": "x", "ask": "on-miss"}, "ask=on-miss cannot be honoured"),
        ({"command": "x", "ask": "sometimes"}, 'Invalid exec ask "sometimes"'),
        ({"command": "x", "awaitResults": True, "background": True}, "awaitResults cannot be combined"),
        ({"command": "x", "agentId": 3}, '"agentId" must be a string'),
        ({"command": "x", "env": {"PATH": "/evil"}}, "Custom 'PATH' variable is forbidden"),
    ],
)
def test_refusals_are_one_clear_line(settings, body, fragment) -> None:
    one_line_error(parse_exec_request, body, settings, match=fragment)


def test_not_an_object(settings) -> None:
    one_line_error(parse_exec_request, ["ls"], settings, match="must be a JSON object, not array")


def test_empty_workdir_means_default(settings) -> None:
    assert parse(settings, command="x", workdir="").workdir is None


def test_host_values_that_run_here(settings, tmp_path) -> None:
    for host in ("auto", "gateway", "AUTO", " gateway ", ""):
        assert parse(settings, command="x", host=host).host == "gateway"
    sandboxed = config.load(environ={"PADDEDCELL_HOME": str(tmp_path)}, overrides={"supervisor.sandbox": "rlimits"})
    r = parse_exec_request({"command": "x", "host": "sandbox"}, sandboxed)
    assert r.host == "sandbox" and r.sandboxed


def test_ask_off_and_elevated_false_are_accepted(settings) -> None:
    parse(settings, command="x", ask="off", elevated=False)
    parse(settings, command="x", ask="")


def test_all_openclaw_fields_are_known() -> None:
    # execSchema in bash-tools.schemas.ts (2026.9.6), plus awaitResults (newer docs).
    for name in ("title", "command", "workdir", "env", "yieldMs", "background", "timeoutSeconds",
                 "pty", "elevated", "host", "ask", "node", "awaitResults"):  # fmt: skip
        assert name in EXEC_FIELDS


# --------------------------------------------------------------------------- env guard


@pytest.mark.parametrize(
    "key",
    ["PATH", "path", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "NODE_OPTIONS",
     "PYTHONPATH", "PYTHONHOME", "BASH_ENV", "ENV", "IFS", "GCONV_PATH", "SSLKEYLOGFILE",
     "PERL5LIB", "RUBYOPT", "BASH_FUNC_foo%%", "HOME", "GIT_SSH_COMMAND", "GIT_CONFIG_GLOBAL",
     "NPM_CONFIG_PREFIX", "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER", "PROMPT_COMMAND",
     "SHELL", "GITHUB_TOKEN"],
)  # fmt: skip
def test_openclaw_blocked_keys(key) -> None:
    with pytest.raises(RequestError, match="Security Violation"):
        check_env({key: "x"})


@pytest.mark.parametrize(
    "key", ["AGENT_ID", "AGENT_WORKSPACE", "AGENT", "PADDEDCELL_HOME", "PADDEDCELL_AGENT", "OPENCLAW_SHELL", "agent_id"]
)
def test_identity_variables_cannot_be_overridden(key) -> None:
    """Adversarial: an agent must not pose as another agent to read its secrets."""
    with pytest.raises(RequestError) as info:
        check_env({key: "other-agent"})
    assert str(info.value) == (
        f"Security Violation: Environment variable '{key.upper()}' is forbidden during host execution."
    )


def test_allowed_env() -> None:
    check_env({"FOO": "1", "TERM": "xterm-256color", "LANG": "C.UTF-8", "PAGER": "cat", "GIT_PAGER": "", "NO_COLOR": "1"})


def test_several_blocked_keys_in_one_line() -> None:
    with pytest.raises(RequestError) as info:
        check_env({"LD_PRELOAD": "x", "NODE_OPTIONS": "y", "BAD KEY": "z"})
    assert str(info.value) == (
        "Security Violation: blocked override keys: LD_PRELOAD, NODE_OPTIONS; "
        "invalid non-portable override keys: BAD KEY."
    )


# --------------------------------------------------------------------------- process


def test_process_defaults() -> None:
    assert parse_process_action({"action": "list"}) == ProcessAction(action="list")
    a = parse_process_action({"action": "paste", "sessionId": "s", "text": "hi"})
    assert a.bracketed is True and a.text == "hi" and a.timeout_ms == 0


def test_process_every_field() -> None:
    a = parse_process_action(
        {"action": "send-keys", "sessionId": "s1", "keys": ["C-c"], "hex": ["1b"], "literal": "x",
         "data": "d", "eof": True, "text": "t", "bracketed": False, "offset": 2.9, "limit": 5,
         "timeout": 1500, "agentId": "a", "sessionKey": "k"}
    )  # fmt: skip
    assert a == ProcessAction(
        action="send-keys", session_id="s1", data="d", eof=True, keys=("C-c",), hex=("1b",), literal="x",
        text="t", bracketed=False, offset=2, limit=5, timeout_ms=1500, agent_id="a", session_key="k",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 0), (0, 0), (-5, 0), (1500.7, 1500), (30_000, 30_000), (99_999, 30_000), ("2000", 2000), (" 7 ", 7), ("-4", 0), ("99999", 30_000)],
)
def test_poll_timeout_is_clamped(value, expected) -> None:
    body = {"action": "poll", "sessionId": "s"}
    if value is not None:
        body["timeout"] = value
    assert parse_process_action(body).timeout_ms == expected


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "Invalid process action. Expected one of: list, poll, log, write, send-keys, submit, paste, kill, clear, remove"),
        ({"action": "frob"}, "Invalid process action."),
        ({"action": "poll"}, "sessionId is required for this action."),
        ({"action": "kill", "sessionId": ""}, "sessionId is required for this action."),
        ({"action": "send-keys", "sessionId": "s", "keys": "Enter"}, '"keys" must be an array of strings'),
        ({"action": "send-keys", "sessionId": "s", "hex": [1]}, '"hex" must be an array of strings'),
        ({"action": "write", "sessionId": "s", "data": 5}, '"data" must be a string'),
        ({"action": "write", "sessionId": "s", "eof": "yes"}, '"eof" must be true or false'),
        ({"action": "log", "sessionId": "s", "offset": "3"}, '"offset" must be a number'),
        ({"action": "log", "sessionId": "s", "limit": float("inf")}, '"limit" must be a finite number'),
    ],
)
def test_process_refusals(body, fragment) -> None:
    one_line_error(parse_process_action, body, match=fragment)


def test_unknown_fields_are_ignored_like_openclaw(settings) -> None:
    got = parse_exec_request({"command": "x", "bogus": 1, "cwd": "/", "security": "full",
                              "timeout_seconds": 3}, settings)
    assert got.command == "x" and got.workdir is None
    assert parse_process_action({"action": "list", "bogus": 1}).action == "list"
    # resolvePollWaitMs: what is not a number of milliseconds waits 0.
    assert parse_process_action({"action": "poll", "sessionId": "s", "timeout": "soon"}).timeout_ms == 0


def test_a_blank_workdir_is_left_for_the_run_to_report(settings) -> None:
    # OpenClaw answers a failed result ("workdir ... is unavailable"), not an error.
    assert parse_exec_request({"command": "x", "workdir": "   "}, settings).workdir == "   "


def test_elevated_and_sandbox_refusals_are_openclaws_words(settings) -> None:
    with pytest.raises(RequestError) as info:
        parse_exec_request({"command": "x", "elevated": True, "sessionKey": "agent:main:k"}, settings)
    assert info.value.multiline
    assert str(info.value) == (
        "elevated is not available right now (runtime=direct).\n"
        "Failing gates: enabled (tools.elevated.enabled / agents.entries.*.tools.elevated.enabled)\n"
        "Context: session=agent:main:k\n"
        "Fix-it keys:\n- tools.elevated.enabled\n- tools.elevated.allowFrom.<provider>\n"
        "- agents.entries.*.tools.elevated.enabled\n"
        "- agents.entries.*.tools.elevated.allowFrom.<provider>")
    no_sandbox = config.load(environ={"PADDEDCELL_HOME": str(settings.home),
                                      "PADDEDCELL_SUPERVISOR_SANDBOX": "none"})
    with pytest.raises(RequestError) as info:
        parse_exec_request({"command": "x", "host": "sandbox"}, no_sandbox)
    assert str(info.value) == (
        "exec host=sandbox requires a sandbox runtime for this session.\n"
        'Enable sandbox mode (`agents.defaults.sandbox.mode="non-main"` or `"all"`) or use '
        "host=auto/gateway/node.")


def test_process_offsets_are_floored_and_non_negative() -> None:
    a = parse_process_action({"action": "log", "sessionId": "s", "offset": -3, "limit": 2.9})
    assert (a.offset, a.limit) == (0, 2)


def test_every_action_parses() -> None:
    for action in PROCESS_ACTIONS:
        body = {"action": action} if action == "list" else {"action": action, "sessionId": "s"}
        assert parse_process_action(body).action == action


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(list(EXEC_FIELDS) + ["x", "timeout"]), JSONISH, max_size=6))
def test_exec_parser_only_raises_request_error(body) -> None:
    try:
        parse_exec_request(body)
    except RequestError as exc:
        assert "\n" not in str(exc)


@given(st.dictionaries(st.sampled_from(["action", "sessionId", "keys", "hex", "timeout", "offset", "limit", "data", "x"]), JSONISH, max_size=6))
def test_process_parser_only_raises_request_error(body) -> None:
    try:
        parse_process_action(body)
    except RequestError as exc:
        assert "\n" not in str(exc)


def test_env_names_are_trimmed_like_openclaw(settings) -> None:
    assert parse(settings, command="x", env={" FOO ": "1"}).env == {"FOO": "1"}
    with pytest.raises(RequestError, match="'LD_PRELOAD'"):
        parse(settings, command="x", env={" LD_PRELOAD": "1"})
