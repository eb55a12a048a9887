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


def vault_router(tmp_path, **overrides):
    """(settings, a router with the vault's routes) over a vault with PASSWORD."""
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, {**FAST_KDF, **overrides})
    init_admin(PASSWORD, settings)
    router = Router()
    routes_vault.register(router, SimpleNamespace(settings=settings, services={}))
    return settings, router


async def call_served(tmp_path, settings, router, calls):
    """``calls(client)`` in a thread, against ``router`` served on a real Unix socket."""
    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)

        def run():
            client = DaemonClient(settings)
            client.path = path
            return calls(client)

        results = await trio.to_thread.run_sync(run)
        nursery.cancel_scope.cancel()
    return results


async def test_check_leak_route(tmp_path):
    settings, router = vault_router(tmp_path, **{"vault.leak_thread_threshold_bytes": 1000})

    def calls(client):
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

    results = await call_served(tmp_path, settings, router, calls)
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


async def test_a_big_text_is_scanned_by_its_child_with_the_guards_filter(tmp_path, monkeypatch):
    """issue 20: a text over PARSE_IN_THREAD_BYTES is scanned by its body's child with the
    guard's filter (L + 16 bits per form, no test of a guess); a clean one never reaches
    the daemon's own scan, a hit is confirmed by the daemon's detector and answered as a
    small text is; while the guard waits the answer says so."""
    import base64

    from paddedcell.daemon.http import PARSE_IN_THREAD_BYTES
    from paddedcell.vault import guard, guard_runtime

    settings, router = vault_router(tmp_path)
    lent = router.big_body_extras["/vault/check-leak"]()
    assert set(lent["weights"]) == {0} and all(form[1] == 0 and len(form[2]) == 4
                                               for form in lent["forms"])
    scanned = []
    real = routes_vault.find_leaks
    monkeypatch.setattr(routes_vault, "find_leaks",
                        lambda text, *a, **k: scanned.append(len(text)) or real(text, *a, **k))
    pad = "lorem ipsum " * (PARSE_IN_THREAD_BYTES // 6)
    hidden = base64.b64encode(f"pw={PASSWORD}".encode()).decode()

    def calls(client):
        out = [client.call("POST", "/vault/check-leak", {"text": pad, "source": "s"}),
               client.call("POST", "/vault/check-leak",
                           {"text": pad + PASSWORD + " " + hidden + " ok", "source": "s"})]
        guard_runtime.remove(settings.home_text)  # a daemon started after a reboot:
        guard.forget()  # no human gave it the password yet
        out.append(client.call("POST", "/vault/check-leak",
                               {"text": pad + PASSWORD, "source": "s"}))
        return out

    clean, hit, waiting = await call_served(tmp_path, settings, router, calls)
    assert clean == {"leak": False}
    assert hit["leak"] and hit["redacted"] == pad + "###### ###### ok"
    assert waiting == {"leak": False, "guard": "waiting"}
    assert scanned == [len(pad) + len(PASSWORD) + len(hidden) + 4]  # only the hit came back
