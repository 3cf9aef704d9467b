"""Reading from git what an escalated loop's agent changed against its base.

A loop in a worktree works on the branch ``forge/<change>``, made from its
base: the diff runs from the branch's point on the repository's ``HEAD`` (the
merge base) to the worktree as it is now, committed and uncommitted work
together. A loop working in the repository's own tree has no branch of its
own: its diff is of the files its iterations recorded changing, against
``HEAD``. Forge's own files (its state, journals, the lessons file) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._git import git_output, run_git
from .._redact import Redact
from .._state import FORGE_LINES, FORGE_WRITES, STATE_DIR
from ._diff import MAX_NEW_FILES, bounded_diff, diffstat
from ._model import LoopReport, WorkDiff


def work_diff(loop: LoopReport, *, redact: Redact | None, own: Sequence[str] = ()) -> WorkDiff:
    """What ``loop``'s agent changed, or a :class:`WorkDiff` saying why there is no diff."""
    root = Path(loop.root)
    worktree = root / STATE_DIR / "worktrees" / loop.change
    exclude = [
        f":(exclude){STATE_DIR}",
        f":(exclude,glob)**/{FORGE_WRITES}",
        f":(exclude,glob)**/{FORGE_LINES}",
        *(f":(exclude,literal){path}" for path in own if path),
    ]
    if (worktree / ".git").exists():
        branch = f"forge/{loop.change}"
        found = git_output(root, "merge-base", "HEAD", branch)
        if not found:
            return WorkDiff(
                None,
                missing=f"no diff: the base of branch {branch} is gone "
                "(it shares no commit with HEAD)",
            )
        base = found.decode(errors="replace").strip()
        words = f"the branch point of {branch} ({base[:10]}), uncommitted work included"
        workdir, spec = worktree, ["--", ".", *exclude]
    else:
        if git_output(root, "rev-parse", "--verify", "-q", "HEAD") is None:
            return WorkDiff(None, missing="no diff: not a git repository with a commit")
        if not loop.files_loop:
            return WorkDiff(None, missing="no diff: the loop recorded no file it changed")
        base, workdir = "HEAD", root
        words = "HEAD, the files the loop changed (it works in the repository's own tree)"
        spec = ["--", *(f":(literal){path}" for path in loop.files_loop), *exclude]
    numstat = git_output(workdir, "diff", "--no-color", "--numstat", "-z", base, *spec)
    diff = git_output(workdir, "diff", "--no-color", "--no-ext-diff", base, *spec)
    if numstat is None or diff is None:
        return WorkDiff(None, missing=f"no diff: git could not compare the work with {base}")
    listed = git_output(workdir, "ls-files", "-z", "--others", "--exclude-standard", *spec)
    untracked = [p for p in (listed or b"").decode(errors="replace").split("\0") if p]
    counts = _numstat(numstat)
    texts = [diff.decode(errors="replace")]
    # A new file the agent has not added is most often the work itself: shown
    # as a diff from nothing, like the rest (the first of them; the cut bounds all).
    for path in untracked[:MAX_NEW_FILES]:
        new = _new_file(workdir, path)
        if new is not None:
            texts.append(new[1])
            counts.append(new[0])
    return bounded_diff(
        words,
        diffstat(counts, more=max(0, len(untracked) - MAX_NEW_FILES)),
        "".join(texts),
        redact=redact,
    )


def _numstat(raw: bytes) -> list[tuple[str, int | None, int | None]]:
    """``git diff --numstat -z``'s records: path, lines added, lines deleted (None: binary)."""
    found: list[tuple[str, int | None, int | None]] = []
    fields = raw.decode(errors="replace").split("\0")
    index = 0
    while index < len(fields):
        record = fields[index]
        index += 1
        if not record:
            continue
        added, deleted, path = [*record.split("\t", 2), "", ""][:3]
        if not path:  # a rename: its source and destination follow
            path = fields[index + 1] if index + 1 < len(fields) else "?"
            index += 2
        found.append((path, _count(added), _count(deleted)))
    return found


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _new_file(workdir: Path, path: str) -> tuple[tuple[str, int | None, int | None], str] | None:
    """An untracked file's numstat and its diff from nothing."""
    args = ("diff", "--no-index", "--no-color", "--no-ext-diff")
    # --no-index exits 1 when the files differ, which is every time here.
    shown = run_git(workdir, *args, "--", "/dev/null", path)
    counted = run_git(workdir, *args, "--numstat", "-z", "--", "/dev/null", path)
    if shown.returncode not in (0, 1) or counted.returncode not in (0, 1):
        return None
    records = _numstat(counted.stdout)
    _, added, deleted = records[0] if records else (path, 0, 0)
    return (path + " (new, untracked)", added, deleted), shown.stdout.decode(errors="replace")
