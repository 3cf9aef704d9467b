"""Reading a shell command into a tree, the way bash reads it.

Quotes (``'…'``, ``"…"``, ``$'…'``, backslashes), the operators ``&&``/``||``/
``;``/``|``/``&`` and newlines, ``( … )`` and ``{ …; }``, ``$( … )`` and
backticks (whose inner commands become trees too), process substitutions,
here-documents and redirections. Reserved words (``if``, ``while``, ``case``,
…) are dropped, so a compound command reads as the simple commands inside it;
``for NAME in WORDS`` is kept, for its body to see NAME bound. Arithmetic
(``(( … ))``, ``$(( … ))``) is also read as commands, since ``sh`` (dash)
runs ``((rm x))`` as two subshells and bash falls back to that when the text is
not arithmetic; a function definition's body is read as if it ran.

Parsing is lenient by design: an unterminated quote, substitution or group ends
at the end of the command, and a stray operator is skipped. bash would reject
such a line, but earlier lines of a script still run, so the analysis keeps
what the command most likely meant in view rather than allowing or refusing it
wholesale. Nesting deeper than 48 levels is not read: the parser marks itself
``too_deep`` and the evaluator refuses the command.

This runs on every tool call of an agent: it imports only :mod:`re`.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

    Node: TypeAlias = "Simple | Group | For"

MAX_NESTING = 48  # ( … ), { …; } and $( … ) inside one another
_SPACE = " \t"
_ENDS_WORD = " \t\n;&|()<>"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_REDIRECT = re.compile(r"(\d*)(&>>|&>|>>|>\||>&|<<<|<<-|<<|<>|<&|>|<)")
_EMPTY_PARENS = re.compile(r"\s*\(\s*\)")  # matched where it stands: never a slice to the end
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|]")
_DROPPED = frozenset(
    {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "time", "esac"}
)
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "0": "\0"}


class Part:
    """A piece of a word: ``lit`` (unquoted), ``q`` (quoted), ``var``/``qvar`` (a
    parameter, unquoted/quoted), ``sub`` (a command substitution: unknown text),
    ``psub`` (a process substitution: a /dev/fd path), ``opq`` (unknown text)."""

    __slots__ = ("body", "kind", "text")

    def __init__(self, kind: str, text: str = "", body: list[Item] | None = None) -> None:
        self.kind = kind
        self.text = text
        self.body = body


class Word:
    """A shell word, as the parts it is made of."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts

    def plain(self) -> str | None:
        """The word's text when it is all unquoted literal (a reserved word candidate)."""
        if all(part.kind == "lit" for part in self.parts):
            return "".join(part.text for part in self.parts)
        return None


class Simple:
    """A simple command: its words, redirections and here-documents."""

    __slots__ = ("docs", "redirects", "words")

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.redirects: list[tuple[str, Word]] = []
        self.docs: list[tuple[str, bool]] = []  # here-document bodies, expanded or not


class Group:
    """``( … )`` (a subshell) or ``{ …; }``: a command list, with its redirections."""

    __slots__ = ("body", "redirects", "subshell")

    def __init__(self, body: list[Item], subshell: bool) -> None:
        self.body = body
        self.subshell = subshell
        self.redirects: list[tuple[str, Word]] = []


class For:
    """``for NAME in WORDS``: the body (parsed as ordinary commands) sees NAME bound."""

    __slots__ = ("name", "words")

    def __init__(self, name: str, words: list[Word] | None) -> None:
        self.name = name
        self.words = words


class Item:
    """A command in a list, and the operator after it (``;``, ``&&``, ``|``, ``&``, …)."""

    __slots__ = ("node", "separator")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.separator = ""


