"""Terminal output: styled on a terminal, plain text everywhere else.

Output is plain, with no control codes, when stdout is not a terminal, when
``NO_COLOR`` is set, or with ``--plain``. Lines are never wrapped: the contract
lines (``Verdict: PASS``, ``Breaker: …``) must reach scripts whole.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.text import Text


class Output:
    """Where a command writes: human lines to stdout, notes to stderr, or one JSON document."""

    def __init__(self, *, plain: bool = False, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        no_style = plain or bool(os.environ.get("NO_COLOR"))
        # Live displays only on a real terminal; elsewhere, one plain line per event.
        self.live = not plain and _isatty(sys.stdout)
        self._out = _console(sys.stdout, no_style=no_style)
        self._err = _console(sys.stderr, no_style=no_style)

    @property
    def console(self) -> Console:
        """The rich console of stdout, for commands that render tables or live views."""
        return self._out

    def line(self, text: str = "", style: str | None = None) -> None:
        """A line of the human report (nothing in JSON mode)."""
        if not self.json_mode:
            self._out.print(Text(text, style=style or ""))

    def styled(self, *parts: tuple[str, str | None]) -> None:
        """A line assembled from differently styled parts."""
        if not self.json_mode:
            text = Text()
            for part, style in parts:
                text.append(part, style=style or "")
            self._out.print(text)

    def note(self, text: str, style: str | None = "yellow") -> None:
        """A remark for the person at the terminal, on stderr in every mode."""
        self._err.print(Text(text, style=style or ""))

    def document(self, data: Any) -> None:
        """The one JSON document of ``--json`` mode."""
        try:
            sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


class _QuietConsole(Console):
    """A console that survives a reader going away (``forge verify | head -1``).

    rich exits the program on a broken pipe; Forge must finish recording what
    it did and return its own exit code, so further output goes to /dev/null.
    """

    def on_broken_pipe(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.file.fileno())
        os.close(devnull)


def _console(stream: Any, *, no_style: bool) -> Console:
    # Styles only on a terminal: FORCE_COLOR must not put escape codes into the
    # contract lines that scripts grep.
    plain = no_style or not _isatty(stream)
    return _QuietConsole(
        file=stream,
        force_terminal=False if plain else None,
        no_color=plain,
        color_system=None if plain else "auto",
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
    )


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
