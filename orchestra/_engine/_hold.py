"""A person's hold on a running loop: a pause it waits out, a stop it obeys.

The loop asks before each iteration (:meth:`PersonHold.hold`) and while it
waits for anything else (:meth:`PersonHold.unless_stopped`: a cooldown, a
permit, an answer), looking at the store's controls once a second on trio's
clock. What the controls are and where they are kept (a file, the fleet's
server) is the store's; what a pause and a stop do to the loop is here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import attrs
import trio

from .._durations import format_duration
from .._errors import ForgeError
from .._groups import sole_error
from .._state import LOOP_PAUSED, LOOP_RESUMED, LoopControls, OtherEvent
from ._endings import STOPPED, Ending
from ._progress import LoopProgress
from ._store import Store

_T = TypeVar("_T")

# How often a waiting loop (paused, cooling down, waiting for a permit or an
# answer) looks for a person's resume or stop (trio seconds).
CONTROL_LOOK = 1.0
PAUSED_STATUS = "paused by a person"


@attrs.frozen
class PersonHold:
    """One run's side of ``forge pause``, ``forge resume`` and ``forge stop``.

    Attributes:
        store: The change's store (its controls, its timeline).
        progress: The loop's progress (its status while held).
        say: The loop's line to a person watching: ``say(kind, text)``.
        run_id: The run, for the events it records.
        change: The change, for the command its lines name.
        began: When the run began (the loop's wall clock): a stop asked
            before it was meant for an earlier run.
    """

    store: Store
    progress: LoopProgress
    say: Callable[[str, str], None]
    run_id: str
    change: str
    began: float

    async def controls(self) -> LoopControls:
        return await _in_thread(self.store.controls)

    async def hold(self, controls: LoopControls, number: int) -> tuple[Ending | None, bool]:
        """Before iteration ``number``: a stop ends the run; a pause holds it until lifted.

        Returns the stop's ending, if any, and whether the loop held (then its
        state is to be read afresh: a person may have reset it meanwhile).
        """
        if controls.stop_for(self.began) is not None:
            ending = await self.stop_asked()
            if ending is not None:
                return ending, False
        if not controls.holds:
            return None, False
        progress = self.progress
        was, progress.status = progress.status, PAUSED_STATUS
        held_since = trio.current_time()
        why = controls.why_held()
        await self._record(LOOP_PAUSED, number, why=why)
        self.say(
            "loop", f"paused before iteration {number} — {why}; forge resume {self.change} goes on"
        )
        while controls.holds:
            await trio.sleep(CONTROL_LOOK)
            controls = await self.controls()
            if controls.stop_for(self.began) is not None:
                ending = await self.stop_asked()
                if ending is not None:
                    return ending, True
        waited = round(trio.current_time() - held_since, 3)
        await self._record(LOOP_RESUMED, number, waited=waited)
        progress.status = was
        self.say("loop", f"resumed after {format_duration(waited)}: iteration {number} goes on")
        return None, True

    async def stop_asked(self) -> Ending | None:
        """The ending a person's stop asks for (taken from the controls), or None."""
        request = await _in_thread(self.store.take_stop, self.began)
        if request is None:
            return None
        detail = request.describe("stopped")
        self.say("loop", f"stopped — {detail}")
        return Ending(STOPPED, detail=detail)

    async def unless_stopped(self, wait: Callable[[], Awaitable[object]]) -> Ending | None:
        """Run ``wait`` (a cooldown, a permit, an answer), cut short by a person's stop.

        Returns the stop's ending, or None when ``wait`` ran to its end.
        """
        stopped: list[Ending] = []

        async def watch(cancel_scope: trio.CancelScope) -> None:
            while True:
                await trio.sleep(CONTROL_LOOK)
                try:
                    controls = await self.controls()
                    ending = None
                    if controls.stop_for(self.began) is not None:
                        ending = await self.stop_asked()
                except (ForgeError, OSError):
                    # A look that failed ends no wait: the next one, a second on,
                    # may read it; the loop's own next read reports a lasting fault.
                    continue
                if ending is not None:
                    stopped.append(ending)
                    cancel_scope.cancel()
                    return

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, nursery.cancel_scope)
                await wait()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Only the wait raises (the watch keeps its faults): its error, as
            # it would be without the watch. A stop taken as the wait ended (a
            # permit granted at that instant) still ends the run.
            raise sole_error(group) from None
        return stopped[0] if stopped else None

    async def _record(self, name: str, number: int, **fields: Any) -> None:
        event = OtherEvent(name=name, fields={"run_id": self.run_id, "iteration": number, **fields})
        await _in_thread(self.store.append, event)


async def _in_thread(function: Callable[..., _T], *args: Any) -> _T:
    """A blocking read or write of the store, off the event loop."""
    return await trio.to_thread.run_sync(partial(function, *args))