class Parser:
    """Reads ``text`` into a command tree; :meth:`parse_list` reads the whole of it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.pending: list[tuple[str, bool, bool, Simple]] = []  # here-documents to read
        self.nesting = 0
        self.too_deep = False  # nesting past MAX_NESTING was left unread

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

    def parse_list(self, stop: str) -> list[Item]:
        """Commands up to ``stop`` (``)``, ``}`` or ``""`` for the end of the text)."""
        items: list[Item] = []
        self.nesting += 1
        try:
            if self.nesting > MAX_NESTING:
                self.too_deep = True  # absurdly deep: the command is refused
                self.pos = len(self.text)
                return items
            return self.read_list(stop, items)
        finally:
            self.nesting -= 1

    def nested(self, text: str, extra: int = 0) -> list[Item]:
        """``text`` (a backtick substitution, arithmetic) read as commands, one level deeper."""
        child = Parser(text)
        child.nesting = self.nesting + extra
        items = child.parse_list("")
        child.read_documents()
        self.too_deep = self.too_deep or child.too_deep
        return items

    def arithmetic(self, start: int) -> list[Item]:
        """Past ``(( … ))`` whose text starts at ``start``; that text read as commands.

        bash evaluates arithmetic there, but dash (``sh``) runs ``((rm x))`` as
        two subshells, and bash does when the text is not arithmetic: reading
        it as commands too is the safe side. Its own parser keeps an arithmetic
        ``<<`` from taking the lines after it as a here-document.
        """
        self.skip_parentheses(start, 2)
        return self.nested(self.text[start : self.pos], extra=1)

    def read_list(self, stop: str, items: list[Item]) -> list[Item]:
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
                items.append(Item(node))
                self.pos += self.pos == before  # never stall on input nothing reads

    def command(self, stop: str) -> Node | None:
        """One command; None at the ``}`` that closes the brace group being read."""
        if self.text.startswith("((", self.pos):
            group = Group(self.arithmetic(self.pos + 2), subshell=True)
            self.trailing_redirects(group.redirects)
            return group
        if self.peek() == "(":
            self.pos += 1
            group = Group(self.parse_list(")"), subshell=True)
            self.trailing_redirects(group.redirects)
            return group
        node = Simple()
        while True:
            self.blank()
            char = self.peek()
            if not char or char in "\n;|)" or (char == "&" and self.peek(1) != ">"):
                return node
            if char == "#":
                return node  # a comment
            if char == "(":
                if node.words and _EMPTY_PARENS.match(self.text, self.pos):
                    # name() { body; }: the body is analysed as if it ran.
                    self.pos = self.text.index(")", self.pos) + 1
                    return Simple()
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
                    group = Group(self.parse_list("}"), subshell=False)
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

    def for_header(self) -> Node:
        self.blank()
        if self.text.startswith("((", self.pos):
            return Group(self.arithmetic(self.pos + 2), subshell=True)
        name = self.word()
        words: list[Word] | None = None
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
        return For((name.plain() if name else None) or "", words)

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
            match = _EMPTY_PARENS.match(self.text, self.pos)
            if match:
                self.pos = match.end()

    def trailing_redirects(self, redirects: list[tuple[str, Word]]) -> None:
        holder = Simple()
        while True:
            self.blank()
            if not self.redirect(holder):
                break
        redirects.extend(holder.redirects)

    def redirect(self, node: Simple) -> bool:
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

    def word(self) -> Word | None:
        parts: list[Part] = []
        literal: list[str] = []

        def flush() -> None:
            if literal:
                parts.append(Part("lit", "".join(literal)))
                literal.clear()

        start = self.pos
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in _ENDS_WORD:
                if char in "<>" and self.pos == start and self.peek(1) == "(":
                    self.pos += 2
                    parts.append(Part("psub", "/dev/fd/63", self.parse_list(")")))
                    continue
                break
            if char == "\\":
                if self.peek(1) == "\n":
                    self.pos += 2
                    continue
                flush()
                parts.append(Part("q", self.peek(1) or "\\"))
                self.pos += 2
            elif char == "'":
                flush()
                end = self.text.find("'", self.pos + 1)
                end = len(self.text) if end == -1 else end
                parts.append(Part("q", self.text[self.pos + 1 : end]))
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
        return Word(parts) if self.pos > start else None

    def double_quoted(self, parts: list[Part], end: str) -> None:
        """Double-quoted text up to ``end`` (``""``: the end of the text, for a here-document)."""
        text: list[str] = []

        def flush() -> None:
            if text:
                parts.append(Part("q", "".join(text)))
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

    def backtick(self, parts: list[Part]) -> None:
        inner: list[str] = []
        index = self.pos + 1
        while index < len(self.text) and self.text[index] != "`":
            if self.text[index] == "\\" and self.text[index + 1 : index + 2] in ("`", "\\", "$"):
                index += 1
            inner.append(self.text[index])
            index += 1
        self.pos = index + 1
        parts.append(Part("sub", body=self.nested("".join(inner))))

    def dollar(self, parts: list[Part], *, quoted: bool) -> bool:
        """A ``$`` expansion at ``pos`` into ``parts``; False for a literal ``$``."""
        after = self.peek(1)
        if self.text.startswith("$((", self.pos):
            parts.append(Part("opq", body=self.arithmetic(self.pos + 3)))
        elif after == "(":
            self.pos += 2
            parts.append(Part("sub", body=self.parse_list(")")))
        elif after == "{":
            end = self.text.find("}", self.pos + 2)
            end = len(self.text) if end == -1 else end
            inner = self.text[self.pos + 2 : end]
            self.pos = end + 1
            if NAME.fullmatch(inner) or is_digits(inner):
                parts.append(Part("qvar" if quoted else "var", inner))
            else:
                parts.append(Part("opq"))
        elif after == "'" and not quoted:
            parts.append(Part("q", self.ansi_c()))
        elif after == '"' and not quoted:
            self.pos += 1  # $"…": a plain double-quoted string
            return True
        elif match := NAME.match(self.text, self.pos + 1):
            self.pos = match.end()
            parts.append(Part("qvar" if quoted else "var", match.group()))
        elif is_digits(after):
            self.pos += 2
            parts.append(Part("qvar" if quoted else "var", after))
        elif after and after in "@*#?$!-":
            self.pos += 2
            parts.append(Part("opq"))
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
        return re.sub(_ANSI_ESCAPE, _ansi_char, body, flags=re.DOTALL).partition("\0")[0]


# Compiled on first use (re caches it): few commands hold a $'…' word, and
# every hook would pay for compiling it at import.
_ANSI_ESCAPE = r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)"


def _ansi_char(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1:
        return chr(min(int(code[1:], 16), 0x10FFFF))
    if code[0] in "01234567":
        return chr(int(code, 8))
    if code[0] == "c" and len(code) > 1:
        return chr(ord(code[1]) & 0x1F)
    return _ANSI_C.get(code, code)


def is_digits(text: str) -> bool:
    """Whether ``text`` is ASCII digits (``str.isdigit`` alone also takes ``²``)."""
    return text.isascii() and text.isdigit()
