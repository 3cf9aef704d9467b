"""A loop's own iteration logs, guarded without walking its whole history.

Each iteration's output is kept in ``.forge/changes/<change>/runs/<run>/
iteration-<n>.log``: the evidence a person reviews after an escalation. An
agent must not delete or rewrite it. Walking ``runs/`` whole would cost a
loop more with every run it ever made, so this names the few paths that
matter by name (a stat each): the ``runs/`` folder and the running run's
folder must exist, and the logs of the run's earlier iterations are frozen
(the current iteration's log is still being written). Which run and
iteration that is, is read from the timeline when the check is armed
(:meth:`RunLogs.follow`), so that the paths after the iteration are the ones
before it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import attrs

from ._spec import EXIST, FROZEN

RUNS = "runs"


@attrs.define
class RunLogs:
    """The ``runs/`` folder of one change and its running run's earlier logs."""

    reads: ClassVar[bool] = True

    folder: Path  # the change's state folder
    name: str  # its display name (``.forge/changes/<change>``)
    run_id: str | None = None
    iteration: int | None = None

    def follow(self, run_id: str | None, iteration: int | None) -> None:
        """The run and iteration the next manifests are for (set when the check is armed)."""
        self.run_id, self.iteration = run_id, iteration

    def walk(self) -> Iterator[tuple[str, str, str]]:
        runs = os.path.join(self.folder, RUNS)
        if os.path.islink(runs):
            return  # the walk never follows a link; it shows as a folder replaced
        yield runs, f"{self.name}/{RUNS}", EXIST
        run_id = self.run_id
        if not run_id or "/" in run_id or run_id in (".", ".."):
            return
        run = os.path.join(runs, run_id)
        yield run, f"{self.name}/{RUNS}/{run_id}", EXIST
        for number in range(1, self.iteration or 0):
            log = f"iteration-{number}.log"
            yield os.path.join(run, log), f"{self.name}/{RUNS}/{run_id}/{log}", FROZEN
