"""Seeing a supervisor run: a live table on a terminal, one plain line per event elsewhere."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

import trio
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .._engine import LoopProgress
from .._oneline import cells, fit, one_line
from .._ratelimit import LimiterStatistics, RateLimiter

REFRESH_SECONDS = 0.25
_COLUMNS = (
    "change",
    "state",
    "iteration",
    "circuit",
    "verify",
    "score",
    "tokens",
    "cost",
    "last event",
)
# A rich table's own width besides its cells: a border each side and between
# columns, and a space of padding each side of every cell.
_TABLE_FRAME = len(_COLUMNS) + 1 + 2 * len(_COLUMNS)
_STYLES = {
    "done": "green",
    "running": "cyan",
    "probing": "magenta",
    "cooling down": "yellow",
    "waiting for a permit": "yellow",
    "verifying": "cyan",
    "paused by a person": "yellow",
    "stopped": "yellow",  # by a person: nothing wrong, nothing done
}


def limiter_line(stats: LimiterStatistics, now_wall: float) -> str:
    """The limiter in one line: use, waiters, countdown, pause."""
    line = f"rate limit: {stats.used}/{stats.calls} calls in the last {stats.window:g}s"
    if stats.unavailable:
        return f"rate limit: UNAVAILABLE — {stats.unavailable}; no executor starts until it is back"
    if stats.tasks_waiting:
        line += f" · {stats.tasks_waiting} waiting"
    # The head of the line's own wait is the backend's answer when it was told to
    # wait; the arithmetic over the log seen last can lag behind it.
    wait = max(stats.next_free_in, stats.head_wait)
    if stats.remaining == 0 and wait > 0:
        line += f" · next permit in {wait:.1f}s"
    if stats.paused_until is not None and stats.paused_until > now_wall:
        line += f" · paused by the provider for {stats.paused_until - now_wall:.0f}s"
    return line


def score_cell(loop: LoopProgress) -> str:
    """The score, the risk while the loop runs (a finished loop has none), and its alerts."""
    if loop.score is None:
        cell = ""
    elif loop.reason is not None:
        cell = f"{loop.score:+d}"
    else:
        cell = f"{loop.score:+d} ({loop.risk})"
    if loop.alerts:
        cell += f" ⚠ {', '.join(loop.alerts)}"
    return cell.strip()


class Dashboard:
    """A rich Live table, refreshed from a trio task (so the mock clock drives it in tests)."""

    def __init__(
        self, console: Console, progress: Sequence[LoopProgress], limiter: RateLimiter | None
    ) -> None:
        self._console = console
        self._progress = progress
        self._limiter = limiter
        self._events: deque[str] = deque(maxlen=6)

    def event(self, kind: str, change: str, text: str) -> None:
        if kind != "iteration":
            self._events.append(f"{change}: {text}")

    async def run(self) -> None:
        with Live(console=self._console, auto_refresh=False, transient=False) as live:
            try:
                while True:
                    if self._limiter is not None:
                        # Other processes share the log: read it, not just our own grants.
                        await self._limiter.refresh()
                    live.update(self.render(), refresh=True)
                    await trio.sleep(REFRESH_SECONDS)
            finally:
                live.update(self.render(), refresh=True)

    def render(self) -> Group:
        now = trio.current_time()
        rows = [self._row(loop, now) for loop in self._progress]
        width = self._console.width
        # Every row on one line: the last event takes what the other columns
        # leave and is cut at a word; the others are short and never wrap.
        fixed = [max([cells(_COLUMNS[i])] + [cells(row[i]) for row in rows]) for i in range(8)]
        room = max(cells(_COLUMNS[-1]), width - sum(fixed) - _TABLE_FRAME)
        table = Table(expand=False)
        for column in _COLUMNS:
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        for loop, row in zip(self._progress, rows, strict=True):
            table.add_row(
                row[0],
                Text(row[1], style=_STYLES.get(loop.status, "red" if loop.reason else "")),
                *row[2:8],
                fit(row[8], room),
            )
        header = (
            limiter_line(self._limiter.statistics(), time.time())
            if self._limiter
            else "rate limit: off"
        )
        parts: list[Text | Table] = [Text(fit(header, width), style="bold"), table]
        parts.extend(Text(fit(line, width), style="dim", no_wrap=True) for line in self._events)
        return Group(*parts)

    @staticmethod
    def _row(loop: LoopProgress, now: float) -> list[str]:
        """One loop's cells, as text, in the order of the columns."""
        circuit = loop.circuit
        if loop.cooldown_until is not None:
            circuit += f" ({max(0.0, loop.cooldown_until - now):.0f}s)"
        if loop.trips:
            circuit += f" ×{loop.trips}"
        if loop.recovery and loop.reason is None:
            circuit += f" · recovery {loop.recovery.split(':', 1)[0]}"
        return [
            loop.change,
            loop.status,
            f"{loop.iteration}/{loop.max_iterations}",
            circuit,
            loop.verify,
            score_cell(loop),
            str(loop.tokens),
            f"{'~' if loop.cost_estimated else ''}${loop.cost_usd:.2f}",
            one_line(loop.last_event),
        ]
