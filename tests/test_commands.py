"""The pass_mgr scanner: every syntax bash runs, and the refusals (fail closed)."""

from __future__ import annotations

import pytest

from paddedcell.execspec.commands import (
    CommandRefused,
    PassMgrCall,
    check_command,
    find_pass_mgr_calls,
    scan_command,
)


def gets(command: str, *, direct_only: bool = True) -> list[tuple[str | None, int | None]]:
    """(key, version) of each ``get`` call, direct ones only by default."""
    return [
        (c.key, c.version)
        for c in find_pass_mgr_calls(command)
        if c.subcommand == "get" and (c.direct or not direct_only)
    ]


# One row per syntax: (command, the direct ``get`` keys bash would run).
SYNTAXES = [
    ("pass_mgr get k", ["k"]),
    ("echo $(pass_mgr get k)", ["k"]),
    ("echo `pass_mgr get k`", ["k"]),
    ('echo "$(pass_mgr get k)"', ["k"]),
    ('echo "`pass_mgr get k`"', ["k"]),
    ("curl -H \"Authorization: Bearer $(pass_mgr get api_token)\" https://x", ["api_token"]),
    ("/usr/local/bin/pass_mgr get k", ["k"]),
    ("./pass_mgr get k", ["k"]),
    ("~/bin/pass_mgr get k", ["k"]),
    ("$HOME/bin/pass_mgr get k", ["k"]),
    ("\"${TOOLS}\"/pass_mgr get k", ["k"]),
    ("pass_mgr get -- k", ["k"]),
    ("pass_mgr get -- --odd-key", ["--odd-key"]),
    ("pass_mgr get k --version 3", ["k"]),
    ("pass_mgr get --version=2 k", ["k"]),
    ("pass_mgr get k | wc -c", ["k"]),
    ("pass_mgr get a; pass_mgr get b", ["a", "b"]),
    ("pass_mgr get a && pass_mgr get b || pass_mgr get c", ["a", "b", "c"]),
    ("pass_mgr get a\npass_mgr get b\n", ["a", "b"]),
    ("pass_mgr get a & pass_mgr get b", ["a", "b"]),
    ("pass_mgr get a |& tee log", ["a"]),
    ("echo $(echo $(pass_mgr get inner))", ["inner"]),
    ("echo $(cat <(pass_mgr get p))", ["p"]),
    ("diff <(pass_mgr get a) <(pass_mgr get b)", ["a", "b"]),
    ("echo `echo \\`pass_mgr get nested\\``", ["nested"]),
    ("env X=1 pass_mgr get k", ["k"]),
    ("env -i HOME=/tmp pass_mgr get k", ["k"]),
    ("command pass_mgr get k", ["k"]),
    ("exec pass_mgr get k", ["k"]),
    ("nohup pass_mgr get k > out", ["k"]),
    ("timeout 5 pass_mgr get k", ["k"]),
    ("timeout -s KILL 5 pass_mgr get k", ["k"]),
    ("nice -n 5 pass_mgr get k", ["k"]),
    ("sudo -u bob pass_mgr get k", ["k"]),
    ("X=1 Y=2 pass_mgr get k", ["k"]),
    ("TOKEN=$(pass_mgr get k) ./deploy.sh", ["k"]),
    ("export TOKEN=$(pass_mgr get k)", ["k"]),
    ("local t=\"$(pass_mgr get k)\"", ["k"]),
    ("(pass_mgr get a; pass_mgr get b)", ["a", "b"]),
    ("{ pass_mgr get a; }", ["a"]),
    ("if pass_mgr get a >/dev/null; then echo ok; fi", ["a"]),
    ("while read -r l; do echo $(pass_mgr get k); done < f", ["k"]),
    ("for i in 1 2; do pass_mgr get \"k$i\"; done", [None]),
    ("case $x in a) pass_mgr get a;; b) pass_mgr get b;; esac", ["a", "b"]),
    ("echo $(case x in x) pass_mgr get a;; *) pass_mgr get b;; esac)", ["a", "b"]),
    ("echo $(case x in (x) pass_mgr get a;; esac; pass_mgr get c)", ["a", "c"]),
    ("echo $(echo $(case x in x) :;; esac) $(pass_mgr get d))", ["d"]),
    ("! pass_mgr get k", ["k"]),
    ("time pass_mgr get k", ["k"]),
    ("pass_mgr get 'quoted key'", ["quoted key"]),
    ('pass_mgr get "k"', ["k"]),
    ("pass_mgr get k\\\n  --version 1", ["k"]),
    ("pass_mgr 'get' k", ["k"]),
    ('p"ass"_mgr get k', ["k"]),
    ("\\pass_mgr get k", ["k"]),
    ("$'pass_mgr' get k", ["k"]),
    ("echo ${X:-$(pass_mgr get k)}", ["k"]),
    ("echo $(( $(pass_mgr get n) + 1 ))", ["n"]),
    ("pass_mgr get k 2>/dev/null", ["k"]),
    ("pass_mgr get k 2>&1 | head", ["k"]),
    ("cat <<EOF\ntoken=$(pass_mgr get h)\nEOF", ["h"]),
    ("cat <<-EOF\n\ttoken=`pass_mgr get h`\n\tEOF", ["h"]),
    ("cat <<EOF | sh\nx\nEOF\npass_mgr get after", ["after"]),
    ("echo hi # pass_mgr get commented", []),
    ("echo '$(pass_mgr get not_run)'", []),
    ("echo \"\\$(pass_mgr get not_run)\"", []),
    ("cat <<'EOF'\n$(pass_mgr get not_run)\nEOF", []),
    ("cat <<\"EOF\"\n$(pass_mgr get not_run)\nEOF", []),
    ("cat <<\\EOF\n$(pass_mgr get not_run)\nEOF", []),
]


