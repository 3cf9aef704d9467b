"""``forge policy simulate``: replay a change's recorded iterations under another policy.

The replay goes through the live loop's own decision function, so under the
policy the loop ran with it reaches the same trips at the same iterations.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from .._engine import Replay, ReplayStep, replay
from .._errors import EXIT_OK, UsageError
from .._policy import Policy, policy_as_dict
from .._state import ChangePaths, read_timeline, require_change
from .._supervise import resolve_loops
from ._candidate import policy_file, with_settings
from ._common import policy_from, project_from, set_layer
from ._console import Output

_COLUMNS = "  #  files  tasks  tests+  lint-  error  out-lines  denied  score  window  risk    "


@attrs.frozen
class Simulation:
    """What ``forge policy simulate --change`` replays: one change's timeline, one policy.

    Attributes:
        paths: The change's state (in its loop's repository, for a loop elsewhere).
        policy: The policy the recorded iterations are judged under.
        described: That policy in words, for the report's first line.
    """

    paths: ChangePaths
    policy: Policy
    described: str


@attrs.frozen
class _Outcome:
    """The replay as the report shows it: a row per iteration, and what stands out."""

    rows: list[dict[str, Any]]
    first: dict[str, Any] | None  # the first iteration the policy would trip at
    live_first: dict[str, Any] | None  # and the live loop's
    ending: ReplayStep | None
    ending_at: int
    not_run: int


def run(args: argparse.Namespace, out: Output) -> int:
    if args.change is not None and (args.all or args.run is not None):
        raise UsageError(
            "--change replays one change's history; --run and --all a whole batch",
            hint="--change C --sweep TABLE.KEY=V1,V2 sweeps one change",
        )
    if args.sweep:
        from ._sweep_cmd import run as run_sweep  # a batch, or one change, once per value

        return run_sweep(args, out)
    if args.change is None:
        from ._whatif_cmd import run as run_batch  # a whole batch: --run, --all

        return run_batch(args, out)
    request = _request(args)
    timeline = read_timeline(request.paths.timeline)
    for problem in timeline.problems(request.paths.timeline):
        out.note(problem)
    outcome = _outcome(replay(timeline.typed(), request.policy))
    if out.json_mode:
        out.document(_document(request, outcome))
    else:
        _render(request, outcome, out)
    return EXIT_OK


def _request(args: argparse.Namespace) -> Simulation:
    project = project_from(args)
    paths = ChangePaths(project.root, args.change)
    settings = [set_layer(text) for text in args.set or []]
    loaded = policy_from(project)
    if settings:
        policy_from(project, args=args)  # --set checked as everywhere: a typo gets its suggestion
    loops = resolve_loops(loaded, project.root)
    loop = next((setup for setup in loops if setup.change == paths.name), None)
    if loop is not None:
        paths = ChangePaths(loop.root, paths.name)  # a loop in another repository keeps it there
    # As everywhere: a change with no state is a typo (exit 2, the changes there are).
    require_change(paths, "forge policy simulate")
    if args.policy:
        candidate = policy_file(args.policy, root=project.root, settings=settings)
        policy = candidate.for_change(paths.name)
        described = str(args.policy)
    else:
        policy = with_settings(loop.policy if loop else loaded.policy, settings)
        if loop is not None:
            described = f"the loop's own ({loop.source})"
        else:
            described = "forge.toml" if loaded.files else "built-in defaults"
    if settings:
        described += " with " + " ".join(f"--set {text}" for text in args.set)
    return Simulation(paths=paths, policy=policy, described=described)


def _outcome(result: Replay) -> _Outcome:
    rows = [_row(step) for step in result.steps if step.ran and step.record.signals is not None]
    ending = next((s for s in result.steps if s.ending is not None), None)
    return _Outcome(
        rows=rows,
        first=next((r for r in rows if r["would_trip"]), None),
        live_first=next((r for r in rows if r["live_trip"]), None),
        ending=ending,
        # An ending before an iteration (its admission refused) comes after the one before.
        ending_at=0 if ending is None else ending.record.iteration - (0 if ending.ran else 1),
        not_run=result.not_run,
    )


def _document(request: Simulation, outcome: _Outcome) -> dict[str, Any]:
    ending = outcome.ending
    return {
        "change": request.paths.name,
        "policy": request.described,
        "stagnation": policy_as_dict(request.policy)["stagnation"],
        "iterations": outcome.rows,
        "first_trip": _trip(outcome.first, "would_trip"),
        "live_first_trip": _trip(outcome.live_first, "live_trip"),
        "ending": None
        if ending is None or ending.ending is None
        else {
            "iteration": outcome.ending_at,
            "reason": ending.ending.reason,
            "detail": ending.ending.detail,
        },
        "iterations_not_run": outcome.not_run,
    }


def _render(request: Simulation, outcome: _Outcome, out: Output) -> None:
    rows, first, live_first = outcome.rows, outcome.first, outcome.live_first
    out.line(
        f'simulate: change "{request.paths.name}", {len(rows)} recorded iteration(s), '
        f"policy: {request.described}"
    )
    if not rows:
        out.line("nothing to replay: no supervised iteration recorded its signals yet")
        return
    out.line(_COLUMNS + "would open the circuit", style="bold")
    for row in rows:
        out.line(_row_text(row), style="red" if row["would_trip"] else None)
    out.line()
    if first:
        out.line(f"first trip: iteration {first['iteration']} — {first['would_trip']}")
    else:
        out.line("first trip: none — no trip condition holds over this history")
    out.line(_live_line(first, live_first))
    ending = outcome.ending
    if ending is not None and ending.ending is not None:
        out.line(
            f"ending:     iteration {outcome.ending_at} — {ending.ending.reason}"
            + (f" ({ending.ending.detail})" if ending.ending.detail else "")
        )
    if outcome.not_run:
        out.line(f"            {outcome.not_run} recorded iteration(s) would not have run")


def _live_line(first: dict[str, Any] | None, live_first: dict[str, Any] | None) -> str:
    if not live_first:
        return "live run:   no trip recorded"
    same = first is not None and (first["iteration"], first["would_trip"]) == (
        live_first["iteration"],
        live_first["live_trip"],
    )
    verdict = "the same" if same else "different"
    return (
        f"live run:   iteration {live_first['iteration']} — {live_first['live_trip']} ({verdict})"
    )


def _row(step: ReplayStep) -> dict[str, Any]:
    signals = step.record.signals
    return {
        "iteration": step.record.iteration,
        "signals": signals.as_record() if signals is not None else {},
        "score": step.score if step.score is not None else 0,
        "window_score": step.window_score if step.window_score is not None else 0,
        "risk": step.risk or "-",
        "would_trip": step.would_open,
        "evidence": step.evidence,
        "live_trip": step.live_trip,
        "recovery": step.recovery,
        "alerts": list(step.alerts),
    }


def _trip(row: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    return None if row is None else {"iteration": row["iteration"], "reason": row[key]}


def _row_text(row: dict[str, Any]) -> str:
    s = row["signals"]
    error = (s["error_fingerprint"] or "-")[:6]
    text = (
        f"{row['iteration']:>3}  {s['files_modified']:>5}  {s['tasks_completed']:>5}  "
        f"{s['tests_newly_passing']:>6}  {s['lint_resolved']:>5}  {error:>6}  "
        f"{s['output_lines']:>9}  {s['permission_denials']:>6}  {row['score']:>+5}  "
        f"{row['window_score']:>+6}  {row['risk']:<6}  "
    )
    if row["would_trip"]:
        text += row["would_trip"]
    if row["live_trip"]:
        text += f"   (live: {row['live_trip']})"
    if row["recovery"]:
        text += f"   recovery: {row['recovery']}"
    if row["alerts"]:
        text += f"   alerts: {', '.join(row['alerts'])}"
    return text.rstrip()
