"""Whether deleting or changing a path would harm a protected one.

Harm is judged per path, after resolving symlinks and ``..`` against the real
root (case-insensitively when the spec folds case); paths outside the root are
none of our business, a folder above the root stands for the root:

- **Deleting** harms an ``exist`` or ``frozen`` path that exists: the path
  itself, or — for a recursive delete of a real folder — anything protected
  inside it. Removing a symlink removes the link only; a trailing ``/``
  follows it.
- **Changing** harms a ``frozen`` path, existing or not (creating one is a
  change too), and, for a recursive change of a folder, any frozen path inside
  it. The same change to an ``exist`` path is an edit, which is allowed.
- **Unknowns** are judged by the folder they could name: a path known only
  when the command runs (``rm -rf "$(…)"``, an unset ``$VAR``, ``xargs rm``'s
  arguments, a glob matching too many paths) or a relative path after ``cd
  "$(…)"`` is refused when the folder of the known prefix (the working folder;
  after ``cd "$(…)"`` the root, first as the literal path, then as anywhere in
  it) holds anything protected. A git pathspec is judged the same way, by
  everything protected under it.

Finding what is protected under a folder walks the real tree, within a budget
per command; past it, the worst is assumed. Each path judged counts against
the analysis's work limit too (:data:`PATH_WORK`): a command naming thousands
of paths is refused rather than checked one by one.

This runs on every tool call of an agent: it imports only :mod:`os`,
:mod:`re`, :mod:`stat`, its sibling modules and :mod:`.._spec`.
"""

from __future__ import annotations

import os
import re
import stat

from ..._protect import EXIST, FROZEN
from ._words import GLOB_CHARS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..._protect import Entry
    from ._state import Analysis, Arg, State

ALL = (EXIST, FROZEN)
FROZEN_ONLY = (FROZEN,)
PATH_WORK = 32
"""What judging one path counts against the analysis's work limit (resolving it and
matching it against the spec cost about as much as reading that many characters)."""


def lexical_target(full: str) -> str:
    """An absolute path with its folder's links resolved and its last component kept."""
    head, tail = os.path.split(full)
    if tail in ("", ".", ".."):
        return os.path.realpath(full)  # a trailing / (or . or ..) follows a link
    return os.path.join(os.path.realpath(head), tail)


def _target(arg: Arg, state: State) -> str | None:
    if arg.opaque or (state.cwd is None and not os.path.isabs(arg.text)):
        return None
    return lexical_target(os.path.join(state.cwd or "/", arg.text))


def root_relative(analysis: Analysis, path: str) -> str | None:
    """Root-relative form of an absolute path: ``""`` for the root or above it, None outside."""
    key = analysis.key(path)
    if key == analysis.root_key:
        return ""
    if key.startswith(analysis.prefix):
        return path[len(analysis.prefix) :]
    if analysis.root_key.startswith(key.rstrip("/") + "/"):
        return ""  # a folder above the root holds all of it
    return None


def check_delete(analysis: Analysis, verb: str, arg: Arg, state: State, *, recursive: bool) -> None:
    """Judge ``verb`` deleting ``arg`` (``recursive``: and all a folder holds)."""
    if (arg.text == "" and not arg.opaque) or not analysis.spend(PATH_WORK):
        return
    path = _target(arg, state)
    if path is None:
        if _first_at_root(analysis, arg, state):
            check_delete(analysis, verb, arg, _at_root(analysis, state), recursive=recursive)
            if analysis.refusals[analysis.mark :]:
                return
        check_unknown(analysis, verb, arg, state, ALL, "delete")
        return
    relative = root_relative(analysis, path)
    if relative is None:
        return
    entry = analysis.spec.entry_for(relative) if relative else None
    if entry is not None and _actual(analysis, relative) is not None:
        analysis.refuse(relative, entry.mode, f'{verb} would delete "{relative}"')
    elif recursive and os.path.isdir(path) and not os.path.islink(path):
        for found, mode in protected_paths(analysis, relative, ALL):
            within = f'inside "{arg.text}"'
            analysis.refuse(found, mode, f'{verb} would delete "{found}" {within}')


def check_write(
    analysis: Analysis,
    verb: str,
    arg: Arg,
    state: State,
    *,
    follow: bool = True,
    recursive: bool = False,
) -> None:
    """Judge ``verb`` changing ``arg`` (``follow``: through a link; ``recursive``: a folder)."""
    if (arg.text == "" and not arg.opaque) or not analysis.spend(PATH_WORK):
        return
    path = _target(arg, state)
    if path is None:
        if _first_at_root(analysis, arg, state):
            rooted = _at_root(analysis, state)
            check_write(analysis, verb, arg, rooted, follow=follow, recursive=recursive)
            if analysis.refusals[analysis.mark :]:
                return
        check_unknown(analysis, verb, arg, state, FROZEN_ONLY, "change")
    else:
        check_path_write(analysis, verb, path, follow=follow, recursive=recursive)


