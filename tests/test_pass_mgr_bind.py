"""Bindings through pass_mgr (docs/design.md §6.4): set --hosts, bind, list, admin status;
human-only, sealed with the value, kept by rotate/generate/set, never printing a value."""

from __future__ import annotations

import json

import pytest

from test_pass_mgr import PW, PassMgr, exe, pm  # noqa: F401 - fixtures

VALUE = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.fixture
def bound(pm: PassMgr) -> PassMgr:
    pm.init()
    result = pm.run("set", "agent1", str(pm.workspace), "gh", VALUE, PW,
                    "--hosts", "api.github.com,github.com")
    assert result.returncode == 0, result.stderr
    assert b"bound to api.github.com,github.com" in result.stderr
    return pm


def _no_value(*outputs: bytes | str) -> None:
    for out in outputs:
        text = out.decode() if isinstance(out, bytes) else out
        assert VALUE not in text and VALUE[4:] not in text


def test_list_and_admin_status_show_names_and_hosts_never_values(bound):
    bound.ok("set", "agent1", str(bound.workspace), "plain", "unbound value 123", PW)
    listed = bound.run("list", agent=True)
    assert listed.stdout.decode().splitlines() == ["gh\tapi.github.com,github.com", "plain"]
    status = bound.run("admin", "status")
    lines = status.stdout.decode().splitlines()
    assert lines[0] == "ready"
    assert lines[1].split("\t")[:4] == ["bound", "agent1", "gh", "api.github.com,github.com"]
    assert len(lines) == 2
    _no_value(listed.stdout, listed.stderr, status.stdout, status.stderr)
    # An agent's admin status shows no bindings (other agents' are not its business).
    agent_status = bound.run("admin", "status", env={"PADDEDCELL_AGENT": "1"})
    assert agent_status.stdout.decode().splitlines() == ["ready"]


def test_bind_is_human_only_and_needs_the_admin_password(bound):
    ws = str(bound.workspace)
    wrong = bound.run("bind", "agent1", ws, "gh", "not the password", "--hosts", "x.example")
    assert wrong.returncode == 5
    agent = bound.run("bind", "agent1", ws, "gh", PW, "--hosts", "x.example", agent=True)
    assert agent.returncode == 5 and b"humans only" in agent.stderr
    missing = bound.run("bind", "agent1", ws, "nope", PW, "--hosts", "x.example")
    assert missing.returncode == 4
    no_tty = bound.run("bind", "agent1", ws, "gh", "--hosts", "x.example")  # password: "-"
    assert no_tty.returncode == 1 and b"no terminal" in no_tty.stderr
    assert bound.run("list", agent=True).stdout.decode().startswith(
        "gh\tapi.github.com,github.com")


@pytest.mark.parametrize("args, message", [
    (["--hosts", "*"], b"name the hosts"),
    (["--hosts", ""], b"at least one host"),
    (["--hosts", "a b"], b"--hosts"),
    (["--hosts", "x.example:0"], b"port"),
    (["--hosts", "x.example", "--inject", "cookie"], b"cookie"),
    ([], b"--hosts"),
    (["--hosts", "x.example", "--unbind"], b"--unbind"),
])
def test_bad_bindings_are_usage_errors(bound, args, message):
    result = bound.run("bind", "agent1", str(bound.workspace), "gh", PW, *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_options_rebind_and_unbind(bound):
    ws = str(bound.workspace)
    result = bound.run("bind", "agent1", ws, "gh", PW, "--hosts", "*.githubusercontent.com:443",
                       "--inject", "body", "--allow-plain-http")
    assert result.returncode == 0, result.stderr
    assert bound.ok("list", agent=True) == \
        "gh\t*.githubusercontent.com:443 inject=body plain-http\n"
    bound.ok("bind", "agent1", ws, "gh", PW, "--unbind")
    assert bound.ok("list", agent=True) == "gh\n"
    assert bound.ok("get", "gh", agent=True) == VALUE + "\n"  # the value did not change


def test_bindings_survive_rotate_generate_and_set(bound):
    ws = str(bound.workspace)
    bound.ok("rotate", "gh", agent=True)
    bound.ok("generate", "gh", "--force", agent=True)
    bound.ok("rotate", agent=True)  # the whole store under a new data key
    bound.ok("set", "agent1", ws, "gh", VALUE + "x", PW)  # no --hosts: the binding stays
    assert bound.ok("list", agent=True) == "gh\tapi.github.com,github.com\n"
    bound.ok("set", "agent1", ws, "gh", VALUE, PW, "--hosts", "api.github.com")
    assert bound.ok("list", agent=True) == "gh\tapi.github.com\n"


def test_a_binding_widened_in_the_file_is_an_integrity_failure(bound):
    raw = bound.store_file.read_bytes()
    header, _, body = raw.partition(b"\n")
    doc = json.loads(body)
    doc["entries"]["gh"]["bind"]["hosts"].append("attacker.example")
    bound.store_file.write_bytes(header + b"\n" + json.dumps(doc, sort_keys=True,
                                                               separators=(",", ":")).encode())
    result = bound.run("list", agent=True)
    assert result.returncode == 6
