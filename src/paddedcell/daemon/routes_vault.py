"""``POST /vault/check-leak {text, source}`` → ``{leak: bool}`` (a hit locks the vault).

The plugin sends every inbound and outbound message, tool-call parameter and
tool result here. The scan is pure CPU (linear in the text, ~60 ms per MB), so a
text above ``vault.leak_thread_threshold_bytes`` runs in a worker thread and
does not stall the other routes.
"""

from __future__ import annotations

from typing import Any

import trio

from ..vault import check_leak
from ..vault.errors import VaultError
from .http import HTTPError, Request, Router


def register(router: Router, ctx: Any) -> None:
    settings = ctx.settings
    threshold = int(settings["vault.leak_thread_threshold_bytes"])

    @router.route("POST", "/vault/check-leak")
    async def vault_check_leak(request: Request) -> dict[str, Any]:
        text = request.body.get("text")
        if not isinstance(text, str):
            raise HTTPError(400, "field 'text' is required and must be a str")
        source = request.require("source")

        def scan() -> bool:
            return check_leak(text, source, settings=settings)

        try:
            if len(text) > threshold:
                leak = await trio.to_thread.run_sync(scan)
            else:
                leak = scan()
        except VaultError as exc:
            raise HTTPError(409, str(exc)) from exc
        return {"leak": leak}
