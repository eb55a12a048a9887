"""``pass_mgr``: the vault's command line (commands and exit codes: DESIGN §4.3).

Agents run ``pass_mgr get KEY`` inside their commands many times, so ``get``
has a hand-parsed fast path that imports neither click nor anything the vault
does not need; every other command, ``--help`` and every usage error go
through click.

Human-only operations (``set``, ``admin`` except ``status``) refuse in an agent
context, and read passwords given as ``-`` from ``/dev/tty`` only: Python's
``getpass`` silently reads a pipe when there is no terminal, which would let a
program answer a prompt meant for a person.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

from .. import AGENT_CONTEXT_VARIABLES as AGENT_MARKERS

EXIT_LEAK = 10
#: Agent commands that go over the session channel inside a session.
SESSION_OPS = ("get", "generate", "rotate", "unset", "list", "history")
PROG = "pass_mgr"


def fail(message: str, code: int) -> NoReturn:
    prefix = "" if message.startswith(PROG + " ") else f"{PROG}: "
    sys.stderr.write(f"{prefix}{message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def os_error_line(exc: OSError) -> str:
    """One line for a file-system error, naming the file."""
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def agent_env() -> tuple[str, str]:
    """(AGENT_ID, AGENT_WORKSPACE) from the environment; exit 1 naming a missing one."""
    for name in ("AGENT_ID", "AGENT_WORKSPACE"):
        if not os.environ.get(name):
            fail(f"{name} is not set; agent commands run inside an agent session "
                  "(pcexec sets AGENT_ID and AGENT_WORKSPACE)", 1)
    return os.environ["AGENT_ID"], os.environ["AGENT_WORKSPACE"]


def agent_marker() -> str | None:
    """The first agent-context variable present in the environment (set even if empty)."""
    return next((name for name in AGENT_MARKERS if name in os.environ), None)


def refuse_in_agent_context(what: str) -> None:
    marker = agent_marker()
    if marker:
        fail(f"{what} is for humans only and refuses to run in an agent context ({marker} is "
              "set); run it in your own terminal", 5)
    # Not the environment: the process tree and the sandbox (DESIGN §4.3, agent_session).
    from ..agent_session import inside_agent_session

    if inside_agent_session():
        fail(f"{what} is for humans only and refuses to run inside an agent session (whatever "
             "its environment says); run it in your own terminal", 5)


def load_settings():
    """config.load(), a bad setting becoming one line and exit 1."""
    from .. import config

    try:
        return config.load()
    except config.ConfigError as exc:
        fail(str(exc), 1)


def require_ready(settings) -> None:
    """Exit 3 with the vault's message unless it is initialized and not locked."""
    from ..vault import admin
    from ..vault.errors import VaultError

    try:
        admin.require_ready(admin.AdminPaths(settings.home_text))
    except VaultError as exc:
        fail(str(exc), exc.exit_code)


# -- the fast get path ---------------------------------------------------------------


def _decimal(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²', which ``int`` refuses."""
    return text.isascii() and text.isdigit()


def _parse_get(args: list[str]) -> tuple[str, int | None] | None:
    """(key, version) for the plain forms of ``get``; None sends the call to click."""
    key, version, rest = None, None, list(args)
    while rest:
        arg = rest.pop(0)
        # Version 0 and below go to click, whose usage error (exit 2) is the answer.
        if arg == "--version" and rest and _decimal(rest[0]) and int(rest[0]) >= 1:
            version = int(rest.pop(0))
        elif arg.startswith("--version=") and _decimal(arg[10:]) and int(arg[10:]) >= 1:
            version = int(arg[10:])
        elif arg.startswith("-") or key is not None:
            return None
        else:
            key = arg
    return None if key is None else (key, version)


def run_get(key: str, version: int | None) -> int:
    """Print KEY's value and a newline; every failure is one stderr line and its exit code."""
    os.umask(0o077)
    settings = load_settings()
    require_ready(settings)
    agent_id, workspace = agent_env()
    from ..vault.api import get_secret
    from ..vault.errors import VaultError

    try:
        value = get_secret(agent_id, workspace, key, version=version, settings=settings)
    except VaultError as exc:
        fail(str(exc), exc.exit_code)
    except OSError as exc:
        fail(os_error_line(exc), 1)
    sys.stdout.write(value + "\n")
    sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] and args[0] in SESSION_OPS:
        # Inside an agent session the session's supervisor answers, for its agent only
        # (DESIGN §1); AGENT_ID there is informational. Logic: cli/session_channel.py.
        from . import session_channel

        if session_channel.in_session():
            code = session_channel.run_pass_mgr(args)
            if code >= 0:
                if argv is None:
                    os._exit(code)
                raise SystemExit(code)
    if args[:1] == ["get"]:
        parsed = _parse_get(args[1:])
        if parsed is not None:
            if argv is None:
                # A process of its own that lives a few milliseconds: no garbage
                # collections while it imports, and no interpreter teardown once the
                # value is written and flushed (failures still exit the usual way).
                import gc

                gc.disable()
                os._exit(run_get(*parsed))
            raise SystemExit(run_get(*parsed))
    from .pass_mgr_click import cli

    cli.main(args=args, prog_name=PROG)


if __name__ == "__main__":
    main()
