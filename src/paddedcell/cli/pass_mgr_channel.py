"""``pass_mgr``'s agent commands inside an agent session, over the session's channel.

Inside an agent session ``pass_mgr get/generate/rotate/unset/list/history`` do not
read the vault or trust ``AGENT_ID``: the session's supervisor answers, for the
session's agent only (the client: :mod:`paddedcell.session.client`). Printed
like the direct path prints. Import-light: ``pass_mgr get`` runs many times a command.
"""

from __future__ import annotations

from .. import exits
from ..pass_mgr_grammar import UsageError, parse
from ..session.client import request
from ..session.protocol import Refusal


def channel_fields(args: list[str]) -> tuple[str, dict]:
    """``(op, fields)`` of the channel request for an agent command line (the grammar's
    reading, :mod:`paddedcell.pass_mgr_grammar`); a :class:`Refusal` when it cannot go."""
    try:
        call = parse(args)
    except UsageError as exc:
        raise Refusal(str(exc), exits.USAGE) from None
    fields = dict(call.options)
    if fields.pop("show", False):
        raise Refusal("pass_mgr generate --print refuses inside an agent session (the value "
                      "would show)", exits.FORBIDDEN)
    if "no_symbols" in fields:
        fields["symbols"] = not fields.pop("no_symbols")
    if call.key is not None:
        fields["key"] = call.key
    return call.op, fields


def run_pass_mgr(args: list[str]) -> int:
    """pass_mgr's agent commands over the channel; prints like the direct path does."""
    import sys

    if any(a in ("-h", "--help") for a in args[1:]):
        return -1  # click prints the help
    try:
        op, fields = channel_fields(args)
        answer = request(op, **fields)
    except Refusal as exc:
        sys.stderr.write(f"pass_mgr: {exc.message}\n")
        return exc.exit_code
    out, err = sys.stdout, sys.stderr
    key = fields.get("key")
    if op == "get":
        out.write(str(answer.get("value", "")) + "\n")
    elif op == "generate":
        err.write(f"pass_mgr: generated {key} (version {answer.get('version')}, "
                  f"{answer.get('length')} characters); the value was not printed\n")
    elif op == "rotate":
        err.write(f"pass_mgr: rotated {key} to version {answer.get('version')}; the previous "
                  "value stays in its history\n" if key else
                  f"pass_mgr: re-encrypted the store of {answer.get('agentId')} under a fresh "
                  "data key\n")
    elif op == "unset":
        err.write(f"pass_mgr: removed {key}\n")
    elif op == "list":
        bound = answer.get("bound") or {}
        for name in answer.get("keys", []):
            out.write(f"{name}\t{bound[name]}\n" if name in bound else f"{name}\n")
    elif op == "history":
        for index, (version, created) in enumerate(answer.get("versions", [])):
            out.write(f"{version}\t{created}" + ("\tcurrent" if index == 0 else "") + "\n")
    out.flush()
    err.flush()
    return 0
