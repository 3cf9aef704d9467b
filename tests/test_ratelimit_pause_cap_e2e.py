"""A pause in the shared rate-limit log is capped, names who paused; an overlong one is dropped.

Every loop on the machine obeys the pause row of ``.forge/ratelimit.sqlite3``:
a row an agent (or anyone) writes a year ahead must not hold every loop for
a year. Forge caps what it writes to the longest provider pause it accepts
and drops, with a message naming the file and the row, what exceeds it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from orchestra._ratelimit import SlidingWindow, SqliteBackend
from orchestra._ratelimit._sqlite import SCHEMA_VERSION
from orchestra._ratelimit._window import LONGEST_PAUSE

from .support import Repo

_YEAR = 365 * 86400.0


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _pause_rows(path: Path) -> list[tuple[float, str, str]]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute("SELECT until, reason, paused_by FROM pause").fetchall()


def test_a_pause_row_a_year_ahead_holds_no_run(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = ""\n')
    repo.commit("policy")
    agent = repo.root.parent / "agent.sh"
    agent.write_text("#!/bin/sh\necho FORGE_DONE\n")
    agent.chmod(0o755)
    assert repo.forge("run", "--change", "a", "--cmd", str(agent), "--yes").code == 0
    log = repo.root / ".forge" / "ratelimit.sqlite3"
    with contextlib.closing(sqlite3.connect(log, isolation_level=None)) as connection:
        connection.execute(
            "INSERT INTO pause (id, until, reason) VALUES (1, ?, 'hold every loop')",
            (time.time() + _YEAR,),
        )
    # Obeyed, this would wait a year: the harness's timeout would fail it.
    done = repo.forge("run", "--change", "b", "--cmd", str(agent), "--yes")
    assert done.code == 0, done.err
    assert "run: DONE after 1 iteration(s)" in done.lines
    assert f"{log}: the pause row (table pause, id 1: 'hold every loop'" in done.err
    assert "written by no Forge" in done.err
    assert "dropped, not obeyed" in done.err
    assert _pause_rows(log) == []


def test_a_pause_forge_writes_is_capped_and_names_who_paused(tmp_path: Path) -> None:
    clock = _Clock(1_800_000_000.0)
    backend = SqliteBackend.open(tmp_path / "log.sqlite3", clock=clock)
    backend.pause(_YEAR, "provider limit reported by c")
    [(until, reason, by)] = _pause_rows(tmp_path / "log.sqlite3")
    assert until == clock.now + LONGEST_PAUSE
    assert reason == "provider limit reported by c"
    assert by.startswith(f"pid {os.getpid()} on ")
    reading = backend.peek(SlidingWindow(calls=5, window=60))
    assert reading.paused_for == LONGEST_PAUSE


def test_an_overlong_pause_read_back_is_reported_once_and_dropped(tmp_path: Path) -> None:
    clock = _Clock(1_800_000_000.0)
    said: list[str] = []
    path = tmp_path / "log.sqlite3"
    backend = SqliteBackend.open(path, clock=clock, report=said.append)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute(
            "INSERT INTO pause VALUES (1, ?, 'mine', 'pid 1 on elsewhere')",
            (clock.now + LONGEST_PAUSE + 1,),
        )
    rule = SlidingWindow(calls=5, window=60)
    assert backend.peek(rule).paused_for == 0
    assert backend.try_acquire(rule, 1, "c").granted
    [line] = said
    assert str(path) in line
    assert "written by pid 1 on elsewhere" in line
    # A pause right at the cap is obeyed.
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute(
            "INSERT INTO pause VALUES (1, ?, 'weekly', '')", (clock.now + LONGEST_PAUSE,)
        )
    assert backend.peek(rule).paused_for == LONGEST_PAUSE


def test_a_log_of_schema_version_2_keeps_its_pause(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    SqliteBackend.open(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        # As Forge wrote it before pauses said who paused.
        connection.execute("DROP TABLE pause")
        connection.execute(
            "CREATE TABLE pause ("
            " id INTEGER PRIMARY KEY CHECK (id = 1), until REAL NOT NULL, reason TEXT NOT NULL)"
        )
        connection.execute("INSERT INTO pause VALUES (1, 1800000030.0, '429')")
        connection.execute("PRAGMA user_version = 2")
    backend = SqliteBackend.open(path, clock=_Clock(1_800_000_000.0))
    reading = backend.peek(SlidingWindow(calls=5, window=60))
    assert (reading.paused_for, reading.pause_reason) == (30.0, "429")
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert _pause_rows(path) == [(1800000030.0, "429", "")]
