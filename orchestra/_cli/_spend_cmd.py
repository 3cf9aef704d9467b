"""``forge spend <change> [--reset]``: what a change has spent, and clearing it.

With ``--fleet`` (or ``FORGE_REDIS_URL`` set) a fleet loop's, on the server;
without a change there, every loop of the batch.
"""

from __future__ import annotations

import argparse

import attrs

from .._errors import EXIT_OK, UsageError
from .._fleet import fleet_meant
from .._spend import read_spend, reset_spend
from .._state import ChangePaths, require_change
from ._common import change_budget, project_from
from ._console import Output


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    command = "forge spend --reset" if args.reset else "forge spend"
    if fleet_meant(getattr(args, "fleet", False)) and not (args.change is None and args.reset):
        # A fleet loop's spend is on the server (a change of this host's own is not).
        from ._fleet_control_cmd import fleet_spend

        done = fleet_spend(args, out, project)
        if done is not None:
            return done
    if args.change is None:
        raise UsageError(
            f"{command} needs a change",
            hint="forge spend CHANGE; every loop of a fleet batch: forge spend --fleet",
        )
    paths = require_change(ChangePaths(project.root, args.change), command)
    if args.reset:
        reading = reset_spend(paths)
        before = reading.totals
        if reading.corrupt is not None:
            out.note(reading.corrupt.render())
        line = (
            f'Spend: reset for change "{paths.name}" — cleared {before.tokens} tokens, '
            f"{before.tool_calls} tool calls, ${before.cost_usd:.4f}."
        )
        out.line(line)
        if out.json_mode:
            out.document({"change": paths.name, "message": line, "cleared": attrs.asdict(before)})
        return EXIT_OK
    budget = change_budget(project, paths.name, args)
    reading = read_spend(paths)
    if reading.corrupt is not None:
        out.note(reading.corrupt.render())
    totals = reading.totals
    if out.json_mode:
        out.document(
            {"change": paths.name, "spend": attrs.asdict(totals), "budget": attrs.asdict(budget)}
        )
        return EXIT_OK

    def ceiling(value: object) -> str:
        return "no ceiling" if value is None else f"ceiling {value}"

    out.line(f'change "{paths.name}": {totals.iterations} iteration(s) recorded')
    out.line(f"  tokens:     {totals.tokens} ({ceiling(budget.max_tokens)})")
    out.line(f"  tool calls: {totals.tool_calls} ({ceiling(budget.max_tool_calls)})")
    estimated = " estimated from tokens and the executor's prices," if totals.cost_estimated else ""
    out.line(f"  cost:       ${totals.cost_usd:.4f}{estimated} ({ceiling(budget.max_cost_usd)})")
    if totals.blocked:
        out.line(
            f"  blocked:    {totals.blocked} — clear it with forge spend {paths.name} --reset",
            style="red",
        )
    return EXIT_OK
