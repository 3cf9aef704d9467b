"""The rules for git subcommands that delete files or discard changes.

- ``git rm`` deletes its paths; ``git mv`` is read as ``mv``.
- ``git clean`` (unless ``-n``/``--dry-run``) deletes untracked files (with
  ``-x`` ignored ones too, with ``-X`` only those; folders only with ``-d``),
  never tracked ones. When anything protected exists within its pathspecs (or
  the working folder), git itself is asked which files it would remove (``git
  clean -n`` with the same options and pathspecs): refused for the protected
  ones among them, and whenever git cannot answer. A pathspec or working folder
  known only at run time, or another git command earlier in the line (it may
  untrack files first), is judged by everything protected within reach.
- ``git reset --hard``, ``git checkout -f``, ``git switch
  --discard-changes`` and ``git stash -u``/``-a`` can revert or delete
  anything in the tree: refused when anything protected exists.
- ``git checkout [<tree>] -- <paths>`` and ``git restore <paths>`` discard
  changes: refused for frozen paths in scope, and for exist paths too where
  they can delete (``--no-overlay``, ``restore --source``).
- ``git apply`` changes the files its diff names (:mod:`._patches`).
- A branch switch without ``-f`` and plain ``git stash`` are allowed.

``-C`` and ``--work-tree`` move the working folder the paths are read from.

This runs on every tool call of an agent: it imports only :mod:`os` and its
sibling modules; only a ``git clean`` with something protected in reach
imports :mod:`orchestra._git` and runs git.
"""

from __future__ import annotations

import os

from ._harm import ALL, FROZEN_ONLY, check_delete, check_pathspec, pathspec_holds_protected
from ._options import has_flag, option_value, parse_options
from ._state import Arg, cd_target
from ._verbs import move
from ._words import GLOB_CHARS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ._state import Analysis, State


