"""``POST /vault/check-leak {text, source}`` → ``{leak: bool}`` (a hit locks the vault);
``POST /vault/changed {agentId, agentWorkspace}`` → ``{ok: true}``: a store changed outside
the daemon (``pass_mgr set``): its values join every live session that could print them
before the answer (the body names the store, never a value).

``POST /vault/guard {password}`` → ``{guard: "armed"}``: a human gives the admin password
(``pass_mgr admin guard``, and after ``admin init``/``set``/``bind``/``recover``); once the
admin KDF confirms it, the daemon masks it in every session's output (``vault/guard.py``:
the detector lives in memory, its filter on tmpfs for later starts); ``{reload: true}``
instead loads that runtime file, which the human's pass_mgr just wrote (no second KDF;
``{guard: "waiting"}`` when it holds nothing for this admin.json). ``GET /vault/guard``
→ ``{guard: "armed" | "waiting" | "uninitialized"}``; ``GET /vault/guard/filter`` adds the
detector's filter for a foreground ``pcexec`` (``L + 16`` bits per form, confirmed by the
KDF there; only a verified peer of the daemon's own uid outside every session, as
``/vault/get``). None of the three answers a caller inside a session. While the guard waits,
``/vault/check-leak`` answers ``{leak: false, guard: "waiting"}``.

On a hit the answer also says where, so the caller can mask just the password
without asking again: ``redacted`` is the text with each hit run replaced by
``######`` (lone surrogates, which JSON cannot carry back, become U+FFFD), and
``spans`` lists the same runs as ``[start, end)`` UTF-16 code-unit offsets into
the text as sent (JavaScript ``text.slice(start, end)``). Each call writes at most
one CRITICAL line, however many hits.

The plugin sends every inbound and outbound message, tool-call parameter and
tool result here. The scan is pure CPU (linear in the text, ~60 ms per MB), so a
text above ``vault.leak_thread_threshold_bytes`` runs in a worker thread and
does not stall the other routes.
"""

from __future__ import annotations

import os
import re
from typing import Any

import trio

from ..vault import arm_guard, find_leaks, guard_state, lend_guard, reload_guard
from ..vault.errors import Forbidden
from ..vault.leak import redact, utf16_spans
from .bigbody import CleanText
from .http import HTTPError, Request, Router, cpu_limiter

#: Texts longer than this are scanned one at a time (N CPU-bound threads at once
#: make the event loop wait for the GIL N-fold: /healthz stalled 0.5 s). Shorter
#: ones do not queue behind them (the plugin's synchronous check waits 1 s).
BIG_SCAN_CHARS = 1 << 20

#: A str decoded from JSON holds surrogates only unpaired; UTF-8 cannot carry them back.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def leak_answer(text: str, spans: list[tuple[int, int]]) -> dict[str, Any]:
    """The route's answer for the code-point ``spans`` that ``find_leaks`` gave for ``text``."""
    if not spans:
        return {"leak": False}
    return {"leak": True,
            "redacted": LONE_SURROGATE.sub("\ufffd", redact(text, spans)),
            "spans": [list(span) for span in utf16_spans(text, spans)]}


