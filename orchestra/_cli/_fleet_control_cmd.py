"""A person's controls pointed at a fleet batch: circuit, spend, requeue, cancel.

``forge circuit`` and ``forge spend`` go to the fleet's server with
``--fleet``, or when ``FORGE_REDIS_URL`` is set and the batch has a loop for
the change (as ``forge timeline`` does); ``forge fleet requeue`` and
``forge fleet cancel`` always do. The work is :mod:`orchestra._fleet._control`'s.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from .._errors import EXIT_ESCALATE, EXIT_OK, UsageError
from .._fleet import Connection, FleetConfig, FleetUnavailable
from .._workspace import Project
from ._common import policy_from, project_from
from ._console import Output


@contextmanager
def connected(project: Project, args: argparse.Namespace) -> Iterator[Connection]:
    config = FleetConfig.from_policy(policy_from(project, args=args).policy.fleet)
    connection = Connection(config)
    try:
        yield connection
    finally:
        connection.close()


def fleet_loop(
    connection: Connection, args: argparse.Namespace, out: Output, *, steers: bool = False
) -> dict[str, Any] | None:
    """The change's loop in the batch; None to fall back to this host's files.

    ``steers``: the command gives a loop a person's request (a pause, a stop,
    guidance). With the server out of reach it then falls back only to a loop
    this host runs: a request left in this host's files for a fleet loop would
    never reach it, while the command said it would.

    Raises:
        UsageError: with ``--fleet``, the batch has no loop for the change.
        FleetUnavailable: with ``--fleet`` (or, steering, no loop of this host
            running the change), the server cannot be reached.
    """
    from .._fleet import loop_state

    try:
        loop = loop_state(connection, args.change)
    except FleetUnavailable as exc:
        if args.fleet or (steers and not _runs_here(args)):
            raise
        out.note(f"{exc.message}; showing this host's files")
        return None
    if loop is None and args.fleet:
        raise UsageError(
            f'the fleet batch "{connection.config.name}" has no loop for change "{args.change}"',
            hint="forge fleet status lists its loops",
        )
    return loop


def _runs_here(args: argparse.Namespace) -> bool:
    """Whether a loop of this host runs the change now."""
    from .._state import ChangePaths, loop_running

    return loop_running(ChangePaths(project_from(args).root, args.change))


# -- forge circuit --------------------------------------------------------------


def fleet_circuit(
    args: argparse.Namespace, out: Output, project: Project, describe: Callable[[Any], str]
) -> int | None:
    """``forge circuit`` of a fleet loop; None when the change is this host's own."""
    from .._fleet import reset_circuit

    with connected(project, args) as connection:
        loop = fleet_loop(connection, args, out)
        if loop is None:
            return None
        name = connection.config.name
        if not args.reset:
            from .._fleet import read_state

            keys = connection.config.keys
            state, _ = connection.once(lambda client: read_state(client, keys, args.change))
            if out.json_mode:
                out.document(
                    {
                        "change": args.change,
                        "fleet": name,
                        "loop": loop,
                        "circuit": attrs.asdict(state.circuit),
                    }
                )
            else:
                out.line(
                    f'change "{args.change}" (fleet "{name}", {_where(loop)}): '
                    f"circuit {describe(state.circuit)}"
                )
            return EXIT_OK
        reason = (args.reason or "").strip()
        applied, before = reset_circuit(connection, args.change, reason=reason)
        circuit = before.circuit
        line = (
            f'Circuit: reset for change "{args.change}" on the fleet "{name}" — was '
            f"{circuit.state}, opened {circuit.opens} time(s), {circuit.iterations_used} "
            f"iteration(s) used. Reason: {reason}"
        )
        out.line(line)
        breaker = None
        from .._verify import holds, reset_line

        if holds(before.verify):
            breaker = reset_line(before.verify, args.change)
            out.line(breaker)
        if applied.requeued:
            out.line(
                f"Requeued: the loop had ended {loop.get('reason') or applied.was}; a host "
                "working the batch runs it again (start one with: forge fleet work)"
            )
        elif applied.was in ("done",):
            out.line(f"It ended done: forge fleet requeue {args.change} runs it again", style="dim")
        held = _still_held(connection, args.change, before.spend)
        for hold in held:
            out.line(hold)
        if out.json_mode:
            out.document(
                {
                    "change": args.change,
                    "fleet": name,
                    "message": line,
                    "was": attrs.asdict(circuit),
                    "verify_breaker": breaker,
                    "requeued": applied.requeued,
                    "still_held": list(held),
                }
            )
        return EXIT_ESCALATE if held else EXIT_OK


def _still_held(connection: Connection, change: str, spend: Any) -> tuple[str, ...]:
    """A spent budget still stops the loop: granting money is its own decision."""
    from .._fleet import read_spec
    from .._policy import structure_policy
    from .._spend import budget_exceeded

    spec = read_spec(connection, change)
    if spec is None:
        return ()
    budget = structure_policy(spec.policy, f"fleet loop {change}").budget
    spent = budget_exceeded(spend, budget)
    if spent is None:
        return ()
    return (
        f"Still held: spend budget ({spent}) — clear it with: forge spend {change} --reset --fleet",
    )


def _where(loop: dict[str, Any]) -> str:
    state = str(loop.get("state"))
    if state == "running" and loop.get("host"):
        return f"running on {loop['host']}"
    if loop.get("reason") and loop.get("reason") != state:
        return f"{state}: {loop['reason']}"
    return state


