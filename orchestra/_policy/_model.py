"""The policy model: every tunable Forge has, with its default.

This module is the one place in the code where a default lives. Each table of
``forge.toml`` is a frozen attrs class; adding a table means adding a class and
one field of :class:`Policy`. Every field carries a ``doc`` used by
``forge policy show`` and by the commented ``policies/default.toml``.
"""

import re
from typing import Any, TypeGuard, TypeVar

import attrs

from .._durations import Duration
from ._fields import (
    Check,
    ConflictError,
    FieldError,
    at_least,
    between,
    in_choices,
    in_each,
    non_empty,
    non_empty_list,
    optional,
    positive_duration,
    relative_path,
    relative_path_or_none,
    relative_paths,
)

MAX_ITERATIONS_CEILING = 50

_TABLES: set[type] = set()
_T = TypeVar("_T", bound=type)


def _doc(text: str, example: object = None) -> dict[str, Any]:
    """Field metadata: its documentation and, for a value that is unset by default, an example."""
    return {"doc": text, "example": example}


def _table(cls: _T) -> _T:
    """Mark an attrs class as a table of the policy (rather than a value type)."""
    _TABLES.add(cls)
    return cls


@_table
@attrs.frozen
class VerifyPolicy:
    """``[verify]``: what ``forge verify`` runs and when its breaker opens."""

    command: str = attrs.field(
        default="pytest -q --junitxml=.forge/junit.xml",
        metadata=_doc('Test command, run with sh -c from the project root; "" runs none.'),
    )
    lint: str = attrs.field(
        default="", metadata=_doc('Lint command, run after the tests; "" runs none.')
    )
    specs: tuple[str, ...] = attrs.field(
        default=("specs/",),
        validator=relative_paths,
        metadata=_doc("Where spec scenarios are found (directories, files or globs)."),
    )
    tests: tuple[str, ...] = attrs.field(
        default=("tests/",),
        validator=relative_paths,
        metadata=_doc('Where tests name the scenarios they cover ("scenario: <id>").'),
    )
    max_failures: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive verify failures that open the breaker of a change."),
    )
    timeout: Duration = attrs.field(
        default=Duration(15 * 60),
        validator=positive_duration,
        metadata=_doc("Longest a single verify command may run before it counts as failed."),
    )


@_table
@attrs.frozen
class RunPolicy:
    """``[run]``: one bounded loop of ``forge run``, and each iteration of any loop."""

    max_iterations: int = attrs.field(
        default=5,
        validator=between(1, MAX_ITERATIONS_CEILING, what="an integer from 1 to 50 (the ceiling)"),
        metadata=_doc("Iterations a run may use; finishing them is not success. Ceiling 50."),
    )
    timeout: Duration = attrs.field(
        default=Duration(15 * 60),
        validator=positive_duration,
        metadata=_doc("Longest one iteration may run; past it the executor tree is stopped."),
    )
    grace: Duration = attrs.field(
        default=Duration(10),
        metadata=_doc("Time between SIGTERM and SIGKILL when an executor tree is stopped."),
    )
    done_marker: str = attrs.field(
        default="FORGE_DONE",
        validator=non_empty,
        metadata=_doc("A line of exactly this text (trimmed) signals that the work is done."),
    )
    executor: str = attrs.field(
        default="",
        metadata=_doc('A named executor definition (executors/<name>.toml), e.g. "claude".'),
    )
    cmd: str = attrs.field(
        default="", metadata=_doc("Or a shell command run with sh -c as the executor.")
    )
    prompt: str = attrs.field(
        default="", metadata=_doc("The prompt a named executor receives as {prompt}.")
    )
    max_limit_wait: Duration = attrs.field(
        default=Duration(5 * 60),
        metadata=_doc(
            "forge run: longest wait for a provider limit's known reset; "
            "past it (or with no reset time) the run stops."
        ),
    )
    limit_backoff_max: Duration = attrs.field(
        default=Duration(60 * 60),
        validator=positive_duration,
        metadata=_doc(
            "forge supervise: a provider limit with no reset time is waited out 1 minute, "
            "then twice as long at each refusal in a row, up to this."
        ),
    )
    max_refusals: int = attrs.field(
        default=10,
        validator=at_least(1),
        metadata=_doc(
            "The most provider refusals in a row a loop waits out (forge run and "
            "forge supervise); one more stops it with the provider-limit ending."
        ),
    )
    permission: str = attrs.field(
        default="",
        metadata=_doc(
            "The executor's permission level (a key of its [permissions]); "
            "empty: the level its definition names."
        ),
    )
    session: str = attrs.field(
        default="",
        validator=in_choices(("", "fresh", "continue")),
        metadata=_doc(
            '"continue": each iteration continues the agent\'s previous session (when its '
            'executor can); "fresh": a new session each time; empty: the executor\'s choice.'
        ),
    )
    session_max_age: Duration = attrs.field(
        default=Duration(12 * 60 * 60),
        validator=positive_duration,
        metadata=_doc(
            "A session older than this (from the iteration that began it) is not "
            "continued: the next iteration starts a fresh one."
        ),
    )

    def __attrs_post_init__(self) -> None:
        if self.executor and self.cmd:
            raise ConflictError("cmd", "set either run.cmd or run.executor, not both")


