"""``forge circuit <change> [--reset]``: a supervised loop's circuit, and resetting it.

With ``--fleet`` (or ``FORGE_REDIS_URL`` set) a fleet loop's, on the server.
"""

from __future__ import annotations

import argparse
import time

import attrs

from .._circuit import CircuitState, cooldown_remaining, load_circuit, reset_circuit
from .._durations import format_duration
from .._errors import EXIT_ESCALATE, EXIT_OK, ForgeError, UsageError
from .._fleet import fleet_meant
from .._state import ChangePaths, require_change
from .._workspace import Project
from ._common import change_budget, project_from
from ._console import Output


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    command = "forge circuit --reset" if args.reset else "forge circuit"
    if args.reason is not None and not args.reset:
        raise UsageError(
            "--reason goes with --reset", hint="forge circuit C --reset --reason '...'"
        )
    if args.reset and not (args.reason or "").strip():
        # Overriding an open circuit bypasses the loop's safety: say why, for the record.
        raise UsageError(
            "forge circuit --reset needs --reason: why may this loop run again?",
            hint=f"forge circuit {args.change} --reset --reason 'fixed the flaky fixture'",
        )
    if fleet_meant(getattr(args, "fleet", False)):
        # A fleet loop's circuit is on the server (a change of this host's own is not).
        from ._fleet_control_cmd import fleet_circuit

        done = fleet_circuit(args, out, project, _describe)
        if done is not None:
            return done
    paths = require_change(ChangePaths(project.root, args.change), command)
    if args.reset:
        reason = (args.reason or "").strip()
        before = reset_circuit(paths, reason=reason)
        line = (
            f'Circuit: reset for change "{paths.name}" — was {before.state}, opened '
            f"{before.opens} time(s), {before.iterations_used} iteration(s) used. "
            f"Reason: {reason}"
        )
        out.line(line)
        breaker = _reset_verify_breaker(paths, reason)
        if breaker is not None:
            out.line(breaker)
        held = _still_held(project, paths)
        for hold in held:
            out.line(hold)
        if out.json_mode:
            out.document(
                {
                    "change": paths.name,
                    "message": line,
                    "was": attrs.asdict(before),
                    "verify_breaker": breaker,
                    "still_held": list(held),
                }
            )
        return EXIT_ESCALATE if held else EXIT_OK
    state = load_circuit(paths)
    if out.json_mode:
        out.document({"change": paths.name, "circuit": attrs.asdict(state)})
    else:
        out.line(f'change "{paths.name}": circuit {_describe(state)}')
    return EXIT_OK


def _reset_verify_breaker(paths: ChangePaths, reason: str) -> str | None:
    """Clear the change's verify breaker too, when it holds anything; its ``Breaker:`` line.

    A loop whose circuit a person reset must be able to run: a verify streak
    left behind (at or near ``max_failures``) would stop it again before, or
    after, its first iteration. The reset is journalled as the verify
    breaker's own ``breaker.reset`` event, with the same reason.
    """
    from .._verify import holds, read_breaker, reset_breaker, reset_line

    if not holds(read_breaker(paths).before):
        return None
    return reset_line(reset_breaker(paths, reason=reason).before, paths.name)


def _still_held(project: Project, paths: ChangePaths) -> tuple[str, ...]:
    """What would still stop the loop after the reset, each with the command that clears it.

    A spent budget is not cleared with the circuit: granting more money is a
    decision of its own (``forge spend C --reset``).
    """
    from .._spend import budget_exceeded, read_spend

    try:
        budget = change_budget(project, paths.name)
    except ForgeError as exc:
        return (f"Still held: unknown — the policy could not be read ({exc.message})",)
    reading = read_spend(paths)
    if reading.totals.blocked is not None:
        spent: str | None = f"the spend state is unreadable ({reading.totals.blocked})"
    else:
        spent = budget_exceeded(reading.totals, budget)
    if spent is None:
        return ()
    return (
        f"Still held: spend budget ({spent}) — clear it with: forge spend {paths.name} --reset",
    )


def _describe(state: CircuitState) -> str:
    text = state.state
    if state.reason:
        text += f" ({state.reason})"
    left = cooldown_remaining(state, time.time())
    if left:
        text += f", {format_duration(round(left))} of cooldown left"
    if state.escalated:
        text += ", escalated"
    return text
