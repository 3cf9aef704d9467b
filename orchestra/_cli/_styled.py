"""The rich side of :mod:`._console`, imported only when a command needs rich."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from ._devnull import to_devnull


class QuietConsole(Console):
    """A console that survives a reader going away (``forge verify | head -1``).

    rich exits the program on a broken pipe; Forge must finish recording what
    it did and return its own exit code, so further output goes to /dev/null.
    """

    def on_broken_pipe(self) -> None:
        to_devnull(self.file)


def console(stream: Any, *, plain: bool) -> Console:
    """A console that never wraps, with styles unless ``plain``."""
    return QuietConsole(
        file=stream,
        force_terminal=False if plain else None,
        no_color=plain,
        color_system=None if plain else "auto",
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
    )


def print_line(console: Console, parts: Sequence[tuple[str, str | None]]) -> None:
    """One line of differently styled parts."""
    if len(parts) == 1:
        text, style = parts[0]
        console.print(Text(text, style=style or ""))
        return
    line = Text()
    for part, style in parts:
        line.append(part, style=style or "")
    console.print(line)
