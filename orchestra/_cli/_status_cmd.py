"""``forge status``: every change's standing, circuit, verify breaker, spend and last event.

It opens with one headline (``4 loops: 2 need you · 1 running · 1 done``), and
shows under each loop that needs a person what stopped it and the commands
that clear it. Nothing is run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .._circuit import cooldown_remaining, load_circuit
from .._durations import format_duration
from .._errors import EXIT_OK
from .._fleet import fleet_meant
from .._names import CHANGE_NAME
from .._spend import read_spend
from .._state import (
    LOOP_CIRCUIT,
    STATE_DIR,
    STATUS_FILE,
    AlertCleared,
    AlertRaised,
    BreakerReset,
    ChangePaths,
    Event,
    IterationFinished,
    RecoveryStep,
    decode_event,
    event_name,
    interrupted_landing,
    land_state,
    last_alert_details,
    list_changes,
    read_controls,
    read_guidance,
    read_timeline,
)
from .._verify import read_breaker
from .._workspace import Project
from ._common import policy_from, project_from
from ._console import Output
from ._standing import DONE, NEEDS_YOU, ORDER, RUNNING, Held, headline, standing


def status(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    if fleet_meant(getattr(args, "fleet", False)):
        # A fleet batch's state is on its server, whichever host ran each loop.
        from ._fleet_standing import fleet_status_view

        shown = fleet_status_view(args, out, project)
        if shown is not None:
            return shown
    roots = _roots(project, args)
    changes = [ChangePaths(root, name) for root in sorted(roots) for name in list_changes(root)]
    rows = [_row(paths, project.root) for paths in changes]
    states = [row["standing"] for row in rows]
    said = headline(states)
    if out.json_mode:
        counts = {state: states.count(state) for state in ORDER}
        out.document(
            {"root": str(project.root), "changes": rows, "headline": said, "counts": counts}
        )
        return EXIT_OK
    if not rows:
        out.line("no changes yet: nothing under .forge/changes/")
        return EXIT_OK
    out.line(said, style="bold")
    for row in rows:
        out.line()
        circuit = row["circuit"]
        if row["reason"]:
            circuit += f" ({row['reason']})"
        if row["escalated"]:
            circuit += " — escalated: a human must review"
        elif row["cooldown_remaining"]:
            circuit += f", cooldown {format_duration(round(row['cooldown_remaining']))} left"
        if row["score"] is not None:
            circuit += f"; last score {row['score']:+d}"
            if row["risk"] is not None:
                circuit += f", stagnation risk {row['risk']}"
        out.styled((row["change"], "bold"), (f"  {row['where']}" if row["where"] else "", "dim"))
        _print_needs(row, out)
        out.line(f"  circuit:  {circuit}, {row['iterations_used']} iteration(s) used")
        out.line(f"  verify:   {row['verify']}")
        spend = row["spend"]
        out.line(
            f"  spend:    {spend['tokens']} tokens, {spend['tool_calls']} tool calls, "
            f"${spend['cost_usd']:.4f}"
        )
        recovery = row["recovery"]
        if recovery is not None:
            given = (
                f"{recovery['trip_kind']} {recovery['step']}/{recovery['steps']}: "
                f"{recovery['strategy']}"
            )
            if row["escalated"]:
                given = f"escalated after {given}"
            out.line(f"  recovery: {given}")
        for name, detail in row["alerts"].items():
            out.line(f"  alert:    {name} — {detail}", style="yellow")
        if row["land"] is not None:
            out.line(f"  land:     {row['land']}")
        if row["held"] is not None:
            out.line(f"  paused:   {row['held']}", style="yellow")
        for given in row["guidance"]:
            text = given["text"] if len(given["text"]) <= 60 else given["text"][:59] + "…"
            out.line(f"  guidance: waiting ({given['keep']}, by {given['by']}): {text}")
        out.line(f"  last:     {row['last_event'] or '-'}")
    return EXIT_OK


_STANDING_STYLES = {NEEDS_YOU: "bold red", RUNNING: "cyan", DONE: "green"}


def _print_needs(row: dict[str, Any], out: Output) -> None:
    """Where the loop stands, what stopped it, the decisions it waits on, how to run it again."""
    out.styled(("  standing: ", None), (row["standing"], _STANDING_STYLES.get(row["standing"])))
    blocker = row["blocker"]
    if blocker is not None:
        out.line(f"  blocker:  {blocker['gate']} — {blocker['reason']}", style="red")
    for decision in row["decisions"]:
        out.line(f"  decide:   {decision['what']} — {decision['command']}", style="yellow")
    if row["then"]:
        out.line(f"  then:     {' && '.join(row['then'])}")


def _roots(project: Project, args: argparse.Namespace) -> set[Path]:
    """The folders whose changes are listed: the project's and every ``[[loop]]``'s."""
    declared = None if getattr(args, "set", None) else _declared_roots(project)
    if declared is not None:
        return {project.root, *declared}
    from .._supervise import resolve_loops

    loaded = policy_from(project, args=args)
    return {project.root, *(setup.root for setup in resolve_loops(loaded, project.root))}


def _declared_roots(project: Project) -> list[Path] | None:
    """The loops' folders, read straight from the policy file; None to load the policy.

    Status shows state, not the policy: it needs of each ``[[loop]]`` table only
    its ``change`` and ``dir``, resolved as the supervisor resolves them, and
    is spared the policy loader. A file it cannot read that simply (not TOML,
    an ``extends`` chain, a loop table out of the ordinary) goes the full way,
    which reports every problem.
    """
    if project.config is None:
        return []
    import tomllib  # here: only status reads the file this way

    try:
        data = tomllib.loads(project.config.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError, UnicodeDecodeError
        return None
    tables = data.get("loop", [])
    if "extends" in data or not isinstance(tables, list):
        return None
    folder = project.config.resolve().parent
    roots: list[Path] = []
    seen: set[tuple[Path, str]] = set()
    for table in tables:
        change = table.get("change") if isinstance(table, dict) else None
        where = table.get("dir", "") if isinstance(table, dict) else None
        if not isinstance(change, str) or not CHANGE_NAME.fullmatch(change):
            return None
        if not isinstance(where, str):
            return None
        root = (folder / where).resolve() if where else project.root
        if not root.is_dir() or (root, change) in seen:
            return None
        seen.add((root, change))
        roots.append(root)
    return roots


def _marks(records: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The last recovery strategy given, and the alerts raised and not cleared since."""
    recovery: dict[str, Any] | None = None
    alerts: dict[str, str] = {}
    for record in records:
        kind = record.get("event")
        if kind == RecoveryStep.kind and not record.get("escalated"):
            recovery = record
        elif kind == AlertRaised.kind and isinstance(record.get("alert"), str):
            alerts[record["alert"]] = str(record.get("detail", ""))
        elif kind == AlertCleared.kind:
            alerts.pop(str(record.get("alert")), None)
        elif kind == BreakerReset.kind and record.get("breaker") == LOOP_CIRCUIT:
            recovery, alerts = None, {}
    return recovery, alerts


