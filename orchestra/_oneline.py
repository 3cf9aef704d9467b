"""Text that fits one terminal line: measured in cells, cut at a word (pure).

A terminal gives a wide character (漢) two cells and a combining mark none,
so a line is measured in cells, as rich measures it, not in characters.
Measuring here keeps rich out of a command whose output goes to a pipe.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata

ELLIPSIS = "…"
# Runs of whitespace (a newline a person typed into a detail) read as one space.
_SPACES = re.compile(r"\s+")
# What a cut line may not end on before its ellipsis.
_TRAILING = " ,;:—-("
# rich's width when it can find none: neither COLUMNS nor a terminal.
DEFAULT_WIDTH = 80


def one_line(text: str) -> str:
    """``text`` on one line: whitespace runs become one space, control characters go."""
    flat = _SPACES.sub(" ", text).strip()
    return "".join(ch for ch in flat if unicodedata.category(ch) != "Cc")


def cells(text: str) -> int:
    """The terminal cells ``text`` takes."""
    total = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells at a word's end, with ``…``; whole when it fits.

    A cut never splits a word: when not even the first word fits, the line is
    the ellipsis alone (or nothing, in a width of zero).
    """
    if cells(text) <= width:
        return text
    room = width - cells(ELLIPSIS)
    if room < 0:
        return ""
    kept = ""
    for match in re.finditer(r"\S+", text):
        candidate = text[: match.end()]
        if cells(candidate) > room:
            break
        kept = candidate
    return kept.rstrip(_TRAILING) + ELLIPSIS if kept.strip() else ELLIPSIS


def terminal_width() -> int:
    """The width rich gives a console: ``COLUMNS``, else a terminal's, else 80.

    As rich does, the size is asked of stdin, stdout and stderr in turn: output
    piped to a pager from a terminal is as wide as that terminal.
    """
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
        except (AttributeError, ValueError, OSError):
            continue
    return DEFAULT_WIDTH
