"""What a candidate policy would have done to a whole batch: one row per change.

For each change, its timeline is replayed (:func:`replay`) under the
candidate, and the iterations of one run (or of its whole history) are
compared with what was recorded: how the loop ended then and would end now,
where it first tripped, and the iterations, tokens and cost the candidate
would have saved (positive) or needed beyond the record. A loop the candidate
would let run past its last recorded iteration cannot be judged further: its
ending now is unknown, and the row says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from .._policy import Policy
from .._state import Event, IterationFinished, RunStarted, RunStopped
from ._endings import EXHAUSTED
from ._record import IterationRecord
from ._replay import Replay, ReplayStep, replay


@attrs.frozen
class Moment:
    """An ending or a trip, and the iteration it happened at."""

    iteration: int
    reason: str

    def as_json(self) -> dict[str, object]:
        return {"iteration": self.iteration, "reason": self.reason}


@attrs.frozen
class WhatIf:
    """One change under the candidate policy, against its record.

    Attributes:
        change: The change.
        ending_then: How the recorded run ended (None: no ending recorded).
        ending_now: How the candidate would end it (None: it would run past
            the record, where nothing can be said).
        trip_then: The first circuit opening recorded (a trip or a failed probe).
        trip_now: The first the candidate would have.
        iterations_then: Iterations recorded.
        iterations_now: Iterations the candidate would run of those.
        tokens_saved: Tokens of the recorded iterations the candidate would not run.
        cost_saved: Their cost.
        done_then: The recorded run ended done.
        opens_now: The circuit openings the candidate would have in the run
            compared (each trip or failed probe; a loop that ends done
            cooled down from every one of them).
    """

    change: str
    ending_then: Moment | None
    ending_now: Moment | None
    trip_then: Moment | None
    trip_now: Moment | None
    iterations_then: int
    iterations_now: int
    tokens_saved: int
    cost_saved: float
    done_then: bool
    opens_now: int = 0

    @property
    def iterations_saved(self) -> int:
        return self.iterations_then - self.iterations_now

    @property
    def moved(self) -> bool:
        """The candidate changes how or when the loop ends, or where it first trips."""
        return self.ending_now != self.ending_then or self.trip_now != self.trip_then

    @property
    def false_trip(self) -> bool:
        """The loop finished in reality, but the candidate would stop it first."""
        return self.done_then and self.ending_now is not None and self.ending_now.reason != "done"

    def as_json(self) -> dict[str, object]:
        def moment(value: Moment | None) -> dict[str, object] | None:
            return value.as_json() if value is not None else None

        return {
            "change": self.change,
            "ending_then": moment(self.ending_then),
            "ending_now": moment(self.ending_now),
            "first_trip_then": moment(self.trip_then),
            "first_trip_now": moment(self.trip_now),
            "iterations_then": self.iterations_then,
            "iterations_now": self.iterations_now,
            "iterations_saved": self.iterations_saved,
            "tokens_saved": self.tokens_saved,
            "cost_saved": round(self.cost_saved, 6),
            "moved": self.moved,
            "false_trip": self.false_trip,
        }


def what_if(
    change: str, events: Sequence[Event], policy: Policy, *, run_id: str | None = None
) -> WhatIf:
    """Compare ``change``'s recorded run ``run_id`` (None: its whole history) with the candidate.

    The whole timeline is replayed either way, so what earlier runs left (an
    open circuit, spent budget) weighs on the run compared, as it did live.
    """
    result: Replay = replay(events, policy)

    def in_run(record_run: str) -> bool:
        return run_id is None or record_run == run_id

    steps = [s for s in result.steps if in_run(s.record.run_id)]
    unreached = [r for r in result.unreached if in_run(r.run_id)]
    stopped = [e for e in events if isinstance(e, RunStopped) and in_run(e.run_id)]
    recorded = [s.record for s in steps if s.ran] + unreached
    last_stop = stopped[-1] if stopped else None
    return WhatIf(
        change=change,
        ending_then=_ending_then(recorded, last_stop),
        ending_now=_ending_now(
            result,
            steps,
            run_id,
            last_stop,
            _runs_before(events, run_id),
            _used_at_start(events, run_id, policy),
        ),
        trip_then=_first_trip_then(events, in_run),
        trip_now=_first_trip_now(steps),
        iterations_then=len(recorded),
        iterations_now=sum(1 for s in steps if s.ran),
        tokens_saved=sum(r.tokens for r in unreached),
        cost_saved=sum(r.cost_usd for r in unreached),
        done_then=last_stop is not None and last_stop.reason == "done",
        opens_now=sum(1 for s in steps if s.ran and s.would_open),
    )


def _first_trip_then(events: Sequence[Event], in_run: Callable[[str], bool]) -> Moment | None:
    """Where the recorded run first tripped."""
    return next(
        (
            Moment(e.iteration, e.trip)
            for e in events
            if isinstance(e, IterationFinished) and e.trip and in_run(e.run_id)
        ),
        None,
    )


def _first_trip_now(steps: Sequence[ReplayStep]) -> Moment | None:
    """Where the candidate would first trip."""
    return next(
        (Moment(s.record.iteration, s.would_open) for s in steps if s.ran and s.would_open),
        None,
    )


def _ending_then(
    recorded: Sequence[IterationRecord], last_stop: RunStopped | None
) -> Moment | None:
    """How the recorded run ended, at its last recorded iteration."""
    if last_stop is None:
        return None
    return Moment(_last_iteration(recorded, last_stop.iterations), last_stop.reason)


def _runs_before(events: Sequence[Event], run_id: str | None) -> frozenset[str]:
    """The runs that started before ``run_id`` did (none, when it never started)."""
    before: set[str] = set()
    for event in events:
        if isinstance(event, RunStarted):
            if event.run_id == run_id:
                return frozenset(before)
            before.add(event.run_id)
    return frozenset()


def _ending_now(
    result: Replay,
    steps: Sequence[ReplayStep],
    run_id: str | None,
    last_stop: RunStopped | None,
    earlier: frozenset[str],
    used_up: int | None,
) -> Moment | None:
    """How the candidate ends the run compared, if its replay ends it.

    ``used_up``: the iterations the run found used, when they were all of
    the candidate's (it ends before its first iteration, whatever else the
    runs before left).
    """
    # Endings are compared within one run: the one asked for, or (over a whole
    # history) the last one, since every new run starts its loop again.
    ending_run = run_id if run_id is not None else (last_stop.run_id if last_stop else None)
    ended = next(
        (
            s
            for s in steps
            if s.ending is not None and (ending_run is None or s.record.run_id == ending_run)
        ),
        None,
    )
    if ended is None and run_id is not None and not steps:
        if used_up is not None:
            return Moment(used_up, EXHAUSTED)
        ended = _ended_before(result, earlier)
    if ended is None or ended.ending is None:
        return None
    # An ending before an iteration comes after the one before it.
    at = ended.record.iteration if ended.ran else ended.record.iteration - 1
    return Moment(at, ended.ending.reason)


def _used_at_start(events: Sequence[Event], run_id: str | None, policy: Policy) -> int | None:
    """The iterations ``run_id`` found used when they were all the policy allows, else None.

    A run resumed with none left (its predecessor was killed after its last
    iteration) ends at once, its iterations used up, as the live loop checks
    first.
    """
    started = next((e for e in events if isinstance(e, RunStarted) and e.run_id == run_id), None)
    used = started.plan.get("iterations_used") if started is not None else None
    if isinstance(used, int) and not isinstance(used, bool) and used >= policy.run.max_iterations:
        return used
    return None


def _ended_before(result: Replay, earlier_runs: frozenset[str]) -> ReplayStep | None:
    """A run that ran nothing because the loop had ended: the replay's ending of the runs before.

    A loop that finished in an earlier run (done, its iterations used up, its
    circuit open) does nothing in the next one but end again the same way;
    the candidate's ending of the earlier runs is the one it carries into it.
    Only the runs that started before it count: a later run's ending says
    nothing of a run that never started (a worktree that could not be made).
    """
    earlier = [s for s in result.steps if s.ending is not None and s.record.run_id in earlier_runs]
    return earlier[-1] if earlier else None


def _last_iteration(recorded: Sequence[IterationRecord], fallback: int) -> int:
    return max((r.iteration for r in recorded), default=fallback)
