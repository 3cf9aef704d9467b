"""Word expansion: the arguments a parsed word becomes, against the real tree.

As bash does it, in its order: ``{a,b}`` braces, ``~`` and ``~user``,
``$VAR`` (from assignments earlier in the command, then the environment; a
``for`` loop's variable gives the word once per value), splitting of unquoted
variables on blanks, and globs (``*`` skips dotfiles, as in bash) matched
against the files that exist. What is known only at run time (a command
substitution, an unset variable, ``$@``, …) makes an opaque argument that
keeps the known text before it; so does a glob matching more than 256 paths.
A word makes at most 256 arguments.

The substitutions inside a word are analysed by the evaluator (:mod:`._evaluate`)
before it expands the word here.

This runs on every tool call of an agent: it imports only :mod:`itertools`,
:mod:`os`, :mod:`re` and its sibling modules (:mod:`glob` when a word globs).
"""

from __future__ import annotations

import itertools
import os
import re

from ._parse import is_digits
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._parse import Word
    from ._state import Analysis, State

_MAX_WORDS = 256  # fields one word may expand to (braces, loops)
GLOB_CHARS = "*?["

# Flags of expanded characters: unquoted literal, quoted, from an unquoted variable
# (split on blanks and globbed, but not brace-expanded), and an unknown stretch.
_LIT, _QUOTED, _SPLIT, _UNKNOWN = 0, 1, 2, 3


def _lookup(analysis: Analysis, state: State, name: str) -> str | tuple[str, ...] | None:
    """A parameter's value: a for loop's values as a tuple, None when unknown."""
    if is_digits(name):
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


def expand_word(analysis: Analysis, word: Word, state: State, *, split: bool = True) -> list[Arg]:
    """The arguments a word becomes.

    ``split``: brace-expanded, split into fields and globbed, as a command's
    words are; not an assignment's value or a redirection's target.
    """
    loops: list[tuple[str, tuple[str, ...]]] = []
    for part in word.parts:
        if part.kind in ("var", "qvar"):
            value = _lookup(analysis, state, part.text)
            if isinstance(value, tuple) and all(name != part.text for name, _ in loops):
                loops.append((part.text, value))
    # A for loop's variable: the word once per value (its body runs once per value).
    bindings: list[dict[str, str]] = [{}]
    for name, values in loops:
        bindings = [{**b, name: v} for b in bindings for v in values][:_MAX_WORDS]
    out: list[Arg] = []
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
        if not analysis.spend(len(chars)):
            break  # the command is refused: too much to analyse
        for field in _braces(analysis, chars) if split else [chars]:
            out.extend(_finish(analysis, _tilde(analysis, field), state, split=split))
    return out[:_MAX_WORDS]


def _braces(analysis: Analysis, chars: list[tuple[str, int]]) -> list[list[tuple[str, int]]]:
    """Brace expansion (``a{b,c}`` → ``ab ac``), at most _MAX_WORDS words.

    A word that would make more is opaque from its first brace on: its
    arguments are known only when it runs (as a glob matching too many).
    """
    count, first = _brace_count(chars)
    if count == 1:
        return [chars]
    if count > _MAX_WORDS or not analysis.spend(count * len(chars)):
        return [[*chars[:first], ("", _UNKNOWN)]]
    done: list[list[tuple[str, int]]] = []
    todo = [chars]
    while todo and len(done) + len(todo) <= _MAX_WORDS:
        alternatives = _brace_group(todo[0])
        if alternatives is None:
            done.append(todo.pop(0))
        else:
            todo[:1] = alternatives
    return (done + todo)[:_MAX_WORDS]


def _brace_count(chars: list[tuple[str, int]]) -> tuple[int, int]:
    """At least as many words as braces make of ``chars`` (past _MAX_WORDS: some more),
    and where the first brace group opens; one pass."""
    opened: list[tuple[int, int]] = []  # (where, commas) of each group still open
    count, first = 1, len(chars)
    for index, (char, flag) in enumerate(chars):
        if flag != _LIT:
            continue
        if char == "{":
            opened.append((index, 0))
        elif char == "," and opened:
            opened[-1] = (opened[-1][0], opened[-1][1] + 1)
        elif char == "}" and opened:
            where, commas = opened.pop()
            if commas:
                # Nested groups multiply here where bash adds: an overestimate, the safe side.
                count *= commas + 1
                first = min(first, where)
                if count > _MAX_WORDS:
                    return count, first
    return count, first


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


def _tilde(analysis: Analysis, chars: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``~`` or ``~user`` at the start of a word, made the home folder."""
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
    analysis: Analysis, chars: list[tuple[str, int]], state: State, *, split: bool
) -> list[Arg]:
    """One brace-expanded word split into fields, and each field globbed."""
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
    out: list[Arg] = []
    for field in fields:
        unknown = next((i for i, (_, flag) in enumerate(field) if flag == _UNKNOWN), None)
        text = "".join(c for c, _ in field)
        if unknown is not None:
            out.append(Arg("".join(c for c, _ in field[:unknown]), opaque=True))
            continue
        globbing = split and any(c in GLOB_CHARS and f in (_LIT, _SPLIT) for c, f in field)
        matches: list[str] = []
        if globbing and (os.path.isabs(text) or state.cwd is not None):
            import glob  # here: glob and its contextlib cost a hook more than most commands

            pattern = "".join(
                glob.escape(c) if f == _QUOTED and c in GLOB_CHARS else c for c, f in field
            )
            root_dir = None if os.path.isabs(pattern) else state.cwd
            matches = list(itertools.islice(glob.iglob(pattern, root_dir=root_dir), _MAX_WORDS + 1))
            if len(matches) > _MAX_WORDS:
                # Too many to check one by one: judge the folder the pattern starts from.
                head = re.split(r"[*?\[]", text, maxsplit=1)[0]
                out.append(Arg(head, opaque=True))
                continue
        out.extend([Arg(m) for m in sorted(matches)] or [Arg(text)])
    return out
