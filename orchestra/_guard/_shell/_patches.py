"""``patch`` and ``git apply``: they change the files their diff names.

A diff the guard can read — a here-document or here-string on stdin, or a
patch file that exists and is small (:data:`MAX_PATCH`) — is judged by the
files it names (its ``---``/``+++`` lines, less ``-p`` components): each is
changed, and one the diff deletes is deleted. A diff known only when it runs
(a pipe, a redirection from a file, a missing file) could name any file in
the working folder (``-d``/``--directory`` moves it): refused when that
folder holds a frozen path. ``patch FILE`` changes that file whatever the diff
says; ``--dry-run``, ``git apply --check``/``--stat``/``--cached`` change no
file in the tree.

This runs on every tool call of an agent that runs one of these: it imports
only :mod:`os` and its sibling modules.
"""

from __future__ import annotations

import os

from ._harm import FROZEN_ONLY, PATH_WORK, check_delete, check_unknown, check_write
from ._options import has_flag, option_value, parse_options
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis, Handler, State

MAX_PATCH = 1 << 20
"""The largest patch file (bytes) the guard reads to learn the files it names."""

_PATCH_VALUES = frozenset(
    {"-p", "-d", "--directory", "-i", "--input", "-o", "--output", "-r", "-B", "-D", "-F", "-z"}
    | {"-V", "-Y", "-g", "--strip"}
)
_GIT_APPLY_VALUES = frozenset({"-p", "--directory", "--exclude", "--include", "-C", "--whitespace"})


def patch(analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """``patch [OPTIONS] [FILE [PATCHFILE]]``, its diff on stdin, ``-i`` or the operand."""
    options, operands = parse_options(argv, _PATCH_VALUES)
    if has_flag(options, "", "--dry-run"):
        return
    output = option_value(options, "-o", "--output")
    if output is not None and output != "-":
        check_write(analysis, verb, Arg(output), state)
        return
    if operands:
        check_write(analysis, verb, operands[0], state)
        return
    source = option_value(options, "-i", "--input")
    strip = option_value(options, "-p", "--strip")
    folder = option_value(options, "-d", "--directory") or ""
    _judge_diff(analysis, verb, _diff(source, stdin, state), strip, folder, state)


def git_apply(
    analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]
) -> None:
    """``git apply [PATCH…]``: each patch (stdin when none) changes the files it names."""
    options, operands = parse_options(argv, _GIT_APPLY_VALUES)
    looks = ("--check", "--stat", "--numstat", "--summary", "--cached")
    if any(name in looks for name, _ in options):
        return
    strip = option_value(options, "-p")
    folder = option_value(options, "--directory") or ""
    if strip is None:
        strip = "1"  # git strips a/ and b/
    sources: list[Arg | None] = [*operands] if operands else [None]
    for source in sources:
        if source is not None and source.opaque:
            _judge_diff(analysis, verb, None, strip, folder, state)
            continue
        text = _diff(source.text if source else None, stdin, state)
        _judge_diff(analysis, verb, text, strip, folder, state)


def _diff(source: str | None, stdin: list[str], state: State) -> str | None:
    """The diff's text when the guard can read it, else None."""
    if source is None or source == "-":
        return "\n".join(stdin) if stdin else None
    if state.cwd is None and not os.path.isabs(source):
        return None
    path = os.path.join(state.cwd or "/", source)
    try:
        if os.path.getsize(path) > MAX_PATCH:
            return None
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _judge_diff(
    analysis: Analysis, verb: str, text: str | None, strip: str | None, folder: str, state: State
) -> None:
    if text is None:
        where = Arg(folder.rstrip("/") + "/" if folder else "", opaque=True)
        what = f"{verb} of a diff known only when it runs"
        check_unknown(analysis, what, where, state, FROZEN_ONLY, "change")
        return
    if not analysis.spend(len(text)):
        return
    previous: list[Arg] = []  # the files of the last "---" line
    for line in text.splitlines():
        if not line.startswith(("--- ", "+++ ")):
            continue
        name = line[4:].split("\t", 1)[0].strip()
        if name == "/dev/null":
            for target in previous if line.startswith("+++ ") else ():
                check_delete(analysis, verb, target, state, recursive=False)
            previous = []
            continue
        targets = [Arg(os.path.join(folder, n)) for n in _stripped(name, strip) if n]
        if not analysis.spend(PATH_WORK * len(targets)):
            return
        for target in targets:
            check_write(analysis, verb, target, state)
        previous = targets if line.startswith("--- ") else []


def _stripped(name: str, strip: str | None) -> list[str]:
    """``name`` less its first ``-p`` components; without ``-p``, both the whole name and
    its last component (``patch`` picks one by what exists)."""
    if strip is None:
        return list(dict.fromkeys((name, os.path.basename(name))))
    try:
        count = int(strip)
    except ValueError:
        return [name]
    parts = name.split("/")
    return ["/".join(parts[count:])] if count < len(parts) else []


PATCHES: dict[str, Handler] = {"patch": patch}
