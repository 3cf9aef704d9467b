"""The false alarms a person running loops overnight saw, each pinned by a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from orchestra._durations import Duration
from orchestra._engine import DONE, LoopProgress, replay
from orchestra._policy import BreakerPolicy, Policy, RunPolicy, StagnationPolicy, VerifyPolicy
from orchestra._ratelimit import LimiterStatistics
from orchestra._stagnation import Signals, assess
from orchestra._state import read_timeline
from orchestra._supervise import limiter_line

from .test_supervised_loop import agent, supervise_one, timeline


class _Abort(Exception):
    """Stops the first supervisor during its cooldown, as a crash or Ctrl-C would."""


def _policy(**breaker: Any) -> Policy:
    return Policy(
        verify=VerifyPolicy(command="", specs=()),
        run=RunPolicy(max_iterations=10),
        breaker=BreakerPolicy(cooldown=Duration(1800), cooldown_max=Duration(7200), **breaker),
    )


async def test_a_restarted_supervisor_judges_the_probe_on_its_own_progress(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    idle = {"print": "thinking\n"}
    work = {"print": "working\n", "append": {"work.py": "x = 1\n"}}
    cmd = agent(tmp_path, idle, idle, idle, work, {"print": "FORGE_DONE\n"})
    policy = _policy(max_opens=1)

    def crash(_count: int) -> None:
        raise _Abort

    with pytest.raises(BaseExceptionGroup):
        await supervise_one(tmp_path, mock_clock, policy, cmd, on_cooldown=crash)
    mock_clock.jump(600)  # the supervisor is down for ten minutes of the cooldown
    summary, waited, _ = await supervise_one(tmp_path, mock_clock, policy, cmd)
    assert waited == [1200]
    assert summary.reason == DONE, summary.detail
    events = timeline(tmp_path)
    probe = next(e for e in events if e["event"] == "iteration.finished" and e["iteration"] == 4)
    assert probe["trip"] is None
    assert probe["score"] == 1
    assert [e["event"] for e in events if e["event"].startswith("breaker.")] == [
        "breaker.opened",
        "breaker.half_open",
        "breaker.closed",
    ]
    # The replay agrees with the live loop.
    steps = replay(read_timeline(tmp_path / ".forge/changes/c/timeline.jsonl").typed(), policy)
    assert [(s.record.iteration, s.would_open) for s in steps.steps if s.would_open] == [
        (3, "stagnation: no-progress (3)")
    ]
    assert steps.steps[-1].ending is not None
    assert steps.steps[-1].ending.reason == DONE


def _signals(lines: int, files: int = 1) -> Signals:
    return Signals(files_modified=files, meaningful_files=files, output_lines=lines)


def test_output_decline_needs_a_baseline_volume_before_it_can_trip() -> None:
    policy = StagnationPolicy()
    # One line of output going to none, with a file changed every iteration (+1 each).
    small = assess([_signals(1), _signals(0), _signals(0)], policy)
    assert small.reason is None
    assert small.score == 1
    big = assess([_signals(100), _signals(50), _signals(10)], policy)
    assert big.reason == "stagnation: output-decline (90%)"
    below = assess([_signals(19), _signals(5), _signals(1)], policy)
    assert below.reason is None  # under output_min_lines (20)


async def test_a_finished_loop_shows_no_risk_and_a_running_one_does(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from orchestra._supervise import Dashboard

    done = LoopProgress("checkout", 5, status="done", iteration=3, reason="done")
    done.score, done.risk = 0, "medium"
    running = LoopProgress("billing", 5, status="running", iteration=2)
    running.score, running.risk = -3, "medium"
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160, color_system=None)
    console.print(Dashboard(console, [done, running], None).render())
    rows = {
        line.split("│")[1].strip(): line
        for line in buffer.getvalue().splitlines()
        if "│" in line and ("checkout" in line or "billing" in line)
    }
    assert "medium" not in rows["checkout"]
    assert "+0" in rows["checkout"]
    assert "-3 (medium)" in rows["billing"]


def test_a_verify_streak_past_its_threshold_reads_sensibly() -> None:
    from orchestra._engine._progress import verify_cell

    assert verify_cell("PASS", 0, 2) == "PASS"
    assert verify_cell("FAIL", 1, 2) == "FAIL 1/2"
    assert verify_cell("FAIL", 3, 2) == "FAIL 3× (breaker open at 2)"


def test_a_countdown_line_carries_the_real_remaining_time() -> None:
    # The log last seen says the window has room again (next_free_in 0) while the
    # backend told the head of the line to wait 42s more.
    stats = LimiterStatistics(
        calls=2,
        window=60.0,
        used=2,
        remaining=0,
        next_free_in=0.0,
        tasks_waiting=2,
        head_wait=42.0,
        warned=True,
        paused_until=None,
        pause_reason=None,
    )
    assert limiter_line(stats, 0.0) == (
        "rate limit: 2/2 calls in the last 60s · 2 waiting · next permit in 42.0s"
    )
    free = attrs_evolve(stats, head_wait=0.0, remaining=1, used=1)
    assert "next permit" not in limiter_line(free, 0.0)


def attrs_evolve(stats: LimiterStatistics, **changes: Any) -> LimiterStatistics:
    import attrs

    return attrs.evolve(stats, **changes)
