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
from ..supervisor import procs
from .http import HTTPError

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


def bind_identity(supervisor, request, kind: str) -> dict[str, Any]:
    """The request's body with the caller's agent; raises 403 when the caller claims another.

    ``kind`` is ``"exec"`` or ``"process"``.
    """
    body = request.body
    if not isinstance(body, dict):
        return body  # the parser says what is wrong with it
    caller = identify(supervisor, request.peer_pid)
    if not caller.in_session:
        return body
    session = caller.session
    if session is None:
        raise HTTPError(403, "this request comes from inside an agent session the daemon did "
                             "not start; send it through the session (pcexec and paddedcell "
                             "process do that by themselves)")
    claimed = body.get("agentId")
    if claimed is not None and claimed != session.agent_id:
        raise HTTPError(403, f"inside agent {session.agent_id or '(none)'}'s session you act "
                             f"as that agent only, not {claimed}")
    workspace = getattr(getattr(session, "channel", None), "agent_workspace", None)
    if kind == "exec":
        claimed_ws = body.get("agentWorkspace")
        if claimed_ws is not None and workspace is not None and claimed_ws != workspace:
            raise HTTPError(403, f"inside this session the agent workspace is {workspace}, "
                                 f"not {claimed_ws}")
    if not session.agent_id:
        raise HTTPError(403, "this session belongs to no agent, so it cannot start or drive "
                             "agent sessions")
    body = dict(body, agentId=session.agent_id)
    if kind == "exec" and workspace:
        body["agentWorkspace"] = workspace
    return body


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


#: What a caller inside an agent session may ask the daemon's socket (unsandboxed hosts;
#: in the sandbox the socket is hidden and the channel forwards the same set), and the
#: body field naming the agent. /exec and /process bind theirs in routes_exec.
SESSION_ROUTES: dict[tuple[str, str], str | None] = {
    ("POST", "/exec"): None, ("POST", "/process"): None, ("GET", "/healthz"): None,
    ("HEAD", "/healthz"): None, ("GET", "/agents"): None,
    ("POST", "/query-restart"): "requesterAgentId",
    ("POST", "/restart-cancel"): "requesterAgentId",
}
_BOUND_ELSEWHERE = {("POST", "/exec"), ("POST", "/process"), ("GET", "/healthz"),
                    ("HEAD", "/healthz")}


def install_guard(router, ctx) -> None:
    """Callers inside an agent session get the routes in ``SESSION_ROUTES`` only, with the
    agent field bound to their session's agent (the lifecycle, workflow, notification and
    restart-result routes are the plugin's and the restart job's, never an agent's)."""
    for (method, path), handler in list(router.routes.items()):
        if (method, path) in _BOUND_ELSEWHERE:
            continue
        router.routes[(method, path)] = _guarded(method, path, handler, ctx)


def _guarded(method: str, path: str, handler, ctx):
    async def guarded(request):
        supervisor = ctx.services.get("supervisor")
        if supervisor is None or request.peer_pid is None:
            return await handler(request)
        caller = identify(supervisor, request.peer_pid)
        if not caller.in_session:
            return await handler(request)
        if (method, path) not in SESSION_ROUTES:
            raise HTTPError(403, f"{method} {path} is not for commands inside an agent session")
        field_name = SESSION_ROUTES[(method, path)]
        from ..cli.session_channel import operator_fields_in

        operator_fields = operator_fields_in(request.body)
        if operator_fields:
            raise HTTPError(403, f"{', '.join(operator_fields)} in a restart "
                                 "job is the operator's setting, not an agent's")
        if field_name is not None:
            session = caller.session
            if session is None:
                raise HTTPError(403, "this request comes from inside an agent session the "
                                     "daemon did not start; send it through the session")
            body = request.body if isinstance(request.body, dict) else {}
            claimed = body.get(field_name)
            if claimed is not None and claimed != session.agent_id:
                raise HTTPError(403, f"inside agent {session.agent_id or '(none)'}'s session "
                                     f"you act as that agent only, not {claimed}")
            body = dict(body, **{field_name: session.agent_id})
            if (method, path) == ("POST", "/query-restart"):  # its files are the session's
                from ..restart.confine import bind_session_job, session_ids

                workspace = getattr(getattr(session, "channel", None), "agent_workspace", None)
                body = bind_session_job(body, workspace, *session_ids(session))
            request = dataclasses.replace(request, body=body)
        return await handler(request)

    guarded.__name__ = getattr(handler, "__name__", "guarded")
    return guarded