def git(analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """``git [-C DIR] SUBCOMMAND …``: the subcommand's rule, if it has one."""
    index = 0
    while index < len(argv) and not argv[index].opaque:
        text = argv[index].text
        if text in ("-C", "--work-tree") or text.startswith("--work-tree="):
            if "=" in text:
                where = Arg(text.partition("=")[2])
            else:
                index += 1
                where = argv[index] if index < len(argv) else Arg(".")
            state = state.copy()
            state.cwd = cd_target(where, state)
        elif text in ("-c", "--git-dir", "--namespace", "--exec-path"):
            index += 1
        elif not text.startswith("-"):
            break
        index += 1
    if index >= len(argv) or argv[index].opaque:
        return
    subcommand = argv[index].text
    handler = _GIT.get(subcommand)
    if subcommand == "apply":
        from ._patches import git_apply

        git_apply(analysis, "git apply", argv[index + 1 :], state, stdin)
    elif handler is not None:
        handler(analysis, "git " + subcommand, argv[index + 1 :], state)
    if subcommand not in _CANNOT_UNTRACK:
        analysis.gits += 1


# Subcommands that cannot make a tracked file untracked or change what is ignored.
_CANNOT_UNTRACK = frozenset(
    {"add", "status", "diff", "log", "show", "fetch", "grep", "blame", "commit", "rev-parse"}
)
_GIT_TIMEOUT = 30.0  # seconds for git clean -n; an agent waits on it
_ESCAPES = {ord(k): v for k, v in zip("abtnvfr", b"\a\b\t\n\v\f\r", strict=True)}


def _git_clean(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    options, paths = parse_options(argv, frozenset({"-e", "--exclude"}))
    if has_flag(options, "n", "--dry-run"):
        return
    specs = paths or [Arg(".")]
    if state.cwd is None or analysis.gits or any(p.opaque for p in specs):
        what = f"{verb} after another git command" if analysis.gits else verb
        for path in specs:
            check_pathspec(analysis, what, path, state, ALL, "delete")
        return
    if not any(pathspec_holds_protected(analysis, path, state) for path in specs):
        return  # nothing protected within reach: no need to ask git
    args = ["-c", "core.quotePath=false", "clean", "--dry-run"]
    for name, value in options:
        if name in ("-e", "--exclude"):
            args += ["-e", value]
        elif name in ("--force", "-d", "-x", "-X"):
            args.append(name)
        elif not name.startswith("--"):
            # -f twice also removes nested repositories; -q and -i do not matter here.
            args += [f"-{c}" for c in name[1:] if c in "fdxX"]
    args += ["--", *(p.text for p in paths)]  # a pathspec, even ".", implies -d
    removed = _ask_git(analysis, verb, state.cwd, args)
    for name in removed or ():
        folder = name.endswith("/")
        check_delete(analysis, verb, Arg(name.rstrip("/") or name), state, recursive=folder)


def _ask_git(analysis: Analysis, verb: str, cwd: str, args: list[str]) -> list[str] | None:
    """What ``git clean --dry-run`` says it would remove (relative to ``cwd``); None: refused."""
    from pathlib import Path

    from ..._git import run_git

    result = run_git(Path(cwd), *args, timeout=_GIT_TIMEOUT)
    if not result.ok:
        said = result.message().splitlines()[0]
        analysis.refuse_command(f"{verb}: git cannot say which files it would remove ({said})")
        return None
    removed = []
    for line in result.stdout.decode(errors="surrogateescape").splitlines():
        if line.startswith("Would remove "):
            removed.append(_unquote(line[len("Would remove ") :]))
    return removed


def _unquote(text: str) -> str:
    """A path as git prints it: C-quoted when it holds a quote, a backslash or a control."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text
    body = text[1:-1].encode(errors="surrogateescape")
    out = bytearray()
    index = 0
    while index < len(body):
        byte = body[index]
        if byte == 0x5C and index + 1 < len(body):  # a backslash
            following = body[index + 1]
            if 0x30 <= following <= 0x37:  # \ooo, one byte in octal
                out.append(int(body[index + 1 : index + 4], 8) & 0xFF)
                index += 4
                continue
            out.append(_ESCAPES.get(following, following))
            index += 2
            continue
        out.append(byte)
        index += 1
    return out.decode(errors="surrogateescape")


def _git_rm(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    options, paths = parse_options(argv, frozenset({"--pathspec-from-file"}))
    if has_flag(options, "n", "--cached", "--dry-run"):
        return
    if option_value(options, "--pathspec-from-file") is not None:
        paths = [*paths, Arg("", opaque=True)]
    for path in paths:
        if path.opaque or path.text.startswith(":") or any(c in path.text for c in GLOB_CHARS):
            check_pathspec(analysis, verb, path, state, ALL, "delete")
        else:
            check_delete(analysis, verb, path, state, recursive=True)


def _git_checkout(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    texts = [a.text for a in argv]
    split = texts.index("--") if "--" in texts else len(argv)
    options, before = parse_options(argv[:split], frozenset({"-b", "-B", "--orphan"}))
    after = argv[split + 1 :]
    if split < len(argv):
        paths = after
    elif option_value(options, "-b", "-B", "--orphan") is not None:
        paths = []
    elif len(before) >= 2:
        paths = before[1:]
    elif len(before) == 1 and _looks_like_path(before[0], state):
        paths = before
    else:
        paths = []
    if paths:
        modes = ALL if has_flag(options, "", "--no-overlay") else FROZEN_ONLY
        for path in paths:
            check_pathspec(analysis, verb, path, state, modes, "discard changes to")
    elif has_flag(options, "f", "--force"):
        check_pathspec(analysis, f"{verb} -f", Arg(":/"), state, ALL, "revert or delete")


def _looks_like_path(arg: Arg, state: State) -> bool:
    text = arg.text
    if arg.opaque or text in (".", "..") or text.startswith(":") or "/" in text:
        return True
    return state.cwd is not None and os.path.lexists(os.path.join(state.cwd, text))


def _git_restore(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    with_value = frozenset({"-s", "--source", "--pathspec-from-file"})
    options, paths = parse_options(argv, with_value)
    if has_flag(options, "S", "--staged") and not has_flag(options, "W", "--worktree"):
        return
    source = option_value(options, "-s", "--source") is not None
    overlay = has_flag(options, "", "--overlay")
    modes = ALL if source and not overlay else FROZEN_ONLY
    if option_value(options, "--pathspec-from-file") is not None:
        paths = [*paths, Arg("", opaque=True)]
    for path in paths:
        check_pathspec(analysis, verb, path, state, modes, "discard changes to")


def _git_reset(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    if any(a.text == "--hard" for a in argv):
        check_pathspec(analysis, f"{verb} --hard", Arg(":/"), state, ALL, "revert or delete")


def _git_switch(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    options, _ = parse_options(argv, frozenset({"-c", "-C"}))
    if has_flag(options, "f", "--force", "--discard-changes"):
        check_pathspec(analysis, f"{verb} -f", Arg(":/"), state, ALL, "revert or delete")


def _git_stash(analysis: Analysis, verb: str, argv: list[Arg], state: State) -> None:
    if argv and not argv[0].opaque and not argv[0].text.startswith("-"):
        if argv[0].text not in ("push", "save"):
            return
        argv = argv[1:]
    options, paths = parse_options(argv, frozenset({"-m", "--message"}))
    if not has_flag(options, "ua", "--include-untracked", "--all"):
        return
    for path in paths or [Arg(":/")]:
        check_pathspec(analysis, f"{verb} -u", path, state, ALL, "stash away (delete)")


_GIT: dict[str, Callable[[Analysis, str, list[Arg], State], None]] = {
    "clean": _git_clean,
    "rm": _git_rm,
    "mv": lambda analysis, verb, argv, state: move(analysis, verb, argv, state, []),
    "checkout": _git_checkout,
    "restore": _git_restore,
    "reset": _git_reset,
    "switch": _git_switch,
    "stash": _git_stash,
}