@_table
@attrs.frozen
class BudgetPolicy:
    """``[budget]``: spend ceilings per change; an absent ceiling can never open the gate."""

    max_tokens: int | None = attrs.field(
        default=None,
        validator=optional(at_least(1)),
        metadata=_doc("Tokens (input and output) a change may spend.", example=2_000_000),
    )
    max_tool_calls: int | None = attrs.field(
        default=None,
        validator=optional(at_least(1)),
        metadata=_doc("Tool calls a change's executors may make.", example=500),
    )
    max_cost_usd: float | None = attrs.field(
        default=None,
        validator=optional(between(1e-9, float("inf"), what="a cost above 0")),
        metadata=_doc("Cost in US dollars a change may spend.", example=20.0),
    )
    allow_unpriced: bool = attrs.field(
        default=False,
        metadata=_doc(
            "Accept a cost ceiling the executor's cost may not reach: without it, a run whose "
            "CLI reports no cost and whose model has no price is refused at plan time, and an "
            "iteration of an unpriced model stops the loop (its cost is unknown).",
            example=False,
        ),
    )

    @property
    def has_ceiling(self) -> bool:
        return any(v is not None for v in (self.max_tokens, self.max_tool_calls, self.max_cost_usd))


def _one_of(*choices: str) -> Any:
    return in_choices(choices)


@_table
@attrs.frozen
class BreakerPolicy:
    """``[breaker]``: the loop circuit: what a loop does when a trip condition opens it."""

    on_open: str = attrs.field(
        default="cooldown",
        validator=_one_of("cooldown", "escalate"),
        metadata=_doc('When the circuit opens: "cooldown" then a half-open probe, or "escalate".'),
    )
    cooldown: Duration = attrs.field(
        default=Duration(30 * 60),
        validator=positive_duration,
        metadata=_doc("Wait before the first half-open probe; doubled after a failed probe."),
    )
    cooldown_max: Duration = attrs.field(
        default=Duration(4 * 3600),
        validator=positive_duration,
        metadata=_doc("The doubling stops here."),
    )
    max_opens: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Openings a loop may cool down from; the next one escalates."),
    )

    def __attrs_post_init__(self) -> None:
        if self.cooldown_max < self.cooldown:
            raise ConflictError("cooldown_max", "cooldown_max must not be shorter than cooldown")


