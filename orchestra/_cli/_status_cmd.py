"""``forge status``: every change's circuit, verify breaker, spend and last event; nothing run."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import attrs

from .._circuit import cooldown_remaining, load_circuit
from .._durations import format_duration
from .._errors import EXIT_OK
from .._spend import read_spend
from .._state import ChangePaths, IterationFinished, event_name, list_changes, read_timeline
from .._supervise import resolve_loops
from .._verify import read_breaker
from ._common import policy_from, project_from
from ._console import Output


def status(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    loaded = policy_from(project, args=args)
    roots = {project.root}
    roots.update(setup.root for setup in resolve_loops(loaded, project.root))
    changes = [ChangePaths(root, name) for root in sorted(roots) for name in list_changes(root)]
    rows = [_row(paths, project.root) for paths in changes]
    if out.json_mode:
        out.document({"root": str(project.root), "changes": rows})
        return EXIT_OK
    if not rows:
        out.line("no changes yet: nothing under .forge/changes/")
        return EXIT_OK
    for row in rows:
        circuit = row["circuit"]
        if row["reason"]:
            circuit += f" ({row['reason']})"
        if row["escalated"]:
            circuit += " — escalated: a human must review"
        elif row["cooldown_remaining"]:
            circuit += f", cooldown {format_duration(round(row['cooldown_remaining']))} left"
        if row["score"] is not None:
            circuit += f"; last score {row['score']:+d}, stagnation risk {row['risk']}"
        out.styled((row["change"], "bold"), (f"  {row['where']}" if row["where"] else "", "dim"))
        out.line(f"  circuit:  {circuit}, {row['iterations_used']} iteration(s) used")
        out.line(f"  verify:   {row['verify']}")
        spend = row["spend"]
        out.line(
            f"  spend:    {spend['tokens']} tokens, {spend['tool_calls']} tool calls, "
            f"${spend['cost_usd']:.4f}"
        )
        out.line(f"  last:     {row['last_event'] or '-'}")
    return EXIT_OK


def _row(paths: ChangePaths, root: Path) -> dict[str, Any]:
    circuit_state = load_circuit(paths)
    verify = read_breaker(paths).after
    spend = read_spend(paths).totals
    events = read_timeline(paths.timeline).typed()
    last = events[-1] if events else None
    scored = next(
        (e for e in reversed(events) if isinstance(e, IterationFinished) and e.score is not None),
        None,
    )
    where = "" if paths.root == root else str(paths.root)
    if verify.blocked:
        verify_text = f"BLOCKED ({verify.blocked})"
    elif verify.last_verdict is None:
        verify_text = "never run"
    else:
        state = "OPEN" if verify.open else "closed"
        threshold = f"/{verify.max_failures}" if verify.max_failures else ""
        verify_text = (
            f"{verify.last_verdict}, {verify.consecutive_failures}{threshold} consecutive "
            f"failures, breaker {state}"
        )
    return {
        "change": paths.name,
        "where": where,
        "circuit": circuit_state.state,
        "reason": circuit_state.reason,
        "escalated": circuit_state.escalated,
        "cooldown_remaining": 0.0
        if circuit_state.escalated
        else cooldown_remaining(circuit_state, time.time()),
        "score": scored.score if scored else None,
        "risk": scored.risk if scored else None,
        "iterations_used": circuit_state.iterations_used,
        "verify": verify_text,
        "verify_state": attrs.asdict(verify),
        "spend": attrs.asdict(spend),
        "last_event": f"{event_name(last)} at {last.ts}" if last else None,
    }
