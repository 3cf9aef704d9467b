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

from .._git import git_output
from .._redact import Redact
from .._state import FORGE_LINES, FORGE_WRITES, STATE_DIR
from ._diff import bounded_diff
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
    stat = git_output(workdir, "diff", "--no-color", "--stat=100", base, *spec)
    diff = git_output(workdir, "diff", "--no-color", "--no-ext-diff", base, *spec)
    if stat is None or diff is None:
        return WorkDiff(None, missing=f"no diff: git could not compare the work with {base}")
    listed = git_output(workdir, "ls-files", "-z", "--others", "--exclude-standard", *spec)
    untracked = [p for p in (listed or b"").decode(errors="replace").split("\0") if p]
    return bounded_diff(
        words,
        stat.decode(errors="replace"),
        diff.decode(errors="replace"),
        redact=redact,
        untracked=untracked,
    )
