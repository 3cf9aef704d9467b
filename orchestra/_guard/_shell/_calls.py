"""The calls in a program's text that delete, change or run: judged by what they are given.

A program an interpreter runs (:mod:`._interpreters`) is judged first by the
paths its strings name (:mod:`._mentions`). That misses a path the program
builds (``"forge" + ".toml"``, ``os.path.join("specs", name)``,
``sys.argv[1]``) and the root itself (``shutil.rmtree(".")``). So the calls
that can harm a file are read too, in the languages' everyday spellings:

- **deleting**: ``shutil.rmtree``, ``os.remove``/``unlink``/``rmdir``,
  ``fs.rmSync``/``unlinkSync``, ``FileUtils.rm_rf``, ``File.delete``, Perl's
  ``unlink``/``rmtree``/``remove_tree``, PHP's ``unlink``, …;
- **changing**: ``open(…, "w")`` (any writing mode), ``os.rename``/``replace``,
  ``shutil.move``/``copy…``, ``fs.writeFileSync``/``renameSync``,
  ``File.write``, ``file_put_contents``, ``Path(…).write_text()``, …;
- **running a command**: ``os.system``, ``subprocess.…``, ``execSync``,
  ``system``, …: a literal command line (or a list of literal words) is
  analysed as a shell command.

A call given a literal path is judged like the shell verb it stands for
(``shutil.rmtree(".")`` deletes the root and all it holds). A call whose path
is known only when the program runs is judged by the folder its known prefix
names — the working folder when nothing is known — and refused when that
folder holds anything protected: code the guard cannot resolve, able to
delete or change a protected path, does not run. A program with no such call
(``print(1)``) is not affected, nor a script file (``python -m pytest``).

This is a reading of the text, not of the language: a call under another name
(``from os import remove as r``), or code built at run time (``exec``,
``eval``), is not seen.

This runs on every tool call of an agent that runs an interpreter: it imports
only :mod:`os`, :mod:`re`, :mod:`shlex` (for a command given as a list) and its sibling
modules.
"""

from __future__ import annotations

import os
import re

from ._harm import ALL, FROZEN_ONLY, PATH_WORK, check_delete, check_unknown, check_write
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis, State

_MAX_ARGUMENTS = 400
"""How far past a call's name its arguments are read (a longer argument list is unknown)."""

# Each name stands for what its call does with which argument.
_RECURSIVE_DELETES = r"rmtree|remove_tree|rm_rf|rm_r|remove_dir|remove_entry(?:_secure)?|rmSync|rm"
_DELETES = r"os\.remove|unlink(?:Sync)?|rmdir(?:Sync)?|removedirs|rm_f|File\.delete|Dir\.delete"
_MOVES = r"os\.rename|os\.replace|shutil\.move|renameSync|(?<!\.)rename|FileUtils\.mv|File\.rename"
_COPIES = r"shutil\.copy\w*|copyFile(?:Sync)?|cpSync|FileUtils\.cp\w*|(?<!\.)copy"
_WRITES = (
    r"(?:write|append)File(?:Sync)?|truncate(?:Sync)?|os\.truncate|File\.write|"
    r"file_put_contents|write_text|write_bytes|touch"
)
_SPAWNS = (
    r"os\.system|os\.popen|os\.exec\w*|os\.spawn\w*|subprocess\.\w+|exec(?:File)?Sync|"
    r"spawnSync|system|popen|shell_exec|passthru"
)
_CALL = re.compile(
    rf"(?<![\w$])(?:(?P<rdelete>{_RECURSIVE_DELETES})|(?P<delete>{_DELETES})|"
    rf"(?P<move>{_MOVES})|(?P<copy>{_COPIES})|(?P<write>{_WRITES})|(?P<spawn>{_SPAWNS})|"
    r"(?P<open>open))(?![\w$])(?:[ \t]*(?P<paren>\()|[ \t]+(?=[\"'$@]))[ \t]*"
)
_LITERAL = re.compile(r"'([^'\n\\]*)'|\"([^\"\n\\]*)\"")
# os.path.join("specs", name) and Path("specs") / name: a folder, when its literal is whole.
_JOINED = re.compile(
    r"(?:(?:os\.)?path\.join|Path)\(\s*(?:'([^'\n]*)'|\"([^\"\n]*)\")(?P<whole>\s*[,)])?"
)
_RECEIVER = re.compile(r"Path\(\s*(?:'([^'\n]*)'|\"([^\"\n]*)\")\s*\)\s*\.\s*$")
_MODE = re.compile(r"[rwxabtU+]+")
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def judge_calls(analysis: Analysis, verb: str, text: str, state: State) -> None:
    """Judge each call in ``text`` (a program ``verb`` runs) that can delete, change or run."""
    judged: set[tuple[bool, str]] = set()  # unknown paths judged: once per folder and harm
    for match in _CALL.finditer(text):
        kind = match.lastgroup if match.lastgroup != "paren" else _kind(match)
        arguments, end = _arguments(text, match.end(), bool(match.group("paren")))
        if not analysis.spend(end - match.start()):
            return
        name = match.group(kind or "open")
        where = f"{verb} calls {name}()"
        if kind == "open":
            if _writes(arguments):
                _path(analysis, where, arguments, 0, state, judged, delete=False, recursive=False)
        elif kind == "spawn":
            if arguments:  # platform.system() runs nothing
                _spawn(analysis, where, arguments, state)
        elif kind == "move":
            _path(analysis, where, arguments, 0, state, judged, delete=True, recursive=True)
            _path(analysis, where, arguments, 1, state, judged, delete=False, recursive=True)
        elif kind == "copy":
            _path(analysis, where, arguments, 1, state, judged, delete=False, recursive=True)
        else:
            if not arguments and text[match.start() - 1 : match.start()] == ".":
                if name == "truncate":
                    continue  # a file object's: the file was opened, and judged, before
                # A method: Path("build").unlink(); its path is the receiver.
                start = max(0, match.start() - _MAX_ARGUMENTS)
                receiver = _RECEIVER.search(text, start, match.start())
                arguments = [f'"{_group(receiver)}"'] if receiver else []
            delete, recursive = kind != "write", kind == "rdelete"
            _path(analysis, where, arguments, 0, state, judged, delete=delete, recursive=recursive)


