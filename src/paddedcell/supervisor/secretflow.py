"""docs/design.md §3 steps 1–2: resolve ``pass_mgr get`` before running, build the mask set.

Order matters: refuse first (``pass_mgr set``/``admin``, the mask replayed into
a command), then resolve every static ``pass_mgr get KEY`` through the vault —
if any fails nothing runs — then add every value of the agent's store, so a
dynamic key (``pass_mgr get "$K"``) that the shell resolves at run time is
masked too. The child's own ``pass_mgr`` really prints the value; only the
redactor sees it.

Fail closed: when the agent's store cannot be read (locked vault, corrupt
store), we cannot know what to mask, so nothing runs. An uninitialized vault
holds no secrets: commands without static ``pass_mgr get`` run unmasked.
Pure of Trio; the daemon calls :func:`prepare` in a worker thread (the vault
does file locking and key derivation).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..execspec import commands
from ..redactor.filters import OutputFilter, new_filter  # plain Python: no engine import

#: Exit code of the plain CLI when a secret could not be resolved (docs/design.md §4.1).
SECRET_RESOLUTION_EXIT = 3


#: The command may not run at all (a request error: nothing was started).
CommandRefused = commands.CommandRefused


class SecretResolutionError(Exception):
    """A secret could not be resolved; ``str()`` is the vault's one-line message."""

    exit_code = SECRET_RESOLUTION_EXIT


@dataclass(frozen=True)
class Prepared:
    """The secrets to mask (plaintext: hand straight to the supervisor), the calls,
    and the output filter already built for the secrets: building its matcher
    takes milliseconds, which belong in this worker thread, not in the daemon's
    event loop."""

    secrets: list[str] = field(repr=False)
    calls: list = field(default_factory=list)
    redactor: OutputFilter | None = field(default=None, repr=False)
    #: The egress side of the session (``egress.session.ProxySession``: bindings, the
    #: session CA, placeholders to come) when egress is on for this agent (docs/design.md
    #: §6.7); the supervisor uses it only where the sandbox gives the session its proxy.
    egress: Any = field(default=None, repr=False)


def prepare(command: str, agent_id: str | None, workspace: str | None, settings) -> Prepared:
    """Check the command, resolve its static ``pass_mgr get`` calls, load the mask set;
    the redactor is followed by the admin-password scan (a hit masks it and locks the
    vault) whenever the vault has an admin password."""
    prepared = _resolve(command, agent_id, workspace, settings)
    if not os.path.lexists(os.path.join(settings.home, "vault", "admin.json")):
        return prepared  # no admin password to find (and no vault import for a plain run)
    from .. import vault
    try:
        guard = vault.output_guard(prepared.redactor, f"pcexec output ({agent_id or 'no agent'})",
                                   settings=settings,
                                   new_redactor=partial(new_filter, settings=settings))
    except vault.VaultError as exc:
        raise SecretResolutionError(str(exc)) from None
    return Prepared(prepared.secrets, prepared.calls, guard, prepared.egress)


def _resolve(command: str, agent_id: str | None, workspace: str | None, settings) -> Prepared:
    calls = commands.check_command(command, settings["redactor.mask"])
    # Direct calls run as written; indirect ones (xargs, bash -c strings) are masked
    # through the whole store like dynamic keys.
    static = [c for c in calls if c.direct and c.subcommand == "get" and c.key is not None]
    identity = bool(agent_id and workspace)
    if static and not identity:
        raise SecretResolutionError(
            "pass_mgr get needs the agent's identity; set AGENT_ID and AGENT_WORKSPACE "
            "(or pass --agent-id and --agent-workspace)")
    if not identity:
        return Prepared([], calls, new_filter((), settings))  # no agent, no store: nothing to mask
    from .. import vault  # only now: its crypto imports cost a plain run ~50 ms
    values: list[str] = []
    bindings: dict = {}
    try:
        for call in static:
            values.append(vault.get_secret(agent_id, workspace, call.key, version=call.version,
                                           settings=settings))
        try:
            stored, bindings = vault.agent_values_and_bindings(agent_id, workspace,
                                                               settings=settings)
            values.extend(stored)
        except vault.NotInitialized:
            pass  # no vault, no secrets to mask (static gets already failed above)
    except vault.VaultError as exc:
        raise SecretResolutionError(str(exc)) from None
    # Distinct, longest first: the order does not change what is masked, only the work.
    unique = sorted({v for v in values if v}, key=len, reverse=True)
    egress = None
    from ..egress import egress_wanted  # cheap: the proxy and the CA load only when wanted

    if egress_wanted(settings, bindings):
        from ..egress.session import session_for

        egress = session_for(agent_id, settings, values=unique, bindings=bindings)
    return Prepared(unique, calls, new_filter(unique, settings), egress)
