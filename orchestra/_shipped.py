"""Where the policies and executor definitions shipped with Forge are found.

In a wheel they live inside the package (``orchestra/_shipped/<kind>/``); in a
source checkout or an editable install they are the repository's top-level
``policies/`` and ``executors/`` folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_dir(kind: str) -> Path:
    """The folder of shipped files of one kind (``"policies"`` or ``"executors"``)."""
    inside = _PACKAGE_DIR / "_shipped" / kind
    if inside.is_dir():
        return inside
    return _PACKAGE_DIR.parent / kind


def shipped_names(kind: str) -> list[str]:
    """Names of the shipped TOML files of one kind, without their suffix."""
    folder = shipped_dir(kind)
    if not folder.is_dir():
        return []
    return sorted(path.stem for path in folder.glob("*.toml"))
