"""The live dashboard, driven by a trio task on the mock clock, into a capture console."""

from __future__ import annotations

import io

import trio
import trio.testing
from rich.console import Console

from orchestra._ratelimit import MemoryBackend, RateLimiter
from orchestra._supervise import Dashboard, LoopProgress, limiter_line


def console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=160, color_system=None), buffer


async def test_rows_and_header(autojump_clock: trio.testing.MockClock) -> None:
    limiter = RateLimiter(MemoryBackend(trio.current_time), 2, 60.0, 0.8, clock=trio.current_time)
    await limiter.acquire("a")
    await limiter.acquire("b")
    cooling = LoopProgress("billing", 10, status="cooling down", iteration=3, circuit="open")
    cooling.cooldown_until = trio.current_time() + 90
    cooling.trips = 2
    done = LoopProgress("checkout", 5, status="done", iteration=3, reason="done")
    live_console, buffer = console()
    dashboard = Dashboard(live_console, [cooling, done], limiter)
    dashboard.event("breaker.opened", "billing", "circuit OPEN — verify: 2 consecutive failures")
    live_console.print(dashboard.render())
    text = buffer.getvalue()
    assert "rate limit: 2/2 calls in the last 60s · next permit in 60.0s" in text
    assert "billing" in text
    assert "open (90s) ×2" in text
    assert "3/10" in text
    assert "billing: circuit OPEN — verify: 2 consecutive failures" in text


async def test_the_refresh_task_runs_on_the_trio_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    progress = LoopProgress("c", 5, status="running")
    live_console, buffer = console()
    dashboard = Dashboard(live_console, [progress], None)
    with trio.move_on_after(10):  # forty refreshes of mock time, no real waiting
        await dashboard.run()
    assert "rate limit: off" in buffer.getvalue()


def test_limiter_line_shows_a_provider_pause() -> None:
    from orchestra._ratelimit import LimiterStatistics

    stats = LimiterStatistics(
        calls=100,
        window=3600.0,
        used=10,
        remaining=90,
        next_free_in=120.0,
        tasks_waiting=3,
        head_wait=120.0,
        warned=False,
        paused_until=1120.0,
        pause_reason="provider",
    )
    assert limiter_line(stats, 1000.0) == (
        "rate limit: 10/100 calls in the last 3600s · 3 waiting · paused by the provider for 120s"
    )


async def test_an_estimated_cost_is_marked_with_a_tilde(
    autojump_clock: trio.testing.MockClock,
) -> None:
    estimated = LoopProgress("codex-loop", 5, cost_usd=1.5, cost_estimated=True)
    reported = LoopProgress("claude-loop", 5, cost_usd=2.25)
    live_console, buffer = console()
    live_console.print(Dashboard(live_console, [estimated, reported], None).render())
    text = buffer.getvalue()
    assert "~$1.50" in text
    assert "$2.25" in text
    assert "~$2.25" not in text


async def test_each_row_is_one_line_at_140_columns_and_events_end_at_a_word(
    autojump_clock: trio.testing.MockClock,
) -> None:
    buffer = io.StringIO()
    narrow = Console(file=buffer, force_terminal=True, width=140, color_system=None)
    words = "verify FAILED tests/test_cart.py::test_total — expected 12.50 but the cart said "
    loops = []
    for n in range(3):
        loop = LoopProgress(f"change-{n}", 10, status="cooling down", iteration=4, circuit="open")
        loop.cooldown_until = trio.current_time() + 1800
        loop.trips, loop.recovery, loop.verify = 2, "narrow: one file at a time", "FAIL"
        loop.score, loop.risk, loop.alerts = -3, "high", ["calls-remaining"]
        loop.last_event = words * 4
        loops.append(loop)
    dashboard = Dashboard(narrow, loops, None)
    dashboard.event("breaker.opened", "change-0", words * 3)
    narrow.print(dashboard.render())
    lines = buffer.getvalue().splitlines()
    assert all(len(line) <= 140 for line in lines), lines
    # The header; the table's top rule, names and rule; a line per loop; its
    # bottom rule; the event.
    assert sum(1 for line in lines if "change-" in line and "│" in line) == 3, lines
    assert len(lines) == 1 + 3 + 3 + 1 + 1, lines
    event = lines[-1]
    assert event.endswith("…")
    assert (event[:-1].rstrip() + " ") in f"change-0: {words * 3}"
