"""The watchdog: a real process killing real process groups when its deadline lapses.

The deadline's own durations are real and short here; every kill is waited
for (a process reaped), never assumed after a sleep. What must *not* happen
is proved by order on the pipe: a witness group killed by a later line shows
that every line before it was read and judged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from orchestra._fleet import Connection, FleetConfig, LeaseLost, RedisChangeStore
from orchestra._fleet._deadline import LeaseDeadline, boot_clock, watchdog_margin
from orchestra._fleet._watchdog import _WATCHDOG, Watchdog
from orchestra._policy import FleetPolicy
from orchestra._state import IterationStarted

from .redis_server import RedisServer


def sleeper() -> subprocess.Popen[bytes]:
    """A ``sleep`` leading a process group of its own, as every executor does."""
    return subprocess.Popen(["sleep", "600"], start_new_session=True)


def killed(process: subprocess.Popen[bytes], timeout: float = 30) -> bool:
    """Whether the process ended by SIGKILL (waited for, up to ``timeout``)."""
    try:
        return process.wait(timeout=timeout) == -signal.SIGKILL
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture
def watchdog() -> Iterator[Watchdog]:
    opened = Watchdog()
    yield opened
    opened.close()


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_lapsed_deadline_kills_every_group(
    watchdog: Watchdog, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    sleepers += [sleeper(), sleeper()]
    for process in sleepers:
        watchdog.watch(process.pid, True)
    watchdog.kill_at(boot_clock() + 0.2)
    assert all(killed(process) for process in sleepers)
    # The watchdog itself goes on: it is the worker's until the worker ends.
    assert os.waitpid(watchdog.pid, os.WNOHANG) == (0, 0)


@pytest.fixture
def raw() -> Iterator[subprocess.Popen[bytes]]:
    """The watchdog's script with its pipe in the test's hands: several lines in one write."""
    process = subprocess.Popen(
        [sys.executable, "-S", "-I", "-c", _WATCHDOG, repr(boot_clock())],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    yield process
    if process.stdin is not None and not process.stdin.closed:
        process.stdin.close()
    process.wait(timeout=10)


def send(raw: subprocess.Popen[bytes], text: str) -> None:
    """One write, shorter than PIPE_BUF, so one read: all its lines are obeyed, then judged."""
    assert raw.stdin is not None
    raw.stdin.write(text.encode())
    raw.stdin.flush()


def test_a_renewed_deadline_kills_nothing_and_lapses_once_renewals_stop(
    raw: subprocess.Popen[bytes], sleepers: list[subprocess.Popen[bytes]]
) -> None:
    sleepers += [sleeper(), sleeper()]
    kept, witness = sleepers
    # A deadline already passed, renewed in the same read: the renewal is what is judged.
    send(raw, f"+{kept.pid}\nd{boot_clock() - 1!r}\nd{boot_clock() + 600!r}\n")
    # Written after: once the witness is killed, the lines before were read and judged.
    send(raw, f"-{kept.pid}\n+{witness.pid}\nd{boot_clock() - 1!r}\n")
    assert killed(witness)
    assert kept.poll() is None
    # The renewals stop: the last deadline lapses.
    send(raw, f"d{boot_clock() + 0.2!r}\n+{kept.pid}\n")
    assert killed(kept)


def test_a_group_stopped_by_the_worker_is_left_alone(
    watchdog: Watchdog, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    sleepers += [sleeper(), sleeper()]
    kept, dropped = sleepers
    watchdog.watch(kept.pid, True)
    watchdog.watch(dropped.pid, True)
    watchdog.watch(dropped.pid, False)  # the worker stopped it (here: still running)
    watchdog.kill_at(boot_clock())
    assert killed(kept)
    # Killed on arrival, after the lapse's kills are all sent: the probe's death orders them.
    probe = sleeper()
    sleepers.append(probe)
    watchdog.watch(probe.pid, True)
    assert killed(probe)
    assert dropped.poll() is None


def test_after_a_lapse_new_groups_die_at_once_until_a_new_deadline(
    watchdog: Watchdog, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    watchdog.kill_at(boot_clock() - 1)  # lapsed already (nothing listed)
    sleepers.append(sleeper())
    watchdog.watch(sleepers[0].pid, True)
    assert killed(sleepers[0])
    watchdog.kill_at(boot_clock() + 600)
    sleepers.append(sleeper())
    watchdog.watch(sleepers[1].pid, True)
    # Ordered after it on the pipe: a group that is killed proves the line before was read.
    sleepers.append(sleeper())
    watchdog.kill_at(boot_clock() - 1)
    watchdog.watch(sleepers[2].pid, True)
    assert killed(sleepers[2])
    assert killed(sleepers[1])  # listed under the new deadline, killed when it lapsed


def test_no_deadline_kills_nothing_until_the_worker_ends(
    raw: subprocess.Popen[bytes], sleepers: list[subprocess.Popen[bytes]]
) -> None:
    sleepers += [sleeper(), sleeper()]
    kept, witness = sleepers
    # The worker holds no lease any more: its last deadline, passed, goes unjudged.
    send(raw, f"+{kept.pid}\nd{boot_clock() - 1!r}\nx\n")
    send(raw, f"-{kept.pid}\n+{witness.pid}\nd{boot_clock() - 1!r}\n")
    assert killed(witness)  # the lines before it were read and judged
    assert kept.poll() is None
    send(raw, f"x\n+{kept.pid}\n")
    assert raw.stdin is not None
    raw.stdin.close()  # the worker ended: what is listed goes
    assert killed(kept)
    assert raw.wait(timeout=10) == 0


def test_partial_and_garbled_lines_are_read_whole_or_ignored(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    watchdog = subprocess.Popen(
        [sys.executable, "-S", "-I", "-c", _WATCHDOG, repr(boot_clock())],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    assert watchdog.stdin is not None
    try:
        sleepers.append(sleeper())
        pgid = str(sleepers[0].pid).encode()
        for piece in (b"+", pgid[:2], pgid[2:] + b"\n", b"+x\nzz\nd\n", b"-1\n"):
            watchdog.stdin.write(piece)
            watchdog.stdin.flush()
            time.sleep(0.05)  # one piece per read
        watchdog.stdin.write(f"d{boot_clock() + 0.2!r}\n".encode())
        watchdog.stdin.flush()
        assert killed(sleepers[0])
    finally:
        watchdog.stdin.close()
        watchdog.wait(timeout=10)
    assert watchdog.returncode == 0


def test_a_frozen_worker_s_groups_are_killed_and_the_worker_can_tell(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    """The worker's side: claims and renewals move the deadline, and a lapse is remembered."""
    watchdog = Watchdog()
    try:
        lease, heartbeat = 1.0, 0.4
        deadline = LeaseDeadline(lease, heartbeat, watchdog.kill_at)
        sent = deadline.now()
        deadline.renewed("c1", sent)
        trusted = deadline.trust()
        assert deadline.until == sent + lease - watchdog_margin(heartbeat)
        sleepers.append(sleeper())
        watchdog.watch(sleepers[0].pid, True)
        assert killed(sleepers[0])  # nobody renewed: a frozen worker
        assert not trusted()
        deadline.renewed("c1", deadline.now())  # the worker runs again and renews
        assert not trusted()  # its executor may have been killed: the loop is lost
        assert deadline.trust()()
    finally:
        watchdog.close()


