"""What the analysis of one shell command carries, and the builtins that change it.

An :class:`Analysis` holds what every part of one command is judged against
(the real root, the spec, the environment) and what it finds (the refusals).
A :class:`State` is what a command list carries from one command to the next:
the working folder, ``cd``'s stack and ``$OLDPWD``, and the variables set so
far. ``cd``/``pushd``/``popd`` move the working folder for the rest of the
list, and ``export``/``declare``/``unset``/… set its variables; inside
``( … )``, a pipeline or a background job the evaluator gives them a copy, so
nothing leaks out.

This runs on every tool call of an agent: it imports only :mod:`os` and
:mod:`._parse`.
"""

from __future__ import annotations

import os

from ._parse import NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypeAlias

    from ..._protect import ProtectSpec

    # A command's rule: (analysis, its name, its arguments, the state, its stdin texts).
    Handler: TypeAlias = Callable[["Analysis", str, list["Arg"], "State", list[str]], None]

_WALK_BUDGET = 20_000  # paths visited looking for protected ones, per command
WORK_LIMIT = 262_144
"""Characters read and expanded in all, nesting included, before a command is refused."""


class Refusal:
    """A protected path a command would harm.

    Attributes:
        path: the harmed path, relative to the root.
        mode: its protection, ``exist`` or ``frozen``.
        reason: one line for the agent or a human.
        rule: what protects it: ``exist``, ``frozen`` or ``Forge's own state``
            (Forge's files under ``.forge/``, frozen whatever the policy says).
    """

    __slots__ = ("mode", "path", "reason", "rule")

    def __init__(self, path: str, mode: str, reason: str, rule: str | None = None) -> None:
        self.path = path
        self.mode = mode
        self.reason = reason
        self.rule = rule or mode

    def __repr__(self) -> str:
        return f"Refusal({self.path!r}, {self.mode!r}, {self.reason!r})"


class Arg:
    """An expanded word: its text, or for an opaque one the known prefix of it."""

    __slots__ = ("opaque", "text")

    def __init__(self, text: str, opaque: bool = False) -> None:
        self.text = text
        self.opaque = opaque


class State:
    """What a command list carries from one command to the next."""

    __slots__ = (
        "aliases",
        "cwd",
        "oldpwd",
        "piped",
        "piped_text",
        "positional",
        "stack",
        "variables",
    )

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd  # None: unknown (after cd "$(…)")
        self.oldpwd: str | None = None
        self.stack: list[str | None] = []
        # None: set to something unknown; a tuple: a for loop's values.
        self.variables: dict[str, str | tuple[str, ...] | None] = {}
        self.positional: list[str | None] | None = None
        self.piped: list[Arg] | None = None  # the command writing into this one's stdin
        self.piped_text: list[str] | None = None  # what it writes there, when known
        self.aliases: dict[str, str | None] = {}  # alias NAME=TEXT: its text, unparsed

    def copy(self) -> State:
        twin = State(self.cwd)
        twin.aliases = dict(self.aliases)
        twin.oldpwd = self.oldpwd
        twin.stack = list(self.stack)
        twin.variables = dict(self.variables)
        twin.positional = self.positional
        return twin


class Analysis:
    """One command's analysis: what it is judged against, and the refusals found so far."""

    __slots__ = (
        "aliasing",
        "budget",
        "commands",
        "depth",
        "env",
        "exhausted",
        "fold",
        "gits",
        "home",
        "mark",
        "prefix",
        "refusals",
        "root",
        "root_key",
        "seen",
        "spec",
        "work",
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
        self.mark = 0  # refusals before a retry (see _harm._first_at_root)
        self.gits = 0  # git commands judged so far (see _git._git_clean)
        self.aliasing: frozenset[str] = frozenset()  # aliases being expanded (never again inside)
        # Command lines a program runs (os.system("…")), for the evaluator to analyse next.
        self.commands: list[tuple[str, State]] = []
        # Characters read or expanded so far, all nesting included: the analysis's cost,
        # bounded by WORK_LIMIT (past it the command is refused, see _evaluate).
        self.work = 0

    def key(self, path: str) -> str:
        return path.casefold() if self.fold else path

    def spend(self, work: int) -> bool:
        """Count ``work`` (characters read or expanded); False, refusing, past the limit.

        Each character of a command is read once and expanded about once; what
        nesting reads again (``sh -c``, ``eval``, aliases) and what braces and
        ``for`` loops multiply is counted too, so that no command costs more
        than a constant times :data:`WORK_LIMIT`.
        """
        self.work += work
        if self.work <= WORK_LIMIT:
            return True
        self.refuse_command(
            f"the command is too much to analyse (more than {WORK_LIMIT} characters read "
            "and expanded, nesting included)"
        )
        return False

    def refuse(self, path: str, mode: str, harm: str) -> None:
        """Record a refusal: ``harm`` says what would happen to ``path``."""
        entry = self.spec.entry_for(path)
        rule = entry.rule if entry is not None and entry.mode == mode else mode
        reason = f"{harm} (protected: {mode if rule == mode else f'{mode}, {rule}'})"
        if (path, reason) not in self.seen:
            self.seen.add((path, reason))
            self.refusals.append(Refusal(path, mode, reason, rule))

    def refuse_command(self, why: str) -> None:
        """Refuse the whole command, which cannot be analysed: ``why``.

        The refusal names the root (``.``), as frozen: anything could be harmed.
        """
        reason = f"{why}; refusing"
        if (".", reason) not in self.seen:
            self.seen.add((".", reason))
            self.refusals.append(Refusal(".", "frozen", reason))


def stdin_program(analysis: Analysis, verb: str, state: State, stdin: list[str]) -> list[str]:
    """The program ``verb`` (a shell, an interpreter) reads from stdin, as texts.

    A here-document's or here-string's, or what a pipe carries when it is
    known (``echo``, ``printf``, ``cat <<EOF``); from anything else the
    program is known only when it runs, and the command is refused.
    """
    texts = stdin or ([] if state.piped is None else state.piped_text)
    if texts is None:
        source = state.piped[0].text if state.piped and not state.piped[0].opaque else "a pipe"
        analysis.refuse_command(
            f"{verb} runs a program piped from {source}, known only when it runs"
        )
        return []
    return texts


def _cd(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
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
        target = cd_target(operands[0], state)
    if verb == "pushd":
        state.stack.append(state.cwd)
    state.oldpwd, state.cwd = state.cwd, target


def cd_target(arg: Arg, state: State) -> str | None:
    """The folder ``cd ARG`` goes to; None when it is known only at run time."""
    if arg.opaque:
        return None
    if os.path.isabs(arg.text):
        return os.path.normpath(arg.text)
    return None if state.cwd is None else os.path.normpath(os.path.join(state.cwd, arg.text))


def _declare(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``export``/``declare``/``local``/``readonly`` NAME=VALUE, ``unset``/``read`` NAME."""
    for arg in argv:
        name, equals, value = arg.text.partition("=")
        if not NAME.fullmatch(name):
            continue
        if verb in ("unset", "read"):
            state.variables[name] = None
        elif equals:
            state.variables[name] = None if arg.opaque else value


def _alias(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``alias NAME=TEXT`` (the text replaces NAME as a command word), ``unalias NAME``."""
    for arg in argv:
        name, equals, value = arg.text.partition("=")
        if verb == "unalias":
            state.aliases.pop(name, None)
        elif equals and name:
            state.aliases[name] = None if arg.opaque else value  # None: known when it runs


BUILTINS: dict[str, Handler] = {
    "alias": _alias,
    "unalias": _alias,
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
