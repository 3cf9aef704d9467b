"""``forge policy simulate --run`` / ``--all``: a candidate policy over a whole batch.

Every change of a supervised run (or every change with history) is replayed
under the candidate policy through the loop's own decision function, and
compared with what was recorded: one row per change, the changes whose
outcome moves first, then totals. A sweep (``_sweep_cmd``) replays the same
batch once per value of one key.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import attrs

from .._engine import WhatIf, what_if
from .._errors import EXIT_OK, UsageError
from .._policy import Layer, LoadedPolicy, Policy
from .._state import STATE_DIR, ChangePaths, list_changes, read_timeline, require_change
from .._supervise import LoopSetup, resolve_loops
from .._workspace import Project
from ._candidate import Candidate, policy_file, with_settings
from ._common import policy_from, project_from, set_layer
from ._console import Output


@attrs.frozen
class _Change:
    paths: ChangePaths
    loop: LoopSetup | None


@attrs.frozen
class BatchSimulation:
    """What ``forge policy simulate --run``/``--all``/``--sweep`` replays, and under what.

    Attributes:
        project: The project whose changes are replayed.
        loaded: Its policy, with each loop's own.
        changes: The changes to replay (each with its loop, when one declares it).
        run_id: The run compared (None: every change's whole history).
        policy_file: ``--policy FILE``: the candidate for every change (None:
            each change's own policy).
        settings: The ``--set`` layers on top of the candidate.
        described: The candidate in words.
    """

    project: Project
    loaded: LoadedPolicy
    changes: tuple[_Change, ...]
    run_id: str | None
    policy_file: str | None
    settings: tuple[Layer, ...]
    described: str


def run(args: argparse.Namespace, out: Output) -> int:
    request = batch_request(args)
    run_id, described = request.run_id, request.described
    rows = replayed(request, (), out)
    ordered = sorted(rows, key=lambda row: not row.moved)
    totals = _totals(ordered)
    if out.json_mode:
        out.document(
            {
                "run_id": run_id,
                "policy": described,
                "changes": [row.as_json() for row in ordered],
                "totals": totals,
            }
        )
        return EXIT_OK
    scope = f"run {run_id}" if run_id else "every change's history"
    out.line(f"simulate: {scope}, {len(rows)} change(s), policy: {described}")
    if not rows:
        out.line("nothing to replay: no change has recorded iterations")
        return EXIT_OK
    width = max(6, *(len(row.change) for row in ordered))
    out.line(
        f"{'change':<{width}}  {'then':<24}  {'now':<24}  {'trip then':>9}  {'now':>4}  "
        f"{'iter. saved':>11}  {'tokens saved':>12}  {'cost saved':>10}",
        style="bold",
    )
    for row in ordered:
        out.line(_row_text(row, width), style="yellow" if row.moved else None)
    out.line()
    out.line(
        f"totals: {totals['moved']} change(s) move, {totals['false_trips']} false trip(s); "
        f"{totals['iterations_saved']} iteration(s), {totals['tokens_saved']} tokens, "
        f"${totals['cost_saved']:.4f} saved"
    )
    for row in ordered:
        if row.trip_now is not None and row.trip_now != row.trip_then:
            out.line(
                f"  {row.change}: would trip at {row.trip_now.iteration} — {row.trip_now.reason}"
            )
    return EXIT_OK


def batch_request(args: argparse.Namespace) -> BatchSimulation:
    """The batch ``args`` name (``--run``, ``--all``, or one ``--change``), and its candidate.

    Raises:
        UsageError: No such run, or a malformed ``--set``.
        ConfigError: The project's policy, or a ``--set`` value, is invalid.
    """
    project = project_from(args)
    loaded = policy_from(project)
    if args.set:
        # Checked as every command checks --set, so a typo is named with its
        # suggestion; the candidates below lay the same values over each loop.
        policy_from(project, args=args)
    loops = resolve_loops(loaded, project.root)
    run_id, changes = _batch(project, loops, args)
    settings = [set_layer(text) for text in args.set or []]
    return BatchSimulation(
        project=project,
        loaded=loaded,
        changes=tuple(changes),
        run_id=run_id,
        policy_file=args.policy or None,
        settings=tuple(settings),
        described=_described(args, loaded),
    )


def _batch(
    project: Project, loops: list[LoopSetup], args: argparse.Namespace
) -> tuple[str | None, list[_Change]]:
    """The run to compare (None: every change's whole history) and its changes."""
    by_key = {(setup.root, setup.change): setup for setup in loops}
    roots = [project.root, *sorted({setup.root for setup in loops} - {project.root})]
    if args.change is not None:
        # One change's whole history; a loop in another repository keeps it there.
        loop = next((setup for setup in loops if setup.change == args.change), None)
        root = loop.root if loop is not None else project.root
        paths = require_change(ChangePaths(root, args.change), "forge policy simulate")
        return None, [_Change(paths, loop)]
    if args.all:
        found = [
            _Change(ChangePaths(root, name), by_key.get((root, name)))
            for root in roots
            for name in list_changes(root)
        ]
        return None, found
    run_id = args.run if args.run not in (None, "latest") else _latest_run(roots)
    summary = project.root / STATE_DIR / "runs" / run_id / "summary.json"
    if summary.is_file():
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
            listed = [(Path(loop["dir"]), str(loop["change"])) for loop in data["loops"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{summary}: unreadable ({exc})") from exc
    else:
        # A run killed before its summary: its changes are the ones whose
        # timelines say it started them.
        listed = [
            (root, name)
            for root in roots
            for name in list_changes(root)
            if f'"run_id":"{run_id}"' in _read(ChangePaths(root, name).timeline)
        ]
        if not listed:
            raise UsageError(f"--run {run_id}: no such run", hint="see .forge/runs/")
    return run_id, [
        _Change(ChangePaths(root, name), by_key.get((root, name))) for root, name in listed
    ]


def _latest_run(roots: list[Path]) -> str:
    runs = sorted(
        (folder.name for root in roots for folder in (root / STATE_DIR / "runs").glob("*")),
        reverse=True,
    )
    if not runs:
        raise UsageError(
            "no supervised run to simulate", hint="run forge supervise first, or pass --all"
        )
    return runs[0]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _candidate(
    request: BatchSimulation, change: _Change, settings: list[Layer], file: Candidate | None
) -> Policy:
    if file is not None:
        return file.for_change(change.paths.name)
    loaded = request.loaded
    return with_settings(change.loop.policy if change.loop else loaded.policy, settings)


def replayed(
    request: BatchSimulation, extra: tuple[Layer, ...], out: Output | None
) -> list[WhatIf]:
    """Each change replayed under the candidate, with ``extra`` settings on top.

    ``out``: where a damaged timeline is noted (None: not again, for a sweep's
    second and later values).
    """
    settings = [*request.settings, *extra]
    file = (
        policy_file(request.policy_file, root=request.project.root, settings=settings)
        if request.policy_file
        else None
    )
    rows = []
    for change in request.changes:
        timeline = read_timeline(change.paths.timeline)
        if out is not None:
            for problem in timeline.problems(change.paths.timeline):
                out.note(problem)
        policy = _candidate(request, change, settings, file)
        rows.append(what_if(change.paths.name, timeline.typed(), policy, run_id=request.run_id))
    return rows


def _totals(rows: list[WhatIf]) -> dict[str, Any]:
    return {
        "changes": len(rows),
        "moved": sum(1 for row in rows if row.moved),
        "false_trips": sum(1 for row in rows if row.false_trip),
        "iterations_then": sum(row.iterations_then for row in rows),
        "iterations_now": sum(row.iterations_now for row in rows),
        "iterations_saved": sum(row.iterations_saved for row in rows),
        "tokens_saved": sum(row.tokens_saved for row in rows),
        "cost_saved": round(sum(row.cost_saved for row in rows), 6),
    }


def _moment(row: WhatIf, now: bool) -> str:
    moment = row.ending_now if now else row.ending_then
    if moment is None:
        return "runs past the record" if now else "-"
    return f"{moment.reason} at {moment.iteration}"


def _row_text(row: WhatIf, width: int) -> str:
    trip_then = str(row.trip_then.iteration) if row.trip_then else "-"
    trip_now = str(row.trip_now.iteration) if row.trip_now else "-"
    flag = "  (false trip)" if row.false_trip else ""
    return (
        f"{row.change:<{width}}  {_moment(row, False):<24}  {_moment(row, True):<24}  "
        f"{trip_then:>9}  {trip_now:>4}  {row.iterations_saved:>11}  {row.tokens_saved:>12}  "
        f"${row.cost_saved:>9.4f}{flag}"
    ).rstrip()


def _described(args: argparse.Namespace, loaded: LoadedPolicy) -> str:
    if args.policy:
        described = str(args.policy)
    else:
        described = (
            "each loop's own"
            if loaded.loops
            else ("forge.toml" if loaded.files else "built-in defaults")
        )
    if args.set:
        described += " with " + " ".join(f"--set {text}" for text in args.set)
    return described