# Run before the watchdog's script: from its second reading on (the first is
# its start, against the worker's), the boot clock is ahead of the monotonic
# one by ten minutes, as after the machine was suspended that long.
_SUSPENDED = """
import time
_real, _readings = time.clock_gettime, []

def _suspended(clock):
    _readings.append(clock)
    ahead = 600.0 if clock == time.CLOCK_BOOTTIME and len(_readings) > 1 else 0.0
    return _real(clock) + ahead

time.clock_gettime = _suspended
"""


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="no boot clock here")
def test_a_suspension_passes_the_watchdog_s_deadline(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    """The server's leases lapse while the machine sleeps: so does the deadline."""
    watchdog = subprocess.Popen(
        [sys.executable, "-S", "-I", "-c", _SUSPENDED + _WATCHDOG, repr(boot_clock())],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    assert watchdog.stdin is not None
    try:
        sleepers.append(sleeper())
        # Five minutes on: not yet on the monotonic clock, long past on the boot clock.
        watchdog.stdin.write(f"+{sleepers[0].pid}\nd{boot_clock() + 300!r}\n".encode())
        watchdog.stdin.flush()
        assert killed(sleepers[0])
    finally:
        watchdog.stdin.close()
        watchdog.wait(timeout=10)


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="no boot clock here")
def test_the_host_s_deadline_counts_suspended_time(monkeypatch: pytest.MonkeyPatch) -> None:
    real = time.clock_gettime
    asleep = [0.0]

    def clock_gettime(clock: int) -> float:
        return real(clock) + (asleep[0] if clock == time.CLOCK_BOOTTIME else 0.0)

    monkeypatch.setattr(time, "clock_gettime", clock_gettime)
    deadline = LeaseDeadline(10.0, 2.0, lambda _until: None)
    deadline.renewed("a", deadline.now())
    held = deadline.trust()
    assert held()
    asleep[0] = 600.0  # the machine slept ten minutes: the lease lapsed on the server
    assert not held()


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_deadline_follows_the_oldest_renewal_of_the_leases_held() -> None:
    clock = FakeClock()
    published: list[float | None] = []
    deadline = LeaseDeadline(10.0, 2.0, published.append, clock=clock)
    deadline.renewed("a", 100.0)
    deadline.renewed("b", 103.0)
    assert published == [109.0, 109.0]  # the lease less half a heartbeat after a's renewal
    clock.now = 104.0
    deadline.renewed("a", 104.0)
    assert published[-1] == 112.0  # b is the oldest now
    deadline.released("b")
    assert published[-1] == 113.0
    deadline.released("a")
    assert published[-1] is None  # nothing held: nothing can be taken over
    deadline.released("a")  # released twice: nothing new to tell
    assert len(published) == 5


def test_a_deadline_passed_unmoved_untrusts_every_loop_held_then() -> None:
    clock = FakeClock()
    deadline = LeaseDeadline(10.0, 2.0, lambda _until: None, clock=clock)
    deadline.renewed("a", 100.0)
    held = deadline.trust()
    clock.now = 108.9
    assert held()
    clock.now = 109.0  # the watchdog kills now
    assert not held()
    deadline.renewed("a", 109.0)  # a renewal too late
    assert not held()
    later = deadline.trust()
    assert later()
    deadline.renewed("b", 110.0)  # in time: nothing lapses
    assert later()


def test_a_renewal_whose_answer_comes_after_the_deadline_is_too_late() -> None:
    clock = FakeClock()
    deadline = LeaseDeadline(10.0, 2.0, lambda _until: None, clock=clock)
    deadline.renewed("a", 100.0)
    held = deadline.trust()
    clock.now = 109.5  # sent at 108, answered after the deadline at 109
    deadline.renewed("a", 108.0)
    assert not held()


def test_the_margin_leaves_the_host_s_own_stop_first_and_any_takeover_last() -> None:
    from orchestra._fleet._worker import stop_after

    lease, heartbeat, grace = 30.0, 5.0, 10.0
    own_stop_done = stop_after(lease, heartbeat, grace) + grace  # SIGKILL after the grace
    watchdog_kills = lease - watchdog_margin(heartbeat)
    assert own_stop_done < watchdog_kills < lease


def test_the_deadline_waits_for_the_watchdog_to_hear_of_it() -> None:
    clock = FakeClock()
    seen: list[float | None] = []

    def publish(until: float | None) -> None:
        # The watchdog has the new deadline before the host trusts it.
        seen.append(deadline.until)
        seen.append(until)

    deadline = LeaseDeadline(10.0, 2.0, publish, clock=clock)
    deadline.renewed("a", 100.0)
    assert seen == [None, 109.0]
    assert deadline.until == 109.0


def test_a_store_whose_trust_lapsed_writes_nothing(redis_server: RedisServer) -> None:
    policy = FleetPolicy(redis=redis_server.url, name="t")
    connection = Connection(FleetConfig.from_policy(policy, environ={}))
    try:
        keys = connection.config.keys
        token = int(connection.client.incr(keys.fence("c")))
        trust = [True]
        store = RedisChangeStore(
            connection,
            keys,
            "c",
            token,
            lambda: "2026-12-01T00:00:00.000Z",
            trusted=lambda: trust[0],
        )
        store.load()
        store.begin(IterationStarted(run_id="r", iteration=1))
        trust[0] = False  # the watchdog's deadline passed: the executor may be dead
        with pytest.raises(LeaseLost):
            store.begin(IterationStarted(run_id="r", iteration=2))
        assert store.revoked
        # The fence still names this host: only the trust kept the write out.
        assert connection.client.get(keys.fence("c")) == str(token)
        entries: Any = connection.client.xrange(keys.timeline("c"))
        assert len(entries) == 1
    finally:
        connection.close()
