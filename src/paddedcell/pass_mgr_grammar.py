"""``pass_mgr``'s agent commands: one grammar, one table of ops.

Four readers need the same answer to "what does this ``pass_mgr`` command line
mean": the click CLI (``cli/pass_mgr_click.py`` builds its options from
:data:`OPS`), the fast ``get`` path (``cli/pass_mgr_get.py``), the session
channel (``cli/pass_mgr_channel.py``) and the command scanner that resolves
``$(pass_mgr get KEY)`` before a command runs (``execspec/commands.py``).
They all read arguments with :func:`walk`, so an option that takes a value
(``generate --length 32 KEY``) is never mistaken for the key, and a value is a
number only when it is ASCII digits (``str.isdigit`` also accepts ``²``, which
``int`` refuses).

Import-light (the ``pass_mgr`` binary bundles it; ``get`` starts many times a
command): no imports at all.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A ``pass_mgr`` command line that does not fit the grammar; ``str()`` is one line."""


class Option:
    """One option of an op: a flag, or a whole number within ``low..high``."""

    __slots__ = ("name", "dest", "low", "high", "help")

    def __init__(self, name: str, dest: str, help: str, low: int | None = None,
                 high: int | None = None):
        self.name = name
        #: The parameter name (click's, the parsed call's).
        self.dest = dest
        self.help = help
        self.low = low
        self.high = high

    @property
    def takes_value(self) -> bool:
        return self.low is not None

    def value(self, text: str) -> int:
        """The option's whole number from ``text``; UsageError naming the range."""
        if text.isascii() and text.isdigit():
            number = int(text)
            if number >= self.low and (self.high is None or number <= self.high):
                return number
        if self.high is None:
            raise UsageError(f"{self.name} must be a whole number ≥ {self.low}")
        raise UsageError(f"{self.name} must be a whole number between {self.low} and "
                         f"{self.high}")


class Op:
    """One agent command: its KEY (required, optional or none) and options."""

    __slots__ = ("name", "key", "options")

    def __init__(self, name: str, key: str | None, *options: Option):
        self.name = name
        #: "required", "optional", or None (takes no KEY).
        self.key = key
        self.options = {option.name: option for option in options}


#: The agent commands: the ones that go over a session's channel inside a session.
#: Human-only commands (``set``, ``bind``, ``admin …``) are click's alone.
OPS: dict[str, Op] = {op.name: op for op in (
    Op("get", "required",
       Option("--version", "version", "An older version.", low=1)),
    Op("generate", "required",
       Option("--length", "length", "Characters (default: vault.generate_length, 32).",
              low=8, high=4096),
       Option("--no-symbols", "no_symbols", "Letters and digits only."),
       Option("--force", "force", "Replace an existing value (it stays in history)."),
       Option("--print", "show", "Also print the value (humans only: refused inside an "
                                 "agent session).")),
    Op("unset", "required"),
    Op("rotate", "optional"),
    Op("list", None),
    Op("history", "required"),
)}
AGENT_OPS = tuple(OPS)


def walk(op: Op, args) -> tuple[list[int], dict[str, tuple[int, str | None]], list[int]]:
    """Read ``args`` (the words after the op) as the grammar does, never failing.

    Returns the indices of the positional words; for each known option given, the index
    of the word holding its value (``--name=value``: the option's own word) and the value
    (None for a flag, or when the value is missing); and the indices of unknown options.
    After ``--`` every word is positional; ``-`` alone is positional.
    """
    positional: list[int] = []
    given: dict[str, tuple[int, str | None]] = {}
    unknown: list[int] = []
    index, count = 0, len(args)
    while index < count:
        word = args[index]
        if word == "--":
            positional.extend(range(index + 1, count))
            break
        name, eq, inline = word.partition("=")
        option = op.options.get(name) if word.startswith("--") else None
        if option is None and word.startswith("-") and word != "-":
            unknown.append(index)
        elif option is None:
            positional.append(index)
        elif not option.takes_value:
            given[option.name] = (index, None)
        elif eq:
            given[option.name] = (index, inline)
        elif index + 1 < count:
            index += 1
            given[option.name] = (index, args[index])
        else:
            given[option.name] = (index, None)
        index += 1
    return positional, given, unknown


class Call:
    """A parsed agent command: the op, its KEY (or None) and its options by ``dest``."""

    __slots__ = ("op", "key", "options")

    def __init__(self, op: str, key: str | None, options: dict):
        self.op = op
        self.key = key
        self.options = options

    def __repr__(self) -> str:
        return f"Call({self.op!r}, {self.key!r}, {self.options!r})"


def parse(argv) -> Call:
    """``argv`` (``["get", "KEY", "--version", "2"]``) as a :class:`Call`; UsageError."""
    if not argv or argv[0] not in OPS:
        raise UsageError(f"pass_mgr: the command must be one of {', '.join(AGENT_OPS)}")
    op = OPS[argv[0]]
    args = list(argv[1:])
    positional, given, unknown = walk(op, args)
    if unknown:
        raise UsageError(f"no such option: {args[unknown[0]]}")
    options: dict = {}
    for name, (_index, text) in given.items():
        option = op.options[name]
        if option.takes_value:
            if text is None:
                raise UsageError(f"{name} needs a value")
            options[option.dest] = option.value(text)
        else:
            options[option.dest] = True
    most = 0 if op.key is None else 1
    least = 1 if op.key == "required" else 0
    if not least <= len(positional) <= most:
        raise UsageError(f"pass_mgr {op.name}: " + ("takes no KEY" if most == 0 else
                                                     "needs one KEY"))
    return Call(op.name, args[positional[0]] if positional else None, options)
