"""``forge run``: one bounded agent loop, dry run by default; the first trip stops it."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs

from .._durations import human_seconds
from .._engine import (
    BUDGET_GATE,
    DONE,
    EXECUTOR_FAILED,
    SECSCAN_GATE,
    VERIFY_GATE,
    EventSink,
    IterationRecord,
    LoopPlan,
    LoopProgress,
    RunSummary,
    counted_label,
    first_trip_rules,
    guarded,
    iteration_time_limit,
    run_loop,
)
from .._errors import EXIT_ESCALATE, EXIT_INTERRUPTED, EXIT_OK, ConfigError, UsageError
from .._executor import Executor, IterationOutcome, default_price, load_executor, shell_command
from .._policy import Layer, Policy, relaxed_warnings
from .._ratelimit import LimiterStatistics, open_limiter
from .._spend import read_spend
from .._state import ChangePaths
from .._workspace import Project, default_change
from ._common import flag_layer, policy_from, project_from
from ._console import Output
from ._trio_run import run_interruptible

ESCALATE = "escalate: a human should review before continuing"
# Said once as a loop starts (forge run --yes, forge supervise): a contract line.
ANNOUNCE = (
    "Circuit breaker is active — monitoring for stagnation, rate limits, and file protection."
)
GATES_LINE = f"  gates:    {VERIFY_GATE}, {BUDGET_GATE}, {SECSCAN_GATE}"
STOP_LINE = "  stop:     any gate opening halts the loop and escalates to a human"
DRY_RUN_LINE = "dry run: nothing executed (pass --yes to run)"

_FLAGS = (
    ("max_iterations", "--max-iterations", "run.max_iterations"),
    ("timeout", "--timeout", "run.timeout"),
    ("max_tokens", "--max-tokens", "budget.max_tokens"),
    ("max_tool_calls", "--max-tool-calls", "budget.max_tool_calls"),
    ("max_cost_usd", "--max-cost-usd", "budget.max_cost_usd"),
)


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    loaded = policy_from(project, _flag_layers(args), args)
    policy = loaded.policy
    paths = ChangePaths(project.root, args.change or default_change(project.root))
    executor = _executor(args, policy, project)
    plan = LoopPlan(
        paths=paths,
        executor=executor,
        max_iterations=policy.run.max_iterations,
        time_limit=iteration_time_limit(
            executor, policy, flag_set=loaded.sources.get("run.timeout", "").startswith("flag ")
        ),
        grace=policy.run.grace.seconds,
        done_marker=policy.run.done_marker,
        workdir=project.root,
        prompt=args.prompt if args.prompt is not None else policy.run.prompt,
    )
    # Guarded before the plan is shown: a secret-scan rules file that does not
    # load is an error of the plan too.
    rules = first_trip_rules(policy, verify_done=verify_configured(loaded.sources))
    plan, settings = guarded(plan, policy, rules, limiter=None)
    if args.prompt is not None and policy.run.cmd:
        out.note("note: --prompt is for named executors; a --cmd receives it only as $FORGE_PROMPT")
    if not args.yes:
        print_plan(plan, policy, out, verify_done=rules.verify_done)
        out.line()
        out.line(DRY_RUN_LINE)
        if out.json_mode:
            out.document({"dry_run": True, "plan": _plan_json(plan, policy)})
        return EXIT_OK

    refuse_unpriced([w for w in [cost_warning(executor, policy)] if w], policy)
    out.announce(ANNOUNCE)

    def on_limiter(kind: str, stats: LimiterStatistics) -> None:
        if kind == "warn":
            out.note(f"rate limit: {stats.used} of {stats.calls} calls used in the window")
        elif kind == "wait":
            out.note(f"rate limit: waiting {stats.next_free_in:.0f}s for a permit")

    limiter = open_limiter(policy.rate_limit, project.root, on_event=on_limiter)
    settings = attrs.evolve(settings, limiter=limiter)
    progress = LoopProgress(paths.name, plan.max_iterations)
    try:
        summary = run_interruptible(
            partial(
                run_loop,
                progress=progress,
                on_event=_notes_printer(out),
                on_iteration=_progress_printer(plan, out),
            ),
            plan,
            settings,
        )
    except KeyboardInterrupt:
        out.line(f"run: INTERRUPTED after {progress.completed} iteration(s)", style="bold red")
        out.line("  detail: the executor tree was stopped; the interruption is in the timeline")
        out.line(ESCALATE, style="bold red")
        if out.json_mode:
            out.document(
                {
                    "status": "INTERRUPTED",
                    "reason": "interrupted",
                    "change": paths.name,
                    "run_id": plan.run_id,
                    "iterations": progress.completed,
                    "exit_code": EXIT_INTERRUPTED,
                }
            )
        return EXIT_INTERRUPTED
    code = EXIT_OK if summary.clean else EXIT_ESCALATE
    _print_summary(summary, out)
    if out.json_mode:
        out.document(_summary_json(summary, plan, code))
    return code


def _flag_layers(args: argparse.Namespace) -> list[Layer]:
    layers = [
        flag_layer(flag, dotted, getattr(args, attribute))
        for attribute, flag, dotted in _FLAGS
        if getattr(args, attribute) is not None
    ]
    if args.cmd is not None:
        layers.append(flag_layer("--cmd", "run", {"cmd": args.cmd, "executor": ""}))
    elif args.executor is not None:
        layers.append(flag_layer("--executor", "run", {"executor": args.executor, "cmd": ""}))
    return layers


def _executor(args: argparse.Namespace, policy: Policy, project: Project) -> Executor:
    if policy.run.cmd:
        return shell_command(policy.run.cmd)
    if policy.run.executor:
        executor = load_executor(policy.run.executor, project.root)
        return executor.for_policy(policy.run.permission, policy.run.session)
    raise UsageError(
        "no executor to run",
        hint="pass --cmd '<agent command>' or --executor NAME, or set [run].cmd or "
        "[run].executor in forge.toml",
    )


def verify_configured(sources: Mapping[str, str]) -> bool:
    """Whether the user set ``[verify] command`` (a file or a flag), not the shipped default.

    ``forge run`` checks a done signal against a verify the user stated; the
    shipped ``pytest`` is no statement of what done requires in their project.
    """
    return sources.get("verify.command", "default") != "default"


def print_plan(plan: LoopPlan, policy: Policy, out: Output, *, verify_done: bool = False) -> None:
    out.line(f'Plan: up to {plan.max_iterations} iteration(s) on change "{plan.paths.name}"')
    out.line(f"  executor: {plan.describe_executor()}")
    if (permission := plan.executor.describe_permission()) is not None:
        out.line(f"  permission: {permission}")
    if plan.executor.templated and plan.executor.spec.session == "continue":
        out.line(f"  session: {session_summary(policy)}")
    if warning := cost_warning(plan.executor, policy):
        out.line(f"  warning:  {cost_warning_line(warning, policy)}", style="yellow")
    out.line(GATES_LINE)
    out.line(STOP_LINE)
    if not policy.budget.has_ceiling:
        out.line("  budget:   no ceiling configured — the spend budget gate stays closed")
    out.line(f"  secscan:  {secscan_summary(policy)}")
    out.line(f"  protect:  {protect_summary(policy)}")
    out.line(f"  sandbox:  {plan.describe_sandbox(policy)}")
    out.line(f"  circuit:  {circuit_summary()}")
    out.line(f"  limit:    {limit_summary(policy)}")
    out.line(f"  done:     {done_summary(verify_done)}")
    for warning in relaxed_warnings(policy):
        out.line(f"  {warning}", style="yellow")


def session_summary(policy: Policy) -> str:
    """The plan's words for an executor that continues sessions."""
    return (
        "continue (each iteration resumes the previous one's session; one older than "
        f"{policy.run.session_max_age} starts afresh)"
    )


