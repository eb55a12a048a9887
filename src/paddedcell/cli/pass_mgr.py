"""``pass_mgr``: the vault's command line (commands and exit codes: docs/design.md §4.3).

Agents run ``pass_mgr get KEY`` inside their commands many times, so ``get``
has a hand-parsed fast path (``pass_mgr_get``) that imports neither click nor
anything the vault does not need; every other command, ``--help`` and every
usage error go through click (``pass_mgr_click``). Neither imports this module.

Human-only operations (``set``, ``admin`` except ``status``) refuse in an agent
context, and read passwords given as ``-`` from ``/dev/tty`` only: Python's
``getpass`` silently reads a pipe when there is no terminal, which would let a
program answer a prompt meant for a person.
"""

from __future__ import annotations

import os
import sys

from ..pass_mgr_grammar import AGENT_OPS
from .pass_mgr_get import PROG, _parse_get, run_get


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] and args[0] in AGENT_OPS:
        # Inside an agent session the session's supervisor answers, for its agent only
        # (docs/design.md §1); AGENT_ID there is informational. Logic: cli/pass_mgr_channel.py.
        from ..agent_session import in_session

        if in_session():
            from .pass_mgr_channel import run_pass_mgr

            code = run_pass_mgr(args)
            if code >= 0:
                if argv is None:
                    os._exit(code)
                raise SystemExit(code)
    if args[:1] == ["get"]:
        parsed = _parse_get(args[1:])
        if parsed is not None:
            if argv is None:
                # A process of its own that lives a few milliseconds: no garbage
                # collections while it imports, and no interpreter teardown once the
                # value is written and flushed (failures still exit the usual way).
                import gc

                gc.disable()
                # cryptography loads OpenSSL's legacy provider (RC4, DES, Blowfish, MD4, ...)
                # when its Rust module is imported, unless this variable is set: ~0.3 ms of a
                # get, which opens AES-256-GCM boxes (the default provider) and nothing else,
                # and starts no process that would inherit it. A value set already is the
                # caller's (tests/test_pass_mgr.py).
                os.environ.setdefault("CRYPTOGRAPHY_OPENSSL_NO_LEGACY", "1")
                os._exit(run_get(*parsed))
            raise SystemExit(run_get(*parsed))
    from .pass_mgr_click import cli

    cli.main(args=args, prog_name=PROG)


if __name__ == "__main__":
    main()
