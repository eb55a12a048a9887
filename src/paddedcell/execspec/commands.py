"""Find every ``pass_mgr`` call in a shell command, and refuse the dangerous ones.

``pcexec`` resolves each ``pass_mgr get KEY`` before the command runs (so a
missing key fails the call and nothing runs), and refuses commands that would
run ``pass_mgr set``/``pass_mgr admin …`` or replay the mask ``######``.

Why a tokenizer of our own
--------------------------
The options weighed were a regular expression, ``shlex``, and ``bashlex`` (a
pure-Python port of bash's own grammar).

- A regular expression cannot follow quoting and nesting: it finds
  ``pass_mgr`` inside ``'single quotes'`` and misses ``p"ass"_mgr``.
- ``shlex`` knows POSIX quoting but not ``$(…)``, backticks, ``${…}``, here-docs
  or bash operators: ``$(pass_mgr get k)`` comes out as one opaque word.
- ``bashlex`` parses real bash, but it is GPL-3.0 (PaddedCell is MIT and is
  shipped as a PyInstaller bundle, which would then carry a GPL component), it
  raises ``NotImplementedError`` on parts of the grammar (arithmetic
  ``for ((…))``, some ``case`` forms, ``coproc``), and its positions are in
  bytes of a re-joined string.

What we need is narrower than a full grammar: the *simple commands* of the
text (words after quote removal, with a flag for words that are not static
literals), at every nesting level where bash would run them. So this module is
a small scanner that follows bash's lexical rules (``man bash``: QUOTING,
Command Substitution, Here Documents, Process Substitution) and nothing else;
it never evaluates anything. It fails closed: a text it cannot scan, or a
``pass_mgr`` it cannot place, makes :func:`check_command` refuse whenever the
text mentions ``pass_mgr`` at all. It also refuses commands that change the
variables pass_mgr uses to find the agent's store (``AGENT_ID=other pass_mgr
get k`` would print another agent's secret, which is not in this agent's
redaction set).

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

__all__ = [
    "CommandRefused",
    "PassMgrCall",
    "check_command",
    "find_pass_mgr_calls",
    "scan_command",
]

PASS_MGR = "pass_mgr"
#: How deep ``$(…)``/backticks/subshells may nest, and how many times a string
#: argument is re-read as a script, before we give up (and refuse, if the text
#: mentions pass_mgr).
MAX_NESTING = 48
MAX_RESCAN_DEPTH = 4

# Runs of characters with no special meaning in a word / in "..." / in a here-document.
_WORD_RUN = re.compile(r"[^ \t\n;&|()<>\\'\"$`*?\[~{=]+")
_DQUOTE_RUN = re.compile(r'[^"\\$`]+')
_HEREDOC_RUN = re.compile(r"[^\\$`]+")
_REDIRECTION_OP = re.compile(r"&>>|&>|<<<|<<-|<<|<>|<&|>&|>>|>\||<|>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_SPECIAL_PARAMS = set("@*#?$!-0123456789")
_RESERVED = frozenset(
    {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
     "time", "coproc", "[[", "function"}
)  # fmt: skip


class CommandRefused(ValueError):
    """A command pcexec will not run; ``str()`` is one line telling the agent what to do."""


class _ParseError(Exception):
    pass


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


# --------------------------------------------------------------------------- scanner


class _Word:
    """One shell word as read: its quote-removed value and what we know about it.

    Text is collected in lists (``+=`` on an attribute string is quadratic in
    CPython, and a here-document can be 200 KB).
    """

    __slots__ = ("_v", "_a", "_vlen", "_value", "_approx", "static", "raw_start", "raw_end",
                 "quoted", "assignment", "dyn_end")  # fmt: skip

    def __init__(self, raw_start: int = 0):
        self._v: list[str] = []  # quote-removed text; dynamic parts as written
        self._a: list[str] = []  # script text for re-reading: substitutions as ``$_``
        self._vlen = 0
        self._value: str | None = None
        self._approx: str | None = None
        self.static = True  # no expansion, glob or brace that bash would change
        self.raw_start = raw_start
        self.raw_end = raw_start
        self.quoted = False  # some part was quoted or escaped
        self.assignment = False
        self.dyn_end = 0  # ``value`` index just past the last non-static part

    def add(self, value: str, approx: str | None = None) -> None:
        self._v.append(value)
        self._a.append(value if approx is None else approx)
        self._vlen += len(value)
        self._value = self._approx = None

    def mark_dynamic(self) -> None:
        """The text just added is not static."""
        self.static = False
        self.dyn_end = self._vlen

    @property
    def value(self) -> str:
        if self._value is None:
            self._value = "".join(self._v)
        return self._value

    @property
    def approx(self) -> str:
        if self._approx is None:
            self._approx = "".join(self._a)
        return self._approx


@dataclass(slots=True)
class _Cmd:
    words: list[_Word]
    pos: int
    direct: bool
    depth: int


@dataclass(slots=True)
class _Collector:
    commands: list[_Cmd] = field(default_factory=list)
    rescans: list[tuple[str, int]] = field(default_factory=list)  # (text, depth)


_ANSI_C_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


class _Parser:
    """Reads one script text into simple commands (see the module docstring)."""

    def __init__(self, text: str, out: _Collector, *, direct: bool, depth: int, nesting: int = 0):
        self.s = text
        self.n = len(text)
        self.i = 0
        self.out = out
        self.direct = direct
        self.depth = depth  # re-read depth
        self.nesting = nesting
        self.pending_heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, quoted, strip_tabs)

    # ------------------------------------------------------------ command level
    def parse_list(self, stop: str | None) -> None:
        """Read commands until ``stop`` (``)``) is consumed, or to the end of text."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise _ParseError("nesting too deep")
        words: list[_Word] = []
        start = self.i
        s = self.s
        open_cases = 0  # ``case … in`` seen without its ``esac``: ``)`` ends a pattern

        def first_is(name: str) -> bool:
            return bool(words) and words[0].static and words[0].value == name

        def finish() -> None:
            nonlocal words, start, open_cases
            if first_is("esac"):
                open_cases = max(0, open_cases - 1)
            if words:
                self.out.commands.append(_Cmd(words, start, self.direct, self.depth))
            words = []
            start = self.i

        while True:
            self._skip_blanks()
            if self.i >= self.n:
                finish()
                if stop is not None:
                    raise _ParseError(f"missing {stop!r}")
                self.nesting -= 1
                return
            c = s[self.i]
            if c == "#":  # after blanks or an operator: a comment
                while self.i < self.n and s[self.i] != "\n":
                    self.i += 1
                continue
            if c == "\n":
                self.i += 1
                finish()
                self._read_heredocs()
                continue
            if c == "&" and self.i + 1 < self.n and s[self.i + 1] == ">":
                self._redirection(words)
                continue
            if c in ";&|":
                self.i += 1
                while self.i < self.n and s[self.i] in ";&|":
                    self.i += 1
                finish()
                continue
            if c == "(":
                self.i += 1
                finish()
                self.parse_list(")")
                start = self.i
                continue
            if c == ")":
                self.i += 1
                if first_is("case"):
                    open_cases += 1
                    finish()
                    continue  # ``case x in pattern)``
                if open_cases and not first_is("esac"):
                    finish()
                    continue  # a later pattern's ``)``
                finish()
                if stop == ")":
                    self.nesting -= 1
                    return
                continue  # a stray ``)``: bash would report it
            if c in "<>":
                if self.i + 1 < self.n and s[self.i + 1] == "(":
                    words.append(self._read_word())  # process substitution
                    continue
                self._redirection(words)
                continue
            words.append(self._read_word())

    def _skip_blanks(self) -> None:
        s = self.s
        while self.i < self.n:
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and self.i + 1 < self.n and s[self.i + 1] == "\n":
                self.i += 2
            else:
                break

    def _redirection(self, words: list[_Word]) -> None:
        s = self.s
        op_start = self.i
        # An fd number written right before the operator (``2>``) is not a word.
        if words and words[-1].raw_end == op_start and words[-1].value.isdigit() and not words[-1].quoted:
            words.pop()
        m = _REDIRECTION_OP.match(s, self.i)
        op = m.group(0) if m else s[self.i]
        self.i += len(op)
        self._skip_blanks()
        if self.i >= self.n or s[self.i] in "\n;&|()":
            if op in ("<&", ">&"):
                return  # ``>&`` followed by nothing useful: leave it to bash
            raise _ParseError("redirection without a target")
        if op in ("<&", ">&") and s[self.i] == "-":
            self.i += 1
            return
        target = self._read_word()
        if op in ("<<", "<<-"):
            self.pending_heredocs.append((target.value, target.quoted, op == "<<-"))
            return
        # A redirection target or here-string is not a command word, but it may
        # still hold a command substitution (already collected) or mention pass_mgr.
        self._note_mention(target)

    def _read_heredocs(self) -> None:
        s = self.s
        pending, self.pending_heredocs = self.pending_heredocs, []
        for delimiter, quoted, strip_tabs in pending:
            body_lines: list[str] = []
            while self.i < self.n:
                end = s.find("\n", self.i)
                if end == -1:
                    end = self.n
                line = s[self.i : end]
                self.i = min(end + 1, self.n)
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body_lines.append(line)
            body = "\n".join(body_lines)
            if not quoted:
                # An unquoted here-document expands like a double-quoted string:
                # its command substitutions run.
                sub = _Parser(body, self.out, direct=self.direct, depth=self.depth, nesting=self.nesting)
                sub._read_dquoted_text(terminator=None)
            if _mentions_pass_mgr(body):
                # ``bash <<EOF`` runs the body as a script.
                self.out.rescans.append((body, self.depth + 1))

    # ------------------------------------------------------------ words
    def _read_word(self) -> _Word:
        s = self.s
        w = _Word(self.i)
        if self.i + 1 < self.n and s[self.i] in "<>" and s[self.i + 1] == "(":
            self.i += 2
            self._substitution(")")
            w.add(s[w.raw_start : self.i], "$_")
            w.mark_dynamic()
            w.raw_end = self.i
            return w
        first = True
        while self.i < self.n:
            run = _WORD_RUN.match(s, self.i)
            if run:  # ordinary characters, taken in one step
                w.add(run.group())
                self.i = run.end()
                first = False
                continue
            c = s[self.i]
            if c in " \t\n;&|()<>":
                break
            if c == "\\":
                if self.i + 1 < self.n:
                    nxt = s[self.i + 1]
                    self.i += 2
                    if nxt == "\n":
                        continue
                    w.add(nxt)
                    w.quoted = True
                else:
                    self.i += 1
                first = False
                continue
            if c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise _ParseError("unterminated single quote")
                content = s[self.i + 1 : end]
                w.add(content)
                w.quoted = True
                self.i = end + 1
            elif c == '"':
                self.i += 1
                val, static, approx = self._read_dquoted_text(terminator='"')
                w.add(val, approx)
                w.mark_dynamic() if not static else None
                w.quoted = True
            elif c == "$":
                self._dollar(w, in_dquote=False)
            elif c == "`":
                self._backtick(w)
            else:
                if c == "=" and not w.quoted and _ASSIGNMENT.fullmatch(s[w.raw_start : self.i + 1]):
                    w.assignment = True
                w.add(c)
                if c in "*?[" or (c == "~" and first) or c == "{" and _looks_like_brace_expansion(s, self.i):
                    w.mark_dynamic()  # globs, tilde and brace expansion change the word
                self.i += 1
            first = False
        w.raw_end = self.i
        return w

    def _read_dquoted_text(self, terminator: str | None) -> tuple[str, bool, str]:
        """Text inside ``"…"`` (or an unquoted here-document when ``terminator`` is None)."""
        s = self.s
        w = _Word()
        plain = _DQUOTE_RUN if terminator is not None else _HEREDOC_RUN
        while True:
            if self.i >= self.n:
                if terminator is None:
                    break
                raise _ParseError("unterminated double quote")
            run = plain.match(s, self.i)
            if run:
                w.add(run.group())
                self.i = run.end()
                continue
            c = s[self.i]
            if terminator is not None and c == terminator:
                self.i += 1
                break
            if c == "\\" and self.i + 1 < self.n and s[self.i + 1] in '$`"\\\n':
                nxt = s[self.i + 1]
                self.i += 2
                if nxt != "\n":
                    w.add(nxt)
                continue
            if c == "$":
                self._dollar(w, in_dquote=True)
                continue
            if c == "`":
                self._backtick(w)
                continue
            w.add(c)
            self.i += 1
        return w.value, w.static, w.approx

    def _dollar(self, w: _Word, *, in_dquote: bool) -> None:
        s = self.s
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < self.n else ""
        if nxt == "'" and not in_dquote:
            self.i += 2
            val = self._ansi_c()
            w.add(val)
            w.quoted = True
            return
        if nxt == '"' and not in_dquote:
            self.i += 2
            val, static, approx = self._read_dquoted_text('"')
            w.add(val, approx)
            w.mark_dynamic() if not static else None
            w.quoted = True
            return
        if nxt == "(":
            if self.i + 2 < self.n and s[self.i + 2] == "(":
                self.i += 3
                self._arithmetic()
            else:
                self.i += 2
                self._substitution(")")
            w.add(s[start : self.i], "$_")
            w.mark_dynamic()
            return
        if nxt == "{":
            self.i += 2
            self._braced_parameter()
            w.add(s[start : self.i], "$_")
            w.mark_dynamic()
            return
        if nxt and (nxt in _SPECIAL_PARAMS):
            self.i += 2
            w.add(s[start : self.i])
            w.mark_dynamic()
            return
        m = _NAME.match(s, self.i + 1)
        if m:
            self.i = m.end()
            w.add(s[start : self.i])
            w.mark_dynamic()
            return
        w.add("$")
        self.i += 1

    def _ansi_c(self) -> str:
        """``$'…'`` with its backslash escapes decoded (``self.i`` after the quote)."""
        s = self.s
        out: list[str] = []
        while True:
            if self.i >= self.n:
                raise _ParseError("unterminated $'...'")
            c = s[self.i]
            if c == "'":
                self.i += 1
                return "".join(out)
            if c == "\\" and self.i + 1 < self.n:
                e = s[self.i + 1]
                self.i += 2
                if e in _ANSI_C_SIMPLE:
                    out.append(_ANSI_C_SIMPLE[e])
                elif e in "01234567":
                    m = re.compile(r"[0-7]{0,2}").match(s, self.i)
                    out.append(chr(int(e + m.group(0), 8) & 0xFF))
                    self.i = m.end()
                elif e in "xuU":
                    width = {"x": 2, "u": 4, "U": 8}[e]
                    m = re.compile(r"[0-9A-Fa-f]{1,%d}" % width).match(s, self.i)
                    if m:
                        code = int(m.group(0), 16)
                        out.append(chr(code) if code <= 0x10FFFF else "\ufffd")
                        self.i = m.end()
                    else:
                        out.append("\\" + e)
                elif e == "c" and self.i < self.n:
                    out.append(chr(ord(s[self.i]) & 0x1F))
                    self.i += 1
                else:
                    out.append("\\" + e)
                continue
            out.append(c)
            self.i += 1

    def _substitution(self, stop: str) -> None:
        """``$(…)``, ``<(…)``, ``>(…)``: a nested list, run for real (same directness)."""
        self.parse_list(stop)

    def _arithmetic(self) -> None:
        """``$((…))``: skip to the matching ``))``, reading any ``$(…)``/backticks inside."""
        s = self.s
        depth = 2
        plain: list[str] = []  # the text outside substitutions, for the check below
        while True:
            if self.i >= self.n:
                raise _ParseError("unterminated $((...))")
            c = s[self.i]
            at = self.i
            if c == "(":
                depth += 1
                self.i += 1
            elif c == ")":
                depth -= 1
                self.i += 1
                if depth == 0:
                    break
            elif c == "$" or c == "`":
                self._dollar(_Word(), in_dquote=True) if c == "$" else self._backtick(_Word())
                plain.append("$_")
                continue
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise _ParseError("unterminated single quote")
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._read_dquoted_text('"')
            elif c == "\\":
                self.i += 2
            else:
                self.i += 1
            plain.append(s[at : self.i])
        text = "".join(plain[:-1])  # without the closing parenthesis
        if _mentions_pass_mgr(text):
            # ``$((cmd) )`` is a command substitution holding a subshell, not
            # arithmetic; read the text as commands too rather than guess.
            self.out.rescans.append((text, self.depth + 1))

    def _braced_parameter(self) -> None:
        """``${…}``: skip to the matching ``}``, reading substitutions inside."""
        s = self.s
        depth = 1
        plain: list[str] = []
        while True:
            if self.i >= self.n:
                raise _ParseError("unterminated ${...}")
            c = s[self.i]
            if c == "}":
                depth -= 1
                self.i += 1
                if depth == 0:
                    text = "".join(plain)
                    if _mentions_pass_mgr(text):  # ``${X:-pass_mgr set k}`` as a word
                        self.out.rescans.append((text, self.depth + 1))
                    return
            elif c == "{":
                depth += 1
                self.i += 1
            elif c == "$":
                w = _Word()
                self._dollar(w, in_dquote=True)
                if _mentions_pass_mgr(w.approx):
                    self.out.rescans.append((w.approx, self.depth + 1))
            elif c == "`":
                self._backtick(_Word())
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise _ParseError("unterminated single quote")
                if _mentions_pass_mgr(s[self.i : end]):
                    self.out.rescans.append((s[self.i + 1 : end], self.depth + 1))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                _, _, approx = self._read_dquoted_text('"')
                if _mentions_pass_mgr(approx):
                    self.out.rescans.append((approx, self.depth + 1))
            elif c == "\\":
                plain.append(s[self.i + 1 : self.i + 2])
                self.i += 2
            else:
                plain.append(c)
                self.i += 1

    def _backtick(self, w: _Word) -> None:
        """```…```: unescape ``\\` \\$ \\\\`` and read the content as a nested list."""
        s = self.s
        self.i += 1
        inner: list[str] = []
        while True:
            if self.i >= self.n:
                raise _ParseError("unterminated backtick")
            c = s[self.i]
            if c == "`":
                self.i += 1
                break
            if c == "\\" and self.i + 1 < self.n and s[self.i + 1] in "`$\\":
                inner.append(s[self.i + 1])
                self.i += 2
                continue
            inner.append(c)
            self.i += 1
        sub = _Parser("".join(inner), self.out, direct=self.direct, depth=self.depth, nesting=self.nesting + 1)
        sub.parse_list(None)
        if sub.pending_heredocs:
            sub._read_heredocs()
        w.add("`" + "".join(inner) + "`", "$_")
        w.mark_dynamic()

    def _note_mention(self, word: _Word) -> None:
        if _mentions_pass_mgr(word.approx):
            self.out.rescans.append((word.approx, self.depth + 1))