def cost_warning(executor: Executor, policy: Policy) -> str | None:
    """Why a cost ceiling is set that this executor's cost may never reach, if it is so.

    Its CLI reports no cost and the model it runs has no price in its
    definition's ``[prices]``: the spend budget could not count the cost.
    """
    if policy.budget.max_cost_usd is None or not executor.templated:
        return None
    spec = executor.spec
    if spec.reports_cost or spec.output == "text":
        return None
    if default_price(spec) is not None:
        return None
    model = f"its model {spec.price_model!r}" if spec.price_model else "its model"
    return (
        f"[budget] max_cost_usd is set but executor {executor.name!r} reports no cost and "
        f"{model} has no price in its [prices]: the cost ceiling cannot be counted"
    )


def refuse_unpriced(warnings: list[str], policy: Policy) -> None:
    """Refuse to start under a cost ceiling that cannot be counted, unless accepted.

    Raises:
        ConfigError: some executor's cost cannot be counted and ``[budget]
            allow_unpriced`` is not set.
    """
    if warnings and not policy.budget.allow_unpriced:
        raise ConfigError(
            "the cost ceiling cannot be counted: an unreadable gate is never taken as closed",
            problems=warnings,
            hint="add the model's price to the executor's [prices] (docs/executors.md, "
            "Tokens and cost), or set [budget] allow_unpriced = true to run without it",
        )


def cost_warning_line(warning: str, policy: Policy) -> str:
    """The plan's line for a cost ceiling that cannot be counted."""
    if policy.budget.allow_unpriced:
        return f"{warning} (accepted: [budget] allow_unpriced = true)"
    return f"{warning}; running refuses it unless [budget] allow_unpriced = true"


def secscan_summary(policy: Policy) -> str:
    secscan = policy.secscan
    if not secscan.enabled:
        return "off ([secscan] enabled = false) — the secscan gate stays closed"
    return (
        f'rules "{secscan.rules}", before and after every iteration; unwaived findings at '
        f"or above {secscan.fail_on} open the gate"
    )


