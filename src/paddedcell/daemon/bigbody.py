"""Big request bodies are parsed in a child process, streamed to it as they arrive.

On a loaded host one copy of 10 MB takes 25-40 ms, and every copy, decode, parse or scan
of a whole body on the daemon's thread holds the GIL (and the event loop) that long: four
10 MB commands in flight stalled ``/healthz`` for hundreds of milliseconds. So a body over
``http.PARSE_IN_THREAD_BYTES`` goes, chunk by chunk as it is received, to
``python -m paddedcell.daemon.bigbody ROUTE``, which parses and checks it
(``validate.parse_body``) and hands back the body, pickled. For ``/exec`` a command no
shell can take (``MAX_ARG_STRLEN``, execspec/request.py) comes back cut to that length: the route
answers "too long" without the rest, so nothing of that size crosses back either.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

from ..execspec.request import MAX_ARG_STRLEN
from . import validate


def digest(raw: bytes, route: str) -> dict[str, Any] | str:
    """The checked body (a str: why it was refused), with an /exec command over
    MAX_ARG_STRLEN characters cut to that length (still over the limit, so the answer is
    the same; a NUL anywhere in it is kept, so is that refusal)."""
    body = validate.parse_body_or_refusal(raw, route)
    if route == "/exec" and isinstance(body, dict):
        command = body.get("command")
        if isinstance(command, str) and len(command) > MAX_ARG_STRLEN:
            body["command"] = command[:MAX_ARG_STRLEN] + ("\x00" if "\x00" in command else "")
    return body


def main() -> None:
    raw = sys.stdin.buffer.read()
    pickle.dump(digest(raw, sys.argv[1]), sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    main()
