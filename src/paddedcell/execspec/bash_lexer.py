"""A scanner of bash's lexical rules: the simple commands of a script text, at every
nesting level where bash would run them. It never evaluates anything.

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
``pass_mgr`` it cannot place, makes the rules (:mod:`.commands`) refuse whenever the
text mentions ``pass_mgr`` at all. It also refuses commands that change the
variables pass_mgr uses to find the agent's store (``AGENT_ID=other pass_mgr
get k`` would print another agent's secret, which is not in this agent's
redaction set).

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Collector", "Command", "ParseError", "Parser", "Word"]

#: How deep ``$(…)``/backticks/subshells may nest before we give up (and the rules
#: refuse, if the text mentions pass_mgr).
MAX_NESTING = 48

# Runs of characters with no special meaning in a word / in "..." / in a here-document.
_WORD_RUN = re.compile(r"[^ \t\n;&|()<>\\'\"$`*?\[~{=]+")
_DQUOTE_RUN = re.compile(r'[^"\\$`]+')
_HEREDOC_RUN = re.compile(r"[^\\$`]+")
_REDIRECTION_OP = re.compile(r"&>>|&>|<<<|<<-|<<|<>|<&|>&|>>|>\||<|>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_SPECIAL_PARAMS = set("@*#?$!-0123456789")


class ParseError(Exception):
    """A text the scanner cannot read reliably."""


class Word:
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
class Command:
    words: list[Word]
    pos: int
    direct: bool
    depth: int


@dataclass(slots=True)
class Collector:
    """What a :class:`Parser` found: the simple commands, and strings a program may run as
    a script, to read again (those ``mentions`` says are worth it)."""

    mentions: Callable[[str], bool]
    commands: list[Command] = field(default_factory=list)
    rescans: list[tuple[str, int]] = field(default_factory=list)  # (text, depth)


_ANSI_C_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


class Parser:
    """Reads one script text into simple commands (see the module docstring)."""

    def __init__(self, text: str, out: Collector, *, direct: bool, depth: int, nesting: int = 0):
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
            raise ParseError("nesting too deep")
        words: list[Word] = []
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
                self.out.commands.append(Command(words, start, self.direct, self.depth))
            words = []
            start = self.i

        while True:
            self._skip_blanks()
            if self.i >= self.n:
                finish()
                if stop is not None:
                    raise ParseError(f"missing {stop!r}")
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

    def _redirection(self, words: list[Word]) -> None:
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
            raise ParseError("redirection without a target")
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
                sub = Parser(body, self.out, direct=self.direct, depth=self.depth, nesting=self.nesting)
                sub._read_dquoted_text(terminator=None)
            if self.out.mentions(body):
                # ``bash <<EOF`` runs the body as a script.
                self.out.rescans.append((body, self.depth + 1))

    # ------------------------------------------------------------ words
    def _read_word(self) -> Word:
        s = self.s
        w = Word(self.i)
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
                    raise ParseError("unterminated single quote")
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
        w = Word()
        plain = _DQUOTE_RUN if terminator is not None else _HEREDOC_RUN
        while True:
            if self.i >= self.n:
                if terminator is None:
                    break
                raise ParseError("unterminated double quote")
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

    def _dollar(self, w: Word, *, in_dquote: bool) -> None:
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
                raise ParseError("unterminated $'...'")
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
                raise ParseError("unterminated $((...))")
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
                self._dollar(Word(), in_dquote=True) if c == "$" else self._backtick(Word())
                plain.append("$_")
                continue
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise ParseError("unterminated single quote")
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
        if self.out.mentions(text):
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
                raise ParseError("unterminated ${...}")
            c = s[self.i]
            if c == "}":
                depth -= 1
                self.i += 1
                if depth == 0:
                    text = "".join(plain)
                    if self.out.mentions(text):  # ``${X:-pass_mgr set k}`` as a word
                        self.out.rescans.append((text, self.depth + 1))
                    return
            elif c == "{":
                depth += 1
                self.i += 1
            elif c == "$":
                w = Word()
                self._dollar(w, in_dquote=True)
                if self.out.mentions(w.approx):
                    self.out.rescans.append((w.approx, self.depth + 1))
            elif c == "`":
                self._backtick(Word())
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise ParseError("unterminated single quote")
                if self.out.mentions(s[self.i : end]):
                    self.out.rescans.append((s[self.i + 1 : end], self.depth + 1))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                _, _, approx = self._read_dquoted_text('"')
                if self.out.mentions(approx):
                    self.out.rescans.append((approx, self.depth + 1))
            elif c == "\\":
                plain.append(s[self.i + 1 : self.i + 2])
                self.i += 2
            else:
                plain.append(c)
                self.i += 1

    def _backtick(self, w: Word) -> None:
        """```…```: unescape ``\\` \\$ \\\\`` and read the content as a nested list."""
        s = self.s
        self.i += 1
        inner: list[str] = []
        while True:
            if self.i >= self.n:
                raise ParseError("unterminated backtick")
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
        sub = Parser("".join(inner), self.out, direct=self.direct, depth=self.depth, nesting=self.nesting + 1)
        sub.parse_list(None)
        if sub.pending_heredocs:
            sub._read_heredocs()
        w.add("`" + "".join(inner) + "`", "$_")
        w.mark_dynamic()

    def _note_mention(self, word: Word) -> None:
        if self.out.mentions(word.approx):
            self.out.rescans.append((word.approx, self.depth + 1))


def _looks_like_brace_expansion(s: str, i: int) -> bool:
    end = s.find("}", i)
    if end == -1:
        return False
    inner = s[i + 1 : end]
    return "," in inner or ".." in inner
