"""POST /vault/check-leak over a real Unix socket: miss, hit (locks, says where), big text in a thread."""

from types import SimpleNamespace

import trio

from paddedcell import config
from paddedcell.daemon import routes_vault
from paddedcell.daemon.client import DaemonClient, DaemonError
from paddedcell.daemon.http import Router, serve_unix
from paddedcell.vault import init_admin, vault_status

FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}
PASSWORD = "route test admin pw"


async def test_check_leak_route(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")},
                           {**FAST_KDF, "vault.leak_thread_threshold_bytes": 1000})
    init_admin(PASSWORD, settings)
    router = Router()
    routes_vault.register(router, SimpleNamespace(settings=settings, services={}))
    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)

        def calls():
            client = DaemonClient(settings)
            client.path = path
            out = [client.call("POST", "/vault/check-leak", {"text": "", "source": "s"}),
                   client.call("POST", "/vault/check-leak",
                               {"text": "x" * 5000 + "nothing here", "source": "tool-result"})]
            for body in ({"source": "s"}, {"text": "t"}, {"text": 3, "source": "s"}):
                try:
                    client.call("POST", "/vault/check-leak", body)
                except DaemonError as exc:
                    out.append(exc.status)
            out.append(client.call("POST", "/vault/check-leak",
                                   {"text": "y" * 5000 + PASSWORD, "source": "message:out"}))
            # Non-ASCII and astral text around repeated hits; a lone surrogate comes back as U+FFFD.
            out.append(client.call("POST", "/vault/check-leak",
                                   {"text": f"ö😀 {PASSWORD}{PASSWORD} «{PASSWORD}» \ud800!",
                                    "source": "tool-result"}))
            return out

        results = await trio.to_thread.run_sync(calls)
        nursery.cancel_scope.cancel()
    n = len(PASSWORD)
    assert results == [
        {"leak": False}, {"leak": False}, 400, 400, 400,
        {"leak": True, "redacted": "y" * 5000 + "######", "spans": [[5000, 5000 + n]]},
        {"leak": True, "redacted": "ö😀 ############ «######» \ufffd!",
         # UTF-16 code units, as JavaScript counts: 😀 is two.
         "spans": [[4, 4 + n], [4 + n, 4 + 2 * n], [6 + 2 * n, 6 + 3 * n]]},
    ]
    assert vault_status(settings) == "locked"
    log = (tmp_path / "home" / "security.log").read_text()
    assert "message:out" in log and PASSWORD not in log and "yyy" not in log and "ö" not in log
    assert sum("CRITICAL" in line for line in log.splitlines()) == 2  # one per call with hits
