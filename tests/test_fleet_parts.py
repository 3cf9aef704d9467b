"""The fleet's parts against a real Redis server: limiter, fenced store, commands' errors."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from orchestra._fleet import (
    Connection,
    FleetConfig,
    LeaseLost,
    RedisBackend,
    RedisChangeStore,
)
from orchestra._policy import FleetPolicy
from orchestra._ratelimit import LimiterStatistics, RateLimiter, SlidingWindow
from orchestra._state import IterationStarted, RunStarted

from .fleet_support import wait_for
from .redis_server import RedisServer
from .support import FORGE, forge_env, run_forge


def connect(server: RedisServer, name: str = "t") -> Connection:
    policy = FleetPolicy(redis=server.url, name=name)
    return Connection(FleetConfig.from_policy(policy, environ={}))


@pytest.fixture
def connection(redis_server: RedisServer) -> Iterator[Connection]:
    opened = connect(redis_server)
    yield opened
    opened.close()


def backend(connection: Connection, ticket: str, **options: float) -> RedisBackend:
    return RedisBackend(connection, connection.config.keys, ticket, **options)


def test_every_permit_is_a_member_of_its_own_even_in_one_instant(
    connection: Connection,
) -> None:
    rule = SlidingWindow(3, 60)
    first, second = backend(connection, "a"), backend(connection, "b")
    assert first.try_acquire(rule, 2, "c1").granted
    third = second.try_acquire(rule, 1, "c2")
    assert third.granted
    assert third.used == 3
    refused = second.try_acquire(rule, 1, "c3")
    assert not refused.granted
    assert 59 < refused.wait <= 60
    log = connection.config.keys.limiter_log
    assert connection.client.zcard(log) == 3
    assert 0 < connection.client.pttl(log) <= 61_000  # the log expires with its window


def test_hosts_are_served_in_the_order_they_asked(connection: Connection) -> None:
    rule = SlidingWindow(1, 0.6)
    first, second, third = (backend(connection, t, poll=0.05) for t in ("a", "b", "c"))
    assert first.try_acquire(rule, 1, "x").granted
    waiting = second.try_acquire(rule, 1, "x")  # second in line: at the head
    behind = third.try_acquire(rule, 1, "x")
    assert not waiting.granted
    assert not behind.granted
    assert behind.wait > waiting.wait
    wait_for(lambda: backend(connection, "peek").peek(rule).wait == 0, what="a free permit")
    # A permit is free, but the third host is behind the second's ticket.
    assert not third.try_acquire(rule, 1, "x").granted
    assert second.try_acquire(rule, 1, "x").granted
    wait_for(lambda: third.try_acquire(rule, 1, "x").granted, what="the third host's turn")


def test_a_ticket_whose_host_stopped_asking_leaves_the_line(connection: Connection) -> None:
    rule = SlidingWindow(1, 0.3)
    first = backend(connection, "a")
    gone = backend(connection, "gone", grace=0.2)
    later = backend(connection, "later", poll=0.05)
    assert first.try_acquire(rule, 1, "x").granted
    assert not gone.try_acquire(rule, 1, "x").granted  # and never asks again
    assert not later.try_acquire(rule, 1, "x").granted
    # The dead host's ticket expires 0.2 s after it should have asked again.
    wait_for(lambda: later.try_acquire(rule, 1, "x").granted, timeout=5, what="the line to move")


def test_scripts_are_loaded_again_after_the_server_forgot_them(connection: Connection) -> None:
    rule = SlidingWindow(5, 60)
    limiter = backend(connection, "a")
    assert limiter.try_acquire(rule, 1, "x").granted
    connection.client.script_flush()
    assert limiter.try_acquire(rule, 1, "x").granted
    assert limiter.peek(rule).used == 2


async def test_an_unreachable_server_grants_nothing_and_says_so(
    redis_server: RedisServer,
) -> None:
    connection = connect(redis_server)
    seen: list[tuple[str, LimiterStatistics]] = []
    limiter = RateLimiter(
        backend(connection, "a"),
        10,
        60,
        clock=trio.current_time,
        on_event=lambda kind, stats: seen.append((kind, stats)),
    )
    await limiter.acquire("before")
    redis_server.stop()
    granted = False
    with trio.move_on_after(1.5):
        await limiter.acquire("during")
        granted = True
    assert not granted
    kinds = [kind for kind, _ in seen]
    assert "unavailable" in kinds
    stats = limiter.statistics()
    assert stats.unavailable
    redis_server.start()
    await limiter.acquire("after")
    assert limiter.statistics().unavailable is None
    connection.close()


def _claim(connection: Connection, change: str) -> int:
    return int(connection.client.incr(connection.config.keys.fence(change)))


def test_a_host_whose_loop_was_taken_over_can_write_nothing(connection: Connection) -> None:
    keys = connection.config.keys
    token = _claim(connection, "c")
    store = RedisChangeStore(connection, keys, "c", token, lambda: "2026-12-01T00:00:00.000Z")
    store.load()
    store.begin(IterationStarted(run_id="r", iteration=1))
    newer = _claim(connection, "c")  # another host claimed the change
    taken = RedisChangeStore(connection, keys, "c", newer, lambda: "2026-12-01T00:00:01.000Z")
    assert taken.load().circuit.iterations_used == 1
    with pytest.raises(LeaseLost):
        store.begin(IterationStarted(run_id="r", iteration=2))
    assert store.revoked
    taken.begin(IterationStarted(run_id="r2", iteration=2))
    entries: Any = connection.client.xrange(keys.timeline("c"))
    lines = [json.loads(data["event"]) for _id, data in entries]
    assert [(e["seq"], e["iteration"]) for e in lines] == [(1, 1), (2, 2)]


def test_a_write_sent_again_is_applied_once(connection: Connection) -> None:
    keys = connection.config.keys
    token = _claim(connection, "c")
    store = RedisChangeStore(connection, keys, "c", token, lambda: "2026-12-01T00:00:00.000Z")
    store.load()
    from orchestra._fleet._store import COMMIT  # the script itself, sent twice by hand

    script = connection.script(COMMIT)
    args = [token, "commit-1", 0, '{"ts":"x","seq":', ',"event":"note","change":"c"}']
    keys_of = [keys.fence("c"), keys.change("c"), keys.timeline("c")]
    assert script(keys=keys_of, args=args) == 1
    assert script(keys=keys_of, args=args) == 0  # the answer was lost; the retry changes nothing
    assert connection.client.xlen(keys.timeline("c")) == 1


class Follower:
    """``forge timeline CHANGE --follow`` in its own process, its output read as it comes."""

    def __init__(self, cwd: Path, change: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(FORGE), "timeline", change, "--follow", "--plain", "--raw"],
            cwd=cwd,
            env=forge_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for_line(self, text: str) -> None:
        """Return once a line with ``text`` was printed; the timeout only fails the test."""
        wait_for(lambda: any(text in line for line in self.lines), what=f"a line with {text!r}")

    def stop(self) -> tuple[str, str]:
        """Interrupt the follower; its whole stdout and stderr."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=15)
        self._reader.join(timeout=15)
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        err = self.process.stderr.read()
        self.process.stdout.close()
        self.process.stderr.close()
        return "".join(self.lines), err


