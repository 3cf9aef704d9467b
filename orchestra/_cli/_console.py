"""Terminal output: styled on a terminal, plain text everywhere else.

Output is plain, with no control codes, when stdout is not a terminal, when
``NO_COLOR`` is set, or with ``--plain``. Lines are never wrapped: the contract
lines (``Verdict: PASS``, ``Breaker: …``) must reach scripts whole.

Plain lines are written here directly, byte for byte what rich would write,
so that a command whose output goes to a pipe or a file does not import rich;
rich is imported for a terminal's styles and live views only.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._devnull import to_devnull

if TYPE_CHECKING:
    from rich.console import Console

# The characters rich's Text drops (bell, backspace, vertical tab, form feed,
# carriage return): a plain line must not differ from a styled one in its text.
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))

Parts = Sequence[tuple[str, str | None]]


class Output:
    """Where a command writes: human lines to stdout, notes to stderr, or one JSON document."""

    def __init__(self, *, plain: bool = False, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        no_style = plain or bool(os.environ.get("NO_COLOR"))
        # Live displays only on a real terminal; elsewhere, one plain line per event.
        self.live = not plain and _isatty(sys.stdout)
        self._out = _writer(sys.stdout, no_style=no_style)
        self._err = _writer(sys.stderr, no_style=no_style)

    @property
    def console(self) -> Console:
        """The rich console of stdout, for commands that render tables or live views."""
        return self._out.console

    def line(self, text: str = "", style: str | None = None) -> None:
        """A line of the human report (nothing in JSON mode)."""
        if not self.json_mode:
            self._out.write(((text, style),))

    def styled(self, *parts: tuple[str, str | None]) -> None:
        """A line assembled from differently styled parts."""
        if not self.json_mode:
            self._out.write(parts)

    def announce(self, text: str, style: str | None = None) -> None:
        """A line of the human report that ``--json`` must not silence: on stderr there.

        For what a command says as it starts (the circuit breaker's announcement,
        the policy's warnings): in JSON mode stdout holds the document alone.
        """
        if self.json_mode:
            self._err.write(((text, style),))
        else:
            self._out.write(((text, style),))

    def note(self, text: str, style: str | None = "yellow") -> None:
        """A remark for the person at the terminal, on stderr in every mode."""
        self._err.write(((text, style),))

    def document(self, data: Any) -> None:
        """The one JSON document of ``--json`` mode."""
        try:
            sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            to_devnull(sys.stdout)


class _PlainWriter:
    """Lines without styles, written and flushed one at a time, as rich writes them."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            self._console = _rich_console(self._stream, plain=True)
        return self._console

    def write(self, parts: Parts) -> None:
        text = "".join(part for part, _ in parts)
        if "\t" in text:
            # rich expands tabs by display width (wide characters count twice):
            # leave that to rich rather than imitate it.
            _print(self.console, parts)
            return
        try:
            self._stream.write(text.translate(_STRIPPED) + "\n")
            self._stream.flush()
        except BrokenPipeError:
            to_devnull(self._stream)


class _StyledWriter:
    """Lines through rich, for a terminal."""

    def __init__(self, stream: Any) -> None:
        self.console = _rich_console(stream, plain=False)

    def write(self, parts: Parts) -> None:
        _print(self.console, parts)


def _writer(stream: Any, *, no_style: bool) -> _PlainWriter | _StyledWriter:
    # Styles only on a terminal: FORCE_COLOR must not put escape codes into the
    # contract lines that scripts grep.
    if no_style or not _isatty(stream):
        return _PlainWriter(stream)
    return _StyledWriter(stream)


def _rich_console(stream: Any, *, plain: bool) -> Console:
    from ._styled import console

    return console(stream, plain=plain)


def _print(console: Console, parts: Parts) -> None:
    from ._styled import print_line

    print_line(console, parts)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