@_table
@attrs.frozen
class RateLimitPolicy:
    """``[rate_limit]``: executor starts allowed in a rolling window, shared by every loop."""

    calls: int = attrs.field(
        default=100,
        validator=at_least(1),
        metadata=_doc("Executor starts allowed in any rolling window."),
    )
    window: Duration = attrs.field(
        default=Duration(3600),
        validator=positive_duration,
        metadata=_doc("The rolling window."),
    )
    warn_at: float = attrs.field(
        default=0.8,
        validator=between(0.0, 1.0),
        metadata=_doc("Share of the window's calls at which one warning is shown."),
    )
    backend: str = attrs.field(
        default="sqlite",
        validator=_one_of("memory", "sqlite"),
        metadata=_doc(
            '"sqlite": shared by every forge process on the machine; "memory": one. '
            "A fleet (forge fleet) always shares one limiter on its Redis server."
        ),
    )
    path: str = attrs.field(
        default=".forge/ratelimit.sqlite3",
        validator=non_empty,
        metadata=_doc("The sqlite database, relative to the project root."),
    )


@_table
@attrs.frozen
class StagnationWeights:
    """``[stagnation.weights]``: the progress score of one iteration, summed over the window.

    An iteration that changed only tests earns nothing for its edits nor for
    the tests they made pass (fixing the tests is not progress on the work);
    the same error as the previous iteration's, the agent's own or the same
    tests failing in the JUnit report, costs ``same_error`` once.
    """

    test_passing: int = attrs.field(
        default=3, metadata=_doc("Per test newly passing that was failing before.")
    )
    task_completed: int = attrs.field(
        default=5, metadata=_doc("Per task checked off (- [x]) in the tasks files.")
    )
    file_modified: int = attrs.field(
        default=1,
        metadata=_doc(
            "Per file other than a test modified with a meaningful (not whitespace) change."
        ),
    )
    error_resolved: int = attrs.field(default=2, metadata=_doc("Per lint/build error resolved."))
    same_error: int = attrs.field(
        default=-2,
        metadata=_doc(
            "When the error (the agent's own, or the failing tests) is the same as the "
            "previous iteration's."
        ),
    )
    no_files_modified: int = attrs.field(default=-3, metadata=_doc("When no file was modified."))
    revert: int = attrs.field(
        default=-1, metadata=_doc("Per file whose content returned to an earlier iteration's.")
    )


@_table
@attrs.frozen
class StagnationPolicy:
    """``[stagnation]``: when a supervised loop is spinning without progress."""

    window: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Iterations whose summed score must not be negative."),
    )
    no_progress: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive iterations with no file modified and no task completed."),
    )
    identical_errors: int = attrs.field(
        default=5,
        validator=at_least(1),
        metadata=_doc("Consecutive iterations ending in the same error fingerprint."),
    )
    output_decline: float = attrs.field(
        default=0.7,
        validator=between(0.0, 1.0),
        metadata=_doc("Decline of output volume across the window that trips (0.7 = 70%)."),
    )
    output_min_lines: int = attrs.field(
        default=20,
        validator=at_least(0),
        metadata=_doc(
            "Output lines the window's first iteration must print before a decline counts."
        ),
    )
    permission_denials: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive iterations with permission denials."),
    )
    test_fix_ratio: float = attrs.field(
        default=0.8,
        validator=between(0.0, 1.0),
        metadata=_doc("Share of changed files that are tests, over the window, that trips."),
    )
    tasks_files: tuple[str, ...] = attrs.field(
        default=("tasks.md", "IMPLEMENTATION_PLAN.md", "fix_plan.md", ".ralph/fix_plan.md"),
        validator=relative_paths,
        metadata=_doc("Files whose checked boxes (- [x]) count as tasks completed."),
    )
    junit_xml: str = attrs.field(
        default=".forge/junit.xml",
        metadata=_doc("The JUnit XML report the verify command writes (tests newly passing)."),
    )
    test_globs: tuple[str, ...] = attrs.field(
        default=(
            "tests/**",
            "test/**",
            "**/test_*.py",
            "**/*_test.py",
            "**/*.test.*",
            "**/*.spec.*",
        ),
        metadata=_doc("Which changed files are tests (for the test-fix-loop detector)."),
    )
    weights: StagnationWeights = attrs.field(
        factory=StagnationWeights, metadata=_doc("The progress score.")
    )


