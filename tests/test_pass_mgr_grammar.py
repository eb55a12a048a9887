"""One grammar for pass_mgr's agent commands, and four readers that agree (issue 18).

The click CLI, the fast ``get`` path, the session channel and the command
scanner all read an agent command line through ``paddedcell.pass_mgr_grammar``;
this table runs every line through all four.
"""

from __future__ import annotations

import shlex

import click
import pytest

from paddedcell import exits
from paddedcell.cli.pass_mgr_channel import channel_fields
from paddedcell.cli.pass_mgr_click import cli
from paddedcell.cli.pass_mgr_get import _parse_get
from paddedcell.execspec.commands import CommandRefused, check_command, find_pass_mgr_calls
from paddedcell.pass_mgr_grammar import AGENT_OPS, OPS, UsageError, parse
from paddedcell.session.protocol import Refusal, VAULT_OPS

#: (argv, (op, key, options by dest)) or UsageError.
LINES = [
    (["get", "k"], ("get", "k", {})),
    (["get", "k", "--version", "3"], ("get", "k", {"version": 3})),
    (["get", "--version=2", "k"], ("get", "k", {"version": 2})),
    (["get", "--", "--odd-key"], ("get", "--odd-key", {})),
    (["get", "-"], ("get", "-", {})),
    (["get", "--version", "²", "k"], UsageError),  # str.isdigit says yes, int says no
    (["get", "--version", "٣", "k"], UsageError),
    (["get", "--version", "0", "k"], UsageError),
    (["get", "--version"], UsageError),
    (["get"], UsageError),
    (["get", "a", "b"], UsageError),
    (["get", "--bogus", "k"], UsageError),
    (["generate", "--length", "32", "KEY"], ("generate", "KEY", {"length": 32})),
    (["generate", "KEY", "--length=16", "--no-symbols", "--force"],
     ("generate", "KEY", {"length": 16, "no_symbols": True, "force": True})),
    (["generate", "--length", "7", "K"], UsageError),
    (["generate", "--length", "4097", "K"], UsageError),
    (["generate", "--length", "32"], UsageError),
    (["rotate"], ("rotate", None, {})),
    (["rotate", "k"], ("rotate", "k", {})),
    (["list"], ("list", None, {})),
    (["list", "k"], UsageError),
    (["history", "k"], ("history", "k", {})),
    (["unset", "k"], ("unset", "k", {})),
]


def _click(argv):
    """What click hands the command: (key, the grammar's options that were given)."""
    command = cli.get_command(None, argv[0])
    try:
        ctx = command.make_context(argv[0], list(argv[1:]))
    except click.ClickException:
        return UsageError
    params = dict(ctx.params)
    key = params.pop("key", None)
    return key, {name: value for name, value in params.items() if value not in (None, False)}


@pytest.mark.parametrize("argv, expected", LINES, ids=[shlex.join(a) for a, _ in LINES])
def test_the_four_readers_agree(argv, expected):
    if expected is UsageError:
        with pytest.raises(UsageError):
            parse(argv)
        assert _click(argv) is UsageError
        with pytest.raises(Refusal) as refused:
            channel_fields(argv)
        assert refused.value.exit_code == exits.USAGE
        if argv[0] == "get":
            assert _parse_get(argv[1:]) is None  # click answers (exit 2)
        return
    op, key, options = expected
    call = parse(argv)
    assert (call.op, call.key, call.options) == expected
    assert _click(argv) == (key, options)
    channel_op, fields = channel_fields(argv)
    assert channel_op == op and fields.get("key") == key
    if op == "get":
        assert _parse_get(argv[1:]) == (key, options.get("version"))
    (scanned,) = find_pass_mgr_calls("pass_mgr " + shlex.join(argv))
    assert (scanned.subcommand, scanned.key) == (op, key)
    if op == "get":
        assert scanned.version == options.get("version")


def test_one_op_table():
    assert VAULT_OPS == AGENT_OPS == tuple(OPS)
    assert set(AGENT_OPS) <= set(cli.commands)


def test_a_version_that_is_not_ascii_digits_is_a_clean_refusal():
    # Was a bare ValueError from int('²'): a 500 in the daemon, "internal error" in pcexec.
    for command in ("pass_mgr get --version ² k", "echo $(pass_mgr get k --version=³)"):
        with pytest.raises(CommandRefused, match="--version"):
            check_command(command)


def test_generate_length_is_not_the_key():
    (call,) = check_command("pass_mgr generate --length 32 KEY")
    assert call.key == "KEY"


def test_generate_print_refuses_over_the_channel():
    with pytest.raises(Refusal) as refused:
        channel_fields(["generate", "--print", "K"])
    assert refused.value.exit_code == exits.FORBIDDEN
