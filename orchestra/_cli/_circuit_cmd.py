"""``forge circuit <change> [--reset]``: a supervised loop's circuit, and resetting it."""

from __future__ import annotations

import argparse
import time

import attrs

from .._circuit import CircuitState, cooldown_remaining, load_circuit, reset_circuit
from .._durations import format_duration
from .._errors import EXIT_OK, UsageError
from .._state import ChangePaths, require_change
from ._common import project_from
from ._console import Output


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    command = "forge circuit --reset" if args.reset else "forge circuit"
    paths = require_change(ChangePaths(project.root, args.change), command)
    if args.reason is not None and not args.reset:
        raise UsageError(
            "--reason goes with --reset", hint="forge circuit C --reset --reason '...'"
        )
    if args.reset:
        reason = (args.reason or "").strip()
        if not reason:
            # Overriding an open circuit bypasses the loop's safety: say why, for the record.
            raise UsageError(
                "forge circuit --reset needs --reason: why may this loop run again?",
                hint=f"forge circuit {paths.name} --reset --reason 'fixed the flaky fixture'",
            )
        before = reset_circuit(paths, reason=reason)
        line = (
            f'Circuit: reset for change "{paths.name}" — was {before.state}, opened '
            f"{before.opens} time(s), {before.iterations_used} iteration(s) used. "
            f"Reason: {reason}"
        )
        out.line(line)
        if out.json_mode:
            out.document({"change": paths.name, "message": line, "was": attrs.asdict(before)})
        return EXIT_OK
    state = load_circuit(paths)
    if out.json_mode:
        out.document({"change": paths.name, "circuit": attrs.asdict(state)})
    else:
        out.line(f'change "{paths.name}": circuit {_describe(state)}')
    return EXIT_OK


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