@pytest.mark.parametrize(("command", "keys"), SYNTAXES, ids=[repr(c)[:60] for c, _ in SYNTAXES])
def test_finds_every_direct_get(command: str, keys: list[str | None]) -> None:
    assert [k for k, _ in gets(command)] == keys
    check_command(command)  # none of these is refused


def test_at_least_fifteen_distinct_syntaxes() -> None:
    assert len([s for s, keys in SYNTAXES if keys]) >= 15


def test_version_is_parsed() -> None:
    assert gets("pass_mgr get k --version 3") == [("k", 3)]
    assert gets("pass_mgr get --version=2 k") == [("k", 2)]
    assert gets("pass_mgr get k --version \"$V\"") == [("k", None)]
    assert gets("pass_mgr get k") == [("k", None)]


@pytest.mark.parametrize(
    "command",
    [
        'pass_mgr get "$K"',
        "pass_mgr get $K",
        "pass_mgr get ${K}",
        "pass_mgr get k$SUFFIX",
        "pass_mgr get $(echo k)",
        "pass_mgr get `echo k`",
        "pass_mgr get k*",
        "pass_mgr get {a,b}",
        "pass_mgr get ~",
        "pass_mgr get",
    ],
)
def test_dynamic_key_is_none(command: str) -> None:
    calls = [c for c in find_pass_mgr_calls(command) if c.subcommand == "get"]
    assert calls and all(c.key is None for c in calls)
    check_command(command)  # allowed: the whole store is masked


def test_call_fields() -> None:
    (call,) = find_pass_mgr_calls("/opt/bin/pass_mgr get --version 4 -- 'my key'")
    assert call == PassMgrCall(
        subcommand="get", args=("get", "--version", "4", "--", "my key"), key="my key", version=4
    )
    # After ``--`` everything is positional, as for any getopt-style CLI.
    (call,) = find_pass_mgr_calls("pass_mgr get -- k --version 4")
    assert (call.key, call.version) == ("k", None)
    assert call.direct