@_table
@attrs.frozen
class ProtectPolicy:
    """``[protect]``: paths an agent must not destroy.

    Checked after every iteration against a manifest taken before it; a harmed
    path is restored and the loop stops. ``forge guard`` refuses commands that
    would harm one before they run. Forge's own verify, breaker and spend state
    and the secret-scan waivers are frozen whatever these lists say.
    """

    exist: tuple[str, ...] = attrs.field(
        default=(
            "AGENTS.md",
            "IMPLEMENTATION_PLAN.md",
            "specs/",
            "memory/",
            "CLAUDE.md",
            ".claude/",
            ".ralphrc",
            ".ralph/",
        ),
        validator=relative_paths,
        metadata=_doc("Must not be deleted; edits allowed (files, directories/, globs)."),
    )
    frozen: tuple[str, ...] = attrs.field(
        default=("forge.toml", "policies/"),
        validator=relative_paths,
        metadata=_doc("Must not change at all (files, directories/, globs)."),
    )


SANDBOX_MODES = ("auto", "bubblewrap", "off")


@_table
@attrs.frozen
class SandboxPolicy:
    """``[sandbox]``: the kernel sandbox every executor runs in.

    Inside it the agent's whole process tree cannot write a frozen path, cannot
    delete or rename a path that must exist, and finds ``.forge/`` read-only
    (but for its change's inbox). The guard hook and the check after each
    iteration stay in force either way.
    """

    mode: str = attrs.field(
        default="auto",
        validator=in_choices(SANDBOX_MODES),
        metadata=_doc(
            '"auto": bubblewrap where it is installed and works, else the guard and the check '
            'after each iteration alone; "bubblewrap": refuse to start without it; "off": no '
            "sandbox."
        ),
    )


SEVERITIES = ("low", "medium", "high", "critical")


@_table
@attrs.frozen
class SecscanPolicy:
    """``[secscan]``: the secret scan, and the gate its findings open."""

    enabled: bool = attrs.field(
        default=True, metadata=_doc("Scan the working tree before and after every iteration.")
    )
    rules: str = attrs.field(
        default="secscan",
        validator=non_empty,
        metadata=_doc('The shipped rules by name ("secscan") or a path to your own TOML rules.'),
    )
    fail_on: str = attrs.field(
        default="high",
        validator=in_choices(SEVERITIES),
        metadata=_doc("Unwaived findings at or above this severity open the gate."),
    )
    waivers: str = attrs.field(
        default=".forge/secscan-waivers.yaml",
        validator=relative_path,
        metadata=_doc("The waivers file (frozen while a loop runs)."),
    )
    max_file_bytes: int = attrs.field(
        default=1_000_000,
        validator=at_least(1),
        metadata=_doc("Files larger than this are scanned in overlapping chunks of this size."),
    )


@_table
@attrs.frozen
class ContractPolicy:
    """``[contract]``: the loop contract an agent keeps with ``forge loop start``."""

    max_fix_iterations: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Fix iterations a loop contract allows (forge loop start's default)."),
    )


@_table
@attrs.frozen
class SupervisePolicy:
    """``[supervise]``: how ``forge supervise`` runs its loops."""

    max_parallel: int | None = attrs.field(
        default=None,
        validator=optional(at_least(1)),
        metadata=_doc("Loops running at once (unset: all of them).", example=8),
    )
    worktrees: str = attrs.field(
        default="declared",
        validator=_one_of("declared", "auto"),
        metadata=_doc(
            'Loops that would share one working tree (same folder, no worktree): "declared" '
            'refuses to start them; "auto" gives each of them its own git worktree.'
        ),
    )


