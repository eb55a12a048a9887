"""pcexec is exec: the same calls through OpenClaw's native exec/process and through
pcexec/pcprocess, in ONE real OpenClaw 2026.9.6 gateway, compared call by call.

Each group below is played twice by the scripted model, in two conversations of
agent ``main`` (exec mode full): once with ``exec``/``process``, once with
``pcexec``/``pcprocess``. We compare what the model receives (the tool messages
of its last request) and what the transcript stores (``chat.history``: each
tool result's text and ``details``), after normalising only what must differ:

- session ids (OpenClaw's "quiet-rook" slugs, our 128-bit ids), pids, times,
  durations, idle times (:func:`normalise`);
- the tool names in follow-up texts (``pcprocess``/``pcexec``, and "so PaddedCell
  can register" in the timeout hint) and ``details.truncated`` on exec results:
  the deliberate differences of docs/openclaw.md, so this test is where that list is proven
  complete.

A difference prints both sides in full. Bash's own line numbers need not match
(OpenClaw runs the command after a PATH prelude), so no case depends on them.
``host: "sandbox"`` is not played here: this daemon has a sandbox (the default
where namespaces exist), so pcexec honours it where OpenClaw, without its own
sandbox runtime, refuses; the refusal text for ``supervisor.sandbox = "none"``
is OpenClaw's (tests/test_execspec_request.py).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from fake_model import ToolCall

SID = re.compile(r"session ([A-Za-z0-9_-]+), pid")
#: details keys whose values are times, pids or durations.
VOLATILE = {"pid", "startedAt", "durationMs", "idleMs", "lastOutputAt", "runtimeMs", "endedAt"}
#: details keys PaddedCell adds on purpose (docs/openclaw.md "Deliberate differences").
OURS_ONLY = {"truncated"}


@dataclass
class Side:
    """One side of the comparison: its tool names and the session ids it saw."""

    name: str
    exec_tool: str
    process_tool: str
    ids: list[str] = field(default_factory=list)

    def tool(self, kind: str) -> str:
        return self.exec_tool if kind == "exec" else self.process_tool


NATIVE = ("native", "exec", "process")
OURS = ("pc", "pcexec", "pcprocess")

Step = tuple[str, dict[str, Any]]  # ("exec"|"process", args); "$1" = the first session id


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return json.dumps(content, ensure_ascii=False)


def learn(side: Side, texts: list[str]) -> None:
    """Note the session ids that running results in ``texts`` announce."""
    for text in texts:
        for sid in SID.findall(text):
            if sid not in side.ids:
                side.ids.append(sid)


def _fill(value: Any, ids: list[str]) -> Any:
    if isinstance(value, str):
        return re.sub(r"\$(\d)", lambda m: ids[int(m.group(1)) - 1], value)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


def script(side: Side, steps: list[Step]) -> list[Callable[[list[dict]], ToolCall]]:
    """Model steps that call ``side``'s tools, learning session ids as they appear."""

    def make(kind: str, args: dict[str, Any]) -> Callable[[list[dict]], ToolCall]:
        def step(messages: list[dict]) -> ToolCall:
            learn(side, [_text(m) for m in messages if m.get("role") == "tool"])
            return ToolCall(side.tool(kind), _fill(args, side.ids))
        return step

    return [make(kind, args) for kind, args in steps]


_DURATION = re.compile(r"\b\d+(?:ms|s|m\d*s?|h\d*m?)\b")


