"""Big request bodies are parsed in a child process, streamed to it as they arrive.

On a loaded host one copy of 10 MB takes 25-40 ms, and every copy, decode, parse or scan
of a whole body on the daemon's thread holds the GIL (and the event loop) that long: four
10 MB commands in flight stalled ``/healthz`` for hundreds of milliseconds. So a body over
``http.PARSE_IN_THREAD_BYTES`` goes, chunk by chunk as it is received, to
``python -m paddedcell.daemon.bigbody ROUTE``, which parses and checks it
(``validate.parse_body``) and hands back the body, pickled. For ``/exec`` a command no
shell can take (``MAX_ARG_STRLEN``, execspec/request.py) comes back cut to that length: the route
answers "too long" without the rest, so nothing of that size crosses back either.

For ``/vault/check-leak`` the child also scans the text with the admin-password guard's
*filter* (``Router.big_body_extras``: ``LeakDetector.filter_json``, ``L + 16`` bits per form,
given on the first line of its stdin, never on its command line): a text no window of
which passes the filter comes back as :class:`CleanText` (its length only), so neither the
10 MB nor its scan touch the daemon's thread; a text with a candidate (a leak, or one
window in ``2**(L + 16)``) comes back whole, and the route confirms it with the detector
the daemon holds. Without a filter (the guard waits for a human) nothing is scanned.
"""

from __future__ import annotations

import json
import pickle
import sys
from typing import Any

from ..execspec.request import MAX_ARG_STRLEN
from . import validate


class CleanText:
    """A text the child scanned (``scanned``: with the guard's filter; else nothing could
    be scanned): no window of it can be the admin password."""

    __slots__ = ("length", "scanned")

    def __init__(self, length: int, scanned: bool):
        self.length, self.scanned = length, scanned

    def __len__(self) -> int:
        return self.length

    def __reduce__(self):
        return (CleanText, (self.length, self.scanned))


def digest(raw: bytes, route: str, extra: Any = None) -> dict[str, Any] | str:
    """The checked body (a str: why it was refused), with an /exec command over
    MAX_ARG_STRLEN characters cut to that length (still over the limit, so the answer is
    the same; a NUL anywhere in it is kept, so is that refusal), and a /vault/check-leak
    text that ``extra`` (the guard's filter, or None) finds nothing in as ``CleanText``."""
    body = validate.parse_body_or_refusal(raw, route)
    if route == "/exec" and isinstance(body, dict):
        command = body.get("command")
        if isinstance(command, str) and len(command) > MAX_ARG_STRLEN:
            body["command"] = command[:MAX_ARG_STRLEN] + ("\x00" if "\x00" in command else "")
    if route == "/vault/check-leak" and isinstance(body, dict) and \
            isinstance(body.get("text"), str):
        text = body["text"]
        if extra is None:
            body["text"] = CleanText(len(text), scanned=False)
        else:
            from ..vault.leak import LeakDetector

            if not LeakDetector.from_json(extra).spans(text):  # no confirm: filter hits count
                body["text"] = CleanText(len(text), scanned=True)
    return body


def main() -> None:
    extra = json.loads(sys.stdin.buffer.readline())
    raw = sys.stdin.buffer.read()
    pickle.dump(digest(raw, sys.argv[1], extra), sys.stdout.buffer,
                protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    # Through the package: CleanText must pickle as paddedcell.daemon.bigbody's, not __main__'s.
    from paddedcell.daemon.bigbody import main as package_main

    package_main()