def _strategies(*steps: str) -> Any:
    return attrs.field(
        default=steps,
        validator=non_empty_list,
        metadata=_doc(
            "Strategies tried in turn after each opening of this kind; reaching the last escalates."
        ),
    )


@_table
@attrs.frozen
class RecoveryPolicy:
    """``[recovery]``: what a loop tries after its circuit opens, and the watch after it closes.

    Each opening gives the iterations after it (the half-open probe first) the
    next strategy not yet tried for that kind of trip, in the executor's
    environment and prompt; reaching a list's last entry escalates to a person.
    """

    enabled: bool = attrs.field(
        default=True, metadata=_doc("Hand the agent a recovery strategy after an opening.")
    )
    no_progress: tuple[str, ...] = _strategies(
        "Re-plan from scratch: read the task list and the code again and write a fresh plan "
        "before changing anything.",
        "Split the task you are stuck on into at least three smaller tasks and do the first.",
        "Set the stuck task aside with a note saying why, take the next task, come back later.",
        "Escalate to a person: no strategy got the loop moving.",
    )
    identical_errors: tuple[str, ...] = _strategies(
        "The same error keeps coming back: change the approach altogether.",
        "Check whether the error comes from the environment (tools, versions, paths, "
        "network) rather than the code.",
        "Look for a known issue or workaround for this exact error before editing again.",
        "Escalate to a person with the error log.",
    )
    test_fix_loop: tuple[str, ...] = _strategies(
        "Stop editing the tests: question the assumptions they make first.",
        "Check whether the implementation's approach is itself the flaw.",
        "Narrow the implementation's scope until the tests hold.",
        "Escalate to a person with an analysis of the failing tests.",
    )
    circular: tuple[str, ...] = _strategies(
        "The same changes keep alternating: step back and find the root cause first.",
        "Try an approach this loop has not tried yet (see its recent changes).",
        "Cut the scope down to the smallest version that works.",
        "Escalate to a person with the history of the approaches tried.",
    )
    permission_denials: tuple[str, ...] = _strategies(
        "Work with the tools you are allowed; do not retry a refused tool.",
        "Change the plan so that it needs none of the refused tools.",
        "Reduce the task to what the allowed tools can do, and note what is left.",
        "Escalate to a person with the refused tool uses.",
    )
    verify: tuple[str, ...] = _strategies(
        "Make the failing verify pass before any other work: read its report first.",
        "Check whether the verify fails for a reason outside the code (its command, setup).",
        "Go back to the last state the verify passed and redo the change in smaller steps.",
        "Escalate to a person with the verify report.",
    )
    budget: tuple[str, ...] = _strategies("Escalate to a person with the spend totals.")
    watch: int = attrs.field(
        default=3,
        validator=at_least(0),
        metadata=_doc(
            "Iterations watched after a probe closes the circuit: a stagnation trip "
            "inside them escalates at once."
        ),
    )
    lessons: str = attrs.field(
        default="memory/forge-lessons.md",
        validator=relative_path_or_none,
        metadata=_doc(
            "File, relative to the loop's working tree (where its agent reads it), an entry "
            'is appended to when a loop opens or escalates for stagnation; "" keeps none.'
        ),
    )


ALERTS = (
    "loop-count",
    "no-tasks",
    "no-files",
    "pass-rate",
    "error-frequency",
    "output-volume",
    "calls-remaining",
    "negative-score",
)