def _kind(match: re.Match[str]) -> str | None:
    return next((k for k, v in match.groupdict().items() if v and k != "paren"), None)


def _group(match: re.Match[str]) -> str:
    return next((g for g in match.groups() if g is not None), "")


def _arguments(text: str, start: int, parenthesised: bool) -> tuple[list[str], int]:
    """A call's arguments as source texts, split at its top-level commas (within a bound),
    and where reading them stopped.

    Without parentheses (Perl's ``unlink "x";``) they run to the end of the statement.
    """
    arguments: list[str] = []
    stack: list[str] = []
    quote = ""
    begin = index = start
    end = min(len(text), start + _MAX_ARGUMENTS)
    while index < end:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char in _CLOSING:
            stack.append(_CLOSING[char])
        elif stack and char == stack[-1]:
            stack.pop()
        elif not stack and (char == "," or char in (")" if parenthesised else ";\n)}")):
            arguments.append(text[begin:index].strip())
            if char != ",":
                return [a for a in arguments if a], index
            begin = index + 1
        index += 1
    tail = text[begin:index].strip()
    if index < len(text):
        tail = "\0"  # past the bound: an argument not read
    return [a for a in [*arguments, tail] if a], index


def _literal(argument: str) -> str | None:
    """The string a literal argument is, or None when it is anything else."""
    match = _LITERAL.fullmatch(argument)
    return None if match is None else _group(match)


def _prefix(argument: str) -> str:
    """What an argument known only when it runs is known to start with."""
    match = _LITERAL.match(argument)
    if match is not None:
        return _group(match)  # "forge" + ".toml"
    joined = _JOINED.match(argument)
    if joined is None:
        return ""
    folder = joined.group(1) if joined.group(1) is not None else joined.group(2)
    return folder.rstrip("/") + "/" if joined.group("whole") else folder


def _path(
    analysis: Analysis,
    where: str,
    arguments: list[str],
    position: int,
    state: State,
    judged: set[tuple[bool, str]],
    *,
    delete: bool,
    recursive: bool,
) -> None:
    argument = arguments[position] if position < len(arguments) else ""
    literal = _literal(argument)
    if literal is not None:
        if delete:
            check_delete(analysis, where, Arg(literal), state, recursive=recursive)
        else:
            check_write(analysis, where, Arg(literal), state, recursive=recursive)
        return
    modes, harm = (ALL, "delete") if delete else (FROZEN_ONLY, "change")
    prefix = _prefix(argument)
    folder = prefix if prefix.endswith("/") else os.path.dirname(prefix)
    if (delete, folder) in judged or not analysis.spend(PATH_WORK):
        return
    judged.add((delete, folder))  # what check_unknown judges is the folder
    check_unknown(analysis, where, Arg(prefix, opaque=True), state, modes, harm)


def _writes(arguments: list[str]) -> bool:
    """Whether ``open(path, mode…)`` opens for writing (a mode known only when it runs may)."""
    for argument in arguments[1:]:
        value = argument.partition("=")[2].strip() if argument.startswith("mode") else argument
        literal = _literal(value)
        if literal is not None and _MODE.fullmatch(literal):
            return any(letter in literal for letter in "wax+")
        if literal is None and argument.startswith("mode"):
            return True
    return len(arguments) > 1 and _literal(arguments[1]) is None and "=" not in arguments[1]


def _spawn(analysis: Analysis, where: str, arguments: list[str], state: State) -> None:
    """A command the program runs: a literal one is analysed, any other is unknown."""
    first = arguments[0] if arguments else ""
    literal = _literal(first)
    if literal is not None:
        analysis.commands.append((literal, state.copy()))  # the evaluator analyses it
        return
    if first.startswith("[") and first.endswith("]"):
        words = [a.strip() for a in first[1:-1].split(",") if a.strip()]
        literals = [_literal(word) for word in words]
        if words and all(word is not None for word in literals):
            import shlex

            command = shlex.join(w for w in literals if w is not None)
            analysis.commands.append((command, state.copy()))
            return
    if analysis.spend(PATH_WORK):
        check_unknown(analysis, where, Arg("", opaque=True), state, ALL, "delete or change")