def _calls(connection: Connection, command: str) -> int:
    """How many times the server has run ``command`` (by any client)."""
    stats = connection.client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def started_on(run_id: str) -> RunStarted:
    return RunStarted(run_id=run_id, supervised=True, plan={}, circuit="closed", gates={})


def test_a_person_runs_forge_timeline_follow_and_sees_every_host(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    connection = connect(redis_server, "nightly")
    keys = connection.config.keys
    first = RedisChangeStore(
        connection, keys, "c", _claim(connection, "c"), lambda: "2026-12-01T00:00:00.000Z"
    )
    first.load()
    first.append(
        RunStarted(run_id="on-host-one", supervised=True, plan={}, circuit="closed", gates={})
    )
    (tmp_path / "forge.toml").write_text('[fleet]\nname = "nightly"\n')
    follow = Follower(tmp_path, "c", {"FORGE_REDIS_URL": redis_server.url})
    try:
        second = RedisChangeStore(
            connection, keys, "c", _claim(connection, "c"), lambda: "2026-12-01T00:00:05.000Z"
        )
        second.load()
        # Host one's event printed: the follower has read the server and follows it now.
        follow.wait_for_line("run_id=on-host-one")
        second.append(
            RunStarted(run_id="on-host-two", supervised=True, plan={}, circuit="closed", gates={})
        )
        follow.wait_for_line("run_id=on-host-two")
    finally:
        out, err = follow.stop()
        connection.close()
    assert "run_id=on-host-one" in out, err
    assert "run_id=on-host-two" in out, err
    assert "Traceback" not in err


def test_following_a_submitted_change_before_its_first_event_follows_the_server(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    (tmp_path / "forge.toml").write_text('[fleet]\nname = "nightly"\n')
    (tmp_path / "nightly.toml").write_text('[[loop]]\nchange = "d"\ncmd = "true"\n')
    env = {"FORGE_REDIS_URL": redis_server.url}
    submitted = run_forge(["fleet", "submit", "--batch", "nightly.toml"], cwd=tmp_path, env=env)
    assert submitted.code == 0, submitted
    connection = connect(redis_server, "nightly")
    asked = _calls(connection, "hexists")
    follow = Follower(tmp_path, "d", env)
    try:
        store = RedisChangeStore(
            connection,
            connection.config.keys,
            "d",
            _claim(connection, "d"),
            lambda: "2026-12-01T00:00:05.000Z",
        )
        store.load()
        # With no event yet, the follower asks the server whether the change was
        # submitted (the only HEXISTS there is); once asked, it follows the server.
        wait_for(lambda: _calls(connection, "hexists") > asked, what="the follower to ask")
        store.append(started_on("first-on-the-server"))
        follow.wait_for_line("run_id=first-on-the-server")
    finally:
        out, err = follow.stop()
        connection.close()
    assert "run_id=first-on-the-server" in out, err


def test_commands_name_what_is_missing_or_wrong(tmp_path: Path, redis_server: RedisServer) -> None:
    batch = tmp_path / "nightly.toml"
    batch.write_text('[[loop]]\nchange = "a"\ncmd = "true"\n')
    missing = run_forge(["fleet", "work"], cwd=tmp_path)
    assert missing.code == 2
    assert "no Redis server for the fleet" in missing.err
    assert "fleet.redis" in missing.err
    bad = run_forge(["fleet", "status"], cwd=tmp_path, env={"FORGE_REDIS_URL": "http://x"})
    assert bad.code == 2
    assert "FORGE_REDIS_URL" in bad.err
    (tmp_path / "forge.toml").write_text('[fleet]\nlease = "1s"\nheartbeat = "2s"\n')
    env = {"FORGE_REDIS_URL": redis_server.url}
    conflict = run_forge(["fleet", "status"], cwd=tmp_path, env=env)
    assert conflict.code == 2
    assert "fleet.heartbeat" in conflict.err
    # A host cut off from the server stops its executor a heartbeat plus the
    # executor's grace (10 s by default) before its lease runs out.
    (tmp_path / "forge.toml").write_text('[fleet]\nlease = "12s"\nheartbeat = "1s"\n')
    short = run_forge(["fleet", "submit", "--batch", str(batch)], cwd=tmp_path, env=env)
    assert short.code == 2, short
    assert "the fleet's lease is too short for its loops" in short.err
    assert 'loop "a": run.grace 10s + 2 × fleet.heartbeat 1s is not shorter than' in short.err
    assert "Traceback" not in short.err
    (tmp_path / "forge.toml").write_text("")
    nothing = run_forge(["fleet", "work"], cwd=tmp_path, env=env)
    assert nothing.code == 2
    assert "nothing is submitted" in nothing.err
    assert run_forge(["fleet", "submit", "--batch", str(batch)], cwd=tmp_path, env=env).code == 0
    again = run_forge(["fleet", "submit", "--batch", str(batch)], cwd=tmp_path, env=env)
    assert again.code == 2
    assert "already submitted" in again.err
    replaced = run_forge(
        ["fleet", "submit", "--batch", str(batch), "--replace"], cwd=tmp_path, env=env
    )
    assert replaced.code == 0
    status = run_forge(["fleet", "status"], cwd=tmp_path, env=env)
    assert status.code == 0
    assert "1 loop(s) — 1 queued, 0 running, 0 waiting, 0 done, 0 escalated" in status.out
    redis_server.stop()
    down = run_forge(["fleet", "status"], cwd=tmp_path, env=env)
    assert down.code == 1
    assert "cannot be reached" in down.err
    assert "Traceback" not in down.err


def test_a_quiet_host_s_loop_is_found_however_deep_in_the_pending_list(
    connection: Connection,
) -> None:
    from orchestra._fleet import BatchInfo, LoopSpec, submit
    from orchestra._fleet._queue import next_entry  # the queue's reader, driven by hand

    keys = connection.config.keys
    client = connection.client
    specs = [LoopSpec(change=f"l{n:02d}", policy={}) for n in range(25)]
    batch = BatchInfo(loops=25, calls=1, window=1.0, warn_at=0.8, submitted_at=0.0, source="b")
    submit(client, keys, batch, specs, "now", replace=False)
    delivered: Any = client.xreadgroup("workers", "busy", {keys.loops: ">"}, count=25)
    ids = [entry_id for entry_id, _fields in delivered[0][1]]
    # Every entry but the last was just renewed; the last host went quiet long ago.
    client.xclaim(keys.loops, "workers", "busy", 0, ids[:-1], idle=0, justid=True)
    client.xclaim(keys.loops, "workers", "busy", 0, ids[-1:], idle=10_000_000, justid=True)
    found = next_entry(client, keys, "taker", min_idle_ms=5_000_000)
    assert found is not None
    assert found[0] == ids[-1]
    assert found[1].change == "l24"
    assert next_entry(client, keys, "taker", min_idle_ms=5_000_000) is None
