"""A five-hour provider limit with a known reset, on trio's mock clock.

Two supervised loops share one limiter. When one loop's agent is refused
until a reset five hours away, no executor of either loop starts before the
reset, the refused call uses none of its loop's iterations, and nothing
counts it as a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from orchestra._engine import (
    DONE,
    PROVIDER_LIMIT,
    LoopPlan,
    LoopProgress,
    LoopSettings,
    RunSummary,
    SecscanGate,
    run_loop,
    supervised_rules,
)
from orchestra._policy import Policy, RunPolicy, VerifyPolicy
from orchestra._state import ChangePaths

from .test_supervised_loop import (
    EPOCH,
    fake_claude,
    mock_limiter,
    rejected,
    result,
    supervise_one,
)

FIVE_HOURS = 5 * 3600.0


async def test_a_five_hour_limit_pauses_every_loop_until_its_reset(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    root = tmp_path
    limiter = mock_limiter()
    policy = Policy(verify=VerifyPolicy(command="true", specs=()), run=RunPolicy(max_iterations=1))
    (root / "a").mkdir()
    (root / "b").mkdir()
    refused = fake_claude(
        root / "a",
        f"{rejected(FIVE_HOURS)}\n{result('Claude AI usage limit reached', is_error=True)}\n",
        f"{result('FORGE_DONE')}\n",
    )
    other = fake_claude(root / "b", f"{result('FORGE_DONE')}\n")
    starts: dict[str, list[float]] = {"a": [], "b": []}
    summaries: dict[str, RunSummary] = {}

    async def loop(change: str, executor: object, delay: float) -> None:
        await trio.sleep(delay)  # b asks for its permit just after a was refused
        plan = LoopPlan(
            paths=ChangePaths(root, change),
            executor=executor,  # type: ignore[arg-type]  # an Executor
            max_iterations=1,
            time_limit=600,
            grace=1,
            done_marker="FORGE_DONE",
            workdir=root / change,
        )
        settings = LoopSettings(
            policy,
            supervised_rules(policy),
            SecscanGate(),
            limiter,
            lambda: EPOCH + trio.current_time(),
        )

        def seen(kind: str, name: str, text: str) -> None:
            if kind == "iteration":
                starts[name].append(trio.current_time())

        summaries[change] = await run_loop(
            plan, settings, progress=LoopProgress(change, 1), on_event=seen
        )

    waited: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop, "a", refused, 0.0)
        nursery.start_soon(loop, "b", other, 1.0)
        while len(summaries) < 2:
            await trio.testing.wait_all_tasks_blocked(cushion=0.002)
            if not starts["a"]:
                continue
            if (until_b := 1.0 - trio.current_time()) > 0:
                mock_clock.jump(until_b)  # b wakes during the pause and asks for a permit
            elif (left := limiter.statistics().next_free_in) > 0:
                waited.append(left)
                mock_clock.jump(left)
    # a: refused at once, then done on its only counted iteration after the reset.
    assert summaries["a"].reason == DONE
    assert summaries["a"].iterations == 2  # two executor starts, one iteration counted
    assert starts["a"][0] < 1.0
    assert starts["a"][1] >= FIVE_HOURS
    # b asked after the refusal: it waited for the reset too, without a trip.
    assert summaries["b"].reason == DONE
    assert starts["b"] == [starts["b"][0]]
    assert starts["b"][0] >= FIVE_HOURS
    # The only wait was the pause left after b asked: nobody started meanwhile.
    assert [round(w) for w in waited] == [round(FIVE_HOURS - 1)]
    timeline = (root / ".forge" / "changes" / "a" / "timeline.jsonl").read_text()
    assert "breaker.opened" not in timeline


def overloaded() -> str:
    text = (
        'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    )
    return json.dumps({"type": "result", "subtype": "success", "is_error": True, "result": text})


async def test_an_overloaded_provider_is_waited_out_with_a_doubling_backoff(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    claude = fake_claude(
        tmp_path, f"{overloaded()}\n", f"{overloaded()}\n", f"{result('FORGE_DONE')}\n"
    )
    loop_policy = Policy(
        verify=VerifyPolicy(command="true", specs=()), run=RunPolicy(max_iterations=1)
    )
    summary, waited, events = await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=claude, limiter=mock_limiter()
    )
    assert summary.reason == DONE
    assert summary.iterations == 3  # two refused calls, one counted iteration
    assert waited == [60, 120]  # a minute, then twice as long
    assert "breaker.opened" not in events
    timeline = [
        json.loads(line)
        for line in (tmp_path / ".forge" / "changes" / "c" / "timeline.jsonl")
        .read_text()
        .splitlines()
    ]
    finished = [e for e in timeline if e["event"] == "iteration.finished"]
    assert [(e["judged"], e["pause"]) for e in finished] == [
        (False, 60),
        (False, 120),
        (True, None),
    ]
    assert finished[0]["rate_limit"]["status"] == "overloaded"
    assert finished[0]["failure"] is not None  # the error is kept, but nothing judged it


async def test_a_supervised_loop_stops_after_max_refusals_in_a_row(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # An error misread as a limit must not keep a supervised loop waiting forever.
    claude = fake_claude(tmp_path, *[f"{overloaded()}\n"] * 4, f"{result('FORGE_DONE')}\n")
    loop_policy = Policy(
        verify=VerifyPolicy(command="true", specs=()),
        run=RunPolicy(max_iterations=1, max_refusals=3),
    )
    summary, waited, events = await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=claude, limiter=mock_limiter()
    )
    assert summary.reason == PROVIDER_LIMIT
    assert summary.iterations == 4  # four refused calls; the fourth is one too many
    assert waited == [60, 120, 240]
    assert "breaker.opened" not in events
    timeline = (tmp_path / ".forge" / "changes" / "c" / "timeline.jsonl").read_text()
    assert "refused 4 calls in a row (more than [run] max_refusals = 3)" in timeline
