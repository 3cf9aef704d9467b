"""``forge attach CHANGE``: a loop's executor output as it is printed, until Ctrl-C.

It reads what the loop streams to each iteration's log (already redacted as
it was written), from the beginning of the iteration running when it
attaches, then each later iteration's, and a later run's, each under a line
naming it. Only whole lines are printed: a line still being written waits
for its newline, or for its iteration to end. ``--events`` interleaves the
change's new timeline events, in words, as they are appended. It reads
only: nothing it does changes the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import attrs

from .._errors import EXIT_OK, UsageError
from .._inside import inside_an_executor
from .._state import (
    ChangePaths,
    Event,
    IterationStarted,
    RunStopped,
    decode_event,
    event_record,
    loop_running,
    parse_timeline,
    require_change,
)
from ._attach_logs import LogAt, Running, ends, iterations, next_log, run_folders, running
from ._common import project_from
from ._console import Output
from ._devnull import to_devnull
from ._follow import POLL_SECONDS, Tail, in_words, new_events, read_whole


class _ReaderGone(Exception):
    """Whoever read the output has gone (``forge attach C | head``): nothing is left to do."""


def run(args: argparse.Namespace, out: Output) -> int:
    if out.json_mode:
        raise UsageError(
            "forge attach prints the agent's output as it is; it has no --json",
            hint=f"forge timeline {args.change} --follow --json streams the events as JSON",
        )
    inside = inside_an_executor()
    if inside is not None and inside.change in (None, args.change):
        # Not a control (it reads), but what it prints there is the loop's
        # output, which it would read and print again, without end.
        raise UsageError(
            f"forge attach cannot run {inside.describe()}: what it printed would be "
            "that loop's output again, read and printed again without end",
            hint="forge attach is for a person watching a loop from outside it",
        )
    project = project_from(args)
    # As forge steer: a change with no state is a typo (exit 2, the changes there are).
    paths = require_change(ChangePaths(project.root, args.change), "forge attach")
    from ._trio_run import run_interruptible

    with contextlib.suppress(_ReaderGone):
        attached = _Attached.start(paths, out, events=args.events)
        run_interruptible(_follow, attached)
    return EXIT_OK


async def _follow(attached: _Attached) -> None:
    """Print the output and the events as they come, until interrupted."""
    import trio

    while True:
        attached.step()
        await trio.sleep(POLL_SECONDS)


@attrs.define
class _Attached:
    """What attach has shown of one change, and where it reads next.

    Attributes:
        known: The runs there were when attach began, and those shown since:
            a run not among them is one that started since.
        at: The log shown (or, when attach began between iterations, the
            running run's last): the next shown is its run's next, else a new run's.
        log: ``at``'s log, followed; None while nothing is shown yet.
    """

    paths: ChangePaths
    out: Output
    events: bool
    timeline: Tail
    known: set[str]
    at: LogAt | None = None
    log: Tail | None = None
    waiting: bool = False  # the wait for the next iteration was said
    mid_line: bool = False  # the output printed last did not end its line

    @classmethod
    def start(cls, paths: ChangePaths, out: Output, *, events: bool) -> _Attached:
        """Begin with the running iteration's log from its start; else say attach waits."""
        # The runs first: one that starts meanwhile is then a new one, or on the timeline.
        known = run_folders(paths.runs)
        data = read_whole(paths.timeline)
        # The timeline's runs not stopped, unless no loop holds the change: a run
        # killed (kill -9) before it could record its ending is not running.
        now = running(_decoded(data)) if loop_running(paths) else Running()
        # New events only, from the end of the last whole line read.
        timeline = Tail(paths.timeline, data.rfind(b"\n") + 1)
        attached = cls(paths, out, events, timeline, known=known)
        if now.iterations:
            current = now.iterations[-1]
            if current.path(paths.runs).exists():
                attached.begin(current)
                return attached
            attached.at = LogAt(current.run_id, current.iteration - 1)
        elif now.runs:
            # Between two iterations (a cooldown): its next one is shown.
            run_id = now.runs[-1]
            attached.at = LogAt(run_id, max(iterations(paths.runs, run_id), default=0))
        attached.say_waiting()
        return attached

    def step(self) -> None:
        """Print what was appended since the last step, and move on to a later log."""
        self.print_log()
        for event in new_events(self.timeline):
            self.on_event(event)
            if isinstance(event, IterationStarted):
                # Its output comes after its start, when its log is there already.
                self.move_on(LogAt(event.run_id, event.iteration))
        self.move_on()

    def move_on(self, to: LogAt | None = None) -> None:
        """Show the next log, if there is one (and it is ``to``, when given)."""
        later = next_log(self.paths.runs, self.at, self.known)
        if later is not None and to in (None, later):
            # A run's iterations run one after another: once the next has a
            # log, this one's is written to its end, its last line too.
            self.end_log()
            self.begin(later)

    def begin(self, at: LogAt) -> None:
        """Show ``at``'s log from its beginning, under a line naming it."""
        self.at, self.log, self.waiting = at, Tail(at.path(self.paths.runs)), False
        self.known.add(at.run_id)
        self.say(f"── iteration {at.iteration} · run {at.run_id} ──", style="bold")
        self.print_log()

    def print_log(self) -> None:
        if self.log is not None:
            for part in self.log.lines():
                self.write(part)

    def end_log(self) -> None:
        """The log is at its end: print the rest, the last line too."""
        if self.log is not None:
            self.print_log()
            self.write(self.log.rest())

    def on_event(self, event: Event) -> None:
        ended = self.log is not None and self.at is not None and ends(event, self.at)
        if ended:
            # Its output comes before the event that says it ended.
            self.end_log()
        if self.events:
            self.break_line()
            in_words(self.out)(event_record(event))
        if ended and isinstance(event, RunStopped) and not self.waiting:
            self.say_waiting(f"run {event.run_id} ended ({event.reason}); ")

    def say_waiting(self, why: str = "") -> None:
        self.waiting = True
        change = self.paths.name
        self.say(f'attach: {why}waiting for "{change}"\'s next iteration (Ctrl-C to leave)')

    def say(self, text: str, style: str | None = "dim") -> None:
        self.break_line()
        self.out.line(text, style=style)

    def break_line(self) -> None:
        """End the line a piece of an endless output line left open, before a line of Forge's."""
        if self.mid_line:
            self.write(b"\n")

    def write(self, data: bytes) -> None:
        """The log's bytes as they are: redacted when written, nothing else is done to them."""
        if not data:
            return
        try:
            sys.stdout.flush()  # what the console wrote goes first
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            to_devnull(sys.stdout)
            raise _ReaderGone from None
        self.mid_line = not data.endswith(b"\n")


def _decoded(data: bytes) -> list[Event]:
    return [decode_event(raw) for raw in parse_timeline(data).events]
