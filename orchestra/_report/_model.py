"""The morning report's content: what a batch did, built from its state, before any rendering.

Every class here is a frozen snapshot. The builder (``_build``) fills them from a
run's ``summary.json`` and its loops' timelines; the HTML and Markdown
renderers read them and nothing else, so both say the same thing.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._state import LandState

# What a mark on a loop's timeline strip stands for. A kind this release does not
# know (an event another version writes) is shown as ``other`` with its name.
ITERATION = "iteration"
VERIFY = "verify"
CIRCUIT = "circuit"
COOLDOWN = "cooldown"
LIMITER_WAIT = "limiter-wait"
PROVIDER_PAUSE = "provider-pause"
INTEGRITY = "integrity"
ALERT = "alert"
RECOVERY = "recovery"
OTHER = "other"

# Alerts about what every loop shares (the rate window's calls), not one loop's
# work: the report shows them once, for the batch.
BATCH_WIDE_ALERTS = frozenset({"calls-remaining"})

# How a mark went, for its colour and its glyph (never the colour alone).
GOOD = "good"
BAD = "bad"
WARN = "warn"
NEUTRAL = "neutral"


@attrs.frozen
class Spend:
    """Tokens, tool calls and cost; ``estimated`` when any cost was estimated, not reported.

    ``reported`` is False when no iteration reported or estimated a cost (an
    agent that tells none): the report then says "not reported", not $0.
    """

    tokens: int = 0
    tool_calls: int = 0
    cost_usd: float = 0.0
    estimated: bool = False
    reported: bool = False

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.tokens + other.tokens,
            self.tool_calls + other.tool_calls,
            round(self.cost_usd + other.cost_usd, 6),
            self.estimated or other.estimated,
            self.reported or other.reported,
        )


@attrs.frozen
class Mark:
    """One thing on a loop's timeline strip.

    Attributes:
        kind: One of the kinds above (``ITERATION`` … ``OTHER``).
        start: Seconds from the batch's start.
        duration: Seconds it lasted (0 for a moment).
        label: What happened, in words (the strip's text alternative).
        tone: ``good``, ``bad``, ``warn`` or ``neutral``.
        iteration: The iteration it belongs to, if any.
    """

    kind: str
    start: float
    duration: float
    label: str
    tone: str = NEUTRAL
    iteration: int | None = None


@attrs.frozen
class IterationRow:
    """One iteration as the report lists it."""

    number: int
    start: float
    duration: float
    exit: int | None
    verify: str | None
    score: int | None
    window_score: int | None
    risk: str | None
    trip: str | None
    spend: Spend
    judged: bool = True
    note: str | None = None
    done: bool = False  # the agent said the change is done


@attrs.frozen
class Trip:
    """A loop circuit's opening: why, what evidence, and whether it escalated."""

    condition: str
    reason: str
    opens: int
    cooldown: float | None
    escalated: bool
    evidence: dict[str, Any] | None = None
    at: str | None = None


@attrs.frozen
class Notice:
    """An alert, a recovery step or another event the strip shows by name.

    ``name`` is the event's kind, ``text`` what a person reads of it.
    """

    name: str
    text: str
    at: str | None = None
    alert: str | None = None  # an alert's own name (``calls-remaining`` ...)
    iteration: int | None = None
    tried: bool = True  # a recovery step handed out as the loop escalated was not tried


@attrs.frozen
class WorkDiff:
    """What the agent changed against the loop's base, bounded and redacted.

    Attributes:
        base: The base in words (``the branch point of forge/x (1a2b3c4)``),
            or None when there is no diff to show.
        missing: Why no diff is shown (not a git repository, the base is gone),
            or None.
        stat: The diffstat's lines (``path | 3 +-``, then the totals).
        lines: The diff's first lines, redacted.
        total_lines, total_bytes: The whole diff's size, before the cut.
    """

    base: str | None
    missing: str | None = None
    stat: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()
    total_lines: int = 0
    total_bytes: int = 0

    @property
    def cut_lines(self) -> int:
        """How many of the diff's lines were left out."""
        return max(0, self.total_lines - len(self.lines))


@attrs.frozen
class LoopReport:
    """One loop of the batch.

    Attributes:
        change: The change's name.
        root: The repository whose ``.forge`` holds its state.
        ending: How it ended (``done``, ``circuit-open`` ...), or ``unfinished``
            when its timeline stops without an ending (the batch was killed).
        escalated: Whether a person must act before it goes on.
        gate: The gate that stopped it, if a gate did.
        detail: The ending in words.
        resume: The commands that reset or resume it, in order.
        where: The branch or worktree holding its work.
        files_loop: Paths its iterations changed, as the loop recorded them
            (capped; ``files_loop_more`` beyond; ``files_loop_partial`` when an
            iteration changed more files than it recorded paths of).
        files_changed: Paths changed in its working tree now, when the report
            was made (capped; ``files_more`` beyond; Forge's own files left out).
        output_tail: The last lines of its last iteration's output (already redacted).
        verify_checks: The last verify's checks: ``name``, ``outcome``, ``passed``,
            and for a failing one its ``failures`` lines and output ``tail``.
        land: Its land state, from the ``land.*`` events of its whole timeline.
    """

    change: str
    root: str
    ending: str
    escalated: bool
    iterations: int
    max_iterations: int | None
    gate: str | None = None
    detail: str | None = None
    trips: tuple[Trip, ...] = ()
    notices: tuple[Notice, ...] = ()
    marks: tuple[Mark, ...] = ()
    rows: tuple[IterationRow, ...] = ()
    spend: Spend = Spend()
    circuit: str | None = None
    verify: str | None = None
    resume: tuple[str, ...] = ()
    where: str | None = None
    files_changed: tuple[str, ...] = ()
    files_more: int = 0
    files_loop: tuple[str, ...] = ()
    files_loop_more: int = 0
    files_loop_partial: bool = False
    output_tail: tuple[str, ...] = ()
    output_source: str | None = None
    verify_checks: tuple[dict[str, Any], ...] = ()
    limiter_wait: float = 0.0
    paused: float = 0.0
    cooldown: float = 0.0
    position: int = 0
    diff: WorkDiff | None = None
    land: LandState = attrs.field(factory=LandState)

    @property
    def ready_to_land(self) -> bool:
        """Whether the loop ended done on its own branch and no land is recorded since.

        Only a loop in a worktree has a branch (``forge/<change>``) to land; one
        working in the repository's own tree left its work there already.
        """
        on_branch = (self.where or "").startswith(f"branch forge/{self.change},")
        # A change handed back by forge land --rework lands again once its loop is done.
        return on_branch and self.ending == "done" and self.land.state in ("none", "reworked")

    @property
    def alerts(self) -> tuple[Notice, ...]:
        """The loop's own alerts (a batch-wide one is the batch's, said once)."""
        return tuple(
            n
            for n in self.notices
            if n.name.startswith("alert.") and n.alert not in BATCH_WIDE_ALERTS
        )

    @property
    def recovery(self) -> tuple[Notice, ...]:
        """The recovery steps the loop tried."""
        return tuple(n for n in self._recovery_steps() if n.tried)

    @property
    def not_tried(self) -> tuple[Notice, ...]:
        """The recovery steps handed out as the loop escalated: never tried."""
        return tuple(n for n in self._recovery_steps() if not n.tried)

    def _recovery_steps(self) -> tuple[Notice, ...]:
        return tuple(n for n in self.notices if n.name.startswith("recovery"))

    @property
    def recovered(self) -> bool:
        """Whether the loop finished after a trip: its circuit opened, and it went on to done."""
        return self.ending == "done" and bool(self.trips)


@attrs.frozen
class BatchReport:
    """The whole batch.

    Attributes:
        run_id: The run's id.
        outcome: The batch's outcome in words.
        from_summary: False when the run left no ``summary.json`` (it was
            killed) and the report was built from the timelines alone.
        started_at, finished_at: Wall-clock epochs (None when unknown).
        exit_code: ``forge supervise``'s exit code, when it got to write one.
        span: Seconds covered by the timeline strips.
        limiter: The shared limiter's figures at the end, as the summary holds them.
        limiter_waits: How many times a loop waited for a permit (None: unknown).
        notes: What could not be read, in words.
        supervised: False for a ``forge run`` (one loop, no supervisor).
        warnings: What the policy warned of as the batch started (relaxed
            settings, a cost ceiling that cannot be counted), from its summary.
    """

    run_id: str
    root: str
    outcome: str
    from_summary: bool
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    interrupted: bool
    span: float
    loops: tuple[LoopReport, ...]
    limiter: dict[str, Any] | None = None
    limiter_waits: int | None = None
    notes: tuple[str, ...] = ()
    supervised: bool = True
    warnings: tuple[str, ...] = ()

    @property
    def batch_alerts(self) -> tuple[tuple[str, Notice], ...]:
        """The batch-wide alerts the loops raised, each with its loop's name, in time order."""
        found = [
            (loop.change, n)
            for loop in self.loops
            for n in loop.notices
            if n.name.startswith("alert.") and n.alert in BATCH_WIDE_ALERTS
        ]
        return tuple(sorted(found, key=lambda pair: pair[1].at or ""))

    @property
    def recovered(self) -> int:
        """How many loops finished after a trip."""
        return sum(1 for loop in self.loops if loop.recovered)

    @property
    def wall_time(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, self.finished_at - self.started_at)

    @property
    def spend(self) -> Spend:
        total = Spend()
        for loop in self.loops:
            total = total + loop.spend
        return total

    @property
    def escalations(self) -> tuple[LoopReport, ...]:
        return tuple(loop for loop in self.loops if loop.escalated)

    @property
    def ready_to_land(self) -> tuple[LoopReport, ...]:
        """The loops that ended done and have not landed: ``forge land``'s to do."""
        return tuple(loop for loop in self.loops if loop.ready_to_land)

    def landing(self, state: str) -> tuple[LoopReport, ...]:
        """The loops whose latest land outcome is ``state``, and not ready to land again."""
        found = [loop for loop in self.loops if loop.land.state == state and not loop.ready_to_land]
        # Landed ones in the order they landed; the rest by name.
        return tuple(sorted(found, key=lambda loop: (loop.land.order, loop.change)))

    def counts(self) -> dict[str, int]:
        """Loops by ending, most frequent first (ties by name)."""
        tally: dict[str, int] = {}
        for loop in self.loops:
            tally[loop.ending] = tally.get(loop.ending, 0) + 1
        return dict(sorted(tally.items(), key=lambda item: (-item[1], item[0])))