def done_summary(verify_done: bool) -> str:
    """What ends the run DONE."""
    if not verify_done:
        return "the executor signals done (no [verify] command configured to check it)"
    return (
        "the executor signals done and the verify passes on the tree it left "
        "(read-only: the verify breaker counts none of it)"
    )


def circuit_summary() -> str:
    return "refuses to start while the change's loop circuit is open or escalated"


def limit_summary(policy: Policy) -> str:
    limit = policy.rate_limit
    shared = "this process only" if limit.backend == "memory" else "shared by every loop"
    return (
        f"every executor start takes a permit: {limit.calls} per {limit.window} "
        f"({limit.backend}, {shared}); a provider's limit is waited out up to "
        f"{policy.run.max_limit_wait}"
    )


def protect_summary(policy: Policy) -> str:
    protect = policy.protect
    return (
        f"{len(protect.exist)} exist and {len(protect.frozen)} frozen path(s), checked after "
        "every iteration; harm is restored and stops the loop"
    )


def _notes_printer(out: Output) -> EventSink:
    """What the loop says that the iteration lines do not: why a session was not resumed."""

    def show(kind: str, _change: str, text: str) -> None:
        if kind == "session":
            out.line(f"  note: {text}", style="yellow")

    return show


def _progress_printer(plan: LoopPlan, out: Output) -> Any:
    refused = 0  # calls refused by a provider limit so far: they use no iteration
    noted: set[str] = set()  # cost notes already shown (each once)

    def show(outcome: IterationOutcome, record: IterationRecord) -> None:
        nonlocal refused
        process = outcome.process
        ending = record.failure or ("done" if record.done else "exit 0")
        label = counted_label(outcome.number, refused, plan.max_iterations)
        if record.provider_refused:
            ending = "refused by a provider limit"
            refused += 1
            label = f"{outcome.number} (not counted)"
        spend = f"{outcome.tokens} tokens, {outcome.tool_calls} tool calls, ${outcome.cost_usd:.4f}"
        # The verify read at a done signal: whether done stands.
        checked = f" (verify {record.verify})" if record.verify else ""
        out.line(
            f"iteration {label}: {ending}{checked} in {human_seconds(process.duration)} — {spend}",
            style="dim",
        )
        if record.cost_note and record.cost_note not in noted:
            noted.add(record.cost_note)
            out.line(f"  note: {record.cost_note}", style="yellow")

    return show


def _print_summary(summary: RunSummary, out: Output) -> None:
    # The ending counts the iterations used, as the progress lines do
    # ("2 (1/5 counted)"): a call a provider refused used none.
    if summary.refused:
        out.line(
            f"refused: {summary.refused} call(s) refused by a provider limit, not counted",
            style="dim",
        )
    if summary.reason == DONE:
        out.line(f"run: DONE after {summary.counted} iteration(s)", style="bold green")
        return
    out.line(
        f"run: STOPPED after {summary.counted} iteration(s) — {summary.reason}",
        style="bold red",
    )
    if summary.gate is not None:
        out.line(f"  gate:   {summary.gate}")
        out.line(f"  detail: {summary.detail}")
    elif summary.reason == EXECUTOR_FAILED and summary.last is not None:
        last = summary.last
        out.line(f"  executor: {summary.detail}")
        if last.observation.error:
            out.line(f"  error:    {last.observation.error.splitlines()[0]}")
        tail = last.process.output.last_lines(10)
        if tail:
            out.line("  last lines:")
            for line in tail:
                out.line(f"    {line}", style="dim")
        if last.log_path.exists():
            out.line(f"  log:      {last.log_path}")
    else:
        out.line(f"  detail: {summary.detail}")
    out.line(ESCALATE, style="bold red")


def _plan_json(plan: LoopPlan, policy: Policy) -> dict[str, Any]:
    return {
        "change": plan.paths.name,
        "max_iterations": plan.max_iterations,
        "executor": plan.describe_executor(),
        "gates": [VERIFY_GATE, BUDGET_GATE, SECSCAN_GATE],
        "timeout": str(policy.run.timeout),
        "grace": str(policy.run.grace),
        "budget_ceiling": policy.budget.has_ceiling,
    }


def _summary_json(summary: RunSummary, plan: LoopPlan, code: int) -> dict[str, Any]:
    last = summary.last
    return {
        "status": "DONE" if summary.clean else "STOPPED",
        "reason": summary.reason,
        "change": plan.paths.name,
        "run_id": plan.run_id,
        "iterations": summary.counted,
        "refused_calls": summary.refused,
        "gate": summary.gate,
        "detail": summary.detail,
        "spend": attrs.asdict(summary.spend or read_spend(plan.paths).totals),
        "last_iteration": None
        if last is None
        else {
            "exit": last.process.exit_code,
            "timed_out": last.process.timed_out,
            "failure": last.failure,
            "done": last.done,
            "last_lines": last.process.output.last_lines(10),
            "log": str(last.log_path),
        },
        "exit_code": code,
    }