def register(router: Router, ctx: Any) -> None:
    settings = ctx.settings
    threshold = int(settings["vault.leak_thread_threshold_bytes"])

    def refuse_sessions(request: Request, what: str) -> None:
        # Not from inside an agent session: it would test admin password guesses in bulk.
        from .routes_session import identify

        supervisor = ctx.services.get("supervisor")
        if supervisor is not None and identify(supervisor, request.peer_pid).in_session:
            raise HTTPError(403, f"{what} answers the plugin and people, not commands "
                                 "inside an agent session")

    def require_own_person(request: Request, what: str, inside: str) -> None:
        """Only a verified peer of this daemon's own uid outside every session's tree
        (``identify``), checked here again past the socket's uid check; with no session
        table to check against, nobody (fail closed)."""
        if request.peer_uid != os.getuid() or request.peer_pid is None:
            raise HTTPError(403, f"{what} answers this daemon's own user only")
        supervisor = ctx.services.get("supervisor")
        if supervisor is None:
            raise HTTPError(403, f"{what} needs the daemon's session table")
        from .routes_session import identify

        if identify(supervisor, request.peer_pid).in_session:
            raise HTTPError(403, inside)

    @router.route("POST", "/vault/check-leak")
    async def vault_check_leak(request: Request) -> dict[str, Any]:
        refuse_sessions(request, "the leak check")
        text = request.body.get("text")
        if isinstance(text, CleanText):  # a big body its child scanned (bigbody.py)
            request.require("source")
            if text.scanned:
                return {"leak": False}
            state = await trio.to_thread.run_sync(guard_state, settings)
            return {"leak": False, "guard": "waiting"} if state != "uninitialized" else \
                {"leak": False}
        if not isinstance(text, str):
            raise HTTPError(400, "field 'text' is required and must be a str")
        source = request.require("source")

        def scan() -> dict[str, Any]:
            answer = leak_answer(text, find_leaks(text, source, settings=settings))
            if not answer["leak"] and guard_state(settings) == "waiting":
                answer["guard"] = "waiting"  # nothing could be found: say so
            return answer

        # A VaultError becomes 409 through validate.ERROR_STATUSES.
        if len(text) > threshold:
            return await trio.to_thread.run_sync(
                scan, limiter=cpu_limiter if len(text) > BIG_SCAN_CHARS else None)
        return scan()

    # A big text is scanned by its body's child with the guard's filter (bigbody.py).
    router.big_body_extras["/vault/check-leak"] = lambda: lend_guard(settings)

    @router.route("POST", "/vault/guard")
    async def vault_guard_arm(request: Request) -> dict[str, Any]:
        refuse_sessions(request, "the admin-password guard")
        if request.body.get("reload") is True and "password" not in request.body:
            # A human's pass_mgr just wrote the runtime file (no KDF here: whoever can
            # write that file holds the host key; a filter for another admin.json is not
            # loaded): "waiting" says to send the password instead.
            return {"guard": await trio.to_thread.run_sync(reload_guard, settings)}
        password = request.require("password")
        try:  # the admin KDF: a worker thread, one at a time
            await trio.to_thread.run_sync(arm_guard, password, settings, limiter=cpu_limiter)
        except Forbidden:
            raise HTTPError(403, "wrong admin password") from None
        return {"guard": "armed"}

    @router.route("GET", "/vault/guard")
    async def vault_guard_state(request: Request) -> dict[str, Any]:
        refuse_sessions(request, "the admin-password guard")
        return {"guard": await trio.to_thread.run_sync(guard_state, settings)}

    @router.route("GET", "/vault/guard/filter")
    async def vault_guard_filter(request: Request) -> dict[str, Any]:
        # L + 16 bits per form: a fast filter of guesses, for a human's foreground pcexec.
        require_own_person(request, "the admin-password guard's filter",
                           "the admin-password guard answers the plugin and people, not "
                           "commands inside an agent session")
        lent = await trio.to_thread.run_sync(lend_guard, settings)
        if lent is None:
            return {"guard": await trio.to_thread.run_sync(guard_state, settings)}
        return {"guard": "armed", "filter": lent}

    @router.route("POST", "/vault/get")
    async def vault_get(request: Request) -> dict[str, Any]:
        """A human's direct ``pass_mgr get`` (cli/pass_mgr_get.py): the value the local
        read would print, so the caller skips importing the vault. Only for our own uid
        (nothing it could not read from the store files with the host key) and never for a
        process of a session (it asks its channel, which knows its agent): 403 otherwise,
        and the client then reads locally. Any error answer makes the client read locally
        too, so exit codes and messages stay the local read's."""
        require_own_person(request, "the direct get", "inside an agent session pass_mgr get "
                                                      "goes through the session's channel")
        agent_id, workspace = request.require("agentId"), request.require("agentWorkspace")
        key, version = request.require("key"), request.body.get("version")
        if version is not None and type(version) is not int:
            raise HTTPError(400, "field 'version' must be an int")

        def read() -> str:
            from ..vault import admin
            from ..vault.api import get_secret

            admin.require_ready(admin.AdminPaths(settings.home_text))
            return get_secret(agent_id, workspace, key, version=version, settings=settings)

        return {"value": await trio.to_thread.run_sync(read)}

    @router.route("POST", "/vault/changed")
    async def vault_changed(request: Request) -> dict[str, Any]:
        # Not in SESSION_ROUTES: a command inside a session gets 403 from the guard.
        agent_id, workspace = request.require("agentId"), request.require("agentWorkspace")
        supervisor = ctx.services.get("supervisor")
        if supervisor is not None:
            await supervisor.refresh_store(agent_id, workspace)
        return {"ok": True}
