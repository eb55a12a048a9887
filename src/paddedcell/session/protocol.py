"""The session channel's protocol, the routes a session may use, and who a session acts as.

Wire format, one request per connection (``pass_mgr`` lives milliseconds)::

    -> {"op": "get", "key": "db", "version": null}\\n
    <- {"ok": true, "value": "..."}\\n           or
    <- {"ok": false, "exit": 4, "error": "one line"[, "status": 403]}\\n

Ops: :data:`VAULT_OPS` (for the session's agent), ``whoami``, and the ops of
:data:`SESSION_ROUTES`: ``exec`` / ``process`` (a daemon request body) and
``daemon`` (``method``, ``path``, ``body``), each bound by :func:`bind` before
the supervisor forwards it; the answer is ``{"ok": true, "result": <the
daemon's answer>}``. A refusal keeps its HTTP status when the daemon gave one,
so a 409 that crossed the channel is still a 409 on the other side.

Import-light on purpose (the ``pass_mgr`` binary bundles it): ``exits`` and the grammar only.
"""

from __future__ import annotations

from .. import exits
from ..agent_session import CHANNEL_VARIABLE  # noqa: F401 (its home is import-light)
from ..pass_mgr_grammar import AGENT_OPS
#: Vault ops the channel answers itself, for the session's agent: pass_mgr's agent commands.
VAULT_OPS = AGENT_OPS


# -- one refusal, one exit/status table ---------------------------------------------------

#: Exit code <-> HTTP status: the only place one is converted into the other. Any other
#: 4xx status is a refused request (exit 2: nothing ran); no status, or a 5xx, is exit 1.
EXIT_STATUS = ((exits.FORBIDDEN, 403), (exits.USAGE, 400))


def status_for_exit(exit_code: int) -> int | None:
    return next((status for code, status in EXIT_STATUS if code == exit_code), None)


def exit_for_status(status: int | None) -> int:
    code = next((code for code, known in EXIT_STATUS if known == status), None)
    if code is not None:
        return code
    return exits.USAGE if status is not None and 400 <= status < 500 else exits.ERROR


class Refusal(Exception):
    """A request refused: one line, the exit code a CLI exits with and the HTTP status the
    daemon answers with. Give either; the other comes from :data:`EXIT_STATUS`."""

    def __init__(self, message: str, exit_code: int | None = None, *,
                 status: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else (
            status_for_exit(exit_code) if exit_code is not None else None)
        self.exit_code = exit_code if exit_code is not None else exit_for_status(status)

    def answer(self) -> dict:
        """The channel's ``ok: false`` line for this refusal."""
        answer = {"ok": False, "exit": self.exit_code, "error": self.message}
        if self.status is not None:
            answer["status"] = self.status
        return answer

    @classmethod
    def from_answer(cls, answer: dict) -> "Refusal":
        code, status = answer.get("exit"), answer.get("status")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        message = str(answer.get("error") or "the session channel refused the request")
        return cls(message, code if code is not None or status is not None else exits.ERROR,
                   status=status)


# -- the routes a session may use, and binding them to its agent --------------------------


class Route:
    """How a caller inside a session may use one daemon route."""

    __slots__ = ("op", "agent_field", "session_key_field")

    def __init__(self, op: str, agent_field: str | None = None,
                 session_key_field: str | None = None):
        #: The channel op that carries it (``exec``, ``process``, ``daemon``).
        self.op = op
        #: The body field naming the agent: always the session's agent.
        self.agent_field = agent_field
        #: The body field naming the conversation: the session's when the body has none.
        self.session_key_field = session_key_field


#: Every daemon route a caller inside an agent session may use, through its channel (in
#: the sandbox the daemon's socket is hidden) or on the daemon's socket (without it). The
#: lifecycle, workflow, notification, vault and restart-result routes are the plugin's and
#: the restart job's, never an agent's.
SESSION_ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/exec"): Route("exec", "agentId", "sessionKey"),
    ("POST", "/process"): Route("process", "agentId"),
    ("GET", "/healthz"): Route("daemon"),
    ("GET", "/agents"): Route("daemon"),
    ("POST", "/query-restart"): Route("daemon", "requesterAgentId", "requesterSessionKey"),
    ("POST", "/restart-cancel"): Route("daemon", "requesterAgentId", "requesterSessionKey"),
}
#: Restart job fields only the operator sets (the plugin's config, the daemon's settings):
#: commands the daemon runs outside any session and sandbox. An agent gives rollback and log.
OPERATOR_JOB_FIELDS = ("restartCmd", "statusCmd")


