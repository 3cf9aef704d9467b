"""A person's hold on one loop: ``.forge/changes/<c>/controls.yaml``.

``forge pause`` and ``forge stop`` leave a request here; the loop running the
change reads it between iterations (and while it waits: a cooldown, a permit,
an answer), so a person acts on one loop of a batch without a server to
reach and without touching the others.

- **paused** stands until ``forge resume``: a loop holds before its next
  iteration, whichever run it is (a restarted supervisor holds too).
- **stop** is for the loop running when it was asked: the loop ends with the
  ending ``stopped`` and removes it. A stop older than the run that reads it
  was meant for an earlier run and is not obeyed.

The file is written whole under the change's lock. A corrupt one is moved
aside and reported (``state.corrupt``) and the loop holds, as if paused, until
``forge resume``: whether a person paused it is not known.

Every loop holds a shared lock on ``.forge/changes/<c>/live.lock`` while it runs
(:func:`live_loop`), so a control can tell whether any loop runs the change:
the kernel drops the lock with the process, however it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator

import attrs

from ._change import ChangePaths
from ._events import Event
from ._files import exclusive_lock, iso_epoch
from ._guarded import load_or_block
from ._timeline import append_event
from ._yamlstate import save_state

# The timeline's events of these controls: a person's request, and what the loop did.
CONTROL_PAUSED = "control.paused"
CONTROL_RESUMED = "control.resumed"
CONTROL_STOP = "control.stop"
LOOP_PAUSED = "loop.paused"
LOOP_RESUMED = "loop.resumed"


@attrs.frozen
class Request:
    """A person's request of a loop.

    Attributes:
        by: Who asked (``user@host``).
        at: When (UTC, ISO 8601, milliseconds).
        reason: Why, in their words ("" when they gave none).
    """

    by: str
    at: str
    reason: str = ""

    def describe(self, verb: str) -> str:
        """``paused by alice@laptop: the fixture moved`` (without the reason when none)."""
        words = f"{verb} by {self.by}"
        return f"{words}: {self.reason}" if self.reason else words


@attrs.frozen
class LoopControls:
    """What ``controls.yaml`` holds."""

    paused: Request | None = None
    stop: Request | None = None
    blocked: str | None = None

    @property
    def holds(self) -> bool:
        """Whether a loop must wait before its next iteration (paused, or unreadable)."""
        return self.paused is not None or self.blocked is not None

    def why_held(self) -> str:
        """What holds a loop, in words: who paused it and why, or controls it cannot read."""
        if self.paused is not None:
            return self.paused.describe("paused")
        return f"a person's controls could not be read ({self.blocked})"

    def held_line(self, resume: str) -> str | None:
        """What holds the loop and the command that lifts it, for a status; None: nothing.

        ``paused by a person (alice@laptop, since …): why — forge resume C lets it go on``.
        """
        if self.paused is not None:
            given = self.paused
            why = f": {given.reason}" if given.reason else ""
            return (
                f"paused by a person ({given.by}, since {given.at}){why} — {resume} lets it go on"
            )
        if self.blocked is not None:
            return f"held: {self.why_held()} — {resume} lets it go on"
        return None

    def stop_for(self, run_began: float) -> Request | None:
        """The stop request meant for a run that began at ``run_began`` (epoch), if any."""
        if self.stop is None:
            return None
        asked = iso_epoch(self.stop.at)
        # A request made before the run began was for an earlier run (which
        # ended before it was read); an unreadable time is taken as meant now.
        if asked is not None and asked < run_began:
            return None
        return self.stop


NO_CONTROLS = LoopControls()


def read_controls(paths: ChangePaths) -> LoopControls:
    """The person's requests of the change's loop (a corrupt file: blocked)."""
    if not paths.controls.exists():
        return NO_CONTROLS  # the common case, without taking the lock
    with exclusive_lock(paths.lock):
        state, _ = load_or_block(paths, paths.controls, LoopControls, NO_CONTROLS)
    return state


# What a control records when it changes something, made from the controls before it.
Recorded = Callable[[LoopControls], Event]


def pause_loop(
    paths: ChangePaths, request: Request, record: Recorded | None = None
) -> LoopControls:
    """Pause the change's loop; the controls as they were (already paused: nothing changes).

    ``record``'s event goes to the timeline under the same lock, when the pause
    is written: the loop never reads a pause before its record.
    """
    with exclusive_lock(paths.lock):
        before, _ = load_or_block(paths, paths.controls, LoopControls, NO_CONTROLS)
        if before.paused is None:
            save_state(paths.controls, attrs.evolve(before, paused=request))
            _record(paths, record, before)
    return before


def resume_loop(paths: ChangePaths, record: Recorded | None = None) -> LoopControls:
    """Lift a pause (and a moved-aside file's block); the controls as they were."""
    with exclusive_lock(paths.lock):
        before, _ = load_or_block(paths, paths.controls, LoopControls, NO_CONTROLS)
        if before.holds:
            save_state(paths.controls, attrs.evolve(before, paused=None, blocked=None))
            _record(paths, record, before)
    return before


def ask_stop(paths: ChangePaths, request: Request, record: Recorded | None = None) -> LoopControls:
    """Ask the running loop to stop after its iteration; the controls as they were."""
    with exclusive_lock(paths.lock):
        before, _ = load_or_block(paths, paths.controls, LoopControls, NO_CONTROLS)
        save_state(paths.controls, attrs.evolve(before, stop=request))
        _record(paths, record, before)
    return before


def _record(paths: ChangePaths, record: Recorded | None, before: LoopControls) -> None:
    if record is not None:
        append_event(paths.timeline, paths.name, record(before))


def take_stop(paths: ChangePaths, run_began: float) -> Request | None:
    """The stop meant for this run, removed as the loop obeys it (None: none)."""
    with exclusive_lock(paths.lock):
        state, _ = load_or_block(paths, paths.controls, LoopControls, NO_CONTROLS)
        request = state.stop_for(run_began)
        if request is not None:
            save_state(paths.controls, attrs.evolve(state, stop=None))
    return request


@contextlib.contextmanager
def live_loop(paths: ChangePaths) -> Iterator[None]:
    """Hold the change's ``live.lock``, shared, while a loop runs it.

    A state folder that cannot be written holds no lock: the loop's first
    state write reports that folder, as a clear error (a stop then finds no
    loop to stop, which is true soon enough).
    """
    fd: int | None = None
    try:
        paths.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(paths.live, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        if fd is not None:
            os.close(fd)
        fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def loop_running(paths: ChangePaths) -> bool:
    """Whether a loop runs the change now (on this machine): one holds its ``live.lock``."""
    try:
        fd = os.open(paths.live, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)
