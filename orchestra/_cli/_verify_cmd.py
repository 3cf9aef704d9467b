"""``forge verify``: run the checks, print the report, and (with --change) drive the breaker."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._durations import human_seconds
from .._errors import EXIT_ESCALATE, EXIT_OK, UsageError
from .._secscan import output_redactor
from .._state import STATE_CONVERTER, ChangePaths, require_change
from .._verify import (
    BreakerUpdate,
    VerifyReport,
    breaker_line,
    record_attempt,
    reset_breaker,
    reset_line,
    run_verify,
)
from .._workspace import Project, tree_state
from ._common import flag_layer, policy_from, project_from
from ._console import Output
from ._trio_run import run_interruptible
from ._unrecorded import QUEUED_VERIFY, leave_in_inbox, verify_unrecorded

if TYPE_CHECKING:
    from .._policy import Policy


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    if args.reset_breaker:
        if not args.change:
            raise UsageError("--reset-breaker needs --change <c>: it clears one change's breaker")
        known = require_change(
            ChangePaths(project.root, args.change), "forge verify --reset-breaker"
        )
        return _reset(known, out)
    paths = ChangePaths(project.root, args.change) if args.change else None
    flags = []
    if args.max_failures is not None:
        flags.append(flag_layer("--max-failures", "verify.max_failures", args.max_failures))
    policy = policy_from(project, flags, args).policy
    verify = policy.verify
    redact = output_redactor(policy.secscan, root=project.root)
    grace = policy.run.grace.seconds

    if paths is None:
        # Bare verify reports and never gates: exit 0 whatever the verdict.
        report = run_interruptible(run_verify, project.root, verify, grace, redact)
        _print_report(report, out)
        if out.json_mode:
            out.document({**report.as_json(), "change": None, "breaker": None})
        return EXIT_OK

    inside = getattr(args, "inside", None)
    if inside is not None:
        return _unrecorded(project, policy, paths.name, out)
    tree = tree_state(project.root)
    report = run_interruptible(run_verify, project.root, verify, grace, redact)
    # Record before printing anything: a reader that stops early (`| head -1`)
    # must not cost the breaker its attempt.
    update = record_attempt(paths, report, max_failures=verify.max_failures, tree=tree)
    _print_report(report, out)
    _note_corruption(update, out)
    previous = update.before.consecutive_failures if report.passed else 0
    line = breaker_line(update.after, paths.name, previous_streak=previous)
    exit_code = EXIT_ESCALATE if update.after.gate_open else EXIT_OK
    out.line(line, style="bold red" if exit_code else None)
    if out.json_mode:
        out.document(
            {
                **report.as_json(),
                "change": paths.name,
                "breaker": {**_state_json(update), "message": line, "exit_code": exit_code},
            }
        )
    return exit_code


def _unrecorded(project: Project, policy: Policy, change: str, out: Output) -> int:
    """``forge verify --change`` by the agent inside its own loop: the report, no attempt.

    The recorded verify it stands for is left in the inbox: the loop runs it
    on the tree the iteration ended with, before the requests queued after
    it (a ship-ready checkpoint needs that verify's PASS).
    """
    report = verify_unrecorded(project, policy)
    leave_in_inbox(project.root, change, ["verify", "--change", change])
    _print_report(report, out)
    line = f'Breaker: change "{change}" — run inside its loop: {QUEUED_VERIFY}'
    out.line(line)
    if out.json_mode:
        out.document({**report.as_json(), "change": change, "breaker": None, "recorded": False})
    return EXIT_OK


def _reset(paths: ChangePaths, out: Output) -> int:
    update = reset_breaker(paths)
    _note_corruption(update, out)
    line = reset_line(update.before, paths.name)
    out.line(line)
    if out.json_mode:
        out.document({"change": paths.name, "message": line, "breaker": _state_json(update)})
    return EXIT_OK


def _note_corruption(update: BreakerUpdate, out: Output) -> None:
    if update.corrupt is not None:
        out.note(update.corrupt.render())
        out.note("the verify breaker is blocked until a human clears it with --reset-breaker")


def _state_json(update: BreakerUpdate) -> dict[str, Any]:
    data: dict[str, Any] = STATE_CONVERTER.unstructure(update.after)
    data["gate_open"] = update.after.gate_open
    return data


def _print_report(report: VerifyReport, out: Output) -> None:
    for check in report.checks:
        status = "PASS" if check.passed else "FAIL"
        out.styled(
            (f"{check.name}: ", "bold"),
            (status, "green" if check.passed else "red"),
            (f" ({check.outcome}, {human_seconds(check.duration)}) — {check.command}", None),
        )
        if check.passed:
            continue
        if check.failure_lines:
            out.line("  failures:")
            for failure in check.failure_lines:
                out.line(f"    {failure}", style="red")
        if check.last_lines:
            out.line("  last lines:")
            for last in check.last_lines:
                out.line(f"    {last}", style="dim")
    coverage = report.coverage
    where = ", ".join(report.spec_paths) or "(no spec paths)"
    if not coverage.counts:
        reason = "no spec files" if not coverage.spec_files else "no scenarios in the spec files"
        out.line(f"scenarios: {reason} under {where} — coverage not counted")
    else:
        total = len(coverage.scenarios)
        out.styled(
            ("scenarios: ", "bold"),
            (f"{coverage.covered_count}/{total} covered", "green" if coverage.passed else "red"),
        )
        for scenario in coverage.uncovered:
            out.line(f"  uncovered: {scenario.id} ({scenario.path}:{scenario.line})", style="red")
        for path, why in coverage.skipped_specs:
            out.line(f"  unreadable spec: {path} ({why})", style="red")
    for pattern in coverage.unmatched_patterns:
        out.line(f"  note: spec path {pattern!r} matches no spec file", style="yellow")
    if report.nothing_checked:
        out.line(
            "nothing to verify: no test or lint command and no scenarios (see [verify])",
            style="red",
        )
    out.styled(
        ("Verdict: ", "bold"), (report.verdict, "bold green" if report.passed else "bold red")
    )
