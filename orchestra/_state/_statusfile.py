"""Reading a change's status log (``status.md``) without the loop engine: ``forge status``.

The engine writes the file (one section per judged iteration); a read-only
command needs only the alerts the last section lists, each with its figure
as of that iteration.
"""

from __future__ import annotations

import re
from pathlib import Path

STATUS_FILE = "status.md"

_SECTION = re.compile(r"^## Iteration (\d+) ", re.MULTILINE)
_ALERT = re.compile(r"(\S+) \((.*)\)")


def split_sections(text: str) -> list[str]:
    """The sections of a status log, oldest first (the heading dropped)."""
    starts = [match.start() for match in _SECTION.finditer(text)]
    ends = [*starts[1:], len(text)] if starts else []  # no heading: no section
    return [text[a:b].rstrip("\n") + "\n" for a, b in zip(starts, ends, strict=True)]


def read_sections(path: Path) -> list[str]:
    """The sections already in the file (none when it is missing or unreadable)."""
    try:
        return split_sections(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []


def last_alert_details(path: Path) -> dict[str, str]:
    """The alerts the last section lists, with their figures as of that iteration."""
    sections = read_sections(path)
    if not sections:
        return {}
    for line in sections[-1].splitlines():
        if line.startswith("- Alerts: "):
            found = {}
            for part in line.removeprefix("- Alerts: ").split("; "):
                match = _ALERT.fullmatch(part.strip())
                if match:
                    found[match[1]] = match[2]
            return found
    return {}
