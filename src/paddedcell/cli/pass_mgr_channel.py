"""``pass_mgr``'s agent commands inside an agent session, over the session's channel.

Inside an agent session ``pass_mgr get/generate/rotate/unset/list/history`` do not
read the vault or trust ``AGENT_ID``: the session's supervisor answers, for the
session's agent only (the client: :mod:`paddedcell.session.client`). Printed
like the direct path prints. Import-light: ``pass_mgr get`` runs many times a command.
"""

from __future__ import annotations

from .. import exits
from ..session.client import request
from ..session.protocol import Refusal


# -- pass_mgr ------------------------------------------------------------------------------


def _parse(args: list[str]) -> tuple[str, dict] | str:
    """``(op, fields)`` for pass_mgr's agent commands, or a usage error line."""
    op, rest = args[0], list(args[1:])
    fields: dict = {}
    positional: list[str] = []
    flags = {"generate": {"--no-symbols", "--force", "--print"}}.get(op, set())
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            positional += rest
            break
        name, eq, value = arg.partition("=")
        if op == "get" and name == "--version":
            value = value if eq else (rest.pop(0) if rest else "")
            if not (value.isascii() and value.isdigit() and int(value) >= 1):
                return "--version must be a whole number ≥ 1"
            fields["version"] = int(value)
        elif op == "generate" and name == "--length":
            value = value if eq else (rest.pop(0) if rest else "")
            if not (value.isascii() and value.isdigit() and 8 <= int(value) <= 4096):
                return "--length must be a whole number between 8 and 4096"
            fields["length"] = int(value)
        elif arg in flags:
            fields[arg[2:].replace("-", "_")] = True
        elif arg.startswith("-") and arg != "-":
            return f"no such option: {arg}"
        else:
            positional.append(arg)
    wants_key = {"list": (0, 0), "rotate": (0, 1)}.get(op, (1, 1))
    if not wants_key[0] <= len(positional) <= wants_key[1]:
        return f"pass_mgr {op}: " + ("takes no KEY" if wants_key[1] == 0 else "needs one KEY")
    if positional:
        fields["key"] = positional[0]
    if fields.pop("print", False):
        return "pass_mgr generate --print refuses inside an agent session (the value would show)"
    if "no_symbols" in fields:
        fields["symbols"] = not fields.pop("no_symbols")
    return op, fields


def run_pass_mgr(args: list[str]) -> int:
    """pass_mgr's agent commands over the channel; prints like the direct path does."""
    import sys

    if any(a in ("-h", "--help") for a in args[1:]):
        return -1  # click prints the help
    parsed = _parse(args)
    if isinstance(parsed, str):
        sys.stderr.write(f"pass_mgr: {parsed}\n")
        return exits.USAGE if "refuses" not in parsed else exits.FORBIDDEN
    op, fields = parsed
    try:
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