def _first_at_root(analysis: Analysis, arg: Arg, state: State) -> bool:
    """Whether to judge a relative path after ``cd "$(…)"`` as if the folder were the root.

    That gives a precise refusal where there is one; when it finds nothing,
    :func:`check_unknown` still judges everything the unknown folder might hold.
    """
    if arg.opaque or state.cwd is not None:
        return False
    analysis.mark = len(analysis.refusals)
    return True


def _at_root(analysis: Analysis, state: State) -> State:
    rooted = state.copy()
    rooted.cwd = analysis.root
    return rooted


def check_path_write(
    analysis: Analysis, verb: str, path: str, *, follow: bool, recursive: bool
) -> None:
    """Judge ``verb`` changing the absolute ``path`` (see :func:`check_write`)."""
    paths = [path]
    if follow and os.path.realpath(path) != path:
        paths.append(os.path.realpath(path))  # through a link: its target changes
    for candidate in paths:
        relative = root_relative(analysis, candidate)
        if relative is None:
            continue
        if relative and analysis.spec.mode_of(relative) == FROZEN:
            analysis.refuse(relative, FROZEN, f'{verb} would change "{relative}"')
            return
        if recursive and os.path.isdir(candidate):
            found_any = False
            for found, mode in protected_paths(analysis, relative, FROZEN_ONLY):
                analysis.refuse(found, mode, f'{verb} would change "{found}"')
                found_any = True
            if found_any:
                return


def check_unknown(
    analysis: Analysis, verb: str, arg: Arg, state: State, modes: tuple[str, ...], harm: str
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
    if arg.opaque:
        what = f'a path known only when it runs ("{prefix}…")'
    else:
        what = f'"{arg.text}" in a folder known only when it runs'
    _refuse_all_under(analysis, where, modes, f"{verb} of {what} could {harm}")


def check_pathspec(
    analysis: Analysis, verb: str, arg: Arg, state: State, modes: tuple[str, ...], harm: str
) -> None:
    """A git pathspec: everything protected that exists under it."""
    text = arg.text
    if text.startswith((":!", ":^")):
        return  # an exclusion
    if arg.opaque:
        check_unknown(analysis, verb, arg, state, modes, harm)
        return
    where = _pathspec_folder(analysis, text, state)
    _refuse_all_under(analysis, where, modes, f"{verb} would {harm}")


def pathspec_holds_protected(analysis: Analysis, arg: Arg, state: State) -> bool:
    """Whether anything protected exists under a known git pathspec (an exclusion holds none)."""
    if arg.text.startswith((":!", ":^")):
        return False
    where = _pathspec_folder(analysis, arg.text, state)
    relative = root_relative(analysis, os.path.realpath(where))
    return relative is not None and any(True for _ in protected_paths(analysis, relative, ALL))


def _pathspec_folder(analysis: Analysis, text: str, state: State) -> str:
    """The folder a git pathspec reaches into."""
    if text.startswith(":/"):
        return os.path.join(analysis.root, text[2:])
    if text.startswith(":"):
        return analysis.root  # other pathspec magic: assume the whole tree
    head = re.split(r"[*?\[]", text, maxsplit=1)[0]
    if head != text:
        head = head if head.endswith("/") else os.path.dirname(head)
    if state.cwd is None and not os.path.isabs(head):
        return analysis.root
    return os.path.join(state.cwd or "/", head)


def _refuse_all_under(analysis: Analysis, where: str, modes: tuple[str, ...], harm: str) -> None:
    """Refuse every protected path at or under the folder ``where``, for ``harm "path"``."""
    relative = root_relative(analysis, os.path.realpath(where))
    if relative is None:
        return
    for found, mode in protected_paths(analysis, relative, modes):
        analysis.refuse(found, mode, f'{harm} "{found}"')


# --- Protected paths on disk ---------------------------------------------------------------


def protected_paths(
    analysis: Analysis, folder: str, modes: tuple[str, ...]
) -> Iterator[tuple[str, str]]:
    """Existing protected paths at or under ``folder`` (root-relative), lazily, with their mode.

    A protected folder stands for what it holds: it is named, its contents are
    not (but a path inside it that another entry protects is named too).
    """
    spec = analysis.spec
    key = analysis.key(folder)
    seen: set[str] = set()
    for entry in spec.entries:
        if entry.mode not in modes:
            continue
        literal = entry.literal
        pattern = any(c in entry.text for c in GLOB_CHARS)
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
        for path in _walk(analysis, actual, entry):
            if path in seen:
                continue
            seen.add(path)
            found_any = True
            yield path, spec.mode_of(path) or entry.mode
        if analysis.exhausted and not found_any:
            yield actual, entry.mode  # too much to look through: assume the worst


def _walk(analysis: Analysis, start: str, entry: Entry) -> Iterator[str]:
    """The paths ``entry`` covers at or under ``start``, not below one it covers (links not
    followed), within the walk budget."""
    full = os.path.join(analysis.root, start) if start else analysis.root
    try:
        is_dir = stat.S_ISDIR(os.lstat(full).st_mode)
    except OSError:
        return
    stack = [(start, is_dir)]
    while stack:
        path, is_dir = stack.pop()
        if entry.covers(analysis.key(path)):
            yield path
            continue  # what it holds is covered too
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


def _actual(analysis: Analysis, relative: str) -> str | None:
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