#: The ``job`` field :func:`bind` sets on a restart job, whatever the agent sent in it: the
#: session's workspace and uid, which confine the job's files (``restart/confine.py``).
SESSION_JOB_FIELD = "session"


def session_ids(session) -> tuple[int, int]:
    """The uid and gid a session's commands run as: its own when the sandbox gives it one
    (a per-agent uid under a root daemon), else the supervisor's."""
    import os

    uid, gid = getattr(session, "uid", None), getattr(session, "gid", None)
    return (os.getuid() if uid is None else uid, os.getgid() if gid is None else gid)


def operator_fields_in(body) -> list[str]:
    job = body.get("job") if isinstance(body, dict) else None
    return [k for k in OPERATOR_JOB_FIELDS if isinstance(job, dict) and k in job]


def bind(session, method: str, path: str, body):
    """The body a request from inside ``session`` is answered with, acting as its agent.

    ``session`` has ``agent_id``, ``agent_workspace`` and ``session_key``; None means
    "inside an agent session nobody here can name" (it must use its channel). Pure: the
    channel and the daemon both ask it and act on the answer. Raises :class:`Refusal`.
    """
    route = SESSION_ROUTES.get((method, path))
    if route is None:
        raise Refusal(f"{method} {path} is not available inside an agent session",
                      exits.FORBIDDEN)
    operator = operator_fields_in(body)
    if operator:
        raise Refusal(f"{', '.join(operator)} in a restart job is the operator's setting, "
                      "not an agent's", exits.FORBIDDEN)
    if route.agent_field is None:
        return body
    if session is None:
        raise Refusal("this request comes from inside an agent session the daemon did not "
                      "start; send it through the session (pcexec and paddedcell process do "
                      "that by themselves)", exits.FORBIDDEN)
    if not isinstance(body, dict):
        raise Refusal(f"{method} {path} needs a JSON object", exits.USAGE)
    agent = session.agent_id
    claimed = body.get(route.agent_field)
    if claimed is not None and claimed != agent:
        raise Refusal(f"inside agent {agent or '(none)'}'s session you act as that agent "
                      f"only, not {claimed}", exits.FORBIDDEN)
    workspace = session.agent_workspace
    if route.op == "exec":
        claimed_ws = body.get("agentWorkspace")
        # A session without a workspace may not name one either: it would be any
        # directory on the host, bound (and, under a root daemon, given) to the agent.
        if claimed_ws is not None and claimed_ws != workspace:
            raise Refusal(f"inside this session the agent workspace is "
                          f"{workspace or '(none)'}, not {claimed_ws}", exits.FORBIDDEN)
    if not agent and route.op != "daemon":
        raise Refusal("this session belongs to no agent, so it cannot start or drive agent "
                      "sessions", exits.FORBIDDEN)
    body = dict(body, **{route.agent_field: agent})
    if route.op == "exec" and workspace:
        body["agentWorkspace"] = workspace
    key_field = route.session_key_field
    if key_field and session.session_key and not body.get(key_field):
        body[key_field] = session.session_key
    if isinstance(body.get("job"), dict):  # a restart job's files are the session's
        uid, gid = session_ids(session)
        body["job"] = dict(body["job"], **{SESSION_JOB_FIELD: {
            "workspace": workspace or "", "uid": uid, "gid": gid}})
    return body


# -- how long a caller waits ---------------------------------------------------------------


def answer_within(body: dict, settings) -> float:
    """Seconds the daemon may take to answer an exec ``body``: its yield, or with
    ``awaitResults`` (no yield) the command's whole timeout; plus a margin."""
    if body.get("awaitResults") is True and not body.get("background"):
        seconds = body.get("timeoutSeconds", settings["supervisor.default_timeout_seconds"])
        if not isinstance(seconds, (int, float)) or seconds <= 0:
            return 366 * 24 * 3600.0  # no timeout: the daemon answers when the command ends
        return float(seconds) + 60.0
    yield_ms = body.get("yieldMs") or settings["supervisor.default_yield_ms"]
    return float(yield_ms) / 1000 + 60.0


def process_answer_within(body: dict) -> float:
    """Seconds the daemon may take to answer a process ``body``: a poll waits up to its
    ``timeout`` (≤ 30 s) on top of the daemon's own answer time."""
    timeout = body.get("timeout") if isinstance(body, dict) else None
    timeout = timeout if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) \
        else 0
    return 60.0 + max(0.0, float(timeout)) / 1000
