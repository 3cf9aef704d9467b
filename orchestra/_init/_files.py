"""Reading a project's files as ``forge init`` does: whatever is unreadable counts as empty."""

from __future__ import annotations

import json
from pathlib import Path


def read_text(path: Path) -> str:
    """The file's text ("" when it is missing or unreadable)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def npm_scripts(path: Path) -> dict[str, object]:
    """The ``scripts`` of a package.json (empty when it has none or is not JSON)."""
    try:
        scripts = json.loads(read_text(path) or "{}").get("scripts", {})
    except (ValueError, AttributeError):
        return {}
    return scripts if isinstance(scripts, dict) else {}
