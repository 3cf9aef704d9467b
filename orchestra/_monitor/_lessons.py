"""Lessons: what a stalled loop taught, kept where the agent's next session can read it.

When a supervised loop's circuit opens or escalates for stagnation, an entry
is appended to the lessons file (``[recovery] lessons``, by default
``memory/forge-lessons.md``): the change, the kind of trip, the evidence, the
strategy that was in force and what came of it. The file is rewritten
atomically under a lock (loops of several changes may append at once) and
each write is listed in its folder's forge-writes journal, so the integrity
check takes it for Forge's own write, never an agent's edit, even where the
file lies under a protected path.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from .._git import git_output
from .._state import FORGE_WRITES, STATE_DIR, atomic_write, exclusive_lock

_HEADING = (
    "# Lessons from stalled loops\n\n"
    "Forge appends an entry here each time a loop's circuit opens or escalates because the\n"
    "loop stopped making progress. Read them before planning: they say what did not work.\n"
)


@attrs.frozen
class Lesson:
    """One entry."""

    when: str
    change: str
    iteration: int
    kind: str
    reason: str
    evidence: dict[str, object]
    tried: str
    outcome: str

    def render(self) -> str:
        evidence = json.dumps(self.evidence, sort_keys=True, default=str)
        return (
            f"\n## {self.when} — {self.change}, iteration {self.iteration}: {self.kind}\n"
            f"- Evidence: {self.reason}; {evidence}\n"
            f"- Strategy tried: {self.tried}\n"
            f"- Outcome: {self.outcome}\n"
        )


def append_lesson(root: Path, tree: Path, relative: str, lesson: Lesson) -> Path:
    """Append ``lesson`` to the lessons file at ``tree / relative``; returns its path.

    ``tree`` is the loop's working tree, where its agent reads the file; ``root``
    is the project's, whose state folder holds the lock that loops sharing one
    tree take in turn.
    """
    path = tree / relative
    with exclusive_lock(root / STATE_DIR / "lessons.lock"):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = _HEADING
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, (text + lesson.render()).encode("utf-8"), journal=True, ordinary=True)
    exclude_journal(tree)
    return path


def exclude_journal(tree: Path) -> None:
    """Keep the forge-writes journal beside the lessons file out of the agent's commits.

    It is listed in the repository's ``info/exclude`` (shared by its
    worktrees, never committed), so ``git add -A`` passes it by; the
    integrity check still reads it where it lies.
    """
    found = git_output(tree, "rev-parse", "--git-common-dir")
    if found is None:
        return  # not a git tree: nothing commits it
    common = Path(found.decode("utf-8", errors="replace").strip())
    exclude = (common if common.is_absolute() else tree / common) / "info" / "exclude"
    try:
        text = exclude.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError:
        return
    if FORGE_WRITES in text.splitlines():
        return
    try:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as handle:
            prefix = "" if not text or text.endswith("\n") else "\n"
            handle.write(f"{prefix}# Forge's journal of its own writes (the lessons file)\n")
            handle.write(f"{FORGE_WRITES}\n")
    except OSError:
        return  # a convenience: without it the journal shows as untracked
