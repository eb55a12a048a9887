"""The daemon's edge: every request body is checked here before any route sees it,
and every error a route raises becomes an HTTP status here, in one table.

The guarantee: a handler receives a ``dict`` whose every string is a sequence
of Unicode scalar values (no lone surrogate: UTF-8 and JSON can carry it back),
except in a *path field*, whose every integer is within ±2**53 (what JavaScript
callers hold exactly), whose every float is finite, and which is at most
``MAX_DEPTH`` containers deep. An answer is encoded with ``ensure_ascii`` JSON,
so encoding it cannot fail whatever a handler put in it, and an error message is
always one line (control characters are escaped here, whoever wrote it).

Non-UTF-8 file names (docs/design.md §4.4: path fields). A Linux path is bytes; JSON carries
text. A path field (:data:`PATH_FIELDS`: ``workdir``, ``agentWorkspace``,
``cwd``, ``log`` of a restart result, and the restart job's ``rollback`` and
``log``; top-level or in ``job`` only) carries each byte of a
name that is not UTF-8 as the lone surrogate U+DC80..U+DCFF (``\\udc80`` ..
``\\udcff`` in JSON), the way Python's ``os.fsdecode`` represents it
(PEP 383, ``surrogateescape``); ``os.fsencode`` gives the bytes back. Answers
carry such a path back the same way. Any other surrogate, or a surrogate in
any other field, is refused with 400: nothing else in PaddedCell is a path.
One exception, :data:`RAW_TEXT_FIELDS`: the text of ``/vault/check-leak`` is
whatever a JavaScript string held, scanned as sent.

Options weighed for depth: ``json.loads`` recurses in C and raises
``RecursionError`` near the interpreter's limit, which is a clean exception on
CPython 3.11+ (the C scanner checks the limit), so we catch it and answer 400,
then walk the document without recursion and refuse anything deeper than
``MAX_DEPTH``. A pre-scan of the bytes would cost a Python loop per byte on a
32 MiB body; so we catch, then walk.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

#: The deepest container nesting a request may have (``job`` is 2 deep).
MAX_DEPTH = 32
#: The largest integer magnitude a request may carry (JavaScript's safe range).
MAX_INT = 2**53
#: Fields that hold a file-system path and so may carry surrogateescape bytes.
#: Where they are: top-level fields, or fields of the restart ``job`` object.
PATH_FIELDS = frozenset({"workdir", "agentWorkspace", "cwd", "log", "job.rollback", "job.log"})
#: Top-level names (identities, keys) are stored and logged: bounded, so one
#: request cannot make every later write of the journal a megabyte.
NAME_FIELDS = frozenset({"agentId", "sessionKey", "requesterAgentId", "requesterSessionKey",
                         "workflow", "sessionId"})
MAX_NAME_CHARS = 1024
#: Linux's PATH_MAX.
MAX_PATH_CHARS = 4096
#: Fields that name a directory: when they name something, it must be one.
DIRECTORY_FIELDS = frozenset({"agentWorkspace"})
#: Top-level fields, per route, that take any string JavaScript can hold (lone
#: surrogates included): a leak scan must see exactly the text the agent sees,
#: and answers offsets into it as sent. The route never echoes it unescaped.
RAW_TEXT_FIELDS: dict[str, frozenset[str]] = {"/vault/check-leak": frozenset({"text"})}

#: A JSON escape that may decode to a surrogate (``\\ud800``..``\\udfff``); a
#: body without one holds no surrogate after strict UTF-8 decoding.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_SURROGATEESCAPE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f\u2028\u2029]")


class BodyError(ValueError):
    """The body cannot be accepted; ``str()`` is one line for a 400 answer."""


def _refuse_constant(name: str) -> Any:
    raise BodyError(f"request body holds {name}, which is not JSON; send a finite number")


def one_line(text: str, limit: int = 2000) -> str:
    """``text`` on one line: control characters as escapes, lone surrogates as
    ``\\udcXX`` text, cut at ``limit`` characters."""
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text if len(text) <= limit else text[:limit] + "…"


def field_name(name: Any) -> str:
    """A field name as an error message may show it: quoted, escaped, short."""
    return one_line(repr(name), 200)


def parse_body(raw: bytes, route: str = "") -> dict[str, Any]:
    """The request body for ``route`` as a checked JSON object; raises :class:`BodyError`."""
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")  # strict: CESU-8 surrogates and stray bytes are refused
    except UnicodeDecodeError as exc:
        raise BodyError(f"request body is not valid UTF-8 (byte {exc.start})") from None
    try:
        body = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise BodyError(f"request body is nested too deeply (over {MAX_DEPTH} levels)") from None
    except BodyError:
        raise
    except ValueError:
        # Includes int strings over sys.get_int_max_str_digits().
        raise BodyError("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BodyError("request body must be a JSON object")
    check(body, surrogates_possible=_SURROGATE_ESCAPE.search(raw) is not None,
          raw_text=RAW_TEXT_FIELDS.get(route, frozenset()))
    return body


def parse_body_or_refusal(raw: bytes, route: str = "") -> dict[str, Any] | str:
    """``parse_body``, with a refusal as its one-line reason instead of an exception (what
    a worker process hands back, http.py)."""
    try:
        return parse_body(raw, route)
    except BodyError as exc:
        return one_line(str(exc))


def check(body: dict[str, Any], *, surrogates_possible: bool = True,
          raw_text: frozenset[str] = frozenset()) -> None:
    """Walk ``body`` (without recursion) and refuse what no route may see;
    ``raw_text``: top-level fields that may hold any string (see RAW_TEXT_FIELDS)."""
    # (value, depth, the field name it belongs to, path for the message)
    stack: list[tuple[Any, int, str | None, str]] = [(body, 1, None, "body")]
    while stack:
        value, depth, name, where = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                raise BodyError(f"request body is nested too deeply (over {MAX_DEPTH} levels)")
            for key, item in value.items():
                if surrogates_possible and _SURROGATE.search(key):
                    raise BodyError(f"a field name in {where} holds a lone surrogate "
                                    f"({field_name(key)}); send Unicode text")
                stack.append((item, depth + 1, key, f"{where}.{one_line(key, 60)}"
                              if where != "body" else one_line(key, 60)))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                raise BodyError(f"request body is nested too deeply (over {MAX_DEPTH} levels)")
            stack.extend((item, depth + 1, name, f"{where}[]") for item in value)
        elif isinstance(value, str):
            if surrogates_possible and not (depth == 2 and name in raw_text):
                _check_text(value, where)
            limit = (MAX_NAME_CHARS if depth == 2 and name in NAME_FIELDS else
                     MAX_PATH_CHARS if where in PATH_FIELDS else None)
            if limit is not None and len(value) > limit:
                raise BodyError(f"field {where!r} is longer than {limit} characters")
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if not -MAX_INT <= value <= MAX_INT:
                raise BodyError(f"field {where!r} is out of range: integers must be within "
                                "-2**53..2**53")
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise BodyError(f"field {where!r} must be a finite number")
    _check_directories(body)


def _check_text(value: str, where: str) -> None:
    if where in PATH_FIELDS:
        if _NOT_SURROGATEESCAPE.search(value):
            raise BodyError(f"field {where!r} holds a lone surrogate outside \\udc80-\\udcff; "
                            "a path carries each non-UTF-8 byte as \\udc80-\\udcff (surrogateescape)")
    elif _SURROGATE.search(value):
        raise BodyError(f"field {where!r} holds a lone surrogate; send Unicode text "
                        "(only path fields may carry \\udc80-\\udcff for non-UTF-8 bytes)")


def _check_directories(body: dict[str, Any]) -> None:
    import os

    for name in DIRECTORY_FIELDS:
        value = body.get(name)
        if not isinstance(value, str) or not value:
            continue
        if "\x00" in value:
            raise BodyError(f"field {name!r} holds a NUL byte")
        if not os.path.isabs(value):
            raise BodyError(f"field {name!r} must be an absolute path")
        if os.path.lexists(value) and not os.path.isdir(value):
            raise BodyError(f"field {name!r} names {one_line(value, 300)}, which is not a "
                            "directory; give the agent's workspace directory")


def encode(payload: Any) -> bytes:
    """JSON for an answer: ASCII only, so it cannot fail on any ``str``."""
    return json.dumps(payload, ensure_ascii=True, allow_nan=False,
                      default=_not_json).encode("ascii")


def _not_json(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


# -------------------------------------------------------------- errors → statuses

#: The one table from a domain error to the HTTP status answered: first match
#: wins. Entries are ``(module, class name, status)``; ``None`` as status means
#: "the exception's own ``status`` attribute". Resolved lazily, so this module
#: imports no domain code (nor its start-up cost).
ERROR_STATUSES: tuple[tuple[str, str, int | None], ...] = (
    ("paddedcell.daemon.http", "HTTPError", None),
    ("paddedcell.daemon.validate", "BodyError", 400),
    ("paddedcell.session.protocol", "Refusal", None),
    ("paddedcell.execspec.request", "RequestError", 400),
    ("paddedcell.supervisor.service", "ExecRefused", None),
    ("paddedcell.restart.coordinator", "CoordinatorError", None),
    ("paddedcell.restart.coordinator", "JobSpecError", 400),
    ("paddedcell.restart.confine", "ConfinementError", 403),
    ("paddedcell.restart.machine", "IllegalTransition", 409),
    ("paddedcell.restart.machine", "RestartStatusError", 409),
    ("paddedcell.vault.errors", "VaultError", 409),
)

_resolved: list[tuple[type[BaseException], int | None]] | None = None


def _table() -> list[tuple[type[BaseException], int | None]]:
    import importlib
    import sys

    global _resolved
    if _resolved is None:
        table = []
        for module, name, status in ERROR_STATUSES:
            try:
                cls = getattr(sys.modules.get(module) or importlib.import_module(module), name)
            except (ImportError, AttributeError):
                continue  # a module this daemon build does not have
            table.append((cls, status))
        _resolved = table
    return _resolved


def error_answer(exc: BaseException) -> tuple[int, dict[str, Any]] | None:
    """``(status, {"error": one line})`` for a known domain error, else None (a bug: 500)."""
    for cls, status in _table():
        if isinstance(exc, cls):
            code = status if status is not None else getattr(exc, "status", 400)
            if not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599:
                code = 400
            message = getattr(exc, "message", None)
            message = message if isinstance(message, str) else str(exc)
            if getattr(exc, "multiline", False) is True:
                # A text kept as OpenClaw words it (exec's elevated and sandbox
                # refusals): each line made safe, the line breaks kept.
                return code, {"error": "\n".join(one_line(line) for line in message.split("\n"))}
            return code, {"error": one_line(message)}
    return None


INTERNAL_ERROR = {"error": "internal error in the paddedcell daemon; see its log"}


def answer_for(exc: BaseException, log: Callable[[str], None]) -> tuple[int, dict[str, Any]]:
    """The answer to a handler's exception: the table's status, or a logged 500."""
    known = error_answer(exc)
    if known is not None:
        return known
    log("handler failed")
    return 500, INTERNAL_ERROR