@_table
@attrs.frozen
class AlertsPolicy:
    """``[alerts]``: early warnings over a supervised loop's iterations.

    An alert is raised when its threshold is crossed and cleared when it no
    longer is; it warns and does not stop the loop unless ``trip_on`` names it.
    """

    enabled: bool = attrs.field(default=True, metadata=_doc("Raise and clear alerts."))
    loop_count: int = attrs.field(
        default=20,
        validator=at_least(1),
        metadata=_doc(
            "Iterations on one task (with no task completed; without a tasks file, on the "
            "change) before an alert."
        ),
    )
    no_tasks: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive iterations that completed no task."),
    )
    no_files: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive iterations that modified no file."),
    )
    pass_rate: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Iterations in a row whose test pass rate fell (from the JUnit XML)."),
    )
    error_frequency: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Iterations in a row whose error count rose (failed tests, lint errors)."),
    )
    output_volume: float = attrs.field(
        default=0.7,
        validator=between(0.0, 1.0),
        metadata=_doc("Decline of output lines from the window's peak (0.7 = 70%)."),
    )
    calls_remaining: float = attrs.field(
        default=0.2,
        validator=between(0.0, 1.0),
        metadata=_doc("Share of the rate window's calls left below which an alert is raised."),
    )
    negative_score: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive iterations with a negative progress score."),
    )
    trip_on: tuple[str, ...] = attrs.field(
        default=(),
        validator=in_each(ALERTS),
        metadata=_doc(
            'Alerts that open the circuit like a trip (e.g. ["loop-count"]).',
            example=["loop-count"],
        ),
    )
    status_log: int = attrs.field(
        default=50,
        validator=at_least(0),
        metadata=_doc(
            "Iterations kept in .forge/changes/<c>/status.md (at least this many, the newest; "
            "appended, and cut back to this many when it holds twice as many); 0 writes none."
        ),
    )


@_table
@attrs.frozen
class PolicyRails:
    """``[policy]``: how Forge treats a policy looser than it ships."""

    allow_relaxed: bool = attrs.field(
        default=False,
        metadata=_doc(
            "Acknowledge a cooldown under 30 minutes or thresholds looser than the defaults "
            "(silences the warning)."
        ),
    )


@_table
@attrs.frozen
class ReportPolicy:
    """``[report]``: the morning report forge supervise writes when a batch ends."""

    write: bool = attrs.field(
        default=True,
        metadata=_doc(
            "Write report.html and report.md next to summary.json at the end of every "
            "forge supervise (forge report writes them on demand either way)."
        ),
    )
    output_lines: int = attrs.field(
        default=20,
        validator=at_least(0),
        metadata=_doc("Lines of an escalated loop's last output the report shows."),
    )
    markdown_max: int = attrs.field(
        default=60_000,
        validator=at_least(0),
        metadata=_doc(
            "Longest report.md, in characters (a pull request comment holds 65,536): a longer "
            "one leaves out the per-loop timelines first and says so; 0 means no limit."
        ),
    )


def _url(_instance: Any, attribute: "attrs.Attribute[Any]", value: str) -> None:
    if value and not value.startswith(("http://", "https://")):
        raise FieldError(attribute.name, "an http:// or https:// URL, or empty", value)


@_table
@attrs.frozen
class NotifyPolicy:
    """``[notify]``: commands run, and a URL posted to, when a batch needs a person or ends.

    Each command runs with sh -c, the summary as JSON on its stdin and FORGE_EVENT,
    FORGE_RUN_ID, FORGE_CHANGE, FORGE_REPORT, FORGE_SUMMARY and FORGE_EXIT_CODE set.
    """

    on_escalate: str = attrs.field(
        default="",
        metadata=_doc(
            "Run once for each loop that escalated (unset: none).", example="notify-send forge"
        ),
    )
    on_finish: str = attrs.field(
        default="", metadata=_doc("Run once when the batch ends, whatever its outcome.")
    )
    on_alert: str = attrs.field(
        default="", metadata=_doc("Run once for each alert raised during the batch.")
    )
    on_question: str = attrs.field(
        default="",
        metadata=_doc(
            "Run once for each iteration that ended on a question instead of acting "
            "(the loop goes on, and its next prompt tells the agent to decide)."
        ),
    )
    webhook: str = attrs.field(
        default="",
        validator=Check(_url, {"pattern": "^(https?://.*)?$"}),
        metadata=_doc(
            "POST the same JSON to this URL for every event above (unset: none).",
            example="https://chat.example.com/hooks/forge",
        ),
    )
    timeout: Duration = attrs.field(
        default=Duration(30),
        validator=positive_duration,
        metadata=_doc("Longest a command or the webhook may take; past it, it is stopped."),
    )
    alert_quiet: Duration = attrs.field(
        default=Duration(30 * 60),
        validator=positive_duration,
        metadata=_doc(
            "An alert raised again on the same loop within this time after it was told is "
            "not told again (a batch-wide alert, calls-remaining, is told once per batch)."
        ),
    )