def _last_events(
    paths: ChangePaths,
) -> tuple[Event | None, IterationFinished | None, Sequence[dict[str, Any]]]:
    """The timeline's last event and its last scored iteration; only those are decoded."""
    records = read_timeline(paths.timeline).events
    last = decode_event(records[-1]) if records else None
    for record in reversed(records):
        if record.get("event") == BreakerReset.kind and record.get("breaker") == LOOP_CIRCUIT:
            break  # reset since: no iteration scored yet, no risk to show
        if record.get("event") == IterationFinished.kind:
            event = decode_event(record)
            if isinstance(event, IterationFinished) and event.score is not None:
                return last, event, records
    return last, None, records


def _row(paths: ChangePaths, root: Path) -> dict[str, Any]:
    circuit_state = load_circuit(paths)
    verify = read_breaker(paths).after
    spend = read_spend(paths).totals
    last, scored, records = _last_events(paths)
    recovery, alerts = _marks(records)
    # Each alert's figure as of the last iteration, not as of when it was raised.
    current = last_alert_details(paths.folder / STATUS_FILE)
    alerts = {name: current.get(name, detail) for name, detail in alerts.items()}
    if circuit_state.recovery_type is None:
        recovery = None  # the watch after recovery is over: no strategy in force
    finished = circuit_state.finished is not None
    where = "" if paths.root == root else str(paths.root)
    held = Held.of(circuit_state, verify)
    stands = standing(paths.name, records, held, where=where, root=str(root))
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
        # A finished loop is at no risk of stalling.
        "risk": scored.risk if scored and not finished else None,
        "recovery": None
        if recovery is None
        else {k: recovery.get(k) for k in ("trip_kind", "step", "steps", "strategy")},
        "alerts": alerts,
        "iterations_used": circuit_state.iterations_used,
        "verify": verify_text,
        "verify_state": attrs.asdict(verify),
        "spend": attrs.asdict(spend),
        "last_event": f"{event_name(last)} at {last.ts}" if last else None,
        "standing": stands.state,
        "blocker": None if stands.blocker is None else attrs.asdict(stands.blocker),
        "decisions": [attrs.asdict(decision) for decision in stands.decisions],
        "then": list(stands.then),
        "land": _land_line(paths, records, stands.state),
        "guidance": [
            {"text": given.text, "by": given.by, "keep": given.keep}
            for given in read_guidance(paths).entries
        ],
        **_held(paths),
    }


def _held(paths: ChangePaths) -> dict[str, Any]:
    """A person's pause (``paused``: by, at, reason) and what holds the loop in words (``held``)."""
    controls = read_controls(paths)
    paused = controls.paused
    return {
        "paused": None if paused is None else attrs.asdict(paused),
        "held": controls.held_line(f"forge resume {paths.name}"),
    }


def _land_line(paths: ChangePaths, records: Sequence[dict[str, Any]], stands: str) -> str | None:
    """Its land state, if any; else ``ready`` for a loop in a worktree that ended done.

    Only a loop in a worktree has a branch to land (``forge/<change>``).
    """
    interrupted = interrupted_landing(paths.root)
    if interrupted is not None and interrupted[0] == paths.name:
        return f"an interrupted landing onto {interrupted[1]}: forge land finishes it"
    land = land_state(records)
    if land.state == "reworked" and stands == DONE:
        return f"ready, {land.line()}"  # its rework is done: the next forge land takes it
    if land.state != "none":
        return land.line()
    worktree = paths.root / STATE_DIR / "worktrees" / paths.name
    return "ready" if stands == DONE and worktree.is_dir() else None
