"""Any short history, run live and replayed, reaches the same verdicts at the same iterations.

Hypothesis draws a few runs of a change's loop, each supervised or a ``forge
run`` (first-trip rules): iterations that work, idle, fail, finish, or are
refused by the provider, and between runs a person's reset of the loop
circuit. A supervised run counts its iterations, and the calls refused among
them, on from the supervised runs before; a ``forge run`` counts its own.
Each history runs live on trio's mock clock with the fake agent (a real
executable, so the real subprocess path is taken); then the change's
timeline is replayed under the same policy. Both go through the same
:func:`decide`: the trips, what was judged, the alerts raised and cleared,
the risk and the endings must come out the same.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestra._circuit import load_circuit, reset_circuit
from orchestra._durations import Duration
from orchestra._engine import first_trip_rules, replay, supervised_rules
from orchestra._executor import Executor, ExecutorSpec
from orchestra._policy import (
    AlertsPolicy,
    BreakerPolicy,
    Policy,
    RunPolicy,
    StagnationPolicy,
    VerifyPolicy,
)
from orchestra._state import ChangePaths, read_timeline

from .test_supervised_loop import (
    EPOCH,
    FAKE_AGENT,
    mock_limiter,
    rejected,
    result,
    supervise_one,
)

KINDS = ("work", "idle", "fail", "refused", "done")


def _step(kind: str, n: int, *, supervised: bool = True) -> dict[str, Any]:
    if kind == "refused" and not supervised:
        # forge run weighs a reset against the wall clock (wait, or stop past
        # max_limit_wait); the replay reads that clock from the timeline's
        # timestamps, which here are the real clock, not the loop's mock one. A
        # reset long past is past on both: each refusal is waited out at once.
        return {"print": rejected(-EPOCH / 2) + "\n" + result("limited", is_error=True) + "\n"}
    if kind == "work":
        return {"print": result(f"step {n}") + "\n", "append": {"work.py": f"x = {n}\n"}}
    if kind == "idle":
        return {"print": result("thinking") + "\n"}
    if kind == "fail":
        return {"print": result("boom: it broke", is_error=True) + "\n"}
    if kind == "refused":
        # A reset a minute away from the wall clock's start: every later refusal waits none.
        return {"print": rejected(60) + "\n" + result("limited", is_error=True) + "\n"}
    return {"print": result("FORGE_DONE") + "\n", "append": {"work.py": "done\n"}}


POLICY = Policy(
    verify=VerifyPolicy(command="", specs=()),
    run=RunPolicy(max_iterations=3, max_refusals=2),
    breaker=BreakerPolicy(cooldown=Duration(60), cooldown_max=Duration(120), max_opens=2),
    stagnation=StagnationPolicy(window=2, no_progress=2),
    alerts=AlertsPolicy(no_files=2, calls_remaining=0.95),
)

# A run: its iterations, whether a person resets the loop circuit after it,
# and whether it is supervised (else a forge run).
Run = tuple[list[str], bool, bool]

runs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(KINDS), min_size=1, max_size=4), st.booleans(), st.booleans()
    ),
    min_size=1,
    max_size=3,
)


def _executor(root: Path, steps: list[dict[str, Any]]) -> Executor:
    script = root / "claude.json"
    script.write_text(json.dumps({"steps": steps}))
    argv = (sys.executable, str(FAKE_AGENT), str(script))
    spec = ExecutorSpec(argv=argv, output="claude-stream-json")
    return Executor(name="fake-claude", spec=spec, templated=False)


async def _live(root: Path, history: list[Run]) -> None:
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    limiter = mock_limiter()
    paths = ChangePaths(root, "c")
    for kinds, reset_after, supervised in history:
        # The fake agent plays the step of its iteration number: a supervised
        # run's go after the iterations earlier supervised runs used, a forge
        # run's from the first.
        used = load_circuit(paths).iterations_used if paths.breaker.exists() else 0
        used = used if supervised else 0
        steps = [_step("idle", n) for n in range(used)]
        steps += [_step(kind, used + n, supervised=supervised) for n, kind in enumerate(kinds, 1)]
        executor = _executor(root, steps)
        rules = supervised_rules(POLICY) if supervised else first_trip_rules(POLICY)
        await supervise_one(
            root, clock, POLICY, "", executor=executor, limiter=limiter, rules=rules
        )
        if reset_after:
            reset_circuit(paths, reason="reviewed")


def _live_facts(events: list[dict[str, Any]]) -> dict[str, list[Any]]:
    finished = [e for e in events if e["event"] == "iteration.finished"]
    return {
        "judged": [(e["iteration"], e["judged"], e["trip"]) for e in finished],
        "risk": [e["risk"] for e in finished],
        "raised": [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.raised"],
        "cleared": [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.cleared"],
    }


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(runs)
# A reset after a refused call: the iteration cap of the next run falls as live.
@example([(["refused"], True, True), (["work"], False, True)])
# A forge run's refusals between supervised runs shift no supervised cap: the
# first run stops on its refusals in a row, the third goes on from its count.
@example(
    [
        (["refused", "work", "refused", "refused", "refused"], False, True),
        (["refused", "work"], False, False),
        (["work"], False, True),
    ]
)
# A forge run after a supervised run's refusals counts its own from the first.
@example([(["refused", "refused", "refused"], False, True), (["work"] * 4, False, False)])
def test_a_history_run_live_and_replayed_reaches_the_same_verdicts(
    history: list[Run],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        # No autojump: the fake agent is a real process, and jumping the clock
        # while it runs would time it out. supervise_one jumps cooldowns itself.
        trio.run(_live, root, history, clock=trio.testing.MockClock())
        timeline = root / ".forge" / "changes" / "c" / "timeline.jsonl"
        events = [json.loads(line) for line in timeline.read_text().splitlines()]
        replayed = replay(read_timeline(timeline).typed(), POLICY)
    steps = [s for s in replayed.steps if s.ran]
    assert _live_facts(events) == {
        "judged": [(s.record.iteration, s.judged, s.would_open) for s in steps],
        "risk": [s.risk for s in steps],
        "raised": [(s.record.iteration, name) for s in steps for name in s.raised],
        "cleared": [(s.record.iteration, name) for s in steps for name in s.cleared],
    }
    # Every run that ended on an iteration ended there in the replay too.
    assert [s.ending.reason for s in steps if s.ending is not None] == _live_endings(events)


def _live_endings(events: list[dict[str, Any]]) -> list[str]:
    """How each run ended, for the runs whose ending was decided after an iteration."""
    endings = []
    last = None
    for event in events:
        if event["event"] in ("run.started", "iteration.started", "iteration.finished"):
            last = event["event"]
        elif event["event"] == "run.stopped" and last == "iteration.finished":
            endings.append(event["reason"])
    return endings
