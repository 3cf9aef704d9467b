"""kill -9 at chosen instants: every file operation forge makes under ``.forge/``.

``crashpoint.py`` runs the real ``forge`` and SIGKILLs it at its N-th state
operation (after an open for writing, halfway through a write, after a write
or an fsync, before and after a rename). After each crash every state file
must parse, the counters must agree with the timeline up to the step in
flight, and the next run must carry on without finding anything corrupt.

Guards: atomic_write's temporary file and rename (a file written in place is
empty or half written at some crash point, and the next run moves it aside as
corrupt), the timeline's fresh line after a torn one (otherwise the next event
is glued onto the torn line and lost), and the order "state, then event" that
keeps a state file never behind its timeline.
"""

from __future__ import annotations

import random

import pytest

from ..support import Repo, failing_policy
from .harness import (
    KILLED,
    RUN_POLICY,
    SUPERVISE_POLICY,
    Tracker,
    agent_cmd,
    assert_clean_exit,
    crash_forge,
    crash_points,
    supervise_batch,
    torn_is_tolerated,
)

VERIFY = ("verify", "--change", "c")


# The instants that matter most: a file just opened for writing (empty), a rename
# about to happen and just done, and half a timeline line on disk.
KEY_KINDS = ("open", "os.replace-before", "os.replace-after", "os.write-half")


def _first_of_each(points: list[tuple[int, str, str]], kinds: tuple[str, ...]) -> list[int]:
    """The number of the first crash point of each of ``kinds`` that occurs."""
    chosen = []
    for kind in kinds:
        chosen += [number for number, seen, _ in points if seen == kind][:1]
    return chosen


def _crash_each(repo: Repo, tracker: Tracker, args: tuple[str, ...], numbers: list[int]) -> int:
    """Crash forge at each point in turn; how many crashes landed."""
    landed = 0
    for number in numbers:
        done = crash_forge(repo, number, *args)
        assert "Traceback" not in done.err, (number, done.err)
        if done.code != KILLED:
            # Past its last point this time (the runs differ a little): a normal end.
            assert done.code in (0, 1), (number, done.code, done.err)
        else:
            landed += 1
        tracker.step()
        for change in tracker.torn():
            torn_is_tolerated(repo, change)
    return landed


def test_a_crash_at_each_kind_of_state_write_of_verify_loses_nothing(repo: Repo) -> None:
    failing_policy(repo, max_failures=1000)
    tracker = Tracker(repo)
    points = crash_points(repo, *VERIFY)  # a whole verify: the state worth protecting
    tracker.step(in_flight=0)
    chosen = _first_of_each(points, KEY_KINDS)
    assert _crash_each(repo, tracker, VERIFY, chosen) == len(chosen)

    follow_up = repo.forge(*VERIFY)
    assert_clean_exit(follow_up, 0)
    assert "Breaker: " in follow_up.lines[-1]
    facts = tracker.step(in_flight=0)  # the follow-up itself loses nothing
    counters = facts.changes["c"]
    # Each crash after the state was renamed and before its event was appended
    # counted an attempt the timeline missed: at most one per crash.
    assert 0 <= counters.total_attempts - counters.verify_events <= len(chosen)


@pytest.mark.reliability
def test_a_crash_at_every_state_write_of_verify_loses_nothing(repo: Repo) -> None:
    failing_policy(repo, max_failures=1000)
    assert_clean_exit(repo.forge(*VERIFY), 0)
    tracker = Tracker(repo)
    points = crash_points(repo, *VERIFY)
    tracker.step(in_flight=0)
    numbers = [n for n, _, _ in points]
    assert _crash_each(repo, tracker, VERIFY, numbers) == len(numbers)
    assert_clean_exit(repo.forge(*VERIFY), 0)
    tracker.step(in_flight=0)


def _run_args(repo: Repo) -> tuple[str, ...]:
    cmd = agent_cmd(
        repo.root.parent,
        "worker",
        {"print": "working\n", "report": {"tokens": 10, "tool_calls": 1, "cost_usd": 0.01}},
    )
    return ("run", "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "2")


@pytest.mark.reliability
def test_a_crash_at_every_state_write_of_run_loses_nothing(repo: Repo) -> None:
    repo.write("forge.toml", RUN_POLICY)
    args = _run_args(repo)
    assert_clean_exit(repo.forge(*args), 1)  # iterations exhausted: state worth protecting
    tracker = Tracker(repo)
    points = crash_points(repo, *args)
    tracker.step(in_flight=0)
    numbers = [n for n, _, _ in points]
    assert _crash_each(repo, tracker, args, numbers) >= len(numbers) - 5
    assert_clean_exit(repo.forge(*args), 1)
    tracker.step(in_flight=0)


@pytest.mark.reliability
def test_a_crash_at_sampled_state_writes_of_supervise_loses_nothing(repo: Repo) -> None:
    repo.write("forge.toml", SUPERVISE_POLICY)
    repo.commit("policy")
    tracker = Tracker(repo)
    points = crash_points(repo, *supervise_batch(repo, 0))
    tracker.step(in_flight=0)
    # Hundreds of points, met in a different order each run (the loops run
    # concurrently): a seeded sample across the whole run, each on fresh loops.
    numbers = sorted(random.Random(3).sample(range(1, len(points) + 1), 24))
    landed = 0
    for trial, number in enumerate(numbers, start=1):
        landed += _crash_each(repo, tracker, supervise_batch(repo, trial), [number])
        if trial % 3 == 0:  # the crashed loops resume and run out their iterations
            assert_clean_exit(repo.forge(*supervise_batch(repo, trial)), 1)
            tracker.step(in_flight=0)
    assert landed >= 18
