"""Change names and the folder each change keeps its state in."""

from __future__ import annotations

from pathlib import Path

import attrs

from .._names import CHANGE_NAME, check_change_name
from ._files import STATE_DIR as STATE_DIR


@attrs.frozen
class ChangePaths:
    """Where one change's state lives: ``<root>/.forge/changes/<name>/``."""

    root: Path
    name: str = attrs.field()
    # Joined once: a loop asks for these paths dozens of times an iteration.
    folder: Path = attrs.field(init=False, eq=False, repr=False)

    @name.validator
    def _check_name(self, _attribute: object, value: str) -> None:
        check_change_name(value)

    @folder.default
    def _folder(self) -> Path:
        return self.root / STATE_DIR / "changes" / self.name

    @property
    def verify_attempts(self) -> Path:
        return self.folder / "verify-attempts.yaml"

    @property
    def timeline(self) -> Path:
        return self.folder / "timeline.jsonl"

    @property
    def breaker(self) -> Path:
        return self.folder / "breaker.yaml"

    @property
    def spend(self) -> Path:
        return self.folder / "spend.yaml"

    @property
    def secscan_markers(self) -> Path:
        return self.folder / "secscan-markers.json"

    @property
    def guidance(self) -> Path:
        """A person's guidance for the next iteration (``forge steer``)."""
        return self.folder / "guidance.yaml"

    @property
    def controls(self) -> Path:
        """A person's pause or stop of the change's loop (``forge pause``, ``forge stop``)."""
        return self.folder / "controls.yaml"

    @property
    def live(self) -> Path:
        """Locked, shared, by every loop while it runs the change (kept out of git as a lock)."""
        return self.folder / "live.lock"

    @property
    def runs(self) -> Path:
        return self.folder / "runs"

    @property
    def lock(self) -> Path:
        return self.folder / ".lock"


def list_changes(root: Path) -> list[str]:
    """Names of the changes that have a state folder under ``root``."""
    folder = root / STATE_DIR / "changes"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and CHANGE_NAME.fullmatch(p.name))
