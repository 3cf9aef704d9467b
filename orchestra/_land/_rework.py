"""Handing a change that did not land back to its loop: ``forge land --rework``.

A change that conflicted with the base, or whose verify failed on the
combined tree, is given back to the agent rather than to a person: the base
is merged into its branch, in its worktree — a clean merge committed, a
conflicted one left with the conflicts marked in the files — and its loop
runs again with a brief saying what stands in the way and which base it must
fit. The loop's circuit is reopened for the new round (a ``breaker.reset``
with the reason on its timeline), so the rework runs under the same gates
and rate limit as any iteration; a circuit that is open or escalated is not
reopened: a person decides first. Once the rework's loop ends done, the next
``forge land`` lands it like any other change.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from .._circuit import CLOSED, load_circuit, reset_circuit
from .._state import STATE_DIR, ChangePaths
from ._events import record
from ._queue import LandOutcome
from ._repo import git, merge_base_into, must


@attrs.frozen
class Rework:
    """A change handed back to its loop.

    Attributes:
        change: Its name.
        base: The base it must fit.
        commit: The base's head, merged into its branch.
        kind: ``conflict`` or ``failed``: why it did not land.
        files: The paths the merge left in conflict in its worktree.
        checks: The checks that failed on the combined tree.
        brief: What its loop's iterations are told (see :func:`brief_for`).
    """

    change: str
    base: str
    commit: str
    kind: str
    files: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    brief: str = ""


def rework_refusal(paths: ChangePaths) -> str | None:
    """Why the change's loop may not run a rework now, or None.

    A rework is one more round of the loop, not a way around its gates: a
    circuit that is open, or escalated to a person, stays as it is.
    """
    circuit = load_circuit(paths)
    if circuit.blocked:
        return f"its circuit's state file was moved aside ({circuit.blocked})"
    if circuit.escalated or circuit.state != CLOSED:
        return (
            f"its circuit is {circuit.state}{' (escalated)' if circuit.escalated else ''}; "
            f"a person resets it first: forge circuit {paths.name} --reset --reason WHY"
        )
    return None


def brief_for(
    change: str,
    base: str,
    commit: str,
    kind: str,
    files: tuple[str, ...],
    checks: tuple[str, ...],
) -> str:
    """The words a reworked loop's iterations get (pure)."""
    short = commit[:7]
    if kind == "conflict" or files:
        why = f"it conflicts with {base} ({short}) in {', '.join(files)}"
        task = (
            f"{base} is merged into your branch forge/{change}, with the conflicts marked "
            "in those files. Resolve every conflict so that both its changes and yours "
            "hold, keep the verify passing"
        )
    else:
        why = f"on top of {base} ({short}) its verify fails ({', '.join(checks) or 'verify'})"
        task = (
            f"{base} is merged into your branch forge/{change}. Make the verify pass "
            f"with {base}'s changes in"
        )
    return (
        f"Forge land: this change could not land on {base}: {why}. {task}, and finish "
        "as usual; forge land then lands it."
    )


def prepare_rework(root: Path, outcome: LandOutcome, base: str, run_id: str) -> Rework:
    """Merge the base into the change's branch and reopen its loop; what its loop is told.

    Recorded as ``land.rework`` on the change's timeline, with the run that
    reworks it. The caller checked :func:`rework_refusal` first.

    Raises:
        LandGitError: git could not make the worktree or merge.
    """
    change = outcome.change
    paths = ChangePaths(root, change)
    worktree = _worktree(root, change)
    commit = must(root, "rev-parse", f"refs/heads/{base}")
    files = tuple(
        merge_base_into(worktree, commit, f"forge land --rework: {base} into forge/{change}")
    )
    kind = outcome.result
    brief = brief_for(change, base, commit, kind, files or outcome.files, outcome.checks)
    reset_circuit(paths, reason=f"forge land --rework: {kind} on {base} ({commit[:7]})")
    fields = {"base": base, "commit": commit, "kind": kind, "files": list(files)}
    record(paths, "land.rework", {**fields, "checks": list(outcome.checks), "run": run_id})
    return Rework(change, base, commit, kind, files, outcome.checks, brief)


def _worktree(root: Path, change: str) -> Path:
    """The change's worktree, made again on its branch when its folder is gone."""
    path = root / STATE_DIR / "worktrees" / change
    if not (path / ".git").exists():
        git(root, "worktree", "prune")
        path.parent.mkdir(parents=True, exist_ok=True)
        must(root, "worktree", "add", "-q", str(path), f"forge/{change}")
    return path
