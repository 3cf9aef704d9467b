"""What ``find`` reaches: the protected paths its ``-delete`` and ``-exec`` run over.

``-delete`` and ``-exec``/``-execdir``/``-ok`` run over the protected paths
under its start folders that its ``-name``/``-iname``/``-path``/``-type``/
``-maxdepth``/``-mindepth`` tests let through (or whose folder they let
through, for ``-exec rm -r {}``); any other test makes it consider every path.
``-fprint`` and its kin change the file they name. The evaluator
(:mod:`._evaluate`) runs each ``-exec`` command over the paths found here, and
reads ``find … | xargs CMD`` as ``find … -exec CMD``.

This runs on every tool call of an agent: it imports only :mod:`fnmatch`,
:mod:`os`, :mod:`stat` and its sibling modules.
"""

from __future__ import annotations

import fnmatch
import os
import stat

from ._harm import ALL, check_unknown, check_write, protected_paths, root_relative
from ._parse import is_digits
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._state import Analysis, State


def find_execs(
    analysis: Analysis, argv: list[Arg], state: State
) -> Iterator[tuple[list[Arg], list[str]]]:
    """Judge ``find``'s own harm (``-delete``, ``-fprint``); yield its ``-exec`` commands.

    Each comes once per start folder, with the paths (as ``find`` prints
    them) its ``{}`` would stand for: the protected ones it reaches under a
    start inside the root, the start itself for one outside it (whatever
    lies under it is outside too), none for one known only at run time. Its
    fixed arguments are for the caller to judge wherever ``find`` starts.
    """
    index = 0
    while index < len(argv) and argv[index].text in ("-H", "-L", "-P"):
        index += 1
    starts: list[Arg] = []
    while index < len(argv) and (
        argv[index].opaque or not argv[index].text.startswith(("-", "(", "!", ","))
    ):
        starts.append(argv[index])
        index += 1
    tests: list[tuple[str, str]] = []
    simple = True
    delete = False
    commands: list[list[Arg]] = []
    while index < len(argv):
        text = argv[index].text
        value = argv[index + 1] if index + 1 < len(argv) else Arg("")
        if text == "-delete":
            delete = True
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(argv) and argv[end].text not in (";", "+"):
                end += 1
            commands.append(argv[index + 1 : end])
            index = end
        elif text in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            check_write(analysis, f"find {text}", value, state)
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
    for start in starts or [Arg(".")]:
        if start.opaque or (state.cwd is None and not os.path.isabs(start.text)):
            check_unknown(analysis, "find -delete/-exec", start, state, ALL, "delete")
            for command in commands:
                yield command, []
            continue
        top = os.path.realpath(os.path.join(state.cwd or "/", start.text))
        scope = root_relative(analysis, top)
        if scope is None:
            for command in commands:
                yield command, [start.text]
            continue
        found = _find_candidates(analysis, start.text, top, scope, tests if simple else [], delete)
        for command in commands:
            yield command, found


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
    analysis: Analysis,
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
    for found, mode in protected_paths(analysis, scope, ALL):
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
        if path not in candidates and os.path.isdir(path) and not os.path.islink(path):
            # A protected folder stands for all it holds, which find reaches too.
            inside = _first_inside(analysis, tests, shown, top, path, len(steps))
            if inside is not None:
                printed, held = inside
                if delete and not refused:
                    what = f'"{found}/{held}"' if held else f'what "{found}" holds'
                    analysis.refuse(found, mode, f"find -delete would delete {what}")
                    refused = True
                candidates[printed] = None
        if len(candidates) > 64:
            break
    return list(candidates)


def _first_inside(
    analysis: Analysis, tests: list[tuple[str, str]], shown: str, top: str, folder: str, depth: int
) -> tuple[str, str] | None:
    """The first path inside ``folder`` that find's tests let through: (as printed, as held).

    Within the walk budget; past it, the worst is assumed (``held`` is then "").
    """
    stack = [(folder, depth)]
    while stack:
        current, level = stack.pop()
        analysis.budget -= 1
        if analysis.budget < 0:
            analysis.exhausted = True
            return shown, ""
        try:
            with os.scandir(current) as it:
                children = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
        except OSError:
            continue
        analysis.budget -= len(children)
        for name, is_dir in children:
            path = os.path.join(current, name)
            printed = shown.rstrip("/") + path[len(top) :]
            if _find_matches(tests, printed, level + 1, path):
                return printed, path[len(folder) + 1 :]
            if is_dir:
                stack.append((path, level + 1))
    return None


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
            limit = int(value) if is_digits(value) else None
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
