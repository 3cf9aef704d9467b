"""Running a command's async part so that SIGTERM and SIGHUP end it as cleanly as Ctrl-C.

trio turns SIGINT into KeyboardInterrupt; SIGTERM or a hangup would kill Forge
outright and leave the process groups it started (which are in sessions of
their own, so the hangup never reaches them) running. Here those signals
cancel the run instead, so every ``finally`` stops its process tree, and the
command then ends as interrupted (exit 130).
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple, Unpack

import trio

from .._groups import leaves
from .._process import become_subreaper, sweep_orphans

_T = TypeVar("_T")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_Args = TypeVarTuple("_Args")


def run_interruptible(function: Callable[[Unpack[_Args]], Awaitable[_T]], *args: *_Args) -> _T:
    """``trio.run(function, *args)``; SIGTERM or SIGHUP raise KeyboardInterrupt after cleanup."""

    finished: list[_T] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            async def watch_signals() -> None:
                with trio.open_signal_receiver(*_STOP_SIGNALS) as signals:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

            async def work() -> None:
                finished.append(await function(*args))
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_signals)
            nursery.start_soon(work)

    become_subreaper()
    try:
        trio.run(main)
    except BaseExceptionGroup as group:
        # The nursery wraps what its tasks raise; callers expect the plain error.
        if group.subgroup(KeyboardInterrupt) is not None:
            raise KeyboardInterrupt from None
        found = list(leaves(group))
        # Tasks that met the same error (a server refusing each its credentials) met one.
        if len({(type(leaf), str(leaf)) for leaf in found}) == 1:
            raise found[0] from None
        raise
    finally:
        # Whatever escaped its executor's session (setsid) was adopted by Forge:
        # nothing of any executor's tree outlives the command.
        sweep_orphans()
    if not finished:  # the work was cancelled: only a stop signal does that
        raise KeyboardInterrupt
    return finished[0]
