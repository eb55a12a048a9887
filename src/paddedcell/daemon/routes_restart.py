"""Routes of the restart coordinator (docs/design.md §4.4), thin over :mod:`paddedcell.restart.coordinator`.

``POST /query-restart`` takes the seed's body plus an optional ``job`` object;
with it the daemon runs the restart job itself once the answer is OK, because
the caller may be killed by the very restart it asked for::

    {"requesterAgentId": "main", "requesterSessionKey": "agent:main:main",
     "job": {"rollback": "/abs/rollback.sh", "log": "/abs/restart.log",
             "delaySeconds": 60, "recoverTimeoutSeconds": 5,
             "restartCmd": "openclaw gateway restart",
             "statusCmd": "openclaw gateway status --require-rpc"}}

Without ``job`` the caller runs the restart and reports with ``/restart-result``.
``POST /restart-cancel`` (``{requesterAgentId, requesterSessionKey, reason?}``)
undoes a restart whose restart command has not started; ``safe-restart`` uses
it on Ctrl-C. ``message-end`` accepts ``heartbeat`` like ``message-start``;
``message-start`` accepts ``notificationId`` when the run delivers that
notification (admitted even while frozen; a restart waits for it);
``GET /notifications`` accepts ``agentId`` to filter. Notifications carry
``kind`` (``prepare_agent``, ``prepare_session``, ``restart_done``,
``restart_failed``) beside ``text``.
"""

from __future__ import annotations

from typing import Any

import trio

from ..restart.coordinator import Coordinator, job_spec_from_body
from ..restart.job import drain_logs
from .http import HTTPError, Request, Router


#: One job's files are checked at a time (each check of a session's job may fork).
_job_check_limiter = trio.CapacityLimiter(1)


def _flag(request: Request, name: str) -> bool:
    value = request.body.get(name, False)
    if not isinstance(value, bool):
        raise HTTPError(400, f"field {name!r} must be true or false")
    return value


def _optional_str(request: Request, name: str) -> str | None:
    value = request.body.get(name)
    if value is not None and not isinstance(value, str):
        raise HTTPError(400, f"field {name!r} must be a string")
    return value


def register(router: Router, ctx: Any) -> None:
    coordinator = Coordinator(ctx.settings)
    coordinator.load()
    ctx.services["restart"] = coordinator
    ctx.nursery.start_soon(coordinator.run)

    # CoordinatorError and JobSpecError become their statuses at the edge
    # (daemon/validate.py); every argument is checked before the coordinator runs.

    @router.route("POST", "/lifecycle/message-start")
    async def message_start(request: Request) -> dict[str, Any]:
        notification_id = request.body.get("notificationId")
        if notification_id is not None and (not isinstance(notification_id, int)
                                            or isinstance(notification_id, bool)):
            raise HTTPError(400, "field 'notificationId' must be the integer id of a notification")
        return coordinator.message_start(request.require("agentId"),
                    request.require("sessionKey"), heartbeat=_flag(request, "heartbeat"),
                    workflow=_optional_str(request, "workflow"), notification_id=notification_id)

    @router.route("POST", "/lifecycle/message-end")
    async def message_end(request: Request) -> dict[str, Any]:
        return coordinator.message_end(request.require("agentId"),
                    request.require("sessionKey"), heartbeat=_flag(request, "heartbeat"))

    @router.route("POST", "/workflow/open")
    async def workflow_open(request: Request) -> dict[str, Any]:
        return coordinator.workflow_open(request.require("agentId"),
                    request.require("workflow"))

    @router.route("POST", "/workflow/close")
    async def workflow_close(request: Request) -> dict[str, Any]:
        _optional_str(request, "workflow")
        return coordinator.workflow_close(request.require("agentId"))

    @router.route("POST", "/query-restart")
    async def query_restart(request: Request) -> dict[str, Any]:
        agent_id = request.require("requesterAgentId")
        session = request.require("requesterSessionKey")
        job = None
        if request.body.get("job") is not None:
            # Off the event loop: a session's job files are opened as the session (a
            # fork under a root daemon), and a session may send this as often as it likes.
            job = await trio.to_thread.run_sync(job_spec_from_body, request.body["job"],
                                                ctx.settings, agent_id, limiter=_job_check_limiter)
        answer = coordinator.query_restart(agent_id, session, job)
        await drain_logs()  # its "restart requested" line is in the log before the answer
        return answer

    @router.route("POST", "/restart-result")
    async def restart_result(request: Request) -> dict[str, Any]:
        status = request.require("status")
        if status not in ("ok", "failed"):
            raise HTTPError(400, "field 'status' must be \"ok\" or \"failed\"")
        return coordinator.restart_result(status, _optional_str(request, "log"))

    @router.route("POST", "/restart-cancel")
    async def restart_cancel(request: Request) -> dict[str, Any]:
        answer = coordinator.cancel(request.require("requesterAgentId"),
                    request.require("requesterSessionKey"),
                    _optional_str(request, "reason") or "cancelled by the requester")
        await drain_logs()  # its "restart cancelled" line is in the log before the answer
        return answer

    @router.route("GET", "/agents")
    async def agents(request: Request) -> dict[str, Any]:
        return coordinator.view()

    @router.route("GET", "/notifications")
    async def notifications(request: Request) -> dict[str, Any]:
        try:
            wait = float(request.query.get("wait", "0"))
        except ValueError:
            raise HTTPError(400, "query parameter 'wait' must be a number of seconds") from None
        if not wait >= 0:
            raise HTTPError(400, "query parameter 'wait' must be >= 0")
        found = await coordinator.notifications(wait, request.query.get("agentId") or None)
        return {"notifications": found}

    @router.route("POST", "/notifications/ack")
    async def ack(request: Request) -> dict[str, Any]:
        ids = request.body.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                for i in ids):
            raise HTTPError(400, "field 'ids' must be a list of notification ids (integers)")
        return coordinator.ack(ids)
