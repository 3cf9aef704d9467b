"""The pending-landing journal: a landing killed half-way is finished by the next run.

Before a land run moves the base it writes ``.forge/land/pending.json`` (base,
OLD, NEW, the change); it removes it only once the base, the checked-out
working tree, ``land.done`` and the cleanup are all done. A run that finds the
journal finishes that landing first: nothing moved (the base still at OLD) —
the journal is dropped; the base at NEW — the working tree is brought from
OLD to NEW if it was left behind, and the missing events are recorded, once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import attrs
import cattrs

from .._errors import UsageError
from .._state import STATE_DIR, ChangePaths, atomic_write, pending_landing_path, read_timeline
from ._events import done_at, record
from ._repo import checked_out_branch, close_scratch, git, head_of, must, remove_change


@attrs.frozen
class Pending:
    """One landing under way: ``base`` moves from ``old`` to ``new`` for ``change``."""

    change: str
    base: str
    old: str
    new: str
    mode: str
    order: int
    keep: bool
    checked_out: bool


def pending_path(root: Path) -> Path:
    """Where the journal lives: ``.forge/land/pending.json``."""
    return pending_landing_path(root)


def write_pending(root: Path, pending: Pending) -> None:
    """Journal the landing, whole or not at all, before the base moves."""
    path = pending_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(attrs.asdict(pending), indent=2).encode() + b"\n")


def clear_pending(root: Path) -> None:
    """The landing is complete: forget it."""
    pending_path(root).unlink(missing_ok=True)


def read_pending(root: Path) -> Pending | None:
    """The journalled landing, if any.

    Raises:
        UsageError: the journal is there but not one forge wrote.
    """
    path = pending_path(root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return cattrs.structure(json.loads(raw), Pending)
    except (ValueError, TypeError, cattrs.BaseValidationError) as exc:
        raise UsageError(
            f"{path} is not a pending landing forge can read ({exc})",
            hint="check the base and the working tree by hand, then remove the file",
        ) from exc


def finish_pending(root: Path, said: Callable[[str], None]) -> None:
    """Finish (or drop) a landing a killed run left, and remove its scratch worktree.

    Raises:
        UsageError: the working tree has changes of its own where the
            landing's files go; it is left as it is, and so is the journal.
    """
    close_scratch(root)
    pending = read_pending(root)
    if pending is None:
        return
    head = head_of(root, pending.base)
    if head == pending.old or head is None or not _contains(root, head, pending.new):
        # The base never moved: nothing of this landing happened.
        clear_pending(root)
        said(f"land: {pending.change} — an interrupted landing had not moved {pending.base}")
        return
    if head == pending.new and checked_out_branch(root) == pending.base:
        _bring_tree_forward(root, pending)
    paths = ChangePaths(root, pending.change)
    landed, cleaned = done_at(read_timeline(paths.timeline).events, pending.new)
    if not landed:
        fields = {"base": pending.base, "commit": pending.new, "mode": pending.mode}
        record(paths, "land.done", {**fields, "verify": "PASS", "order": pending.order})
    if not pending.keep and not cleaned:
        worktree = root / STATE_DIR / "worktrees" / pending.change
        removed, deleted = remove_change(root, pending.change, worktree)
        record(paths, "land.cleaned", {"worktree": removed, "branch": deleted})
    clear_pending(root)
    said(
        f"land: {pending.change} — finished an interrupted landing on "
        f"{pending.base} ({pending.new[:7]})"
    )


def _contains(root: Path, head: str, commit: str) -> bool:
    return git(root, "merge-base", "--is-ancestor", commit, head).ok


def _bring_tree_forward(root: Path, pending: Pending) -> None:
    """Bring the checked-out tree from OLD to NEW, if the run was killed before it did.

    A ``read-tree`` killed half-way has written some of NEW's files but not the
    index (still OLD's). Such a file — one the landing changes, with NEW's
    content — is put back to OLD's first; any other difference is the
    person's, and the tree is left alone.
    """
    old, new = pending.old, pending.new
    if git(root, "diff-index", "--cached", "--quiet", new, "--").ok:
        return  # the index is NEW's already: read-tree finished
    if not git(root, "diff-index", "--cached", "--quiet", old, "--").ok:
        raise _tree_refusal(pending, "its index is neither the old base's nor the new one's")
    changed = set(must(root, "diff", "--no-renames", "--name-only", "-z", old, new).split("\0"))
    changed.discard("")
    dirty = set(must(root, "diff-files", "--name-only", "-z").split("\0")) - {""}
    foreign = sorted(dirty - changed)
    if foreign:
        raise _tree_refusal(pending, f"it has uncommitted changes ({', '.join(foreign[:5])})")
    restore: list[str] = []
    for path in sorted(changed):
        state = _file_state(root, path, old, new)
        if state == "theirs":
            raise _tree_refusal(pending, f"{path} differs from both the old and the new base")
        if state == "new":
            if _blob(root, old, path) is None:
                os.unlink(root / path)  # added by the landing, not yet in the index
            else:
                restore.append(path)
    if restore:
        must(root, "checkout-index", "-f", "-u", "--", *restore)
    # Files rewritten with the same content only look changed: refresh their stat.
    git(root, "update-index", "-q", "--refresh")
    must(root, "read-tree", "-m", "-u", old, new)


def _file_state(root: Path, path: str, old: str, new: str) -> str:
    """``old``, ``new`` (the file is that base's version) or ``theirs``."""
    file = root / path
    if file.is_symlink() or file.is_file():
        here: str | None = must(root, "hash-object", "--", path)
    elif file.exists():
        return "theirs"
    else:
        here = None
    if here == _blob(root, old, path):
        return "old"
    if here == _blob(root, new, path):
        return "new"
    return "theirs"


def _blob(root: Path, commit: str, path: str) -> str | None:
    done = git(root, "rev-parse", "-q", "--verify", f"{commit}:{path}")
    return done.stdout.decode().strip() if done.ok else None


def _tree_refusal(pending: Pending, why: str) -> UsageError:
    return UsageError(
        f"an interrupted landing of {pending.change} moved {pending.base} to "
        f"{pending.new[:7]}, but the working tree is still at {pending.old[:7]} and {why}",
        hint=(
            f"commit or stash your changes, then forge land again; or bring the tree "
            f"forward yourself: git read-tree -m -u {pending.old[:12]} {pending.new[:12]}"
        ),
    )