def _pattern(regex: str, expected: str) -> Any:
    compiled = re.compile(regex)

    def check(_instance: Any, attribute: "attrs.Attribute[Any]", value: str) -> None:
        if not compiled.fullmatch(value):
            raise FieldError(attribute.name, expected, value)

    return Check(check, {"pattern": f"^(?:{regex})$"})


@_table
@attrs.frozen
class FleetPolicy:
    """``[fleet]``: several machines working one batch through one Redis server."""

    redis: str = attrs.field(
        default="",
        validator=_pattern(
            r"((rediss?(\+(cluster|sentinel))?|unix)://\S+)?",
            'a URL like "redis://host:6379/0" (or "")',
        ),
        metadata=_doc(
            "The Redis server of the fleet (FORGE_REDIS_URL wins when set).",
            example="redis://localhost:6379/0",
        ),
    )
    name: str = attrs.field(
        default="forge",
        validator=_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", "a name like nightly-2026"),
        metadata=_doc("Prefix of every key, so several batches can share one server."),
    )
    lease: Duration = attrs.field(
        default=Duration(30),
        validator=positive_duration,
        metadata=_doc("A host that has not renewed a loop's lease for this long loses the loop."),
    )
    heartbeat: Duration = attrs.field(
        default=Duration(5),
        validator=positive_duration,
        metadata=_doc("How often a host renews its leases and reports that it is alive."),
    )
    connect_timeout: Duration = attrs.field(
        default=Duration(5),
        validator=positive_duration,
        metadata=_doc("Time allowed to connect to the Redis server."),
    )
    command_timeout: Duration = attrs.field(
        default=Duration(5),
        validator=positive_duration,
        metadata=_doc("Time allowed for one Redis command's answer."),
    )
    keep: Duration = attrs.field(
        default=Duration(7 * 86400),
        validator=positive_duration,
        metadata=_doc("How long an ended batch's keys stay on the server before they expire."),
    )
    export: str = attrs.field(
        default="",
        metadata=_doc(
            "A folder each host writes the ended batch's state into (as forge fleet export) "
            "before its keys expire; empty: none.",
            example="/srv/forge/exports",
        ),
    )
    timeline_max: int = attrs.field(
        default=2000,
        validator=at_least(10),
        metadata=_doc("Events a change's timeline keeps on the server; older ones are trimmed."),
    )
    forget_hosts: Duration = attrs.field(
        default=Duration(3600),
        validator=positive_duration,
        metadata=_doc("A lost host (no heartbeat) is dropped from the host list after this long."),
    )

    def __attrs_post_init__(self) -> None:
        if self.heartbeat.seconds >= self.lease.seconds:
            raise ConflictError("heartbeat", "heartbeat must be shorter than lease")


