"""Commands that run the command after them: ``sudo``, ``env``, ``xargs``, ….

A wrapper's rule strips its own options and returns the command it runs, for
the evaluator (:mod:`._evaluate`) to judge in its place: ``sudo``, ``doas``,
``env`` (whose ``-C`` moves the working folder and ``-S`` splits a string into
words), ``nice``, ``nohup``, ``timeout``, ``flock``, ``exec``, ``command``
(but not ``command -v``, which runs nothing), …. ``xargs CMD`` runs CMD with
arguments from stdin, which are unknown; fed by a ``find`` that only lists
(``find … | xargs rm``), it is read as ``find … -exec rm {} ;``.

This runs on every tool call of an agent: it imports only its sibling modules.
"""

from __future__ import annotations

from ._options import has_flag, option_value, parse_options
from ._parse import ASSIGNMENT
from ._state import Arg, cd_target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from ._state import Analysis, State

    # A wrapper's rule: the command it runs and the state it runs in, or None for none.
    Wrapper: TypeAlias = Callable[
        ["Analysis", list["Arg"], "State"], tuple[list["Arg"], "State"] | None
    ]


def _wrapped(with_value: frozenset[str], skip: int = 0) -> Wrapper:
    """A wrapper like ``nice -n 5 cmd``: options, ``skip`` more words, then the command."""

    def unwrap(analysis: Analysis, argv: list[Arg], state: State) -> tuple[list[Arg], State] | None:
        _, rest = parse_options(argv, with_value, first=True)
        return (rest[skip:], state) if len(rest) > skip else None

    return unwrap


def _env(analysis: Analysis, argv: list[Arg], state: State) -> tuple[list[Arg], State] | None:
    options, rest = parse_options(
        argv, frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), first=True
    )
    chdir = option_value(options, "-C", "--chdir")
    if chdir is not None:
        state = state.copy()
        state.cwd = cd_target(Arg(chdir), state)
    split = option_value(options, "-S", "--split-string")
    if split is not None:
        rest = [Arg(word) for word in split.split()] + rest
    while rest and not rest[0].opaque and ASSIGNMENT.match(rest[0].text):
        rest = rest[1:]
    return (rest, state) if rest else None


def _xargs(analysis: Analysis, argv: list[Arg], state: State) -> tuple[list[Arg], State] | None:
    """``xargs CMD ARGS``: CMD ARGS plus arguments from stdin, which are unknown.

    Fed by ``find`` (``find … | xargs rm``), it is ``find … -exec rm {} ;``.
    """
    with_value = frozenset(
        {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter"}
    )
    options, rest = parse_options(argv, with_value, first=True)
    replace = option_value(options, "-I", "--replace") or ("{}" if has_flag(options, "i") else None)
    if not rest:
        rest = [Arg("echo")]
    source = state.piped or []
    if _is_plain_find(source):
        if replace:
            tail = [Arg(a.text.replace(replace, "{}"), a.opaque) for a in rest]
        else:
            tail = [*rest, Arg("{}")]
        return [*source, Arg("-exec"), *tail, Arg(";")], state
    if replace:
        rest = [rest[0]] + [
            Arg(a.text.partition(replace)[0], opaque=True)
            if replace in a.text and not a.opaque
            else a
            for a in rest[1:]
        ]
    else:
        rest = [*rest, Arg("", opaque=True)]
    return rest, state


def _is_plain_find(argv: list[Arg]) -> bool:
    """A ``find`` that only lists what it finds."""
    if not argv or argv[0].opaque or argv[0].text.rsplit("/", 1)[-1] != "find":
        return False
    return not any(a.text.startswith(("-exec", "-ok", "-delete", "-fprint", "-fls")) for a in argv)


def _command(analysis: Analysis, argv: list[Arg], state: State) -> tuple[list[Arg], State] | None:
    options, rest = parse_options(argv, first=True)
    if has_flag(options, "vV"):
        return None  # command -v: a lookup, nothing runs
    return (rest, state) if rest else None


_SUDO_VALUES = frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user"})
WRAPPERS: dict[str, Wrapper] = {
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
