"""Where a change's executor output is, in order, and which of it is still being written.

Each iteration's output is streamed to ``runs/<run id>/iteration-<n>.log``
in the change's folder; nothing else under ``runs/`` is executor output.
Which run and iteration are running is the timeline's to say.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container, Iterable
from pathlib import Path

import attrs

from .._errors import StateError
from .._state import (
    Event,
    IterationFinished,
    IterationStarted,
    RunStarted,
    RunStopped,
    VerifyRecorded,
)

_LOG = re.compile(r"iteration-([1-9][0-9]*)\.log")


@attrs.frozen
class LogAt:
    """One iteration's log: its run and its number."""

    run_id: str
    iteration: int

    def path(self, runs: Path) -> Path:
        return runs / self.run_id / f"iteration-{self.iteration}.log"


@attrs.frozen
class Running:
    """What a timeline says is running: runs not stopped, iterations not finished, in order."""

    runs: tuple[str, ...] = ()
    iterations: tuple[LogAt, ...] = ()


def running(events: Iterable[Event]) -> Running:
    """The runs a timeline has started and not stopped, and their iterations not finished."""
    runs: dict[str, None] = {}
    going: dict[LogAt, None] = {}
    for event in events:
        if isinstance(event, RunStarted):
            runs[event.run_id] = None
        elif isinstance(event, IterationStarted):
            going[LogAt(event.run_id, event.iteration)] = None
        elif isinstance(event, IterationFinished):
            going.pop(LogAt(event.run_id, event.iteration), None)
        elif isinstance(event, RunStopped):
            runs.pop(event.run_id, None)
            going = {at: None for at in going if at.run_id != event.run_id}
    return Running(tuple(runs), tuple(going))


def run_folders(runs: Path) -> set[str]:
    """The runs that have a folder.

    Raises:
        StateError: the folder of the runs cannot be read.
    """
    return set(_entries(runs, directories=True))


def iterations(runs: Path, run_id: str) -> list[int]:
    """The iterations of one run that have a log, in order.

    Raises:
        StateError: the run's folder cannot be read.
    """
    numbers = []
    for name in _entries(runs / run_id, directories=False):
        match = _LOG.fullmatch(name)
        if match:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def next_log(runs: Path, after: LogAt | None, known: Container[str]) -> LogAt | None:
    """The log to show after ``after``: its run's next, else the first of a run not ``known``.

    A new run is told by its folder, not by its name: two runs started in
    one second sort by the random part of their ids.

    Raises:
        StateError: a folder of the runs cannot be read.
    """
    if after is not None:
        for number in iterations(runs, after.run_id):
            if number > after.iteration:
                return LogAt(after.run_id, number)
    for run_id in sorted(run_folders(runs)):
        if run_id not in known:
            numbers = iterations(runs, run_id)
            if numbers:
                return LogAt(run_id, numbers[0])
    return None


def ends(event: Event, at: LogAt) -> bool:
    """Whether ``event`` says ``at``'s executor has ended.

    Its loop verified after it (the loop verifies once the executor ended),
    its iteration finished, or its run stopped.
    """
    if isinstance(event, IterationFinished | VerifyRecorded):
        return LogAt(event.run_id or "", event.iteration or 0) == at
    return isinstance(event, RunStopped) and event.run_id == at.run_id


def _entries(folder: Path, *, directories: bool) -> list[str]:
    """The names of the folders (or the files) in ``folder``; none when it is not there yet."""
    try:
        with os.scandir(folder) as entries:
            return [
                entry.name
                for entry in entries
                if (
                    entry.is_dir(follow_symlinks=False)
                    if directories
                    else entry.is_file(follow_symlinks=False)
                )
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StateError(f"cannot read {folder}: {exc.strerror or exc}") from exc
