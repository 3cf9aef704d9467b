"""What a loop's rules make of a run, beyond judging its iterations.

:func:`admit` and :func:`decide` judge; the loop around them still has to
know where a run starts counting, what each iteration runs, who waits out a
provider's limit, what an interrupted run counts and which ending the loop
circuit keeps. Each is answered here, from :class:`LoopRules`, as a frozen
value or a pure function, so that the loop shell (``_loop.py``) reads no rule
itself: ``forge run`` and ``forge supervise`` differ in their rules alone.
"""

from __future__ import annotations

import attrs

from .._policy import Policy
from ._decide import LoopRules, LoopState
from ._endings import DONE, Ending
from ._recovery import Strategy, in_force


@attrs.frozen
class Start:
    """How a run of the loop begins.

    Attributes:
        used: The iterations earlier runs used; this run's are numbered on
            from them (a supervised loop's circuit keeps the count; a
            ``forge run`` counts from one).
        ending: The change is already done: the run has nothing to do.
        verifies: The loop runs ``[verify]`` after every iteration.
        verifies_done: The loop runs ``[verify]``, read-only, after an
            iteration that signalled done (done stands only if it passes).
        measures: The loop measures the tree around each iteration (the
            stagnation detectors judge it).
        keeps_status: The loop keeps the status log and the lessons file
            (a supervised loop, which a person watches over a night).
    """

    used: int
    ending: Ending | None
    verifies: bool
    verifies_done: bool
    measures: bool
    keeps_status: bool


def start(state: LoopState, rules: LoopRules) -> Start:
    """Where a run begins, from what earlier runs left."""
    used = state.circuit.iterations_used if rules.supervised else 0
    ending = None
    if rules.supervised and state.circuit.finished == DONE:
        ending = Ending(DONE, detail="done in an earlier run")
    return Start(
        used=used,
        ending=ending,
        verifies=rules.run_verify,
        verifies_done=rules.verify_done and not rules.run_verify,
        measures=rules.judge_stagnation,
        keeps_status=rules.supervised,
    )


def moves_circuit(rules: LoopRules) -> bool:
    """Whether the loop moves its change's loop circuit (``forge run`` only reads it)."""
    return rules.supervised


def may_run(state: LoopState, number: int, rules: LoopRules) -> bool:
    """Whether iteration ``number`` is within the cap (a refused call uses no iteration)."""
    return number - state.refused <= rules.max_iterations


def in_force_for(state: LoopState, policy: Policy, rules: LoopRules) -> Strategy | None:
    """The recovery strategy the next iteration is given (only a supervised loop has one)."""
    return in_force(state.circuit, policy) if rules.supervised else None


def counted_iterations(rules: LoopRules, *, started: int, completed: int) -> int:
    """What an interrupted run counts: a supervised loop every iteration it started.

    A supervised loop's circuit counts an interrupted iteration as used (a
    rerun goes on after it); ``forge run`` counts the iterations that ended.
    """
    return started if rules.supervised else completed


def kept_ending(rules: LoopRules, reason: str) -> str | None:
    """The ending the loop circuit keeps for the next run (a supervised loop's)."""
    return reason if rules.supervised else None


def counted_label(number: int, refused: int, max_iterations: int) -> str:
    """``3/5``, or with refused calls before it (which use no iteration) ``3 (2/5 counted)``."""
    if not refused:
        return f"{number}/{max_iterations}"
    return f"{number} ({number - refused}/{max_iterations} counted)"