def _looks_like_brace_expansion(s: str, i: int) -> bool:
    end = s.find("}", i)
    if end == -1:
        return False
    inner = s[i + 1 : end]
    return "," in inner or ".." in inner


# --------------------------------------------------------------------------- analysis


def _basename(word: _Word) -> str | None:
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


def _skip_wrapper(name: str, words: list[_Word], idx: int) -> int | None:
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


def _identity_change(words: list[_Word], cmd_idx: int | None) -> str | None:
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


_KEYED_SUBCOMMANDS = frozenset({"get", "generate", "unset", "rotate", "history"})
_GET_OPTIONS_WITH_ARG = frozenset({"--version"})  # pass_mgr_click.py: get KEY [--version N]


def _make_call(words: list[_Word], p: int, direct: bool) -> PassMgrCall:
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
    key: str | None = None
    version: int | None = None
    if sub in _KEYED_SUBCOMMANDS:
        after = rest[sub_idx + 1 :]
        positional: list[_Word] = []
        k = 0
        options_done = False
        while k < len(after):
            w = after[k]
            v = w.value
            if not options_done and w.static and v == "--":
                options_done = True
            elif not options_done and w.static and v.startswith("--version="):
                version = _int_or_none(v.split("=", 1)[1])
            elif not options_done and w.static and v in _GET_OPTIONS_WITH_ARG:
                k += 1
                if k < len(after):
                    version = _int_or_none(after[k].value) if after[k].static else None
            elif not options_done and w.static and v.startswith("-") and v != "-":
                pass
            else:
                positional.append(w)
            k += 1
        if positional:
            first = positional[0]
            key = first.value if first.static and first.value else None
    return PassMgrCall(sub, args, key, version, direct)


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


@dataclass(slots=True)
class _Scan:
    calls: list[PassMgrCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _analyze(cmd: _Cmd, scan: _Scan, collector: _Collector) -> None:
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
            scan.calls.append(_make_call(words, cmd_idx, cmd.direct))
            placed.add(cmd_idx)
        elif not head.static and _PASS_MGR_NOT_GET.search(_unquoted(head.value)):
            # ``"$(which pass_mgr)" set x`` runs pass_mgr under a name we cannot see.
            scan.problems.append("builds the pass_mgr command word at run time; write pass_mgr literally")
    for j, w in enumerate(words):
        if j in placed:
            continue
        if _basename(w) == PASS_MGR:
            scan.calls.append(_make_call(words, j, False))
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
    collector = _Collector()
    parser = _Parser(text, collector, direct=direct, depth=depth)
    try:
        parser.parse_list(None)
        if parser.pending_heredocs:
            parser._read_heredocs()
    except (_ParseError, RecursionError) as exc:
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
