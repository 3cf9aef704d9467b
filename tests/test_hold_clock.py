"""A person's pause and stop, on trio's clock: the real loop engine, a real fake agent.

The loop holds for an hour of mock time, or is stopped half an hour into a
cooldown, without the test waiting for either: it jumps the clock once the
loop is blocked in the state under test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from orchestra._durations import Duration
from orchestra._engine import (
    DONE,
    STOPPED,
    LoopPlan,
    LoopProgress,
    LoopSettings,
    SecscanGate,
    run_loop,
    supervised_rules,
)
from orchestra._executor import Executor, ExecutorSpec
from orchestra._policy import BreakerPolicy, Policy, RunPolicy, VerifyPolicy
from orchestra._state import (
    ChangePaths,
    LoopControls,
    Request,
    ask_stop,
    pause_loop,
    read_controls,
    resume_loop,
    utc_iso,
)
from tests.support import FAKE_AGENT

EPOCH = 1_800_000_000.0
HOUR = 3600.0


def _events(paths: ChangePaths) -> list[dict[str, Any]]:
    return [json.loads(line) for line in paths.timeline.read_text().splitlines()]


def _now() -> str:
    """The loop's wall clock now, as a request's time."""
    return utc_iso(EPOCH + trio.current_time())


def _setup(tmp_path: Path, policy: Policy) -> tuple[ChangePaths, LoopPlan, LoopSettings]:
    steps: list[dict[str, Any]] = [{"write": {f"f{n}.txt": f"{n}\n"}} for n in range(1, 4)]
    steps[-1]["print"] = "FORGE_DONE\n"
    script = tmp_path / "steps.json"
    script.write_text(json.dumps({"steps": steps}))
    argv = (sys.executable, str(FAKE_AGENT), str(script))
    executor = Executor(name="fake", spec=ExecutorSpec(argv=argv))
    paths = ChangePaths(tmp_path, "c")
    plan = LoopPlan(
        paths=paths,
        executor=executor,
        max_iterations=3,
        time_limit=600,
        grace=1,
        done_marker="FORGE_DONE",
        workdir=tmp_path,
    )
    settings = LoopSettings(
        policy, supervised_rules(policy), SecscanGate(), None, lambda: EPOCH + trio.current_time()
    )
    return paths, plan, settings


async def _drive(
    plan: LoopPlan,
    settings: LoopSettings,
    progress: LoopProgress,
    clock: trio.testing.MockClock,
    when: str,
    act: Callable[[], None],
) -> tuple[str, int, float]:
    """Run the loop; once its status is ``when``, call ``act``, then let it look each second.

    The clock moves only while the loop waits in ``when`` (never while its
    agent or verify runs, whose time limits are on the same clock). A look
    reads its file in a worker thread, during which the driver may move the
    clock on again: the tests bound the looks' time loosely, and what they
    pin is what the loop did.
    """
    ended: list[tuple[str, int]] = []

    async def loop() -> None:
        summary = await run_loop(plan, settings, progress=progress)
        ended.append((summary.reason, summary.iterations))

    acted = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        while not ended:
            await trio.testing.wait_all_tasks_blocked(cushion=0.002)
            if progress.status != when:
                continue
            if not acted:
                acted = True
                act()
            else:
                clock.jump(1)  # the loop's next look for a person's resume or stop
    assert acted, f"the loop never was {when!r}"
    return ended[0][0], ended[0][1], trio.current_time()


async def test_a_paused_loop_holds_until_resumed_then_goes_on(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    policy = Policy(verify=VerifyPolicy(command="true", specs=()), run=RunPolicy(max_iterations=3))
    paths, plan, settings = _setup(tmp_path, policy)
    paths.folder.mkdir(parents=True)
    # Paused before the run: a pause stands for whichever run comes next.
    pause_loop(paths, Request(by="alice@laptop", at=_now(), reason="reviewing"))
    progress = LoopProgress("c", 3)

    def a_person_resumes_an_hour_later() -> None:
        mock_clock.jump(HOUR)
        resume_loop(paths)

    reason, iterations, _ = await _drive(
        plan, settings, progress, mock_clock, "paused by a person", a_person_resumes_an_hour_later
    )

    assert (reason, iterations) == (DONE, 3)
    events = _events(paths)
    [held] = [e for e in events if e["event"] == "loop.paused"]
    assert held["iteration"] == 1
    assert held["why"] == "paused by alice@laptop: reviewing"
    [went_on] = [e for e in events if e["event"] == "loop.resumed"]
    # It held the hour, and went on at one of its next looks.
    assert HOUR <= went_on["waited"] < HOUR + 60
    kinds = [e["event"] for e in events]
    assert kinds.index("loop.resumed") < kinds.index("iteration.started")


async def test_a_stop_ends_a_cooldown_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # The verify fails at once: the circuit opens and cools down for 30 minutes.
    policy = Policy(
        verify=VerifyPolicy(command="false", specs=(), max_failures=1),
        run=RunPolicy(max_iterations=3),
        breaker=BreakerPolicy(cooldown=Duration(1800)),
    )
    paths, plan, settings = _setup(tmp_path, policy)
    progress = LoopProgress("c", 3)
    asked: list[float] = []

    def a_person_stops_it() -> None:
        mock_clock.jump(60)
        asked.append(trio.current_time())
        ask_stop(paths, Request(by="bob@desk", at=_now(), reason="enough"))

    reason, iterations, ended_at = await _drive(
        plan, settings, progress, mock_clock, "cooling down", a_person_stops_it
    )

    assert (reason, iterations) == (STOPPED, 1)
    # At one of its next looks, long before the cooldown's end: no probe ran.
    assert ended_at - asked[0] < 60
    assert "breaker.half_open" not in [e["event"] for e in _events(paths)]
    [ending] = [e for e in _events(paths) if e["event"] == "run.stopped"]
    assert ending["detail"] == "stopped by bob@desk: enough"
    # Obeyed, the stop is gone: the next run does not stop for it.
    assert read_controls(paths).stop is None


def test_a_stop_asked_before_a_run_began_is_not_for_it() -> None:
    stop = Request(by="bob@desk", at=utc_iso(EPOCH), reason="")
    controls = LoopControls(stop=stop)
    assert controls.stop_for(EPOCH - 1) == stop
    assert controls.stop_for(EPOCH) == stop
    assert controls.stop_for(EPOCH + 1) is None
    assert not controls.holds
    assert LoopControls(blocked="moved aside to controls.yaml.corrupt-1").holds


def test_a_corrupt_controls_file_holds_the_loop_until_resumed(tmp_path: Path) -> None:
    paths = ChangePaths(tmp_path, "c")
    paths.folder.mkdir(parents=True)
    paths.controls.write_text("paused: [unclosed\n")
    controls = read_controls(paths)
    assert controls.holds  # what it said is not known: the loop holds
    assert controls.blocked is not None
    assert controls.blocked.startswith("moved aside to ")
    assert "state.corrupt" in paths.timeline.read_text()
    before = resume_loop(paths)
    assert before.holds
    assert not read_controls(paths).holds
