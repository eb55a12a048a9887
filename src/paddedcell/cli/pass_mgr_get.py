"""The start-up-sensitive part of ``pass_mgr``: the fast ``get`` path and the helpers
every command shares (one-line failures, the agent's identity, human-only refusals).

Agents run ``pass_mgr get KEY`` inside their commands many times, so this module
imports neither click nor ``json``, ``pathlib`` or ``dataclasses``; everything
else (``pass_mgr_click``) may. Exit codes: :mod:`paddedcell.exits`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

from .. import AGENT_CONTEXT_VARIABLES as AGENT_MARKERS
from .. import exits

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
                  "(pcexec sets AGENT_ID and AGENT_WORKSPACE)", exits.ERROR)
    return os.environ["AGENT_ID"], os.environ["AGENT_WORKSPACE"]


def agent_marker() -> str | None:
    """The first agent-context variable present in the environment (set even if empty)."""
    return next((name for name in AGENT_MARKERS if name in os.environ), None)


def refuse_in_agent_context(what: str) -> None:
    marker = agent_marker()
    if marker:
        fail(f"{what} is for humans only and refuses to run in an agent context ({marker} is "
              "set); run it in your own terminal", exits.FORBIDDEN)
    # Not the environment: the process tree and the sandbox (docs/design.md §4.3, agent_session).
    from ..agent_session import inside_agent_session

    if inside_agent_session():
        fail(f"{what} is for humans only and refuses to run inside an agent session (whatever "
             "its environment says); run it in your own terminal", exits.FORBIDDEN)


def load_settings():
    """config.load(), a bad setting becoming one line and exit 2 (as in every CLI)."""
    from .. import config

    try:
        return config.load()
    except config.ConfigError as exc:
        fail(str(exc), exc.exit_code)


def require_ready(settings) -> None:
    """Exit 3 with the vault's message unless it is initialized and not locked."""
    from ..vault.errors import VaultError
    from ..vault.read import AdminPaths, require_ready as vault_ready

    try:
        vault_ready(AdminPaths(settings.home_text))
    except VaultError as exc:
        fail(str(exc), exc.exit_code)


# -- the fast get path ---------------------------------------------------------------


def _parse_get(args: list[str]) -> tuple[str, int | None] | None:
    """(key, version) of ``get`` by the one grammar; None sends the call to click, whose
    usage error (exit 2) or help is the answer."""
    from ..pass_mgr_grammar import UsageError, parse

    try:
        call = parse(["get", *args])
    except UsageError:
        return None
    return call.key, call.options.get("version")


def run_get(key: str, version: int | None) -> int:
    """Print KEY's value and a newline; every failure is one stderr line and its exit code."""
    os.umask(0o077)
    settings = load_settings()
    from .pass_mgr_daemon import get_via_daemon

    value = get_via_daemon(settings, key, version)  # None: read locally, as without a daemon
    if value is not None:
        sys.stdout.write(value + "\n")
        sys.stdout.flush()
        return exits.OK
    require_ready(settings)
    agent_id, workspace = agent_env()
    from ..vault.errors import VaultError
    from ..vault.read import get_secret

    try:
        value = get_secret(agent_id, workspace, key, version=version, settings=settings)
    except VaultError as exc:
        fail(str(exc), exc.exit_code)
    except OSError as exc:
        fail(os_error_line(exc), exits.ERROR)
    sys.stdout.write(value + "\n")
    sys.stdout.flush()
    return exits.OK
