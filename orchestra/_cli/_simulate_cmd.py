"""``forge policy simulate``: replay a change's recorded iterations under another policy."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._errors import EXIT_OK, UsageError
from .._policy import Layer, Policy, load_policy, merge_layers, policy_as_dict, structure_policy
from .._stagnation import Signals, assess, recorded_iterations
from .._state import ChangePaths, read_timeline
from .._supervise import resolve_loops
from ._common import policy_from, project_from, set_layer
from ._console import Output

_COLUMNS = "  #  files  tasks  tests+  lint-  error  out-lines  denied  score  window  risk    "


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    paths = ChangePaths(project.root, args.change)
    settings = [set_layer(text) for text in args.set or []]
    loaded = policy_from(project)
    loops = resolve_loops(loaded, project.root)
    loop = next((setup for setup in loops if setup.change == paths.name), None)
    if loop is not None:
        paths = ChangePaths(loop.root, paths.name)  # a loop in another repository keeps it there
    if args.policy:
        file = Path(args.policy).resolve()
        if not file.is_file():
            raise UsageError(f"--policy {args.policy}: no such file")
        policy = load_policy(file, root=project.root, flags=settings).policy
        described = str(args.policy)
    else:
        policy = _with_settings(loop.policy if loop else loaded.policy, settings)
        if loop is not None:
            described = f"the loop's own ({loop.source})"
        else:
            described = "forge.toml" if loaded.files else "built-in defaults"
    if settings:
        described += " with " + " ".join(f"--set {text}" for text in args.set)

    timeline = read_timeline(paths.timeline)
    for problem in timeline.problems(paths.timeline):
        out.note(problem)
    recorded = recorded_iterations(timeline.events)
    rows = []
    history: list[Signals] = []
    for item in recorded:
        history.append(item.signals)
        found = assess(history, policy.stagnation)
        live = item.trip if item.trip and item.trip.startswith("stagnation:") else None
        # As live: a finished iteration is not judged, and each opening starts afresh.
        would = None if item.finished else found.reason
        if would or item.opened_by_other_means:
            history = []
        rows.append(
            {
                "iteration": item.iteration,
                "signals": item.signals.as_record(),
                "score": found.score,
                "window_score": found.window_score,
                "risk": found.risk,
                "would_trip": would,
                "evidence": found.evidence,
                "live_trip": live,
            }
        )
    first = next((r for r in rows if r["would_trip"]), None)
    live_first = next((r for r in rows if r["live_trip"]), None)
    if out.json_mode:
        out.document(
            {
                "change": paths.name,
                "policy": described,
                "stagnation": policy_as_dict(policy)["stagnation"],
                "iterations": rows,
                "first_trip": _trip(first, "would_trip"),
                "live_first_trip": _trip(live_first, "live_trip"),
            }
        )
        return EXIT_OK
    out.line(
        f'simulate: change "{paths.name}", {len(rows)} recorded iteration(s), policy: {described}'
    )
    if not rows:
        out.line("nothing to replay: no supervised iteration recorded its signals yet")
        return EXIT_OK
    out.line(_COLUMNS + "would open the circuit", style="bold")
    for row in rows:
        out.line(_row_text(row), style="red" if row["would_trip"] else None)
    out.line()
    if first:
        out.line(f"first trip: iteration {first['iteration']} — {first['would_trip']}")
    else:
        out.line("first trip: none — no detector holds over this history")
    if live_first:
        same = first is not None and (first["iteration"], first["would_trip"]) == (
            live_first["iteration"],
            live_first["live_trip"],
        )
        verdict = "the same" if same else "different"
        live_text = f"iteration {live_first['iteration']} — {live_first['live_trip']}"
        out.line(f"live run:   {live_text} ({verdict})")
    else:
        out.line("live run:   no stagnation trip recorded")
    return EXIT_OK


def _with_settings(policy: Policy, settings: list[Layer]) -> Policy:
    if not settings:
        return policy
    base = _without_none(policy_as_dict(policy))
    merged, _ = merge_layers([Layer("policy", base), *settings])
    return structure_policy(merged, "--set")


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None
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
    return text.rstrip()
