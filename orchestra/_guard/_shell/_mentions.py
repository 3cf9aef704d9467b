"""The paths a program's text names, and those the guard cannot resolve.

An interpreter given its program on the command line or its stdin (``python
-c``, ``perl -e``, ``node -e``, a here-document) can delete or change any file,
and the guard does not run the program in its mind. What it can see is the
paths the program names: every quoted string in it (``'…'``, ``"…"``,
``\\`…\\```), and each word of a string holding blanks (``os.system("rm -rf
specs")``), is read as a path from the working folder. One that names a
protected path — a frozen one, or an existing one that must exist, or a
folder holding either — refuses the command. The root itself (``"."``) is not
a mention: ``sys.path.insert(0, ".")`` is everyday code. (The calls that
delete or change a path, the root or one the program builds, are
:mod:`._calls`'.)

A command whose name is known only when it runs (``$(echo rm) -f x``, an
unset ``$TOOL``) is judged the same way by its arguments: it could be any
command, so naming a protected path is enough.

This runs on every tool call of an agent that runs an interpreter: it imports
only :mod:`os`, :mod:`re` and its sibling modules.
"""

from __future__ import annotations

import os
import re

from ..._protect import FROZEN
from ._calls import judge_calls
from ._harm import (
    ALL,
    PATH_WORK,
    _actual,
    check_unknown,
    lexical_target,
    protected_paths,
    root_relative,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis, Arg, State

MAX_MENTIONS = 256
"""The strings one program may name that could be paths; past it the command is refused."""

_QUOTED = re.compile(r"'([^'\n]*)'|\"([^\"\n]*)\"|`([^`\n]*)`")


def judge_program(analysis: Analysis, verb: str, text: str, state: State) -> None:
    """Refuse ``text`` (a program ``verb`` runs) for each protected path it names."""
    strings: dict[str, None] = {}
    for match in _QUOTED.finditer(text):
        quoted = match.group(match.lastindex or 1)
        strings[quoted] = None
        if any(blank in quoted for blank in " \t"):
            strings.update(dict.fromkeys(quoted.split()))
    judge_texts(analysis, verb, list(strings), state)
    judge_calls(analysis, verb, text, state)


def judge_texts(analysis: Analysis, verb: str, texts: list[str], state: State) -> None:
    """Refuse for each of ``texts`` that, read as a path, names a protected one."""
    tops = _tops(analysis)
    candidates = [t for t in texts if t and (tops is None or _may_name(analysis, t, tops))]
    if len(candidates) > MAX_MENTIONS:
        analysis.refuse_command(
            f"{verb} names more than {MAX_MENTIONS} strings that could be paths, too many to check"
        )
        return
    for text in candidates:
        _judge(analysis, verb, text, state)


def judge_computed(analysis: Analysis, args: list[Arg], state: State) -> None:
    """A command whose name is known only when it runs: judged by the paths it is given."""
    known = f' ("{args[0].text}…")' if args[0].text else ""
    verb = f"a command known only when it runs{known}"
    for arg in args[1:]:
        if arg.opaque:
            check_unknown(analysis, verb, arg, state, ALL, "delete or change")
        elif not arg.text.startswith("-"):
            _judge(analysis, verb, arg.text, state)


def _tops(analysis: Analysis) -> frozenset[str] | None:
    """The first segment of every protected entry (None: an entry may match anywhere)."""
    tops = set()
    for entry in analysis.spec.entries:
        if not entry.literal:
            return None
        tops.add(entry.literal.split("/", 1)[0])
    return frozenset(tops)


def _may_name(analysis: Analysis, text: str, tops: frozenset[str]) -> bool:
    """A cheap first look: could ``text`` name anything protected at all?"""
    if text.startswith(("/", "~")) or ".." in text:
        return True  # from elsewhere: resolved by _judge
    key = analysis.key(text)  # the entries are casefolded too when the spec folds
    return any(top in key for top in tops)


def _judge(analysis: Analysis, verb: str, text: str, state: State) -> None:
    if not analysis.spend(PATH_WORK):
        return
    if text.startswith("~"):
        text = analysis.home + text[1:] if text == "~" or text.startswith("~/") else text
    folder = state.cwd if state.cwd is not None else analysis.root
    path = lexical_target(os.path.join(folder, text))
    relative = root_relative(analysis, path)
    if not relative:
        return  # outside the root, or the root itself (not a mention)
    entry = analysis.spec.entry_for(relative)
    if entry is not None:
        if entry.mode == FROZEN or _actual(analysis, relative) is not None:
            analysis.refuse(
                relative, entry.mode, f'{verb} names "{relative}", which it could delete or change'
            )
        return
    if os.path.isdir(path) and not os.path.islink(path):
        for found, mode in protected_paths(analysis, relative, ALL):
            analysis.refuse(found, mode, f'{verb} names "{text}", which holds "{found}"')