@_table
@attrs.frozen
class LandPolicy:
    """``[land]``: how forge land lands: onto the local base, or as pull requests."""

    mode: str = attrs.field(
        default="local",
        validator=in_choices(("local", "pr")),
        metadata=_doc(
            "local: land onto the local base branch, each change verified; pr: push each "
            "change's branch to the remote and open a pull request (forge land --pr)."
        ),
    )
    remote: str = attrs.field(
        default="origin",
        validator=non_empty,
        metadata=_doc("The git remote pull-request mode pushes forge/<change> branches to."),
    )
    base: str = attrs.field(
        default="",
        metadata=_doc(
            "The base branch to land on (empty: the branch checked out in the main working "
            "tree); forge land --base overrides it.",
            example="main",
        ),
    )
    rework: bool = attrs.field(
        default=False,
        metadata=_doc(
            "Hand a change that conflicts with the base or fails its verify on the combined "
            "tree back to its loop, the base merged into its branch (forge land --rework)."
        ),
    )


@_table
@attrs.frozen
class Policy:
    """The effective policy: built-in defaults, extended files, forge.toml, flags."""

    verify: VerifyPolicy = attrs.field(
        factory=VerifyPolicy, metadata=_doc("forge verify and its circuit-breaker.")
    )
    run: RunPolicy = attrs.field(
        factory=RunPolicy, metadata=_doc("forge run: the bounded loop and its executor.")
    )
    budget: BudgetPolicy = attrs.field(
        factory=BudgetPolicy, metadata=_doc("The spend budget gate.")
    )
    breaker: BreakerPolicy = attrs.field(
        factory=BreakerPolicy, metadata=_doc("The loop circuit of supervised loops.")
    )
    rate_limit: RateLimitPolicy = attrs.field(
        factory=RateLimitPolicy, metadata=_doc("The rate limiter shared by every loop.")
    )
    stagnation: StagnationPolicy = attrs.field(
        factory=StagnationPolicy, metadata=_doc("Stagnation detection in supervised loops.")
    )
    supervise: SupervisePolicy = attrs.field(
        factory=SupervisePolicy, metadata=_doc("forge supervise.")
    )
    protect: ProtectPolicy = attrs.field(
        factory=ProtectPolicy, metadata=_doc("Protected paths: checked after every iteration.")
    )
    sandbox: SandboxPolicy = attrs.field(
        factory=SandboxPolicy, metadata=_doc("The sandbox every executor runs in.")
    )
    secscan: SecscanPolicy = attrs.field(
        factory=SecscanPolicy, metadata=_doc("The secret scan and its gate.")
    )
    contract: ContractPolicy = attrs.field(
        factory=ContractPolicy, metadata=_doc("The loop contract: forge loop start, checkpoint.")
    )
    recovery: RecoveryPolicy = attrs.field(
        factory=RecoveryPolicy, metadata=_doc("Recovery strategies after an opening.")
    )
    alerts: AlertsPolicy = attrs.field(
        factory=AlertsPolicy, metadata=_doc("Alerts: early warnings, and the status log.")
    )
    policy: PolicyRails = attrs.field(
        factory=PolicyRails, metadata=_doc("Policies looser than the shipped defaults.")
    )
    report: ReportPolicy = attrs.field(
        factory=ReportPolicy, metadata=_doc("The morning report of forge supervise.")
    )
    notify: NotifyPolicy = attrs.field(
        factory=NotifyPolicy, metadata=_doc("Notifications when a batch escalates or ends.")
    )
    fleet: FleetPolicy = attrs.field(
        factory=FleetPolicy, metadata=_doc("Several machines sharing one Redis: forge fleet.")
    )
    land: LandPolicy = attrs.field(
        factory=LandPolicy, metadata=_doc("forge land: locally, or as pull requests.")
    )


def is_table(annotation: object) -> TypeGuard[type]:
    """Whether a field's type is a table of its own rather than a value."""
    return isinstance(annotation, type) and annotation in _TABLES


# The tables a [[loop]] may override: the rate limiter and the supervisor are shared.
LOOP_POLICY_TABLES = (
    "verify",
    "run",
    "budget",
    "breaker",
    "stagnation",
    "recovery",
    "alerts",
    "sandbox",
)
