"""Find every ``pass_mgr`` call in a shell command, and refuse the dangerous ones.

``pcexec`` resolves each ``pass_mgr get KEY`` before the command runs (so a
missing key fails the call and nothing runs), and refuses commands that would
run ``pass_mgr set``/``pass_mgr admin …`` or replay the mask ``######``.

The shell itself is read by :mod:`.bash_lexer` (why a scanner of our own: there);
this module decides what its simple commands mean for ``pass_mgr``.

This is defence in depth. The boundary that holds against an agent that
obfuscates on purpose (``eval "$(echo … | base64 -d)"``) is ``pass_mgr``
itself, which refuses ``set`` and ``admin`` in an agent's environment
(docs/design.md §4.3). What the scanner buys is a clear refusal before anything runs,
and the list of keys to resolve up front.

Calls come in two kinds. A *direct* call is one bash will run as written:
``pass_mgr`` in command position (after assignments, ``env``, ``command``,
``exec``, ``nohup``, ``time``, ``timeout``, ``nice``, ``sudo``, …), at any
nesting of ``$(…)``, backticks, ``<(…)``, subshells and lists. An *indirect*
call is one that may run through another program: ``pass_mgr`` as a later
argument (``xargs pass_mgr get``, ``find -exec pass_mgr …``) or inside a string
that some program may run as a script (``bash -c '…'``, ``eval "…"``, a
here-document fed to a shell). Direct ``get`` calls are the ones to resolve
before running; indirect ones are masked like any dynamic key (the whole store
is in the redaction set). ``set``/``admin`` are refused in both kinds.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..pass_mgr_grammar import OPS, UsageError, walk
from .bash_lexer import Collector, Command, ParseError, Parser, Word

__all__ = [
    "CommandRefused",
    "PassMgrCall",
    "check_command",
    "find_pass_mgr_calls",
    "scan_command",
]

PASS_MGR = "pass_mgr"
#: How many times a string argument is re-read as a script before we give up (and
#: refuse, if the text mentions pass_mgr).
MAX_RESCAN_DEPTH = 4

_RESERVED = frozenset(
    {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
     "time", "coproc", "[[", "function"}
)  # fmt: skip


class CommandRefused(ValueError):
    """A command pcexec will not run; ``str()`` is one line telling the agent what to do."""


@dataclass(frozen=True, slots=True)
class PassMgrCall:
    """One ``pass_mgr`` invocation found in a command.

    ``subcommand`` is None when there is none (``pass_mgr`` alone, or
    ``pass_mgr --help``) or when it is not a static literal (then ``dynamic``
    is True). ``key`` is the key of a ``get``/``generate``/``unset``/
    ``rotate``/``history`` call when it is a static literal, else None (the
    caller then relies on masking the whole store). ``args`` are the words
    after ``pass_mgr``, quote-removed; a word that is not static is given as
    written in the command. ``direct`` is False for calls that only may run
    (see the module docstring).
    """

    subcommand: str | None
    args: tuple[str, ...]
    key: str | None
    version: int | None = None
    direct: bool = True
    dynamic: bool = False


# --------------------------------------------------------------------------- analysis


def _basename(word: Word) -> str | None:
    """The last path component when it is static (``$HOME/bin/pass_mgr`` -> pass_mgr)."""
    slash = word.value.rfind("/")
    if not word.static and slash < word.dyn_end:
        return None
    return word.value[slash + 1 :]


# Wrappers that run their operand as a command: name -> (options taking an
# argument, number of positional arguments before the command).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-P"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nohup": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R", "-T"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "setsid": (frozenset(), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u"}), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "unbuffer": (frozenset(), 0),
    "caffeinate": (frozenset(), 0),
    "xvfb-run": (frozenset({"-n", "-s", "-f", "-e", "-p"}), 0),
}


def _skip_wrapper(name: str, words: list[Word], idx: int) -> int | None:
    """Index of the wrapped command word, or None when the wrapper runs nothing."""
    takes_arg, positionals = _WRAPPERS[name]
    j = idx + 1
    while j < len(words):
        v = words[j].value if words[j].static else None
        if v is None:
            return j
        if v == "--":
            j += 1
            break
        if name == "command" and v in ("-v", "-V"):
            return None  # a lookup, not a run
        if v.startswith("-") and len(v) > 1:
            opt = v.split("=", 1)[0]
            j += 1
            if opt in takes_arg and "=" not in v:
                j += 1
            continue
        break
    if name in ("env", "sudo"):
        while j < len(words) and words[j].assignment:
            j += 1
    j += positionals
    return j if j < len(words) else None


#: Variables that tell pass_mgr whose store to open (docs/design.md §4.3). A command
#: that sets or unsets them could read another agent's secrets unmasked.
IDENTITY_VARIABLES = frozenset({"AGENT", "AGENT_ID", "AGENT_WORKSPACE", "OPENCLAW_SHELL"})
_DECLARING = frozenset({"export", "unset", "declare", "typeset", "local", "readonly"})


def _is_identity(name: str) -> bool:
    return name in IDENTITY_VARIABLES or name.startswith("PADDEDCELL_")


def _identity_change(words: list[Word], cmd_idx: int | None) -> str | None:
    """The identity variable a command sets or unsets, if any (None otherwise).

    Looks at assignments before the command word (``AGENT_ID=x cmd``, also
    those ``env``/``sudo`` take), ``env -u NAME``, and the operands of
    ``export``/``unset``/``declare``/``typeset``/``local``/``readonly``.
    """
    prefix = words if cmd_idx is None else words[:cmd_idx]
    for k, w in enumerate(prefix):
        if w.assignment and _is_identity(w.value.split("=", 1)[0].split("[", 1)[0].rstrip("+")):
            return w.value.split("=", 1)[0]
        if w.static and w.value.startswith("--unset=") and _is_identity(w.value[8:]):
            return w.value[8:]
        if w.static and w.value in ("-u", "--unset") and k + 1 < len(prefix):
            following = prefix[k + 1]
            if following.static and _is_identity(following.value):
                return following.value
    if cmd_idx is not None and _basename(words[cmd_idx]) in _DECLARING:
        for w in words[cmd_idx + 1 :]:
            name = w.value.split("=", 1)[0].rstrip("+")
            if w.static and _is_identity(name):
                return name
    return None


def _make_call(words: list[Word], p: int, direct: bool, scan: "_Scan") -> PassMgrCall:
    """The call ``words[p:]`` makes, read by pass_mgr's one grammar (``pass_mgr_grammar``).

    Lenient where pass_mgr would say "usage" (nothing secret runs then), except a direct
    ``get`` whose version cannot be read: it would have to be resolved, so it is refused."""
    args = tuple(w.value for w in words[p + 1 :])
    rest = words[p + 1 :]
    sub_idx = None
    for k, w in enumerate(rest):
        if not w.static:
            return PassMgrCall(None, args, None, None, direct, dynamic=True)
        if w.value.startswith("-") and w.value != "-":
            continue
        sub_idx = k
        break
    if sub_idx is None:
        return PassMgrCall(None, args, None, None, direct)
    sub = rest[sub_idx].value
    op = OPS.get(sub)
    if op is None or op.key is None:
        return PassMgrCall(sub, args, None, None, direct)
    after = rest[sub_idx + 1 :]
    positional, given, _unknown = walk(op, [w.value for w in after])
    key = None
    if positional:
        first = after[positional[0]]
        key = first.value if first.static and first.value else None
    version = None
    if "--version" in given:
        index, text = given["--version"]
        if text is not None and after[index].static:
            try:
                version = op.options["--version"].value(text)
            except UsageError as exc:
                scan.problems.append(f"runs pass_mgr {sub} with a --version it cannot read "
                                     f"({exc}); write $(pass_mgr {sub} KEY --version N)")
    return PassMgrCall(sub, args, key, version, direct)


@dataclass(slots=True)
class _Scan:
    calls: list[PassMgrCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _analyze(cmd: Command, scan: _Scan, collector: Collector) -> None:
    words = cmd.words
    idx = 0
    for w in words:
        # ``K=$(pass_mgr get k)`` is fine (the substitution was read as a
        # command, and shows as ``$_`` here); ``P=pass_mgr; $P set`` hides a call.
        if w.assignment and _mentions_pass_mgr(w.approx.partition("=")[2]):
            scan.problems.append(
                "keeps pass_mgr in a variable; call pass_mgr directly, e.g. $(pass_mgr get KEY)"
            )
    # ``{ X=1 pass_mgr …; }``, ``if X=1 pass_mgr …``, ``! X=1 …``: reserved
    # words and assignments may alternate before the command word.
    while idx < len(words) and (
        words[idx].assignment or (words[idx].static and words[idx].value in _RESERVED)
    ):
        idx += 1
    cmd_idx: int | None = idx if idx < len(words) else None
    seen_wrappers = 0
    while cmd_idx is not None and seen_wrappers < 8:
        name = _basename(words[cmd_idx])
        if name in _WRAPPERS:
            cmd_idx = _skip_wrapper(name, words, cmd_idx)
            seen_wrappers += 1
            continue
        break
    identity = _identity_change(words, cmd_idx)
    if identity:
        scan.problems.append(
            f"changes {identity}, which tells pass_mgr which agent is asking; leave the "
            "agent's identity variables as they are"
        )
    placed: set[int] = set()
    if cmd_idx is not None:
        head = words[cmd_idx]
        if _basename(head) == PASS_MGR:
            scan.calls.append(_make_call(words, cmd_idx, cmd.direct, scan))
            placed.add(cmd_idx)
        elif not head.static and _PASS_MGR_NOT_GET.search(_unquoted(head.value)):
            # ``"$(which pass_mgr)" set x`` runs pass_mgr under a name we cannot see.
            scan.problems.append("builds the pass_mgr command word at run time; write pass_mgr literally")
    for j, w in enumerate(words):
        if j in placed:
            continue
        if _basename(w) == PASS_MGR:
            scan.calls.append(_make_call(words, j, False, scan))
            placed.add(j)
        elif _mentions_pass_mgr(w.approx) and not w.assignment:
            collector.rescans.append((w.approx, cmd.depth + 1))


#: A command word that mentions pass_mgr other than as ``pass_mgr get`` (the
#: secret itself as a command word is odd but harmless).
_PASS_MGR_NOT_GET = re.compile(r"pass_mgr(?!\s+get\b)")
_QUOTING = re.compile(r"[\"'\\\n]")


def _unquoted(text: str) -> str:
    return _QUOTING.sub("", text)


def _mentions_pass_mgr(text: str) -> bool:
    """True when ``text`` may name pass_mgr, even as ``p"ass"_mgr`` or ``$'\\x70ass_mgr'``."""
    return PASS_MGR in text or "$'" in text or PASS_MGR in _unquoted(text)


def _worth_scanning(text: str) -> bool:
    return _mentions_pass_mgr(text) or "AGENT" in text or "PADDEDCELL_" in text or "OPENCLAW_SHELL" in text


def _scan_text(text: str, scan: _Scan, *, direct: bool, depth: int) -> None:
    collector = Collector(_mentions_pass_mgr)
    parser = Parser(text, collector, direct=direct, depth=depth)
    try:
        parser.parse_list(None)
        if parser.pending_heredocs:
            parser._read_heredocs()
    except (ParseError, RecursionError) as exc:
        if _mentions_pass_mgr(text):
            scan.problems.append(f"cannot be read reliably ({exc}) and mentions pass_mgr")
        # Keep what was read before the error: bash may run those commands.
    for cmd in collector.commands:
        _analyze(cmd, scan, collector)
    seen: set[str] = set()
    for rescan_text, rescan_depth in collector.rescans:
        if rescan_text in seen or rescan_text == text:
            continue
        seen.add(rescan_text)
        if rescan_depth > MAX_RESCAN_DEPTH:
            if _mentions_pass_mgr(rescan_text):
                scan.problems.append("nests pass_mgr in strings too deeply to check")
            continue
        _scan_text(rescan_text, scan, direct=False, depth=rescan_depth)


def scan_command(command: str) -> tuple[list[PassMgrCall], list[str]]:
    """(calls, problems): every pass_mgr call found, and why some could not be placed."""
    scan = _Scan()
    if not _worth_scanning(command):
        return [], []
    _scan_text(command, scan, direct=True, depth=0)
    # A rescan can find the same call again (``bash -c "pass_mgr get k"`` is
    # found once, indirect); keep the first occurrence of each.
    return list(dict.fromkeys(scan.calls)), scan.problems


def find_pass_mgr_calls(command: str) -> list[PassMgrCall]:
    """Every ``pass_mgr`` call in ``command``, direct ones first in text order."""
    calls, _ = scan_command(command)
    return sorted(calls, key=lambda c: not c.direct)


def check_command(command: str, mask: str = "######") -> list[PassMgrCall]:
    """The command's pass_mgr calls, or :class:`CommandRefused` with what to do instead.

    Refused: the mask in the command (a masked value replayed into a command
    breaks it; OpenClaw issue #104992), ``pass_mgr set``, ``pass_mgr admin``
    other than ``admin status``, a pass_mgr subcommand that is not a literal,
    any text that mentions pass_mgr where the scanner cannot place it, and
    commands that set or unset the agent's identity variables
    (:data:`IDENTITY_VARIABLES`, ``PADDEDCELL_*``), the same names the request's
    ``env`` may not carry.
    """
    if mask and mask in command:
        raise CommandRefused(
            f"the command contains the mask {mask!r}, which stands for a hidden secret and "
            "cannot be replayed; write $(pass_mgr get KEY) where the secret is needed"
        )
    calls, problems = scan_command(command)
    if problems:
        raise CommandRefused(f"refused: the command {problems[0]}")
    for call in calls:
        if call.dynamic:
            raise CommandRefused(
                "refused: the pass_mgr subcommand is not a literal word; write it out, "
                "e.g. $(pass_mgr get KEY)"
            )
        if call.subcommand == "set":
            raise CommandRefused(
                "refused: agents cannot run pass_mgr set; ask a human to store the secret "
                "(pass_mgr set at their terminal), or use pass_mgr generate KEY"
            )
        if call.subcommand == "admin":
            rest = call.args[call.args.index("admin") + 1 :] if "admin" in call.args else ()
            operands = [a for a in rest if not a.startswith("-")]
            if not operands or operands[0] != "status" or len(operands) > 1:
                raise CommandRefused(
                    "refused: agents cannot run pass_mgr admin commands other than "
                    "'pass_mgr admin status'; ask a human operator"
                )
    return sorted(calls, key=lambda c: not c.direct)
