"""Who is calling the daemon: a human / the plugin, or a process inside a session.

docs/design.md §1 and §4.4: inside an agent session the daemon takes the caller's
agent from the peer, not from the body. Every connection on the main socket
carries the peer's pid (``SO_PEERCRED``, ``Request.peer_pid``). We walk that
pid's ``ppid`` chain up to the daemon:

- a process of one of our sessions' trees (``procs.in_tree``) is that
  session's: its agent is the only one it may name;
- a process that started with some ``PADDEDCELL_TREE`` marker in its
  ancestry but belongs to no session of ours (a foreground ``pcexec``'s
  session, or an orphan that dropped its marker) is inside *a* session we
  cannot name: it must use its session channel, which knows its agent;
- anything else (a human's shell, the OpenClaw plugin, a session channel
  forwarding a request for its session) is outside: the body's ``agentId``
  stands, as before.

Also here: a vault locked after an admin password leak stops typing into
sessions (``process write/send-keys/submit/paste``), because a shell started
before the lock would otherwise still take commands.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import trio

from ..agent_session import TREE_MARKER_PREFIX
from ..session.protocol import SESSION_ROUTES, Refusal, bind
from ..supervisor import procs
from .http import HTTPError, Request
from . import validate

#: Process actions that send input to a session (stopped while the vault is locked).
INPUT_ACTIONS = ("write", "send-keys", "submit", "paste")


@dataclass(frozen=True)
class Caller:
    #: Inside some agent session (ours or not).
    in_session: bool
    #: Our session the caller belongs to, or None.
    session: Any = None


OUTSIDE = Caller(False)


def _marked(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return any(entry.startswith(TREE_MARKER_PREFIX) for entry in raw.split(b"\0"))


def identify(supervisor, pid: int | None) -> Caller:
    """Which session (if any) the process ``pid`` belongs to."""
    if pid is None:
        return OUTSIDE
    me = os.getpid()
    if pid == me:
        return OUTSIDE
    chain, reached_me = procs.ancestry(pid, me)  # one walk for every session
    for session in list(supervisor.sessions.values()):
        if session.running and procs.chain_in_tree(session.tree, chain, reached_me):
            return Caller(True, session)
    # Not one of our running sessions: does its ancestry say "a session" all the same?
    if any(info.pid > 1 and _marked(info.pid) for info in chain):
        return Caller(True)
    return OUTSIDE


async def refuse_input_when_locked(action: str, settings) -> None:
    """HTTP 423 for an input action while the vault is locked after a leak."""
    if action not in INPUT_ACTIONS:
        return
    from ..vault.api import vault_status

    try:
        state = await trio.to_thread.run_sync(vault_status, settings)
    except Exception as exc:  # fail closed: a tampered lock file must not reopen input
        raise HTTPError(423, f"process {action} is stopped: the vault's state cannot be read "
                             f"({type(exc).__name__}); a human must check: pass_mgr admin status"
                        ) from None
    if state == "locked":
        raise HTTPError(423, f"process {action} is stopped: the vault is locked after an admin "
                             "password leak; a human must run: pass_mgr admin init")
    if state == "tampered":  # fail closed: junk in place of a real lock must not reopen input
        raise HTTPError(423, f"process {action} is stopped: the vault's lock file was not "
                             "written by pass_mgr; a human must check: pass_mgr admin status")


def install_guard(router, ctx) -> None:
    """Callers inside an agent session get the routes of ``SESSION_ROUTES`` only, acting as
    their session's agent (:func:`paddedcell.session.protocol.bind`, as the channel does)."""
    for (method, path), handler in list(router.routes.items()):
        route = SESSION_ROUTES.get((method, path))
        if route is not None and route.agent_field is None:
            continue  # open to every caller, nothing to bind: no /proc walk for /healthz
        router.routes[(method, path)] = _guarded(method, path, handler, ctx)


def _guarded(method: str, path: str, handler, ctx):
    async def guarded(request):
        supervisor = ctx.services.get("supervisor")
        if supervisor is None or request.peer_pid is None:
            return await handler(request)
        caller = identify(supervisor, request.peer_pid)
        if not caller.in_session:
            return await handler(request)
        body = bind(caller.session, method, path, request.body)  # Refusal: its status
        if body is not request.body:
            request = dataclasses.replace(request, body=body)
        return await handler(request)

    guarded.__name__ = getattr(handler, "__name__", "guarded")
    return guarded


def local_forwarder(router):
    """The daemon's forwarder for its sessions' channels: the request, already bound to
    the session's agent, is dispatched to the route's handler in this process (no HTTP to
    our own socket, no worker thread), after the same body checks as the socket's edge; an
    error answer becomes its :class:`Refusal`, status kept."""

    async def forward(method: str, path: str, body: Any) -> dict[str, Any]:
        body = {} if body is None else body
        try:
            if not isinstance(body, dict):
                raise validate.BodyError("request body must be a JSON object")
            validate.check(body, raw_text=validate.RAW_TEXT_FIELDS.get(path, frozenset()))
        except validate.BodyError as exc:
            raise Refusal(validate.one_line(str(exc)), status=400) from None
        status, answer = await router.dispatch(Request(method, path, {}, body))
        if status >= 400:
            raise Refusal(str(answer.get("error") or f"HTTP {status}"), status=status)
        return answer

    return forward