# -- forge spend ----------------------------------------------------------------


def fleet_spend(args: argparse.Namespace, out: Output, project: Project) -> int | None:
    """``forge spend [CHANGE]`` of the fleet; None when the change is this host's own."""
    from .._fleet import read_spend, reset_spend

    with connected(project, args) as connection:
        name = connection.config.name
        if args.change is None:
            every = read_spend(connection)
            if out.json_mode:
                out.document(
                    {
                        "fleet": name,
                        "spend": {c: attrs.asdict(t) for c, t in every.items()},
                    }
                )
                return EXIT_OK
            out.line(f'fleet "{name}": {len(every)} loop(s)')
            width = max((len(change) for change in every), default=0)
            for change, spent in every.items():
                out.line(
                    f"  {change.ljust(width)}  {spent.iterations:>3} iteration(s)  "
                    f"{spent.tokens:>9} tokens  {spent.tool_calls:>5} tool calls  "
                    f"${spent.cost_usd:.4f}"
                )
            return EXIT_OK
        loop = fleet_loop(connection, args, out)
        if loop is None:
            return None
        if args.reset:
            _applied, before = reset_spend(connection, args.change)
            line = (
                f'Spend: reset for change "{args.change}" on the fleet "{name}" — cleared '
                f"{before.tokens} tokens, {before.tool_calls} tool calls, "
                f"${before.cost_usd:.4f}."
            )
            out.line(line)
            if out.json_mode:
                out.document(
                    {"change": args.change, "message": line, "cleared": attrs.asdict(before)}
                )
            return EXIT_OK
        totals = read_spend(connection, args.change)[args.change]
        budget = _budget(connection, args.change)
        if out.json_mode:
            out.document(
                {
                    "change": args.change,
                    "fleet": name,
                    "spend": attrs.asdict(totals),
                    "budget": None if budget is None else attrs.asdict(budget),
                }
            )
            return EXIT_OK

        def ceiling(value: object) -> str:
            return "no ceiling" if value is None else f"ceiling {value}"

        out.line(
            f'change "{args.change}" (fleet "{name}", {_where(loop)}): '
            f"{totals.iterations} iteration(s) recorded"
        )
        out.line(f"  tokens:     {totals.tokens} ({ceiling(getattr(budget, 'max_tokens', None))})")
        out.line(
            f"  tool calls: {totals.tool_calls} "
            f"({ceiling(getattr(budget, 'max_tool_calls', None))})"
        )
        out.line(
            f"  cost:       ${totals.cost_usd:.4f} "
            f"({ceiling(getattr(budget, 'max_cost_usd', None))})"
        )
        return EXIT_OK


def _budget(connection: Connection, change: str) -> Any:
    from .._fleet import read_spec
    from .._policy import structure_policy

    spec = read_spec(connection, change)
    return None if spec is None else structure_policy(spec.policy, f"fleet loop {change}").budget


# -- forge fleet requeue / cancel -----------------------------------------------


def requeue_cmd(args: argparse.Namespace, out: Output) -> int:
    """``forge fleet requeue CHANGE [--reason TEXT]``."""
    from .._fleet import requeue

    project = project_from(args)
    with connected(project, args) as connection:
        applied = requeue(connection, args.change, reason=_reason(args))
        name = connection.config.name
    out.line(
        f'fleet "{name}": change "{args.change}" is queued again (it had ended '
        f"{applied.was}); its iterations, spend and timeline go on"
    )
    out.line("a host running forge fleet work picks it up (start one if none is)", style="dim")
    if out.json_mode:
        out.document({"fleet": name, "change": args.change, "was": applied.was, "queued": True})
    return EXIT_OK


def cancel_cmd(args: argparse.Namespace, out: Output) -> int:
    """``forge fleet cancel CHANGE [--reason TEXT]``."""
    from .._fleet import cancel, loop_state

    project = project_from(args)
    with connected(project, args) as connection:
        loop = loop_state(connection, args.change) or {}
        applied = cancel(connection, args.change, reason=_reason(args))
        name = connection.config.name
        heartbeat = connection.config.heartbeat
        expiry = _expiry_line(connection)
    if applied.was == "running":
        how = (
            f"it was running on {loop.get('host') or 'a host'}, which stops its agent "
            f"within a heartbeat ({heartbeat:g}s)"
        )
    else:
        how = "it was queued: no host starts it"
    out.line(f'fleet "{name}": change "{args.change}" cancelled — {how}')
    if expiry:
        out.line(expiry, style="dim")
    if out.json_mode:
        out.document(
            {"fleet": name, "change": args.change, "was": applied.was, "host": loop.get("host")}
        )
    return EXIT_OK


def _expiry_line(connection: Connection) -> str | None:
    """When the batch's keys expire (every loop ended), in words; None while it is live."""
    from .._durations import format_duration
    from .._fleet import expires_in

    keys = connection.config.keys
    left = connection.once(lambda client: expires_in(client, keys))
    if left is None:
        return None
    return (
        f"every loop has ended: the batch's keys expire in {format_duration(round(left))} "
        "([fleet] keep; forge fleet export keeps them as files)"
    )


def _reason(args: argparse.Namespace) -> str:
    return str(getattr(args, "reason", None) or "").strip()