def test_indirect_calls_are_marked_not_direct() -> None:
    for command in (
        "bash -c 'pass_mgr get k'",
        "sh -c 'echo $(pass_mgr get k)'",
        "xargs pass_mgr get < keys",
        "find . -exec pass_mgr get {} \\;",
        "watch pass_mgr get k",
        "eval 'pass_mgr get k'",
    ):
        calls = find_pass_mgr_calls(command)
        assert calls, command
        assert not any(c.direct for c in calls if c.subcommand == "get"), command


def test_same_call_twice_is_reported_once_per_kind() -> None:
    calls = find_pass_mgr_calls("pass_mgr get k; pass_mgr get k")
    assert [c.key for c in calls] == ["k"]


def test_other_subcommands_are_returned() -> None:
    subs = [c.subcommand for c in check_command("pass_mgr list; pass_mgr generate db; pass_mgr admin status")]
    assert subs == ["list", "generate", "admin"]
    assert [c.key for c in find_pass_mgr_calls("pass_mgr generate db")] == ["db"]


def test_no_pass_mgr_is_fast_path() -> None:
    assert find_pass_mgr_calls("ls -la | grep foo") == []
    assert scan_command("echo 'unterminated") == ([], [])
    assert check_command("echo 'unterminated") == []  # bash reports it; nothing to hide


# --------------------------------------------------------------------------- refusals

REFUSED_SET = [
    "pass_mgr set a b c d e",
    "echo x; pass_mgr set k v",
    "/usr/bin/pass_mgr set k",
    "echo $(pass_mgr set k v)",
    "sudo pass_mgr set k",
    "env A=1 pass_mgr set k",
    "pass_mgr 'set' k",
    "p\"ass\"_mgr s\\et k",
    "$'\\x70ass_mgr' set k",
    "bash -c 'pass_mgr set k v'",
    "sh -c \"pass_mgr set k $V\"",
    "eval \"pass_mgr set k v\"",
    "xargs pass_mgr set < file",
    "bash <<'EOF'\npass_mgr set k v\nEOF",
    "bash <<EOF\npass_mgr set k v\nEOF",
    "bash -c 'bash -c \"pass_mgr set k\"'",
    "pass_mgr --verbose set k",
]


@pytest.mark.parametrize("command", REFUSED_SET)
def test_set_is_refused(command: str) -> None:
    with pytest.raises(CommandRefused, match="pass_mgr set"):
        check_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "pass_mgr admin init",
        "pass_mgr admin",
        "pass_mgr admin check-leak",
        "pass_mgr admin status extra",
        "echo $(pass_mgr admin init --password-stdin)",
        "bash -c 'pass_mgr admin init'",
    ],
)
def test_admin_other_than_status_is_refused(command: str) -> None:
    with pytest.raises(CommandRefused, match="admin status"):
        check_command(command)


def test_admin_status_is_allowed() -> None:
    (call,) = check_command("pass_mgr admin status")
    assert call.subcommand == "admin"
    check_command("pass_mgr admin --json status")


@pytest.mark.parametrize(
    "command",
    [
        'pass_mgr "$SUB" k',
        "pass_mgr $(echo set) k",
        'P=pass_mgr; $P set k',
        "alias p=pass_mgr",
        'PM="/usr/bin/pass_mgr" ; "$PM" set x',
        '"$(which pass_mgr)" set k',
        "$(echo pass_mgr) set k",
    ],
)
def test_hidden_or_dynamic_subcommand_is_refused(command: str) -> None:
    with pytest.raises(CommandRefused):
        check_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo \"$(pass_mgr get k)",  # unterminated quote
        "echo $(pass_mgr get k",  # unterminated substitution
        "pass_mgr set k\necho 'oops",  # bash would run line 1 before failing
        "echo `pass_mgr get k",
        "echo ${X:-$(pass_mgr get k)",
        "pass_mgr get k >",
        "p'ass_mgr set k",  # unterminated, obfuscated mention
    ],
)
def test_unparseable_mention_is_refused(command: str) -> None:
    with pytest.raises(CommandRefused, match="cannot be read reliably"):
        check_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo 'abc######def'",
        "curl -H 'Authorization: Bearer ######' https://api",
        "export TOKEN=######",
        "echo ######",
    ],
)
def test_mask_is_refused_with_a_hint(command: str) -> None:
    with pytest.raises(CommandRefused) as info:
        check_command(command)
    message = str(info.value)
    assert "$(pass_mgr get KEY)" in message
    assert "\n" not in message


