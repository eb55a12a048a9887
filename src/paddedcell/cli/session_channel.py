"""The client side of a session's channel (server: ``supervisor/channel.py``).

Inside an agent session, ``pass_mgr get/generate/rotate/unset/list/history``,
``pcexec`` and ``paddedcell process`` do not read the vault or trust
``AGENT_ID``: they ask the supervisor that started the session, which answers
for the session's agent only. Import-light on purpose (``pass_mgr get`` runs
many times per command): a raw Unix socket and ``json``, no HTTP client.

Where the channel is: ``$PADDEDCELL_CHANNEL`` (a locator only; the server
checks that the caller belongs to its session). When that variable was
removed, the channel directory is searched: inside the sandbox it holds this
session's socket only; outside, every other session's socket refuses us.
"""

from __future__ import annotations

import os

from .. import exits

CHANNEL_VARIABLE = "PADDEDCELL_CHANNEL"
#: Other daemon routes a session may use through its channel (``safe-restart`` run by
#: an agent's command): method, path, and the body field that names the agent.
DAEMON_ROUTES = {("GET", "/healthz"): None, ("GET", "/agents"): None,
                 ("POST", "/query-restart"): "requesterAgentId",
                 ("POST", "/restart-cancel"): "requesterAgentId"}
#: Restart job fields only the operator sets (the plugin's config, the daemon's settings):
#: commands the daemon runs outside any session and sandbox. An agent gives rollback and log.
OPERATOR_JOB_FIELDS = ("restartCmd", "statusCmd")


def operator_fields_in(body) -> list[str]:
    job = body.get("job") if isinstance(body, dict) else None
    return [k for k in OPERATOR_JOB_FIELDS if isinstance(job, dict) and k in job]


class ChannelError(Exception):
    """The channel answered ``ok: false`` or could not be reached."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def in_session() -> bool:
    """Inside an agent session: the channel variable, or ancestry / sandbox facts."""
    if os.environ.get(CHANNEL_VARIABLE):
        return True
    from ..agent_session import inside_agent_session

    return inside_agent_session()


def _candidates():
    """The named channel first; the channel directory only if that fails."""
    named = os.environ.get(CHANNEL_VARIABLE)
    if named:
        yield named
    from ..config import paddedcell_home_text

    directory = os.path.join(paddedcell_home_text(), "run", "sessions")
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(".sock") and path != named:
            yield path


def _connect(path: str, timeout: float | None) -> "socket.socket":
    import socket  # here, not at the top: a human's `pass_mgr get` never needs it

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    name, fd = path, None
    if len(os.fsencode(path)) >= 100:  # sun_path is 108 bytes: go through the directory fd
        directory, base = os.path.split(path)
        fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        name = f"/proc/self/fd/{fd}/{base}"
    try:
        sock.connect(name)
    except OSError:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


def _exchange(path: str, payload: bytes, timeout: float | None) -> dict:
    with _connect(path, timeout) as sock:
        sock.sendall(payload)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    raw = b"".join(chunks)
    import json

    try:
        answer = json.loads(raw)
    except ValueError:
        raise ChannelError("the session channel sent no answer (its supervisor stopped?)", 1) \
            from None
    if not isinstance(answer, dict):
        raise ChannelError("the session channel sent a malformed answer", 1)
    return answer


def request(op: str, timeout: float | None = 60.0, **fields) -> dict:
    """Send one request; the answer dict when ``ok``, else raise ChannelError."""
    import json

    payload = json.dumps({"op": op, **fields}, ensure_ascii=False).encode() + b"\n"
    refused = None
    for path in _candidates():
        try:
            answer = _exchange(path, payload, timeout)
        except OSError:
            continue
        if answer.get("ok"):
            return answer
        exit_code = answer.get("exit")
        exit_code = exit_code if isinstance(exit_code, int) else 1
        error = str(answer.get("error") or "the session channel refused the request")
        if exit_code == exits.FORBIDDEN and "another session" in error:
            refused = ChannelError(error, exit_code)
            continue  # not our session's socket: try the next one
        raise ChannelError(error, exit_code)
    if refused is not None:
        raise refused
    raise ChannelError("inside an agent session, but its channel is not reachable "
                       f"(${CHANNEL_VARIABLE} unset and no session socket answers); run the "
                       "command through pcexec", 1)


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
    except ChannelError as exc:
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