def normalise(value: Any, side: Side) -> Any:
    if isinstance(value, str):
        text = value
        for index, sid in enumerate(side.ids, 1):
            text = text.replace(sid, f"<session {index}>")
        text = re.sub(r"pid \d+", "pid <pid>", text)
        text = re.sub(r"(diff-[A-Za-z0-9-]*?)-(native|pc)\b", r"\1-<side>", text)
        text = _DURATION.sub("<duration>", text)
        if side.name == "pc":
            text = (text.replace("pcprocess", "process").replace("pcexec", "exec")
                    .replace("so PaddedCell can register", "so OpenClaw can register"))
        return text
    if isinstance(value, list):
        return [normalise(v, side) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in VOLATILE or (side.name == "pc" and key in OURS_ONLY):
                continue
            out[key] = normalise(item, side)
        return out
    return value


def tool_results_seen_by_model(stack, case: str) -> list[str]:
    requests = stack.model.model.requests_for(case)
    assert requests, f"the model was never asked in case {case}"
    return [_text(m) for m in requests[-1]["messages"] if m.get("role") == "tool"]


def tool_results_in_transcript(stack, session: str) -> list[dict[str, Any]]:
    out = []
    for message in stack.gateway.history(session):
        if message.get("role") == "toolResult":
            out.append({"text": _text(message), "details": message.get("details")})
    return out


def play(stack, group: str, steps: list[Step], *, settle: float = 0.0) -> dict[str, Any]:
    """Run ``steps`` on both sides; both sides' normalised observations."""
    stack.ensure_unlocked()  # the shared stack's leak cases may have locked the vault (file order)
    seen = {}
    for name, exec_tool, process_tool in (NATIVE, OURS):
        side = Side(name, exec_tool, process_tool)
        case = f"diff-{group}-{name}"
        stack.model.model.script(case, script(side, steps))
        stack.gateway.agent(case, f"[case:{case}] run the {group} checks", timeout=180)
        if settle:
            time.sleep(settle)
        seen[name] = {
            "model": normalise(tool_results_seen_by_model(stack, case), side),
            "transcript": normalise(tool_results_in_transcript(stack, case), side),
            "side": side,
        }
    return seen


def assert_same(seen: dict[str, Any], what: str) -> None:
    native, ours = seen["native"][what], seen["pc"][what]
    if native != ours:
        pytest.fail(f"{what} differs between native exec/process and pcexec/pcprocess:\n"
                    f"--- native\n{json.dumps(native, indent=1, ensure_ascii=False)}\n"
                    f"--- pcexec\n{json.dumps(ours, indent=1, ensure_ascii=False)}", pytrace=False)


# --------------------------------------------------------------------------- cases


def exec_cases(workspace) -> list[Step]:
    (workspace / "sub").mkdir(exist_ok=True)
    return [
        ("exec", {"command": "echo hi"}),
        ("exec", {"command": "printf '\\n\\n  x  \\n\\n'"}),
        ("exec", {"command": "printf 'a\\nb'; exit 3"}),
        ("exec", {"command": "true"}),
        ("exec", {"command": "nosuchcmd_paddedcell_xyz 2>/dev/null"}),
        # stdin without a PTY is empty and closed
        ("exec", {"command": "cat; echo rc=$?; read x; echo read=$?"}),
        # one stream, in the order written (OpenClaw reads two pipes: lines written
        # faster than it reads may come grouped by stream there; see docs/openclaw.md)
        ("exec", {"command": "echo out; sleep 0.2; echo err >&2; sleep 0.2; echo out2"}),
        # escape sequences stripped, other controls shown as \xNN
        ("exec", {"command": "printf '\\033[31mred\\033[0m plain\\n'; printf 'bell\\007\\n'"}),
        # unknown parameters are ignored
        ("exec", {"command": "echo ok", "bogus": 1}),
        ("exec", {"command": "sleep 5", "timeoutSeconds": 1}),
        ("exec", {"command": "kill -TERM $$"}),
        ("exec", {"command": "pwd", "workdir": "sub"}),
        ("exec", {"command": "pwd", "workdir": str(workspace / "missing")}),
        ("exec", {"command": "pwd", "workdir": "   "}),
        ("exec", {"command": "echo", "env": {"PATH": "/x"}}),
        ("exec", {"command": "echo", "env": {"LD_PRELOAD": "x"}}),
        ("exec", {"command": "echo", "host": "nope"}),
        ("exec", {"command": "echo", "elevated": True}),
        ("exec", {"command": "echo", "timeout": 3}),
        ("exec", {"command": ""}),
        ("exec", {"command": "echo $FOO", "env": {"FOO": "bar"}}),
        ("exec", {"command": "echo titled", "title": "say it"}),
        ("exec", {"command": "sleep 0.2; echo y", "yieldMs": 5000}),
        ("exec", {"command": "seq 1 50000"}),  # past the 200,000-character cap
        ("exec", {"command": "printf 'zw\\342\\200\\213j\\n'"}),  # U+200B is dropped
    ]


PROCESS_CASES: list[Step] = [
    ("exec", {"command": "sleep 1; echo done", "background": True}),
    ("process", {"action": "poll", "sessionId": "$1", "timeout": 10000}),
    ("process", {"action": "log", "sessionId": "$1"}),
    ("process", {"action": "clear", "sessionId": "$1"}),
    ("process", {"action": "poll", "sessionId": "$1"}),
    ("exec", {"command": "sleep 30", "background": True}),
    ("process", {"action": "poll", "sessionId": "$2"}),
    ("process", {"action": "poll", "sessionId": "$2"}),
    ("process", {"action": "log", "sessionId": "$2"}),
    ("process", {"action": "write", "sessionId": "$2", "data": "x\n"}),
    ("process", {"action": "submit", "sessionId": "$2"}),
    ("process", {"action": "list", "bogus": 1}),
    ("process", {"action": "kill", "sessionId": "$2"}),
    ("process", {"action": "poll", "sessionId": "$2", "timeout": 10000}),
    ("process", {"action": "kill", "sessionId": "$2"}),
    ("process", {"action": "remove", "sessionId": "$2"}),
    ("process", {"action": "poll", "sessionId": "nosuchsession"}),
    ("process", {"action": "clear", "sessionId": "nosuchsession"}),
    ("process", {"action": "list"}),
    # PTY sessions
    ("exec", {"command": "printf '\\033[31mred\\033[0m\\n'", "pty": True}),
    ("exec", {"command": "stty -echo; read x; echo got=$x", "pty": True, "background": True}),
    ("process", {"action": "send-keys", "sessionId": "$3", "keys": ["Up"]}),
    ("process", {"action": "send-keys", "sessionId": "$3", "literal": "hi", "keys": ["Enter"]}),
    ("process", {"action": "poll", "sessionId": "$3", "timeout": 5000}),
    ("exec", {"command": "stty -echo; read x; echo got=$x", "pty": True, "background": True}),
    ("process", {"action": "paste", "sessionId": "$4", "text": "pasted", "bracketed": False}),
    ("process", {"action": "submit", "sessionId": "$4"}),
    ("process", {"action": "poll", "sessionId": "$4", "timeout": 5000}),
    ("process", {"action": "paste", "sessionId": "$4", "text": ""}),
]

#: Output shorter than the admin password, shown while the command runs.
SHORT_OUTPUT_CASES: list[Step] = [
    ("exec", {"command": "echo hi; sleep 30", "background": True}),
    ("process", {"action": "poll", "sessionId": "$1", "timeout": 5000}),
    ("process", {"action": "poll", "sessionId": "$1"}),
    ("process", {"action": "log", "sessionId": "$1"}),
    ("process", {"action": "kill", "sessionId": "$1"}),
    ("process", {"action": "poll", "sessionId": "$1", "timeout": 10000}),
    # A prompt without a newline (`printf 'name? '`) is not here: its last bytes are held
    # while they could begin a secret or the admin password (docs/openclaw.md, deliberate differences).
]


#: A poll that waits while the command is quiet answers when its output comes, not at
#: the exit (issue 18: pcprocess once answered "Process exited" 3 s after "done").
WAITING_POLL_CASES: list[Step] = [
    ("exec", {"command": "sleep 2; echo done; sleep 3", "yieldMs": 500}),
    ("process", {"action": "poll", "sessionId": "$1", "timeout": 10000}),
]


def test_exec_results_are_the_same(stack):
    seen = play(stack, "exec", exec_cases(stack.workspace))
    assert_same(seen, "model")
    assert_same(seen, "transcript")


def test_process_actions_are_the_same(stack):
    seen = play(stack, "process", PROCESS_CASES)
    assert_same(seen, "model")
    assert_same(seen, "transcript")


def test_short_output_shows_while_the_command_runs(stack):
    seen = play(stack, "short", SHORT_OUTPUT_CASES)
    assert_same(seen, "model")
    assert_same(seen, "transcript")


@pytest.mark.parametrize("round_", [1, 2])  # the bug showed in one of two runs
def test_a_waiting_poll_answers_when_output_arrives(stack, round_):
    seen = play(stack, f"waiting{round_}", WAITING_POLL_CASES)
    assert_same(seen, "model")
    assert seen["pc"]["model"][-1] == "done\n\nProcess still running.", seen["pc"]["model"]


def test_another_conversation_does_not_see_the_sessions(stack):
    """OpenClaw scopes process to the conversation: another one lists nothing and
    cannot poll or kill a session it did not start."""
    sides = {}
    for name, exec_tool, process_tool in (NATIVE, OURS):
        side = Side(name, exec_tool, process_tool)
        owner = f"diff-scope-owner-{name}"
        stack.model.model.script(owner, script(side, [("exec", {"command": "sleep 15",
                                                                "background": True})]))
        stack.gateway.agent(owner, f"[case:{owner}] start it")
        learn(side, tool_results_seen_by_model(stack, owner))
        assert side.ids, "the background run answered with a session id"
        other = f"diff-scope-other-{name}"
        stack.model.model.script(other, [
            ToolCall(process_tool, {"action": "list"}),
            ToolCall(process_tool, {"action": "poll", "sessionId": side.ids[0]}),
            ToolCall(process_tool, {"action": "kill", "sessionId": side.ids[0]}),
        ])
        stack.gateway.agent(other, f"[case:{other}] look for it")
        sides[name] = {"model": normalise(tool_results_seen_by_model(stack, other), side),
                       "transcript": normalise(tool_results_in_transcript(stack, other), side)}
    assert_same(sides, "model")
    assert_same(sides, "transcript")


def _wake_prompts(bodies: list[dict]) -> list[str]:
    """The user messages of woken turns (after the last assistant message), times out."""
    prompts = []
    for body in bodies:
        messages = body.get("messages", [])
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        for message in messages[last + 1:]:
            if message.get("role") == "user":
                text = re.sub(r"Current time: .*", "Current time: <time>", _text(message))
                text = re.sub(r"Reference UTC: .*", "Reference UTC: <time>", text)
                prompts.append(re.sub(r"\[\w{3} \d{4}-\d\d-\d\d \d\d:\d\d UTC\]", "[<time>]", text))
    return prompts


def test_a_finished_background_run_wakes_its_session(stack):
    """Notify-on-exit: when a background run ends, OpenClaw queues a system event
    for its conversation ("Exec completed (<id>, code 0) :: built") and wakes it
    (an "async command completion event" turn). pcexec must do the same."""
    events = {}
    model = stack.model.model
    for name, exec_tool, process_tool in (NATIVE, OURS):
        side = Side(name, exec_tool, process_tool)
        case = f"diff-notify-{name}"
        model.script(case, script(side, [("exec", {"command": "sleep 1; echo built",
                                                   "background": True})]))
        stack.gateway.agent(case, f"[case:{case}] build in the background")
        learn(side, tool_results_seen_by_model(stack, case))
        assert side.ids, "the background run answered with a session id"
        before = len(model.requests)

        def this_conversations_turns() -> list[dict]:
            # This conversation's turns only: a turn of another one (a test before this one
            # still ending, a scheduled job) once counted as a second native wake (CI, 8af34d3),
            # and once ended the wait before the real wake came (CI, stop 35).
            return [body for body in model.requests[before:] if f"[case:{case}]" in json.dumps(body)]

        deadline = time.monotonic() + 30
        while not this_conversations_turns() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # no second wake follows
        woken = this_conversations_turns()
        events[name] = {"model": normalise(_wake_prompts(woken), side), "wakes": len(woken)}
    assert events["native"]["wakes"] == 1, "native exec woke the conversation once"
    assert_same(events, "wakes")
    assert_same(events, "model")
