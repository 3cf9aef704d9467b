"""How long a host may trust the leases it holds: the watchdog's deadline.

A lease renewed by a request sent at ``t`` lasts on the server until at least
``t + lease`` (the server sets it when the request arrives, later): no other
host may claim the loop before then. The host's watchdog kills every executor
at ``min(t) + lease - margin`` over the leases held, unless a renewal moves
that on first. So a host that is frozen (SIGSTOP, a suspended machine) or
stuck has no agent left by the time its loops can be taken over, though it
cannot stop anything itself.

The margin is half a heartbeat: later than the host's own stop of a loop it
cannot renew (its executor gone a heartbeat before the lease runs out, see
:func:`._worker.stop_after`), earlier than any takeover by half a heartbeat,
time enough for SIGKILL to land. Renewals every heartbeat keep the deadline
well ahead (``2 × heartbeat + grace < lease``).

Once the deadline has passed unmoved, the watchdog may have killed any of the
host's executors: every loop held then is lost to this host (its store writes
nothing more), as if another host had taken it over.

The deadline is on the host's boot clock (:func:`boot_clock`), which counts
the time the machine was suspended: the server's leases lapse during a
suspension, so the deadline must pass during it too. The host's own stop of
a loop it cannot renew is timed on trio's clock, which is monotonic and does
not count a suspension; after one, the watchdog's deadline has passed first.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def boot_clock() -> float:
    """Seconds on this host's boot clock, the clock the watchdog's deadline is on.

    Linux's ``CLOCK_BOOTTIME``: monotonic, and counting the time the machine
    was suspended. Where there is none, the monotonic clock (which does not).
    """
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is None:
        return time.monotonic()
    return time.clock_gettime(boottime)


def watchdog_margin(heartbeat: float) -> float:
    """Seconds before a lease could lapse at which the watchdog kills the executors."""
    return heartbeat / 2


class LeaseDeadline:
    """The leases a host holds, the deadline they give its watchdog, and what is still trusted.

    Args:
        lease: The fleet's lease, seconds.
        heartbeat: The fleet's heartbeat, seconds (the margin is half of it).
        publish: Called with each new deadline (None: no lease held) before
            it is trusted here, so the watchdog never holds an earlier one
            than this host believes.
        clock: :func:`boot_clock` seconds, the clock the watchdog reads too.
    """

    def __init__(
        self,
        lease: float,
        heartbeat: float,
        publish: Callable[[float | None], None],
        clock: Callable[[], float] = boot_clock,
    ) -> None:
        self._span = lease - watchdog_margin(heartbeat)
        self._publish = publish
        self._clock = clock
        self._sent: dict[str, float] = {}
        self._until: float | None = None
        # Bumped whenever the deadline was found passed: the stores of every loop
        # held before then are untrusted for good.
        self._lapses = 0

    @property
    def until(self) -> float | None:
        """The deadline the watchdog holds (None: no lease held)."""
        return self._until

    def now(self) -> float:
        """The time on the clock the deadline is on (for a request's send time)."""
        return self._clock()

    def renewed(self, change: str, sent: float) -> None:
        """The lease of ``change`` was claimed or renewed by a request sent at ``sent``."""
        self._sent[change] = max(sent, self._sent.get(change, sent))
        self._move()

    def released(self, change: str) -> None:
        """This host holds the lease of ``change`` no more (ended, given back, lost)."""
        if self._sent.pop(change, None) is not None:
            self._move()

    def trust(self) -> Callable[[], bool]:
        """For a loop starting now: whether its executor is still this host's to run.

        False for good once the deadline has passed unmoved, even after a later
        renewal moved it on: the watchdog may have killed the executor meanwhile.
        """
        lapses = self._lapses

        def trusted() -> bool:
            until = self._until
            return self._lapses == lapses and (until is None or self._clock() < until)

        return trusted

    def _move(self) -> None:
        earlier = self._until
        until = min(self._sent.values()) + self._span if self._sent else None
        self._publish(until)
        # Judged after publishing: a line that reached the watchdog after the old
        # deadline came too late, whatever it says.
        if earlier is not None and self._clock() >= earlier:
            self._lapses += 1
        self._until = until
