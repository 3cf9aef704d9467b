"""Change names and the folder each change keeps its state in."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from .._errors import UsageError

_CHANGE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
STATE_DIR = ".forge"


def check_change_name(name: str) -> str:
    """Return ``name`` when it is a valid change name.

    A change name becomes a folder name, so it is held to
    ``[a-z0-9][a-z0-9._-]{0,63}``: it can never climb out of ``.forge/changes/``.

    Raises:
        UsageError: naming the rule the name breaks.
    """
    if not _CHANGE_NAME.fullmatch(name):
        raise UsageError(
            f"invalid change name {name!r}",
            hint="a change name is 1-64 characters of a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return name


@attrs.frozen
class ChangePaths:
    """Where one change's state lives: ``<root>/.forge/changes/<name>/``."""

    root: Path
    name: str = attrs.field()

    @name.validator
    def _check_name(self, _attribute: object, value: str) -> None:
        check_change_name(value)

    @property
    def folder(self) -> Path:
        return self.root / STATE_DIR / "changes" / self.name

    @property
    def verify_attempts(self) -> Path:
        return self.folder / "verify-attempts.yaml"

    @property
    def timeline(self) -> Path:
        return self.folder / "timeline.jsonl"

    @property
    def lock(self) -> Path:
        return self.folder / ".lock"


def list_changes(root: Path) -> list[str]:
    """Names of the changes that have a state folder under ``root``."""
    folder = root / STATE_DIR / "changes"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and _CHANGE_NAME.fullmatch(p.name))
