"""A capped timeline keeps what a loop that takes over folds from it.

A loop that starts (a takeover, a requeue) reads back from its change's
timeline the calls a provider refused, the iterations started, the alerts
held and its detectors' history. A trim drops the oldest events; what they
counted for must survive it, so a loop resumes alike with and without a cap.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestra._engine import resume
from orchestra._fleet import Connection, FleetConfig, RedisChangeStore
from orchestra._policy import FleetPolicy
from orchestra._state import (
    AlertCleared,
    AlertRaised,
    Event,
    IterationFinished,
    IterationStarted,
    OtherEvent,
    RateLimitEvent,
    RunStarted,
)

from .redis_server import RedisServer

RUN = "r"


def connect(server: RedisServer, name: str, timeline_max: int) -> Connection:
    policy = FleetPolicy(redis=server.url, name=name, timeline_max=timeline_max)
    return Connection(FleetConfig.from_policy(policy, environ={}))


@pytest.fixture
def capped(redis_server: RedisServer) -> Iterator[Connection]:
    opened = connect(redis_server, "capped", 20)
    yield opened
    opened.close()


@pytest.fixture
def whole(redis_server: RedisServer) -> Iterator[Connection]:
    opened = connect(redis_server, "whole", 10_000)
    yield opened
    opened.close()


def refused(iteration: int) -> Event:
    limit = RateLimitEvent("rejected", 1780000000.0, "five_hour")
    return IterationFinished(run_id=RUN, iteration=iteration, judged=False, rate_limit=limit)


def judged(iteration: int, files: int) -> Event:
    signals = {"files_modified": files, "meaningful_files": files}
    return IterationFinished(run_id=RUN, iteration=iteration, exit=0, signals=signals)


def history() -> list[Event]:
    """A supervised loop's early events (refusals, alerts, signals), then a long tail."""
    early: list[Event] = [RunStarted(run_id=RUN, supervised=True)]
    for iteration in range(1, 4):
        early += [IterationStarted(run_id=RUN, iteration=iteration), refused(iteration)]
    early += [
        IterationStarted(run_id=RUN, iteration=4),
        judged(4, 3),
        AlertRaised(run_id=RUN, iteration=4, alert="no_progress", detail="held"),
        AlertRaised(run_id=RUN, iteration=4, alert="cost", detail="cleared later"),
        AlertCleared(run_id=RUN, iteration=5, alert="cost"),
        IterationStarted(run_id=RUN, iteration=5),
        judged(5, 1),
    ]
    # Enough after them for several trims to drop every early event.
    tail = [OtherEvent(name="note", fields={"n": n}) for n in range(60)]
    return [*early, *tail, IterationStarted(run_id=RUN, iteration=6), judged(6, 2)]


def written_and_taken_over(connection: Connection, events: list[Event]) -> RedisChangeStore:
    """The events written one by one by a host; the store of the host taking over."""
    keys = connection.config.keys
    token = int(connection.client.incr(keys.fence("c")))
    store = RedisChangeStore(connection, keys, "c", token, lambda: "2026-12-01T00:00:00.000Z")
    store.load()
    for event in events:
        store.append(event)
    taken = int(connection.client.incr(keys.fence("c")))
    return RedisChangeStore(connection, keys, "c", taken, lambda: "2026-12-01T00:01:00.000Z")


def test_a_trimmed_timeline_resumes_as_a_whole_one(capped: Connection, whole: Connection) -> None:
    events = history()
    trimmed = written_and_taken_over(capped, events).load()
    kept = written_and_taken_over(whole, events).load()
    left = capped.client.xlen(capped.config.keys.timeline("c"))
    assert int(left) <= 20
    first = capped.client.xrange(capped.config.keys.timeline("c"), count=1)
    assert "note" in str(first)  # every early event was trimmed away
    expected = resume(events)
    assert expected.refused == 3
    assert expected.alerts == (("no_progress", "held"),)
    for state in (trimmed, kept):
        assert state.refused == expected.refused
        assert state.alerts == expected.alerts
        assert state.history == expected.history
        assert state.measured == expected.measured
        assert state.circuit.iterations_used == expected.started == 6


def test_a_trim_s_fold_goes_on_through_later_trims(capped: Connection) -> None:
    """Trimmed again and again, a takeover after each still counts every refusal."""
    events = history()
    events += [refused(6), *(OtherEvent(name="note", fields={"n": n}) for n in range(40))]
    store = written_and_taken_over(capped, events)
    state = store.load()
    assert state.refused == 4
    assert state.alerts == (("no_progress", "held"),)
    assert len(state.history) == 3