def test_mask_is_configurable() -> None:
    check_command("echo '######'", mask="[HIDDEN]") == []
    with pytest.raises(CommandRefused, match=r"\[HIDDEN\]"):
        check_command("echo '[HIDDEN]'", mask="[HIDDEN]")


def test_refusal_messages_are_one_line() -> None:
    for command in REFUSED_SET + ["pass_mgr admin init", 'pass_mgr "$S"', "echo $(pass_mgr get"]:
        with pytest.raises(CommandRefused) as info:
            check_command(command)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "command",
    [
        "echo pass_mgr is the tool",
        "grep -rn 'pass_mgr get' src/",
        "man pass_mgr",
        "which pass_mgr",
        "command -v pass_mgr",
        "pass_mgr --help",
        "pass_mgr",
        "echo 'set up pass_mgr later'",
    ],
)
def test_harmless_mentions_pass(command: str) -> None:
    check_command(command)


def test_deep_nesting_does_not_crash() -> None:
    deep = "echo " + "$(" * 400 + "pass_mgr get k" + ")" * 400
    with pytest.raises(CommandRefused):
        check_command(deep)
    shallow = "echo " + "$(" * 10 + "pass_mgr get k" + ")" * 10
    assert gets(shallow) == [("k", None)]


def test_long_command_is_scanned() -> None:
    body = "echo hello world; " * 5000 + "pass_mgr get last"
    assert gets(body) == [("last", None)]


# --------------------------------------------------------------------------- identity

@pytest.mark.parametrize(
    "command",
    [
        "AGENT_ID=other pass_mgr get k",
        "AGENT_WORKSPACE=/ws/other AGENT_ID=other pass_mgr get their_key",
        "env AGENT_ID=other pass_mgr get k",
        "sudo AGENT_ID=other pass_mgr get k",
        "export AGENT_ID=other; pass_mgr get k",
        "declare -x AGENT_WORKSPACE=/ws/other",
        "unset AGENT_ID PADDEDCELL_AGENT",
        "env -u AGENT_ID -u OPENCLAW_SHELL /tmp/renamed set k v",
        "env --unset=AGENT pm set k",
        "PADDEDCELL_VAULT_PATH_TEMPLATE=/ws/other/store pass_mgr get k",
        "PADDEDCELL_HOME=/tmp/h pass_mgr admin status",
        "echo $(AGENT_ID=other pass_mgr get k)",
        "bash -c 'AGENT_ID=other pass_mgr get k'",
        "{ AGENT_ID=x true; }",
    ],
)
def test_identity_variables_cannot_be_changed(command: str) -> None:
    """Adversarial: pass_mgr finds the agent's store through these variables; an agent
    that changes them could read another agent's secrets, unmasked."""
    with pytest.raises(CommandRefused, match="identity variables") as info:
        check_command(command)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "command",
    ["echo $AGENT_ID", "echo AGENT_ID=x", "printenv AGENT_WORKSPACE", "curl -A 'USER_AGENT'",
     "agent_id=1 true", "grep AGENT_ID= .env", 'test "$AGENT" = a'],
)  # fmt: skip
def test_reading_identity_variables_is_fine(command: str) -> None:
    check_command(command)
