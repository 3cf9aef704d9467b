"""The command line's conventions: ``--version``, help for a bare ``forge``, "did you mean".

What a person who types ``forge`` expects of any command-line tool, kept
apart from the parser it serves: each function takes the words and the
names the parser knows and returns what to say, so the rules read (and are
tested) without argparse.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

# difflib, platform and shutil are imported where they are used: every forge
# command imports this module, and only a mistake or --version needs them.

VERSION_FLAGS = ("--version", "-V")
# A near miss this alike (a swapped or dropped letter) is named alone.
_CLEAR_WINNER = 0.85


def suggestion(word: str, known: Iterable[str]) -> str:
    """`` — did you mean 'status'?`` for a near miss of one of ``known``; "" for none."""
    import difflib

    close = difflib.get_close_matches(word, sorted(known), n=3, cutoff=0.6)
    if not close:
        return ""
    if len(close) == 1 or _likeness(word, close[0]) >= _CLEAR_WINNER:
        return f"; did you mean {close[0]!r}?"
    return "; did you mean one of " + ", ".join(repr(name) for name in close) + "?"


def _likeness(word: str, other: str) -> float:
    import difflib

    return difflib.SequenceMatcher(None, word, other).ratio()


def unknown_word(what: str, word: str, known: Iterable[str]) -> str:
    """The error for a command, action or option no parser knows, with the nearest ones."""
    choices = sorted(known)
    hint = suggestion(word, choices)
    if hint or what == "option":
        return f"unknown {what} {word!r}{hint}"
    return f"unknown {what} {word!r} (choose from {', '.join(choices)})"


def version_text(project_root: Path | None = None) -> list[str]:
    """Forge's release, the Python it runs on, and each shipped executor's CLI on PATH."""
    import platform

    from .._version import __version__

    lines = [
        f"forge {__version__}",
        f"python {platform.python_version()} ({_shown(Path(sys.executable))})",
    ]
    for name, cli, version in _agent_clis(project_root):
        lines.append(f"{name}: {cli} {version}")
    return lines


def _agent_clis(project_root: Path | None) -> list[tuple[str, str, str]]:
    """(executor, the CLI's path, its release) for each shipped executor whose CLI is on PATH."""
    import shutil

    from .._errors import ForgeError
    from .._executor import load_executor
    from .._scripted import installed_version
    from .._shipped import shipped_names

    found = []
    for name in shipped_names("executors"):
        try:
            executor = load_executor(name, project_root or Path.cwd())
        except ForgeError:
            continue  # a project's own definition that does not load: forge run says why
        cli = executor.spec.cli
        if cli is None:
            continue
        path = shutil.which(cli.version_argv[0])
        if path is None:
            found.append((name, cli.version_argv[0], "not on PATH"))
            continue
        version = installed_version(cli.version_argv, os.environ) or "release unknown"
        found.append((name, path, f"{version} (proven with {cli.proven})"))
    return found


def _shown(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def first_unknown_flag(extras: Sequence[str]) -> str | None:
    """The first word argparse left over that looks like an option (``--chnage``)."""
    for word in extras:
        if word.startswith("-") and word != "-":
            return word.partition("=")[0]
    return None
