"""One iteration of an executor: run it, read its output and report, decide how it ended."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from .._guard import shell_guard_environment
from .._hook_passing import HOOKS_PASSED, LOOP_VERIFY
from .._process import TIMEOUT_EXIT_CODE, ProcessResult, run_process
from .._redact import Redact
from .._sourcepath import source_environment
from ._definition import Executor
from ._denials import write_policy
from ._observation import Observation
from ._parsers import make_parser
from ._pricing import estimate_cost, unpriced_models
from ._report import ExecutorReport, read_report

# Set for an executor by Forge (or by Claude Code for its own hooks), never passed on.
_NOT_INHERITED = frozenset({"CLAUDE_PROJECT_DIR", HOOKS_PASSED, LOOP_VERIFY})


@attrs.frozen
class IterationContext:
    """Where and as what one iteration runs."""

    change: str
    number: int
    max_iterations: int
    workdir: Path
    state_dir: Path
    report_path: Path
    log_path: Path
    prompt: str = ""
    # Extra FORGE_* variables for this iteration (the recovery strategy in force).
    extra_env: tuple[tuple[str, str], ...] = ()
    # What the executor's command runs inside (``bwrap ... --``, the sandbox), if anything.
    wrapper: tuple[str, ...] = ()

    def placeholders(self) -> dict[str, str]:
        return {
            "prompt": self.prompt,
            "change": self.change,
            "iteration": str(self.number),
            "max_iterations": str(self.max_iterations),
            "state_dir": str(self.state_dir),
            "report": str(self.report_path),
            "workdir": str(self.workdir),
        }

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        """Forge's environment, the executor's extras, and the iteration's context.

        What tells a hook where it runs is never inherited: Forge started from
        a Claude Code session carries its ``CLAUDE_PROJECT_DIR``, which would
        point another CLI's guard at that session's project.
        """
        env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
        env.update(extra)
        env.update(
            {
                "FORGE_CHANGE": self.change,
                "FORGE_ITERATION": str(self.number),
                "FORGE_MAX_ITERATIONS": str(self.max_iterations),
                "FORGE_STATE_DIR": str(self.state_dir),
                "FORGE_REPORT": str(self.report_path),
                "FORGE_PROMPT": self.prompt,
            }
        )
        env.update(self.extra_env)
        # In a linked worktree the agent's own commands (its tests) import the
        # worktree's sources, as the loop's verify does.
        env.update(source_environment(self.workdir, env))
        return env


@attrs.frozen
class IterationOutcome:
    """How one iteration went.

    ``done`` is the only clean ending: the executor signalled done (report or
    marker) and exited 0, and its own output reports no error. ``failed``
    covers a non-zero exit, a timeout, a signal and a command that could not
    start; ``failure`` says which, in a few words.
    """

    number: int
    process: ProcessResult
    observation: Observation
    report: ExecutorReport | None
    report_problems: tuple[str, ...]
    log_path: Path
    # From the executor's price table, when its CLI reports no cost of its own.
    estimated_cost: float | None = None
    # Models the output names that the price table does not price (no estimate).
    unpriced: tuple[str, ...] = ()

    @property
    def cost_note(self) -> str | None:
        """Why a cost the CLI does not report was not estimated, when a price is missing."""
        if not self.unpriced or self.observation.cost_reported:
            return None
        names = ", ".join(self.unpriced)
        return f"no price for model {names} in the executor's price table: no cost estimate"

    @property
    def failed(self) -> bool:
        return not self.process.succeeded

    @property
    def done(self) -> bool:
        if self.failed or self.observation.is_error or self.observation.unreadable:
            # Output that could not be read is never a clean ending, whatever it printed.
            return False
        said_done = self.report is not None and self.report.done is True
        return said_done or self.observation.done

    @property
    def failure(self) -> str | None:
        if not self.failed:
            return None
        if self.process.timed_out:
            return f"timed out (the equivalent of exit {TIMEOUT_EXIT_CODE})"
        return self.process.describe()

    @property
    def tokens(self) -> int:
        """Tokens spent: the report's figure when it gives one, else the parsed output's."""
        if self.report is not None and self.report.tokens is not None:
            return self.report.tokens
        return self.observation.tokens

    @property
    def tool_calls(self) -> int:
        if self.report is not None and self.report.tool_calls is not None:
            return self.report.tool_calls
        return self.observation.tool_calls

    @property
    def cost_usd(self) -> float:
        """The report's cost, else the one the output reports, else the estimate."""
        if self.report is not None and self.report.cost_usd is not None:
            return self.report.cost_usd
        if self.cost_estimated and self.estimated_cost is not None:
            return self.estimated_cost
        return self.observation.cost_usd

    @property
    def cost_estimated(self) -> bool:
        """The cost is Forge's estimate from tokens and prices, not a reported one."""
        reported = self.observation.cost_reported or (
            self.report is not None and self.report.cost_usd is not None
        )
        return not reported and self.estimated_cost is not None


async def run_iteration(
    executor: Executor,
    context: IterationContext,
    *,
    time_limit: float,
    grace: float,
    done_marker: str,
    redact: Redact | None = None,
    session: str | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> IterationOutcome:
    """Run one iteration of ``executor`` in its own process group and judge it.

    With ``redact``, every output line is redacted before it is logged, kept or
    parsed, and so is the report the executor leaves. With ``session``, an
    executor that continues sessions continues that one. A provider's relative
    reset ("try again in 30 seconds") is counted from ``wall_clock``.
    """
    with contextlib.suppress(FileNotFoundError):
        context.report_path.unlink()  # a report left by an earlier iteration is not this one's
    context.report_path.parent.mkdir(parents=True, exist_ok=True)
    marker = executor.spec.done_marker or done_marker
    parser = make_parser(executor.spec.output, marker, clock=wall_clock)
    env = context.environment(executor.environment())
    if executor.templated and executor.spec.shell_guard:
        env.update(shell_guard_environment(context.state_dir, env))
    if (policy := executor.deny_policy(context.placeholders())) is not None:
        write_policy(*policy)  # the CLI reads it as it starts
    argv = executor.argv(context.placeholders(), session=session)
    # A program that is not found keeps its own "could not start", not the sandbox's word.
    if context.wrapper and argv and _found(argv[0], env, context.workdir):
        argv = [*context.wrapper, *argv]
    process = await run_process(
        argv,
        cwd=context.workdir,
        env=env,
        time_limit=time_limit,
        grace=grace,
        log_path=context.log_path,
        on_output=parser.feed,
        redact=redact,
        on_error_output=parser.feed_stderr,
    )
    report, problems = read_report(context.report_path, redact)
    observation = parser.finish()
    return IterationOutcome(
        number=context.number,
        process=process,
        observation=observation,
        report=report,
        report_problems=tuple(problems),
        log_path=context.log_path,
        estimated_cost=estimate_cost(executor.spec, observation),
        unpriced=unpriced_models(executor.spec, observation),
    )


def _found(program: str, env: Mapping[str, str], cwd: Path) -> bool:
    """Whether ``program`` names something executable, as the executor's start would find it."""
    if "/" in program:
        return os.access(cwd / program, os.X_OK)
    return shutil.which(program, path=env.get("PATH")) is not None
