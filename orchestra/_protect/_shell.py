"""Would a shell command harm a protected path? The analysis behind ``forge guard``.

A command is read the way bash reads it — quotes, ``&&``/``||``/``;``/``|``/
``&``, newlines, ``( … )`` and ``{ …; }``, ``$( … )`` and backticks (whose
inner commands are analysed too), here-documents, ``VAR=1 cmd``, wrappers such
as ``sudo``/``env``/``nice``/``nohup``/``timeout``/``xargs``/``command``, and
``sh -c``/``bash -c``/``eval`` strings — and every word is expanded against the
real tree: ``~``, ``$VAR`` (from assignments earlier in the command, then the
environment), ``{a,b}`` and globs (``*`` skips dotfiles, as in bash). ``cd``
moves the working folder for the rest of its list; inside ``( … )``, a pipeline
or a background job it does not leak.

Harm is judged per path, after resolving symlinks and ``..`` against the real
root (case-insensitively when the spec folds case); paths outside the root are
none of our business, a folder above the root stands for the root:

- **Deleting** (``rm``, ``rmdir``, ``unlink``, ``shred``, ``trash``, the source
  of ``mv``, ``git rm``, ``find -delete``, ``find -exec rm``) harms an
  ``exist`` or ``frozen`` path that exists: the path itself, or — for a
  recursive delete of a real folder — anything protected inside it. Removing a
  symlink removes the link only; a trailing ``/`` follows it.
- **Changing** (redirections ``>``, ``>>``, ``&>``, ``<>``; ``sed -i``,
  ``perl -i``, ``truncate``, ``tee``, ``dd of=``, ``touch``, ``chmod``/
  ``chown``, the destination of ``cp``/``mv``/``ln``/``install``/``rsync``)
  harms a ``frozen`` path, existing or not (creating one is a change too); a
  recursive ``cp``/``chmod -R``/``rsync`` also any frozen path inside its
  target folder. The same change to an ``exist`` path is an edit, which is
  allowed; ``rsync --delete`` deletes in its destination.
- **git**: ``git clean`` (unless ``-n``/``--dry-run``) deletes within its
  pathspecs, or the working folder: refused when anything protected exists
  there (we cannot tell tracked from untracked without running git). ``git
  reset --hard``, ``git checkout -f``, ``git switch --discard-changes`` and
  ``git stash -u``/``-a`` can revert or delete anything in the tree: refused
  when anything protected exists. ``git checkout [<tree>] -- <paths>`` and
  ``git restore <paths>`` discard changes: refused for frozen paths in scope,
  and for exist paths too where they can delete (``--no-overlay``,
  ``restore --source``). A branch switch without ``-f`` and plain ``git
  stash`` are allowed.
- **find**: ``-delete`` and ``-exec``/``-execdir``/``-ok`` run over the
  protected paths under its start folders that its ``-name``/``-iname``/
  ``-path``/``-type``/``-maxdepth``/``-mindepth`` tests let through (or whose
  folder they let through, for ``-exec rm -r {}``); any other test makes it
  consider every path. ``find … | xargs CMD`` is read as ``find … -exec CMD``.
- **Unknowns** are judged by the folder they could name: ``rm -rf "$(…)"``,
  an unset ``$VAR``, ``xargs rm`` fed by anything but ``find`` (its arguments
  come from stdin), a glob matching more than 256 paths, or a relative path
  after ``cd "$(…)"`` is refused when the folder of the known prefix (the
  working folder; after ``cd "$(…)"`` the root, first as the literal path,
  then as anywhere in it) holds anything protected.

Parsing is lenient by design: an unterminated quote, substitution or group ends
at the end of the command, and a stray operator is skipped. bash would reject
such a line, but earlier lines of a script still run, so the analysis keeps
what the command most likely meant in view rather than allowing or refusing it
wholesale. Absurd input is bounded rather than refused: nesting deeper than 48
levels is not read, nor ``sh -c`` deeper than 12, and a word makes at most 256
arguments.

This is a seatbelt against an agent's accidents, not a sandbox against a
hostile one: scripts, interpreters (``python -c``), ``echo … | sh``, ``make``
targets and command names only known at run time are not followed.

This module runs on every tool call of an agent: it imports only cheap parts of
the standard library and :mod:`._spec`.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
import stat

from ._spec import EXIST, FROZEN, ProtectSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import TypeAlias

    _Node: TypeAlias = "_Simple | _Group | _For"
    _Handler = Callable[["_Analysis", str, list["_Arg"], "_State", list[str]], None]
    _Wrapper = Callable[["_Analysis", list["_Arg"], "_State"], tuple[list["_Arg"], "_State"] | None]

__all__ = ["Refusal", "analyse_command", "check_file_write"]

_ALL = (EXIST, FROZEN)
_FROZEN_ONLY = (FROZEN,)
_MAX_DEPTH = 12  # nested sh -c / eval / substitutions
_WALK_BUDGET = 20_000  # paths visited looking for protected ones, per command
_MAX_NESTING = 48  # ( … ), { …; } and $( … ) inside one another
_MAX_WORDS = 256  # fields one word may expand to (braces, loops)
_SPACE = " \t"
_ENDS_WORD = " \t\n;&|()<>"
_GLOB_CHARS = "*?["
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_REDIRECT = re.compile(r"(\d*)(&>>|&>|>>|>\||>&|<<<|<<-|<<|<>|<&|>|<)")
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|]")
_DROPPED = frozenset(
    {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "time", "esac"}
)
_WRITE_REDIRECTS = frozenset({">", ">|", ">>", "&>", "&>>", ">&", "<>"})
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "0": "\0"}


class Refusal:
    """A protected path a command would harm.

    Attributes:
        path: the harmed path, relative to the root.
        mode: its protection, ``exist`` or ``frozen``.
        reason: one line for the agent or a human.
    """

    __slots__ = ("mode", "path", "reason")

    def __init__(self, path: str, mode: str, reason: str) -> None:
        self.path = path
        self.mode = mode
        self.reason = reason

    def __repr__(self) -> str:
        return f"Refusal({self.path!r}, {self.mode!r}, {self.reason!r})"


def analyse_command(
    command: str,
    *,
    cwd: str,
    root: str,
    spec: ProtectSpec,
    env: Mapping[str, str] | None = None,
) -> list[Refusal]:
    """The protected paths a shell command would harm (empty: allow it).

    Args:
        command: the command line, as the agent's shell would run it.
        cwd: the folder it would run in.
        root: the project root the spec's entries are relative to.
        spec: the protected paths.
        env: the environment ``$VAR`` and ``~`` expand from (default: ours).
    """
    analysis = _Analysis(root, spec, os.environ if env is None else env)
    # A NUL cannot reach a shell; dropping it keeps what surrounds it in view.
    _analyse_text(analysis, command.replace("\0", ""), _State(os.path.abspath(cwd)))
    return analysis.refusals


def check_file_write(file_path: str, *, cwd: str, root: str, spec: ProtectSpec) -> Refusal | None:
    """Whether writing ``file_path`` (an agent's Write/Edit tool) would change a frozen path."""
    analysis = _Analysis(root, spec, os.environ)
    file_path = file_path.partition("\0")[0]
    path = os.path.join(os.path.abspath(cwd), os.path.expanduser(file_path))
    _check_write(analysis, "writing", _lexical_target(path), follow=True, recursive=False)
    return analysis.refusals[0] if analysis.refusals else None


# --- Parsing -------------------------------------------------------------------------------


class _Part:
    """A piece of a word: ``lit`` (unquoted), ``q`` (quoted), ``var``/``qvar`` (a
    parameter, unquoted/quoted), ``sub`` (a command substitution: unknown text),
    ``psub`` (a process substitution: a /dev/fd path), ``opq`` (unknown text)."""

    __slots__ = ("body", "kind", "text")

    def __init__(self, kind: str, text: str = "", body: list[_Item] | None = None) -> None:
        self.kind = kind
        self.text = text
        self.body = body


class _Word:
    __slots__ = ("parts",)

    def __init__(self, parts: list[_Part]) -> None:
        self.parts = parts

    def plain(self) -> str | None:
        """The word's text when it is all unquoted literal (a reserved word candidate)."""
        if all(part.kind == "lit" for part in self.parts):
            return "".join(part.text for part in self.parts)
        return None


class _Simple:
    __slots__ = ("docs", "redirects", "words")

    def __init__(self) -> None:
        self.words: list[_Word] = []
        self.redirects: list[tuple[str, _Word]] = []
        self.docs: list[tuple[str, bool]] = []  # here-document bodies, expanded or not


class _Group:
    __slots__ = ("body", "redirects", "subshell")

    def __init__(self, body: list[_Item], subshell: bool) -> None:
        self.body = body
        self.subshell = subshell
        self.redirects: list[tuple[str, _Word]] = []


class _For:
    """``for NAME in WORDS``: the body (parsed as ordinary commands) sees NAME bound."""

    __slots__ = ("name", "words")

    def __init__(self, name: str, words: list[_Word] | None) -> None:
        self.name = name
        self.words = words


class _Item:
    __slots__ = ("node", "separator")

    def __init__(self, node: _Node) -> None:
        self.node = node
        self.separator = ""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.pending: list[tuple[str, bool, bool, _Simple]] = []  # here-documents to read
        self.nesting = 0

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def blank(self) -> None:
        while self.pos < len(self.text):
            if self.text[self.pos] in _SPACE:
                self.pos += 1
            elif self.text.startswith("\\\n", self.pos):
                self.pos += 2
            else:
                return

    def comment(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end == -1 else end

    def parse_list(self, stop: str) -> list[_Item]:
        """Commands up to ``stop`` (``)``, ``}`` or ``""`` for the end of the text)."""
        items: list[_Item] = []
        self.nesting += 1
        try:
            if self.nesting > _MAX_NESTING:
                self.pos = len(self.text)  # absurdly deep: not worth reading on
                return items
            return self.read_list(stop, items)
        finally:
            self.nesting -= 1

    def read_list(self, stop: str, items: list[_Item]) -> list[_Item]:
        while True:
            self.blank()
            char = self.peek()
            if not char:
                return items
            if char == "#":
                self.comment()
            elif char == "\n":
                self.pos += 1
                self.read_documents()
                if items and not items[-1].separator:
                    items[-1].separator = ";"
            elif char == ")":
                self.pos += 1
                if stop == ")":
                    return items
                # A case pattern's parenthesis, or a stray one: a separator.
            elif char in ";&|" and not self.text.startswith("&>", self.pos):
                match = _OPERATOR.match(self.text, self.pos)
                operator = match.group() if match else char
                self.pos += len(operator)
                if items and not items[-1].separator:
                    items[-1].separator = operator
            else:
                before = self.pos
                node = self.command(stop)
                if node is None:
                    return items
                items.append(_Item(node))
                self.pos += self.pos == before  # never stall on input nothing reads

    def command(self, stop: str) -> _Node | None:
        """One command; None at the ``}`` that closes the brace group being read."""
        if self.text.startswith("((", self.pos):
            self.skip_parentheses(self.pos + 2, 2)
            return _Simple()
        if self.peek() == "(":
            self.pos += 1
            group = _Group(self.parse_list(")"), subshell=True)
            self.trailing_redirects(group.redirects)
            return group
        node = _Simple()
        while True:
            self.blank()
            char = self.peek()
            if not char or char in "\n;|)" or (char == "&" and self.peek(1) != ">"):
                return node
            if char == "#":
                return node  # a comment
            if char == "(":
                if node.words and re.match(r"\(\s*\)", self.text[self.pos :]):
                    # name() { body; }: the body is analysed as if it ran.
                    self.pos = self.text.index(")", self.pos) + 1
                    return _Simple()
                if node.words and (node.words[-1].plain() or "").endswith("="):
                    self.skip_parentheses(self.pos + 1, 1)  # an array assignment
                    continue
                return node  # a syntax error: read on from the parenthesis
            if self.redirect(node):
                continue
            word = self.word()
            if word is None:  # not reachable: a safety net against looping
                self.pos += 1
                continue
            if not node.words:
                plain = word.plain()
                if plain == "{":
                    group = _Group(self.parse_list("}"), subshell=False)
                    self.trailing_redirects(group.redirects)
                    return group
                if plain == "}":
                    if stop == "}":
                        return None
                    continue
                if plain in _DROPPED:
                    continue
                if plain in ("for", "select"):
                    return self.for_header()
                if plain in ("case", "function"):
                    self.skip_header(plain)
                    continue
            node.words.append(word)

    def for_header(self) -> _Node:
        self.blank()
        if self.text.startswith("((", self.pos):
            self.skip_parentheses(self.pos + 2, 2)
            return _Simple()
        name = self.word()
        words: list[_Word] | None = None
        self.blank()
        after = self.word_ahead()
        if after == "in":
            self.word()
            words = []
            while True:
                self.blank()
                if not self.peek() or self.peek() in "\n;&|)":
                    break
                word = self.word()
                if word is None:
                    break
                words.append(word)
        return _For((name.plain() if name else None) or "", words)

    def word_ahead(self) -> str | None:
        saved = self.pos
        word = self.word()
        self.pos = saved
        return word.plain() if word else None

    def skip_header(self, keyword: str) -> None:
        """``case WORD in`` and ``function NAME``: words, not a command."""
        while True:
            self.blank()
            if not self.peek() or self.peek() in "\n;&|()":
                break
            word = self.word()
            if word is None or keyword == "function" or word.plain() == "in":
                break
        if keyword == "function":
            match = re.match(r"\s*\(\s*\)", self.text[self.pos :])
            if match:
                self.pos += match.end()

    def trailing_redirects(self, redirects: list[tuple[str, _Word]]) -> None:
        holder = _Simple()
        while True:
            self.blank()
            if not self.redirect(holder):
                break
        redirects.extend(holder.redirects)

    def redirect(self, node: _Simple) -> bool:
        if self.peek() in "<>" and self.peek(1) == "(":
            return False  # a process substitution, read as a word
        match = _REDIRECT.match(self.text, self.pos)
        if match is None:
            return False
        operator = match.group(2)
        self.pos = match.end()
        self.blank()
        word = self.word()
        if word is None:
            return True
        if operator in ("<<", "<<-"):
            delimiter = "".join(part.text for part in word.parts)
            quoted = any(part.kind != "lit" for part in word.parts)
            self.pending.append((delimiter, operator == "<<-", not quoted, node))
        else:
            node.redirects.append((operator, word))
        return True

    def read_documents(self) -> None:
        """The bodies of here-documents opened on the line just ended."""
        for delimiter, strip_tabs, expand, node in self.pending:
            lines: list[str] = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end == -1 else end
                line = self.text[self.pos : end]
                self.pos = min(end + 1, len(self.text))
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            node.docs.append(("\n".join(lines), expand))
        self.pending.clear()

    def skip_parentheses(self, start: int, depth: int) -> None:
        """Past the parenthesis closing ``depth`` open ones before ``start``."""
        index = start
        while index < len(self.text) and depth:
            if self.text[index] == "(":
                depth += 1
            elif self.text[index] == ")":
                depth -= 1
            index += 1
        self.pos = index

    def word(self) -> _Word | None:
        parts: list[_Part] = []
        literal: list[str] = []

        def flush() -> None:
            if literal:
                parts.append(_Part("lit", "".join(literal)))
                literal.clear()

        start = self.pos
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in _ENDS_WORD:
                if char in "<>" and self.pos == start and self.peek(1) == "(":
                    self.pos += 2
                    parts.append(_Part("psub", "/dev/fd/63", self.parse_list(")")))
                    continue
                break
            if char == "\\":
                if self.peek(1) == "\n":
                    self.pos += 2
                    continue
                flush()
                parts.append(_Part("q", self.peek(1) or "\\"))
                self.pos += 2
            elif char == "'":
                flush()
                end = self.text.find("'", self.pos + 1)
                end = len(self.text) if end == -1 else end
                parts.append(_Part("q", self.text[self.pos + 1 : end]))
                self.pos = end + 1
            elif char == '"':
                flush()
                self.pos += 1
                self.double_quoted(parts, '"')
            elif char == "`":
                flush()
                self.backtick(parts)
            elif char == "$":
                flush()
                if not self.dollar(parts, quoted=False):
                    literal.append("$")
            else:
                literal.append(char)
                self.pos += 1
        flush()
        return _Word(parts) if self.pos > start else None

    def double_quoted(self, parts: list[_Part], end: str) -> None:
        """Double-quoted text up to ``end`` (``""``: the end of the text, for a here-document)."""
        text: list[str] = []

        def flush() -> None:
            if text:
                parts.append(_Part("q", "".join(text)))
                text.clear()

        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == end:
                self.pos += 1
                break
            if char == "\\" and self.peek(1) in '$`"\\\n':
                if self.peek(1) != "\n":
                    text.append(self.peek(1))
                self.pos += 2
            elif char == "`":
                flush()
                self.backtick(parts)
            elif char == "$":
                flush()
                if not self.dollar(parts, quoted=True):
                    text.append("$")
            else:
                text.append(char)
                self.pos += 1
        flush()

    def backtick(self, parts: list[_Part]) -> None:
        inner: list[str] = []
        index = self.pos + 1
        while index < len(self.text) and self.text[index] != "`":
            if self.text[index] == "\\" and self.text[index + 1 : index + 2] in ("`", "\\", "$"):
                index += 1
            inner.append(self.text[index])
            index += 1
        self.pos = index + 1
        parts.append(_Part("sub", body=_Parser("".join(inner)).parse_list("")))

    def dollar(self, parts: list[_Part], *, quoted: bool) -> bool:
        """A ``$`` expansion at ``pos`` into ``parts``; False for a literal ``$``."""
        after = self.peek(1)
        if self.text.startswith("$((", self.pos):
            self.skip_parentheses(self.pos + 3, 2)
            parts.append(_Part("opq"))
        elif after == "(":
            self.pos += 2
            parts.append(_Part("sub", body=self.parse_list(")")))
        elif after == "{":
            end = self.text.find("}", self.pos + 2)
            end = len(self.text) if end == -1 else end
            inner = self.text[self.pos + 2 : end]
            self.pos = end + 1
            if _NAME.fullmatch(inner) or _digits(inner):
                parts.append(_Part("qvar" if quoted else "var", inner))
            else:
                parts.append(_Part("opq"))
        elif after == "'" and not quoted:
            parts.append(_Part("q", self.ansi_c()))
        elif after == '"' and not quoted:
            self.pos += 1  # $"…": a plain double-quoted string
            return True
        elif match := _NAME.match(self.text, self.pos + 1):
            self.pos = match.end()
            parts.append(_Part("qvar" if quoted else "var", match.group()))
        elif _digits(after):
            self.pos += 2
            parts.append(_Part("qvar" if quoted else "var", after))
        elif after and after in "@*#?$!-":
            self.pos += 2
            parts.append(_Part("opq"))
        else:
            self.pos += 1
            return False
        return True

    def ansi_c(self) -> str:
        """A ``$'…'`` string, decoded; like bash, it ends at a NUL."""
        index = self.pos + 2
        while index < len(self.text) and self.text[index] != "'":
            index += 2 if self.text[index] == "\\" else 1
        body = self.text[self.pos + 2 : index]
        self.pos = index + 1
        return _ANSI_ESCAPE.sub(_ansi_char, body).partition("\0")[0]


_ANSI_ESCAPE = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)


def _ansi_char(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1:
        return chr(min(int(code[1:], 16), 0x10FFFF))
    if code[0] in "01234567":
        return chr(int(code, 8))
    if code[0] == "c" and len(code) > 1:
        return chr(ord(code[1]) & 0x1F)
    return _ANSI_C.get(code, code)


# --- Evaluation ----------------------------------------------------------------------------


class _Arg:
    """An expanded word: its text, or for an opaque one the known prefix of it."""

    __slots__ = ("opaque", "text")

    def __init__(self, text: str, opaque: bool = False) -> None:
        self.text = text
        self.opaque = opaque


class _State:
    """What a command list carries from one command to the next."""

    __slots__ = ("cwd", "oldpwd", "piped", "positional", "stack", "variables")

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd  # None: unknown (after cd "$(…)")
        self.oldpwd: str | None = None
        self.stack: list[str | None] = []
        # None: set to something unknown; a tuple: a for loop's values.
        self.variables: dict[str, str | tuple[str, ...] | None] = {}
        self.positional: list[str | None] | None = None
        self.piped: list[_Arg] | None = None  # the command writing into this one's stdin

    def copy(self) -> _State:
        twin = _State(self.cwd)
        twin.oldpwd = self.oldpwd
        twin.stack = list(self.stack)
        twin.variables = dict(self.variables)
        twin.positional = self.positional
        return twin


class _Analysis:
    __slots__ = (
        "budget",
        "depth",
        "env",
        "exhausted",
        "fold",
        "home",
        "mark",
        "prefix",
        "refusals",
        "root",
        "root_key",
        "seen",
        "spec",
    )

    def __init__(self, root: str, spec: ProtectSpec, env: Mapping[str, str]) -> None:
        self.root = os.path.realpath(root)
        self.fold = spec.fold
        self.root_key = self.key(self.root)
        self.prefix = self.root_key.rstrip("/") + "/"
        self.spec = spec
        self.env = env
        self.home = env.get("HOME") or os.path.expanduser("~")
        self.refusals: list[Refusal] = []
        self.seen: set[tuple[str, str]] = set()
        self.depth = 0
        self.budget = _WALK_BUDGET
        self.exhausted = False
        self.mark = 0  # refusals before a retry (see _first_at_root)

    def key(self, path: str) -> str:
        return path.casefold() if self.fold else path

    def refuse(self, path: str, mode: str, harm: str) -> None:
        """Record a refusal: ``harm`` says what would happen to ``path``."""
        reason = f"{harm} (protected: {mode})"
        if (path, reason) not in self.seen:
            self.seen.add((path, reason))
            self.refusals.append(Refusal(path, mode, reason))


def _analyse_text(analysis: _Analysis, text: str, state: _State) -> None:
    if analysis.depth >= _MAX_DEPTH:
        return
    analysis.depth += 1
    try:
        parser = _Parser(text)
        items = parser.parse_list("")
        parser.read_documents()  # a here-document without a line after its command
        _run_list(analysis, items, state)
    finally:
        analysis.depth -= 1


def _run_list(analysis: _Analysis, items: list[_Item], state: _State) -> None:
    previous = ""
    previous_args: list[_Arg] | None = None
    for item in items:
        # Each side of a pipe and a background job run in a subshell.
        alone = previous in ("|", "|&") or item.separator in ("|", "|&", "&")
        current = state.copy() if alone else state
        node = item.node
        if isinstance(node, _Group):
            _redirects(analysis, node.redirects, current)
            _run_list(analysis, node.body, current.copy() if node.subshell else current)
        elif isinstance(node, _For):
            values: tuple[str, ...] | None = None
            if node.words is not None:
                args = [a for w in node.words for a in _expand(analysis, w, current)]
                if not any(a.opaque for a in args):
                    values = tuple(a.text for a in args)
            current.variables[node.name] = values
        else:
            current.piped = previous_args if previous in ("|", "|&") else None
            previous_args = _run_simple(analysis, node, current)
            current.piped = None
            previous = item.separator
            continue
        previous = item.separator
        previous_args = None


def _run_simple(analysis: _Analysis, node: _Simple, state: _State) -> list[_Arg] | None:
    """Analyse one simple command; its expanded words (None for assignments alone)."""
    stdin = _redirects(analysis, node.redirects, state)
    for body, expand in node.docs:
        stdin.append(body)
        if expand:
            parser = _Parser(body)
            parts: list[_Part] = []
            parser.double_quoted(parts, "")
            _expand(analysis, _Word(parts), state)  # analyses its substitutions
    assignments: list[tuple[str, str | None]] = []
    index = 0
    for word in node.words:
        first = word.parts[0] if word.parts else None
        match = _ASSIGNMENT.match(first.text) if first and first.kind == "lit" else None
        if match is None:
            break
        rest = [_Part("lit", first.text[match.end() :]), *word.parts[1:]] if first else []
        value = _expand(analysis, _Word(rest), state, split=False)
        known = len(value) == 1 and not value[0].opaque
        assignments.append((match.group(1), value[0].text if known else None))
        index += 1
    if index == len(node.words):
        state.variables.update(assignments)
        return None
    args = [a for w in node.words[index:] for a in _expand(analysis, w, state)]
    _dispatch(analysis, args, state, stdin)
    return args


def _redirects(analysis: _Analysis, redirects: list[tuple[str, _Word]], state: _State) -> list[str]:
    """Check the redirections' targets; the text of any here-string."""
    stdin: list[str] = []
    for operator, word in redirects:
        args = _expand(analysis, word, state, split=False)
        if operator == "<<<":
            stdin.extend(a.text for a in args if not a.opaque)
            continue
        if operator not in _WRITE_REDIRECTS:
            continue
        for arg in args:
            if operator == ">&" and not arg.opaque and (_digits(arg.text) or arg.text == "-"):
                continue  # 2>&1: a descriptor, not a file
            _write(analysis, f"the redirection {operator}", arg, state)
    return stdin


# --- Expansion -----------------------------------------------------------------------------

# Flags of expanded characters: unquoted literal, quoted, from an unquoted variable
# (split on blanks and globbed, but not brace-expanded), and an unknown stretch.
_LIT, _QUOTED, _SPLIT, _UNKNOWN = 0, 1, 2, 3


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _lookup(analysis: _Analysis, state: _State, name: str) -> str | tuple[str, ...] | None:
    if _digits(name):
        if state.positional is None:
            return None
        index = int(name)
        return state.positional[index] if index < len(state.positional) else ""
    if name in state.variables:
        return state.variables[name]
    if name == "PWD":
        return state.cwd
    if name == "OLDPWD":
        return state.oldpwd
    return analysis.env.get(name)


def _expand(analysis: _Analysis, word: _Word, state: _State, *, split: bool = True) -> list[_Arg]:
    """The arguments a word becomes; substitutions inside it are analysed on the way."""
    loops: list[tuple[str, tuple[str, ...]]] = []
    for part in word.parts:
        if part.body is not None:
            _run_list(analysis, part.body, state.copy())
        if part.kind in ("var", "qvar"):
            value = _lookup(analysis, state, part.text)
            if isinstance(value, tuple) and all(name != part.text for name, _ in loops):
                loops.append((part.text, value))
    # A for loop's variable: the word once per value (its body runs once per value).
    bindings: list[dict[str, str]] = [{}]
    for name, values in loops:
        bindings = [{**b, name: v} for b in bindings for v in values][:_MAX_WORDS]
    out: list[_Arg] = []
    for binding in bindings:
        chars: list[tuple[str, int]] = []
        for part in word.parts:
            if part.kind == "lit":
                chars.extend((c, _LIT) for c in part.text)
            elif part.kind in ("q", "psub"):
                chars.extend((c, _QUOTED) for c in part.text)
            elif part.kind in ("var", "qvar"):
                found = binding.get(part.text)
                value = found if found is not None else _lookup(analysis, state, part.text)
                if not isinstance(value, str):
                    chars.append(("", _UNKNOWN))
                else:
                    flag = _SPLIT if part.kind == "var" and split else _QUOTED
                    chars.extend((c, flag) for c in value)
            else:
                chars.append(("", _UNKNOWN))
        for field in _braces(chars) if split else [chars]:
            out.extend(_finish(analysis, _tilde(analysis, field), state, split=split))
    return out[:_MAX_WORDS]


def _braces(chars: list[tuple[str, int]]) -> list[list[tuple[str, int]]]:
    """Brace expansion (``a{b,c}`` → ``ab ac``), at most _MAX_WORDS words."""
    done: list[list[tuple[str, int]]] = []
    todo = [chars]
    while todo and len(done) + len(todo) <= _MAX_WORDS:
        alternatives = _brace_group(todo[0])
        if alternatives is None:
            done.append(todo.pop(0))
        else:
            todo[:1] = alternatives
    return (done + todo)[:_MAX_WORDS]


def _brace_group(chars: list[tuple[str, int]]) -> list[list[tuple[str, int]]] | None:
    """The words the first brace group of ``chars`` makes, or None without one."""
    for start, (char, flag) in enumerate(chars):
        if char != "{" or flag != _LIT:
            continue
        depth = 0
        commas: list[int] = []
        for end in range(start, len(chars)):
            inner, inner_flag = chars[end]
            if inner_flag != _LIT:
                continue
            if inner == "{":
                depth += 1
            elif inner == "}":
                depth -= 1
                if depth == 0:
                    break
            elif inner == "," and depth == 1:
                commas.append(end)
        else:
            continue
        if not commas:
            continue
        bounds = [start, *commas, end]
        head, tail = chars[:start], chars[end + 1 :]
        return [head + chars[low + 1 : high] + tail for low, high in itertools.pairwise(bounds)]
    return None


def _tilde(analysis: _Analysis, chars: list[tuple[str, int]]) -> list[tuple[str, int]]:
    if not chars or chars[0] != ("~", _LIT):
        return chars
    end = next((i for i, (c, _) in enumerate(chars) if c == "/"), len(chars))
    if any(flag != _LIT for _, flag in chars[:end]):
        return chars
    user = "".join(c for c, _ in chars[1:end])
    home = analysis.home if not user else os.path.expanduser("~" + user)
    if home.startswith("~"):
        return chars
    return [(c, _QUOTED) for c in home] + chars[end:]


def _finish(
    analysis: _Analysis, chars: list[tuple[str, int]], state: _State, *, split: bool
) -> list[_Arg]:
    fields: list[list[tuple[str, int]]] = [chars]
    if split and any(flag == _SPLIT for _, flag in chars):
        fields = []
        current: list[tuple[str, int]] = []
        for char, flag in chars:
            if flag == _SPLIT and char in " \t\n":
                if current:
                    fields.append(current)
                current = []
            else:
                current.append((char, flag))
        if current:
            fields.append(current)
    out: list[_Arg] = []
    for field in fields:
        unknown = next((i for i, (_, flag) in enumerate(field) if flag == _UNKNOWN), None)
        text = "".join(c for c, _ in field)
        if unknown is not None:
            out.append(_Arg("".join(c for c, _ in field[:unknown]), opaque=True))
            continue
        globbing = split and any(c in _GLOB_CHARS and f in (_LIT, _SPLIT) for c, f in field)
        matches: list[str] = []
        if globbing and (os.path.isabs(text) or state.cwd is not None):
            pattern = "".join(
                glob.escape(c) if f == _QUOTED and c in _GLOB_CHARS else c for c, f in field
            )
            root_dir = None if os.path.isabs(pattern) else state.cwd
            matches = list(itertools.islice(glob.iglob(pattern, root_dir=root_dir), _MAX_WORDS + 1))
            if len(matches) > _MAX_WORDS:
                # Too many to check one by one: judge the folder the pattern starts from.
                head = re.split(r"[*?\[]", text, maxsplit=1)[0]
                out.append(_Arg(head, opaque=True))
                continue
        out.extend([_Arg(m) for m in sorted(matches)] or [_Arg(text)])
    return out


# --- Commands ------------------------------------------------------------------------------


def _dispatch(analysis: _Analysis, args: list[_Arg], state: _State, stdin: list[str]) -> None:
    while args and not args[0].opaque:
        name = args[0].text.rsplit("/", 1)[-1]
        wrapper = _WRAPPERS.get(name)
        if wrapper is not None:
            unwrapped = wrapper(analysis, args[1:], state)
            if unwrapped is None:
                return
            args, state = unwrapped
            continue
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(analysis, name, args[1:], state, stdin)
        return


def _options(
    argv: list[_Arg], with_value: frozenset[str] = frozenset(), *, first: bool = False
) -> tuple[list[tuple[str, str]], list[_Arg]]:
    """GNU-style (option, value) pairs and operands; ``first``: options end at the first operand."""
    options: list[tuple[str, str]] = []
    operands: list[_Arg] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        text = arg.text
        index += 1
        if arg.opaque or not text.startswith("-") or text == "-" or (first and operands):
            operands.append(arg)
            if first:
                operands.extend(argv[index:])
                break
            continue
        if text == "--":
            operands.extend(argv[index:])
            break
        if text.startswith("--") and "=" in text:
            name, _, value = text.partition("=")
            options.append((name, value))
        elif text in with_value:
            value = argv[index].text if index < len(argv) else ""
            options.append((text, value))
            index += 1
        elif not text.startswith("--") and text[:2] in with_value:
            options.append((text[:2], text[2:]))
        else:
            options.append((text, ""))
    return options, operands


def _flag(options: list[tuple[str, str]], letters: str, *longs: str) -> bool:
    for name, _ in options:
        if name.startswith("--"):
            if name in longs:
                return True
        elif any(letter in name[1:] for letter in letters):
            return True
    return False


def _value(options: list[tuple[str, str]], *names: str) -> str | None:
    return next((value for name, value in options if name in names), None)


def _wrapped(with_value: frozenset[str], skip: int = 0) -> _Wrapper:
    """A wrapper like ``nice -n 5 cmd``: options, ``skip`` more words, then the command."""

    def unwrap(
        analysis: _Analysis, argv: list[_Arg], state: _State
    ) -> tuple[list[_Arg], _State] | None:
        _, rest = _options(argv, with_value, first=True)
        return (rest[skip:], state) if len(rest) > skip else None

    return unwrap


def _env(analysis: _Analysis, argv: list[_Arg], state: _State) -> tuple[list[_Arg], _State] | None:
    options, rest = _options(argv, frozenset({"-u", "--unset", "-C", "--chdir", "-S"}), first=True)
    chdir = _value(options, "-C", "--chdir")
    if chdir is not None:
        state = state.copy()
        state.cwd = _cd_target(_Arg(chdir), state)
    split = _value(options, "-S", "--split-string")
    if split is not None:
        rest = [_Arg(word) for word in split.split()] + rest
    while rest and not rest[0].opaque and _ASSIGNMENT.match(rest[0].text):
        rest = rest[1:]
    return (rest, state) if rest else None


def _xargs(
    analysis: _Analysis, argv: list[_Arg], state: _State
) -> tuple[list[_Arg], _State] | None:
    """``xargs CMD ARGS``: CMD ARGS plus arguments from stdin, which are unknown.

    Fed by ``find`` (``find … | xargs rm``), it is ``find … -exec rm {} ;``.
    """
    with_value = frozenset(
        {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter"}
    )
    options, rest = _options(argv, with_value, first=True)
    replace = _value(options, "-I", "--replace") or ("{}" if _flag(options, "i") else None)
    if not rest:
        rest = [_Arg("echo")]
    source = state.piped or []
    if _is_plain_find(source):
        if replace:
            tail = [_Arg(a.text.replace(replace, "{}"), a.opaque) for a in rest]
        else:
            tail = [*rest, _Arg("{}")]
        return [*source, _Arg("-exec"), *tail, _Arg(";")], state
    if replace:
        rest = [rest[0]] + [
            _Arg(a.text.partition(replace)[0], opaque=True)
            if replace in a.text and not a.opaque
            else a
            for a in rest[1:]
        ]
    else:
        rest = [*rest, _Arg("", opaque=True)]
    return rest, state


def _is_plain_find(argv: list[_Arg]) -> bool:
    """A ``find`` that only lists what it finds."""
    if not argv or argv[0].opaque or argv[0].text.rsplit("/", 1)[-1] != "find":
        return False
    return not any(a.text.startswith(("-exec", "-ok", "-delete", "-fprint", "-fls")) for a in argv)


def _command(
    analysis: _Analysis, argv: list[_Arg], state: _State
) -> tuple[list[_Arg], _State] | None:
    options, rest = _options(argv, first=True)
    if _flag(options, "vV"):
        return None  # command -v: a lookup, nothing runs
    return (rest, state) if rest else None


def _rm(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    options, targets = _options(argv)
    recursive = verb == "trash" or _flag(options, "rR", "--recursive")
    for target in targets:
        _delete(analysis, verb, target, state, recursive=recursive)


def _rmdir(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    options, targets = _options(argv)
    parents = _flag(options, "p", "--parents")
    for target in targets:
        _delete(analysis, verb, target, state, recursive=False)
        text = target.text.rstrip("/")
        while parents and not target.opaque and "/" in text:
            text = text.rsplit("/", 1)[0]
            _delete(analysis, verb, _Arg(text), state, recursive=False)


def _move(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    """``mv``, ``cp``, ``ln`` and ``install``: where things land, and what ``mv`` takes away."""
    with_value = frozenset(
        {"-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "-g", "--owner"}
    )
    options, operands = _options(argv, with_value)
    if verb == "git mv" and _flag(options, "n", "--dry-run"):
        return
    if verb == "install" and _flag(options, "d", "--directory"):
        for operand in operands:
            _write(analysis, verb, operand, state, follow=False)
        return
    directory = _value(options, "-t", "--target-directory")
    plain = _flag(options, "T", "--no-target-directory")
    if directory is not None:
        sources, destination = operands, _Arg(directory)
    elif verb == "ln" and len(operands) == 1:
        sources, destination = operands, _Arg(".")
    elif len(operands) >= 2:
        sources, destination = operands[:-1], operands[-1]
    else:
        return
    if verb in ("mv", "git mv"):
        for source in sources:
            _delete(analysis, verb, source, state, recursive=True)
    recursive = verb == "cp" and _flag(options, "rRa", "--recursive", "--archive")
    follow = verb in ("cp", "install")
    into = directory is not None or (
        not plain and not destination.opaque and _is_dir(destination.text, state)
    )
    if not into or destination.opaque:
        _write(analysis, verb, destination, state, follow=follow, recursive=recursive)
        return
    for source in sources:
        if source.opaque:
            _write(analysis, verb, destination, state, recursive=True)
            continue
        name = os.path.basename(source.text.rstrip("/")) or source.text
        landing = _Arg(os.path.join(destination.text, name))
        _write(analysis, verb, landing, state, follow=follow, recursive=recursive)


def _rsync(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    """The destination changes (and with ``--delete*`` loses what the sources lack)."""
    options, operands = _options(argv, _RSYNC_VALUES)
    if _flag(options, "n", "--dry-run") or len(operands) < 2:
        return
    local = [a for a in operands if a.opaque or not _REMOTE.match(a.text)]
    *sources, destination = operands
    if destination in local:
        if any(name.startswith("--del") for name, _ in options):
            _delete(analysis, f"{verb} --delete", destination, state, recursive=True)
        _write(analysis, verb, destination, state, recursive=True)
    if _value(options, "--remove-source-files") is not None:
        for source in sources:
            if source in local:
                _delete(analysis, f"{verb} --remove-source-files", source, state, recursive=True)


_REMOTE = re.compile(r"[^/]*:")  # host:path, user@host:path, rsync://…
_RSYNC_VALUES = frozenset(
    {"-e", "--rsh", "-f", "--filter", "--exclude", "--include", "-T", "--temp-dir", "-B"}
    | {"--backup-dir", "--log-file", "--files-from", "--exclude-from", "--include-from"}
    | {"--chmod", "--port", "--password-file", "--partial-dir", "--compare-dest", "--suffix"}
    | {"--copy-dest", "--link-dest", "--max-size", "--min-size", "--timeout", "--bwlimit"}
)


def _is_dir(text: str, state: _State) -> bool:
    if not os.path.isabs(text) and state.cwd is None:
        return False
    return os.path.isdir(os.path.join(state.cwd or "/", text))


def _change(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    """Commands that change the files they are given: ``truncate``, ``tee``, ``touch``, …"""
    with_value = _CHANGE_VALUES.get(verb, frozenset())
    options, operands = _options(argv, with_value)
    if verb in ("chmod", "chown", "chgrp"):
        # chmod -w FILE: the mode looked like an option, so every operand is a file.
        mode_option = verb == "chmod" and any(re.fullmatch(r"-[rwxXst]+", n) for n, _ in options)
        if _value(options, "--reference") is None and not mode_option:
            operands = operands[1:]
    if verb == "dd":
        operands = [_Arg(a.text[3:]) for a in argv if a.text.startswith("of=") and not a.opaque]
    recursive = verb in ("chmod", "chown", "chgrp") and _flag(options, "R", "--recursive")
    for operand in operands:
        _write(analysis, verb, operand, state, recursive=recursive)


_CHANGE_VALUES = {
    "truncate": frozenset({"-s", "--size", "-r", "--reference"}),
    "touch": frozenset({"-r", "--reference", "-d", "--date", "-t"}),
    "tee": frozenset({"--output-error"}),
}


def _in_place(
    analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]
) -> None:
    """``sed -i``, ``perl -i``, ``ruby -i``: the files after the script change."""
    script_given = False
    in_place = False
    files: list[_Arg] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        text = arg.text
        index += 1
        if arg.opaque or not text.startswith("-") or text == "-":
            files.append(arg)
            continue
        if text == "--":
            files.extend(argv[index:])
            break
        if text.startswith("--"):
            name = text.partition("=")[0]
            in_place = in_place or name == "--in-place"
            if name in ("--expression", "--file"):
                script_given = True
                index += "=" not in text
            continue
        letters = text[1:]
        for position, letter in enumerate(letters):
            if letter == "i":
                in_place = True
                if text == "-i" and index < len(argv) and argv[index].text == "":
                    index += 1  # BSD sed -i '': the empty backup suffix
                break
            takes_rest, takes_next = _SCRIPT_OPTIONS[verb]
            if letter in takes_rest:
                script_given = script_given or letter in "efE"
                if position == len(letters) - 1 and letter in takes_next:
                    index += 1  # the value is the next argument
                break
    if not in_place:
        return
    for target in files if script_given else files[1:]:
        _write(analysis, verb, target, state)


# Per interpreter: option letters that take the rest of their word as a value, and
# those of them that take the next argument when nothing follows in the word.
_SCRIPT_OPTIONS = {
    "sed": ("efl", "efl"),
    "perl": ("eEIMmxdDlC0", "eEI"),
    "ruby": ("eIrCxEKTUWF0l", "eIrC"),
}


def _find(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    index = 0
    while index < len(argv) and argv[index].text in ("-H", "-L", "-P"):
        index += 1
    starts: list[_Arg] = []
    while index < len(argv) and (
        argv[index].opaque or not argv[index].text.startswith(("-", "(", "!", ","))
    ):
        starts.append(argv[index])
        index += 1
    tests: list[tuple[str, str]] = []
    simple = True
    delete = False
    commands: list[list[_Arg]] = []
    while index < len(argv):
        text = argv[index].text
        value = argv[index + 1] if index + 1 < len(argv) else _Arg("")
        if text == "-delete":
            delete = True
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(argv) and argv[end].text not in (";", "+"):
                end += 1
            commands.append(argv[index + 1 : end])
            index = end
        elif text in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            _write(analysis, f"find {text}", value, state)
            index += 1 + (text == "-fprintf")
        elif text in _FIND_TESTS:
            tests.append((text, value.text))
            index += 1
        elif text not in _FIND_HARMLESS:
            simple = False
            index += text in _FIND_VALUED
        index += 1
    if not delete and not commands:
        return
    for start in starts or [_Arg(".")]:
        if start.opaque or (state.cwd is None and not os.path.isabs(start.text)):
            _scope(analysis, "find -delete/-exec", start, state, _ALL, "delete")
            continue
        top = os.path.realpath(os.path.join(state.cwd or "/", start.text))
        scope = _relative(analysis, top)
        if scope is None:
            continue
        found = _find_candidates(analysis, start.text, top, scope, tests if simple else [], delete)
        for command in commands:
            if not any("{}" in a.text for a in command):
                _dispatch(analysis, command, state.copy(), [])
                continue
            before = len(analysis.refusals)
            for path in found:  # shallowest first; one refusal per action is enough
                replaced = [_Arg(a.text.replace("{}", path), a.opaque) for a in command]
                _dispatch(analysis, replaced, state.copy(), [])
                if len(analysis.refusals) > before:
                    break


_FIND_TESTS = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-type", "-maxdepth"}
    | {"-mindepth"}
)
_FIND_HARMLESS = frozenset(
    {"-a", "-and", "-print", "-print0", "-depth", "-d", "-xdev", "-mount", "-true", "-ls"}
    | {"-delete", "-noleaf", "-daystart", "-nowarn", "-warn", "-ignore_readdir_race"}
)
_FIND_VALUED = frozenset(
    {"-newer", "-anewer", "-cnewer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin"}
    | {"-size", "-user", "-group", "-uid", "-gid", "-perm", "-regex", "-iregex", "-links"}
    | {"-regextype", "-inum", "-samefile", "-lname", "-ilname", "-used", "-fstype", "-printf"}
    | {"-xtype", "-context", "-D", "-O"}
)


def _find_candidates(
    analysis: _Analysis,
    shown: str,
    top: str,
    scope: str,
    tests: list[tuple[str, str]],
    delete: bool,
) -> list[str]:
    """Protected paths (or folders above them) that ``find``'s tests let through.

    ``-delete`` of a matching protected path is refused here; the paths are
    returned, as ``find`` prints them, for ``-exec`` to see as ``{}``.
    """
    candidates: dict[str, None] = {}
    refused = False
    for found, mode in _protected(analysis, scope, _ALL):
        path = os.path.join(analysis.root, found) if found else analysis.root
        below = path[len(top) :] if path.startswith(top) else ""
        steps = below.strip("/").split("/") if below.strip("/") else []
        chain = [top + "".join("/" + s for s in steps[:depth]) for depth in range(len(steps) + 1)]
        for depth, step in enumerate(chain):
            printed = shown.rstrip("/") + step[len(top) :] if depth else shown
            if not _find_matches(tests, printed, depth, step):
                continue
            if step == path and delete and not refused:
                analysis.refuse(found, mode, f'find -delete would delete "{found}"')
                refused = True  # one is enough to refuse the command
            candidates[printed] = None
        if len(candidates) > 64:
            break
    return list(candidates)


def _find_matches(tests: list[tuple[str, str]], printed: str, depth: int, path: str) -> bool:
    for test, value in tests:
        name = os.path.basename(printed.rstrip("/")) or printed
        if test == "-name":
            ok = fnmatch.fnmatchcase(name, value)
        elif test == "-iname":
            ok = fnmatch.fnmatchcase(name.casefold(), value.casefold())
        elif test in ("-path", "-wholename"):
            ok = fnmatch.fnmatchcase(printed, value)
        elif test in ("-ipath", "-iwholename"):
            ok = fnmatch.fnmatchcase(printed.casefold(), value.casefold())
        elif test == "-type":
            ok = _kind(path) in value.split(",")
        else:
            limit = int(value) if _digits(value) else None
            ok = limit is None or (depth <= limit if test == "-maxdepth" else depth >= limit)
        if not ok:
            return False
    return True


def _kind(path: str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISLNK(mode):
        return "l"
    return "d" if stat.S_ISDIR(mode) else "f" if stat.S_ISREG(mode) else "?"


def _shell(
    analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, stdin: list[str]
) -> None:
    """``sh -c TEXT``, ``bash <<EOF``, ``bash -s <<< TEXT``: the text is analysed too."""
    index = 0
    command = False
    while index < len(argv):
        text = argv[index].text
        if argv[index].opaque or text in ("-", "--"):
            index += text in ("-", "--") and not argv[index].opaque
            break
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if text[:1] not in "-+":
            break
        command = command or (not text.startswith("--") and "c" in text[1:])
        index += 1
    if command:
        if index < len(argv) and not argv[index].opaque:
            inner = state.copy()
            inner.positional = [None if a.opaque else a.text for a in argv[index + 1 :]]
            _analyse_text(analysis, argv[index].text, inner)
        return
    if index >= len(argv):
        for text in stdin:
            _analyse_text(analysis, text, state.copy())


def _eval(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    _analyse_text(analysis, " ".join(a.text for a in argv), state)


def _watch(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    options, rest = _options(argv, frozenset({"-n", "--interval", "-d"}), first=True)
    if _flag(options, "x", "--exec"):
        _dispatch(analysis, rest, state.copy(), [])
    else:
        _analyse_text(analysis, " ".join(a.text for a in rest), state.copy())


def _cd(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    operands = [a for a in argv if a.opaque or not (a.text.startswith("-") and a.text != "-")]
    target: str | None
    if verb == "popd":
        if not state.stack:
            return
        target = state.stack.pop()
    elif not operands:
        target = analysis.home
    elif operands[0].text == "-" and not operands[0].opaque:
        target = state.oldpwd
    else:
        target = _cd_target(operands[0], state)
    if verb == "pushd":
        state.stack.append(state.cwd)
    state.oldpwd, state.cwd = state.cwd, target


def _cd_target(arg: _Arg, state: _State) -> str | None:
    if arg.opaque:
        return None
    if os.path.isabs(arg.text):
        return os.path.normpath(arg.text)
    return None if state.cwd is None else os.path.normpath(os.path.join(state.cwd, arg.text))


def _declare(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    """``export``/``declare``/``local``/``readonly`` NAME=VALUE, ``unset``/``read`` NAME."""
    for arg in argv:
        name, equals, value = arg.text.partition("=")
        if not _NAME.fullmatch(name):
            continue
        if verb in ("unset", "read"):
            state.variables[name] = None
        elif equals:
            state.variables[name] = None if arg.opaque else value


def _git(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State, _: list[str]) -> None:
    index = 0
    while index < len(argv) and not argv[index].opaque:
        text = argv[index].text
        if text in ("-C", "--work-tree") or text.startswith("--work-tree="):
            if "=" in text:
                where = _Arg(text.partition("=")[2])
            else:
                index += 1
                where = argv[index] if index < len(argv) else _Arg(".")
            state = state.copy()
            state.cwd = _cd_target(where, state)
        elif text in ("-c", "--git-dir", "--namespace", "--exec-path"):
            index += 1
        elif not text.startswith("-"):
            break
        index += 1
    if index >= len(argv) or argv[index].opaque:
        return
    handler = _GIT.get(argv[index].text)
    if handler is not None:
        handler(analysis, "git " + argv[index].text, argv[index + 1 :], state)


def _git_clean(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    options, paths = _options(argv, frozenset({"-e", "--exclude"}))
    if _flag(options, "n", "--dry-run"):
        return
    for path in paths or [_Arg(".")]:
        _git_scope(analysis, verb, path, state, _ALL, "delete")


def _git_rm(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    options, paths = _options(argv, frozenset({"--pathspec-from-file"}))
    if _flag(options, "n", "--cached", "--dry-run"):
        return
    if _value(options, "--pathspec-from-file") is not None:
        paths = [*paths, _Arg("", opaque=True)]
    for path in paths:
        if path.opaque or path.text.startswith(":") or any(c in path.text for c in _GLOB_CHARS):
            _git_scope(analysis, verb, path, state, _ALL, "delete")
        else:
            _delete(analysis, verb, path, state, recursive=True)


def _git_checkout(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    texts = [a.text for a in argv]
    split = texts.index("--") if "--" in texts else len(argv)
    options, before = _options(argv[:split], frozenset({"-b", "-B", "--orphan"}))
    after = argv[split + 1 :]
    if split < len(argv):
        paths = after
    elif _value(options, "-b", "-B", "--orphan") is not None:
        paths = []
    elif len(before) >= 2:
        paths = before[1:]
    elif len(before) == 1 and _looks_like_path(before[0], state):
        paths = before
    else:
        paths = []
    if paths:
        modes = _ALL if _flag(options, "", "--no-overlay") else _FROZEN_ONLY
        for path in paths:
            _git_scope(analysis, verb, path, state, modes, "discard changes to")
    elif _flag(options, "f", "--force"):
        _git_scope(analysis, f"{verb} -f", _Arg(":/"), state, _ALL, "revert or delete")


def _looks_like_path(arg: _Arg, state: _State) -> bool:
    text = arg.text
    if arg.opaque or text in (".", "..") or text.startswith(":") or "/" in text:
        return True
    return state.cwd is not None and os.path.lexists(os.path.join(state.cwd, text))


def _git_restore(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    with_value = frozenset({"-s", "--source", "--pathspec-from-file"})
    options, paths = _options(argv, with_value)
    if _flag(options, "S", "--staged") and not _flag(options, "W", "--worktree"):
        return
    source = _value(options, "-s", "--source") is not None
    overlay = _flag(options, "", "--overlay")
    modes = _ALL if source and not overlay else _FROZEN_ONLY
    if _value(options, "--pathspec-from-file") is not None:
        paths = [*paths, _Arg("", opaque=True)]
    for path in paths:
        _git_scope(analysis, verb, path, state, modes, "discard changes to")


def _git_reset(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    if any(a.text == "--hard" for a in argv):
        _git_scope(analysis, f"{verb} --hard", _Arg(":/"), state, _ALL, "revert or delete")


def _git_switch(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    options, _ = _options(argv, frozenset({"-c", "-C"}))
    if _flag(options, "f", "--force", "--discard-changes"):
        _git_scope(analysis, f"{verb} -f", _Arg(":/"), state, _ALL, "revert or delete")


def _git_stash(analysis: _Analysis, verb: str, argv: list[_Arg], state: _State) -> None:
    if argv and not argv[0].opaque and not argv[0].text.startswith("-"):
        if argv[0].text not in ("push", "save"):
            return
        argv = argv[1:]
    options, paths = _options(argv, frozenset({"-m", "--message"}))
    if not _flag(options, "ua", "--include-untracked", "--all"):
        return
    for path in paths or [_Arg(":/")]:
        _git_scope(analysis, f"{verb} -u", path, state, _ALL, "stash away (delete)")


# --- Harm ----------------------------------------------------------------------------------


def _lexical_target(full: str) -> str:
    """An absolute path with its folder's links resolved and its last component kept."""
    head, tail = os.path.split(full)
    if tail in ("", ".", ".."):
        return os.path.realpath(full)  # a trailing / (or . or ..) follows a link
    return os.path.join(os.path.realpath(head), tail)


def _target(arg: _Arg, state: _State) -> str | None:
    if arg.opaque or (state.cwd is None and not os.path.isabs(arg.text)):
        return None
    return _lexical_target(os.path.join(state.cwd or "/", arg.text))


def _relative(analysis: _Analysis, path: str) -> str | None:
    """Root-relative form of an absolute path: ``""`` for the root or above it, None outside."""
    key = analysis.key(path)
    if key == analysis.root_key:
        return ""
    if key.startswith(analysis.prefix):
        return path[len(analysis.prefix) :]
    if analysis.root_key.startswith(key.rstrip("/") + "/"):
        return ""  # a folder above the root holds all of it
    return None


def _delete(analysis: _Analysis, verb: str, arg: _Arg, state: _State, *, recursive: bool) -> None:
    if arg.text == "" and not arg.opaque:
        return
    path = _target(arg, state)
    if path is None:
        if _first_at_root(analysis, arg, state):
            _delete(analysis, verb, arg, _at_root(analysis, state), recursive=recursive)
            if analysis.refusals[analysis.mark :]:
                return
        _scope(analysis, verb, arg, state, _ALL, "delete")
        return
    relative = _relative(analysis, path)
    if relative is None:
        return
    entry = analysis.spec.entry_for(relative) if relative else None
    if entry is not None and _actual(analysis, relative) is not None:
        analysis.refuse(relative, entry.mode, f'{verb} would delete "{relative}"')
    elif recursive and os.path.isdir(path) and not os.path.islink(path):
        for found, mode in _protected(analysis, relative, _ALL):
            within = f'inside "{arg.text}"'
            analysis.refuse(found, mode, f'{verb} would delete "{found}" {within}')
            break


def _write(
    analysis: _Analysis,
    verb: str,
    arg: _Arg,
    state: _State,
    *,
    follow: bool = True,
    recursive: bool = False,
) -> None:
    if arg.text == "" and not arg.opaque:
        return
    path = _target(arg, state)
    if path is None:
        if _first_at_root(analysis, arg, state):
            rooted = _at_root(analysis, state)
            _write(analysis, verb, arg, rooted, follow=follow, recursive=recursive)
            if analysis.refusals[analysis.mark :]:
                return
        _scope(analysis, verb, arg, state, _FROZEN_ONLY, "change")
    else:
        _check_write(analysis, verb, path, follow=follow, recursive=recursive)


def _first_at_root(analysis: _Analysis, arg: _Arg, state: _State) -> bool:
    """Whether to judge a relative path after ``cd "$(…)"`` as if the folder were the root.

    That gives a precise refusal where there is one; when it finds nothing,
    :func:`_scope` still judges everything the unknown folder might hold.
    """
    if arg.opaque or state.cwd is not None:
        return False
    analysis.mark = len(analysis.refusals)
    return True


def _at_root(analysis: _Analysis, state: _State) -> _State:
    rooted = state.copy()
    rooted.cwd = analysis.root
    return rooted


def _check_write(
    analysis: _Analysis, verb: str, path: str, *, follow: bool, recursive: bool
) -> None:
    paths = [path]
    if follow and os.path.realpath(path) != path:
        paths.append(os.path.realpath(path))  # through a link: its target changes
    for candidate in paths:
        relative = _relative(analysis, candidate)
        if relative is None:
            continue
        if relative and analysis.spec.mode_of(relative) == FROZEN:
            analysis.refuse(relative, FROZEN, f'{verb} would change "{relative}"')
            return
        if recursive and os.path.isdir(candidate):
            for found, mode in _protected(analysis, relative, _FROZEN_ONLY):
                analysis.refuse(found, mode, f'{verb} would change "{found}"')
                return


def _scope(
    analysis: _Analysis, verb: str, arg: _Arg, state: _State, modes: tuple[str, ...], harm: str
) -> None:
    """A target only known when the command runs: judge the folder its known part names."""
    prefix = arg.text if arg.opaque else ""
    folder = prefix if prefix.endswith("/") else os.path.dirname(prefix)
    if os.path.isabs(folder):
        where = folder
    elif state.cwd is None:
        where = analysis.root  # somewhere unknown: it may be the root
    else:
        where = os.path.join(state.cwd, folder)
    relative = _relative(analysis, os.path.realpath(where))
    if relative is None:
        return
    if arg.opaque:
        what = f'a path known only when it runs ("{prefix}…")'
    else:
        what = f'"{arg.text}" in a folder known only when it runs'
    for found, mode in _protected(analysis, relative, modes):
        analysis.refuse(found, mode, f'{verb} of {what} could {harm} "{found}"')
        return


def _git_scope(
    analysis: _Analysis, verb: str, arg: _Arg, state: _State, modes: tuple[str, ...], harm: str
) -> None:
    """A git pathspec: everything protected that exists under it."""
    text = arg.text
    if text.startswith((":!", ":^")):
        return  # an exclusion
    if arg.opaque:
        _scope(analysis, verb, arg, state, modes, harm)
        return
    if text.startswith(":/"):
        where = os.path.join(analysis.root, text[2:])
    elif text.startswith(":"):
        where = analysis.root  # other pathspec magic: assume the whole tree
    else:
        head = re.split(r"[*?\[]", text, maxsplit=1)[0]
        if head != text:
            head = head if head.endswith("/") else os.path.dirname(head)
        if state.cwd is None and not os.path.isabs(head):
            where = analysis.root
        else:
            where = os.path.join(state.cwd or "/", head)
    relative = _relative(analysis, os.path.realpath(where))
    if relative is None:
        return
    for found, mode in _protected(analysis, relative, modes):
        analysis.refuse(found, mode, f'{verb} would {harm} "{found}"')
        return


# --- Protected paths on disk ---------------------------------------------------------------


def _protected(
    analysis: _Analysis, folder: str, modes: tuple[str, ...]
) -> Iterator[tuple[str, str]]:
    """Existing protected paths at or under ``folder`` (root-relative), lazily, with their mode."""
    spec = analysis.spec
    key = analysis.key(folder)
    seen: set[str] = set()
    for entry in spec.entries:
        if entry.mode not in modes:
            continue
        literal = entry.literal
        pattern = any(c in entry.text for c in _GLOB_CHARS)
        if key == "" or literal == key or literal.startswith(key + "/"):
            start = literal  # the entry lies inside the folder
        elif key.startswith(literal + "/") and (pattern or entry.covers(key)):
            start = key  # the folder lies inside the entry's reach
        elif pattern and literal == "":
            start = key
        else:
            continue
        actual = _actual(analysis, start)
        if actual is None:
            continue
        found_any = False
        for path in _walk(analysis, actual):
            if path in seen or not entry.covers(analysis.key(path)):
                continue
            seen.add(path)
            found_any = True
            yield path, spec.mode_of(path) or entry.mode
        if analysis.exhausted and not found_any:
            yield actual, entry.mode  # too much to look through: assume the worst


def _walk(analysis: _Analysis, start: str) -> Iterator[str]:
    """``start`` and every path under it (links not followed), within the walk budget."""
    full = os.path.join(analysis.root, start) if start else analysis.root
    try:
        is_dir = stat.S_ISDIR(os.lstat(full).st_mode)
    except OSError:
        return
    stack = [(start, is_dir)]
    while stack:
        path, is_dir = stack.pop()
        yield path
        if not is_dir:
            continue
        analysis.budget -= 1
        if analysis.budget < 0:
            analysis.exhausted = True
            return
        try:
            with os.scandir(os.path.join(analysis.root, path) if path else analysis.root) as it:
                children = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
        except OSError:
            continue
        analysis.budget -= len(children)
        for name, child_is_dir in reversed(children):
            stack.append((f"{path}/{name}" if path else name, child_is_dir))


def _actual(analysis: _Analysis, relative: str) -> str | None:
    """``relative`` as it exists on disk (its real case when folding), or None."""
    if relative == "" or os.path.lexists(os.path.join(analysis.root, relative)):
        return relative
    if not analysis.fold:
        return None
    found: list[str] = []
    for part in relative.split("/"):
        folder = os.path.join(analysis.root, *found)
        try:
            names = os.listdir(folder)
        except OSError:
            return None
        match = next((n for n in names if n.casefold() == part.casefold()), None)
        if match is None:
            return None
        found.append(match)
    return "/".join(found)


_SUDO_VALUES = frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user"})
_WRAPPERS: dict[str, _Wrapper] = {
    "sudo": _wrapped(_SUDO_VALUES),
    "doas": _wrapped(frozenset({"-u", "-C"})),
    "env": _env,
    "nice": _wrapped(frozenset({"-n", "--adjustment"})),
    "nohup": _wrapped(frozenset()),
    "setsid": _wrapped(frozenset()),
    "time": _wrapped(frozenset({"-f", "-o", "--format", "--output"})),
    "timeout": _wrapped(frozenset({"-s", "-k", "--signal", "--kill-after"}), skip=1),
    "stdbuf": _wrapped(frozenset({"-i", "-o", "-e"})),
    "ionice": _wrapped(frozenset({"-c", "-n", "-p", "-P", "-u"})),
    "chronic": _wrapped(frozenset()),
    "unbuffer": _wrapped(frozenset()),
    "busybox": _wrapped(frozenset()),
    "builtin": _wrapped(frozenset()),
    "exec": _wrapped(frozenset({"-a"})),
    "flock": _wrapped(frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), skip=1),
    "command": _command,
    "xargs": _xargs,
}
_HANDLERS: dict[str, _Handler] = {
    "rm": _rm,
    "trash": _rm,
    "trash-put": _rm,
    "srm": _rm,
    "shred": _rm,
    "unlink": _rm,
    "rmdir": _rmdir,
    "mv": _move,
    "cp": _move,
    "ln": _move,
    "install": _move,
    "rsync": _rsync,
    "truncate": _change,
    "tee": _change,
    "touch": _change,
    "dd": _change,
    "chmod": _change,
    "chown": _change,
    "chgrp": _change,
    "sed": _in_place,
    "perl": _in_place,
    "ruby": _in_place,
    "find": _find,
    "git": _git,
    "sh": _shell,
    "bash": _shell,
    "zsh": _shell,
    "dash": _shell,
    "ksh": _shell,
    "eval": _eval,
    "watch": _watch,
    "cd": _cd,
    "pushd": _cd,
    "popd": _cd,
    "export": _declare,
    "declare": _declare,
    "typeset": _declare,
    "local": _declare,
    "readonly": _declare,
    "unset": _declare,
    "read": _declare,
}
_GIT: dict[str, Callable[[_Analysis, str, list[_Arg], _State], None]] = {
    "clean": _git_clean,
    "rm": _git_rm,
    "mv": lambda analysis, verb, argv, state: _move(analysis, verb, argv, state, []),
    "checkout": _git_checkout,
    "restore": _git_restore,
    "reset": _git_reset,
    "switch": _git_switch,
    "stash": _git_stash,
}
