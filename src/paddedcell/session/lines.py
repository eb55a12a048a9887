"""A session channel's request line, parsed without stalling the process that serves it.

``json.loads`` holds the GIL for the whole line, and a session may send lines of millions
of tiny values as fast as they are answered (issue 20): a line that is long, or may hold
more than ``max_values`` values, is parsed by ``python -m paddedcell.session.lines`` in a
child process, which hands back the parsed line or why not, pickled. No line may hold more
than ``max_values`` JSON values (what the channel then walks). Pure but for the child.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

#: Children parsing at once (each holds one line: at most channel_max_request_bytes).
CHILDREN = 2


class LineError(ValueError):
    """The line cannot be accepted; ``str()`` is one line for the refusal."""


def value_bound(raw: bytes) -> int:
    """At least as many as the JSON values in ``raw`` (C time): every value but the first
    follows a ',' or opens a container."""
    return 1 + raw.count(b",") + raw.count(b"[") + raw.count(b"{")


def parse_line(raw: bytes, max_values: int) -> Any:
    """The line's JSON value, holding at most ``max_values`` values; raises :class:`LineError`."""
    try:
        line = json.loads(raw)
    except RecursionError:
        raise LineError("the channel request is nested too deeply") from None
    except ValueError:
        raise LineError("the channel request is not JSON") from None
    if value_bound(raw) <= max_values:
        return line
    stack, seen = [line], 0
    while stack:
        value = stack.pop()
        seen += 1
        if seen > max_values:
            raise LineError(f"the channel request holds more than {max_values} JSON values "
                            "(supervisor.channel_max_values)")
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return line


def parsed_or_why(raw: bytes, max_values: int) -> Any:
    """``parse_line``, with a refusal as its one-line reason (a str) instead of an exception."""
    try:
        return parse_line(raw, max_values)
    except LineError as exc:
        return str(exc)


async def parse_in_child(raw: bytes, max_values: int) -> Any:
    """``parsed_or_why`` in a child process (at most :data:`CHILDREN` at once); raises
    OSError or RuntimeError when the child cannot say."""
    async with _limiter():
        done = await trio.run_process(
            [sys.executable, "-I", "-m", "paddedcell.session.lines", str(max_values)],
            stdin=raw, capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the line parser exited with {done.returncode}")
    import pickle  # here: only long lines come this way, and every pcexec start imports us

    return pickle.loads(done.stdout)


#: The parsers' limiter, one per Trio run (a limiter belongs to the run that made it).
_PARSERS: trio.lowlevel.RunVar = trio.lowlevel.RunVar("paddedcell_line_parsers")


def _limiter() -> trio.CapacityLimiter:
    try:
        return _PARSERS.get()
    except LookupError:
        _PARSERS.set(limiter := trio.CapacityLimiter(CHILDREN))
        return limiter


def main() -> None:
    import pickle

    pickle.dump(parsed_or_why(sys.stdin.buffer.read(), int(sys.argv[1])), sys.stdout.buffer,
                protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    main()
