"""The fleet's limiter against a real Redis server: what one acquire reads, and what it says.

What is proven here: an acquire reads nothing of the log beyond a bounded
range whatever the log holds (every command the script sends, seen through
``MONITOR``, the same at 100 and at 10,000 live permits); a reading is the
exact summary of the log (count, next free permit, the oldest instants); the
limiter's statistics age that summary on its own clock; a log written by an
earlier Forge is counted as it is; a limiter key of a foreign type is named,
never overwritten, and ``forge fleet status`` says so (exit 1, no traceback).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import trio

from orchestra._fleet import Connection, FleetConfig, RedisBackend
from orchestra._fleet._limiter import ForeignLimiterKey
from orchestra._policy import FleetPolicy
from orchestra._ratelimit import RateLimiter, SlidingWindow
from orchestra._ratelimit._backends import OLDEST_REPORTED

from .redis_server import RedisServer
from .support import run_forge


def connect(server: RedisServer, name: str = "t") -> Connection:
    return Connection(FleetConfig.from_policy(FleetPolicy(redis=server.url, name=name), environ={}))


@pytest.fixture
def connection(redis_server: RedisServer) -> Iterator[Connection]:
    opened = connect(redis_server)
    yield opened
    opened.close()


def server_now(connection: Connection) -> float:
    return connection.server_time()


def fill(connection: Connection, stamps: list[float], prefix: str = "earlier") -> None:
    """Permits in the log as every Forge so far wrote them: a unique member scored by its grant."""
    log = connection.config.keys.limiter_log
    connection.client.zadd(log, {f"{prefix}:{n}": at for n, at in enumerate(stamps)})


def watched(
    server: RedisServer, connection: Connection, run: Callable[[], None]
) -> list[list[str]]:
    """Every command the script sends on the log while ``run()`` runs, as words (MONITOR)."""
    log = connection.config.keys.limiter_log
    seen: list[list[str]] = []
    attached = threading.Event()

    def watch() -> None:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            # Entered once the server has answered MONITOR: from then on it sees all.
            with client.monitor() as monitor:  # type: ignore[no-untyped-call]  # redis-py's
                attached.set()
                while (command := monitor.next_command())["command"] != "ECHO done":
                    words = command["command"].replace('"', "").split()
                    # The script's own commands (the EVALSHA that runs it aside).
                    if command["client_type"] == "lua" and log in words:
                        seen.append(words)
        finally:
            client.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert attached.wait(10)
    run()
    connection.client.echo("done")
    watcher.join(10)
    assert not watcher.is_alive()
    return seen


def bounded(words: list[str]) -> bool:
    """Whether a command on the log touches a bounded part of it."""
    name = words[0].upper()
    if name in ("TYPE", "ZCARD", "PEXPIRE", "ZADD", "ZREMRANGEBYSCORE", "ZCOUNT"):
        return True
    if name == "ZRANGE":  # one rank: start == stop
        return words[2] == words[3]
    if name == "ZRANGEBYSCORE":
        # The next instant (LIMIT 0 1), or the members after now (none but after
        # the server's clock went back).
        return words[-3:] == ["LIMIT", "0", "1"] or words[-2:][0].startswith("(")
    return False


@pytest.mark.parametrize("mode", ["take", "refuse", "peek"])
def test_an_acquire_reads_a_bounded_part_of_the_log_however_full(
    redis_server: RedisServer, connection: Connection, mode: str
) -> None:
    shapes = []
    for live in (100, 10_000):  # both past the oldest instants a reading reports
        connection.client.delete(connection.config.keys.limiter_log)
        now = server_now(connection)
        # Every permit an instant of its own: the worst case for the oldest instants.
        fill(connection, [now - 1000 + n * 0.01 for n in range(live)])
        rule = SlidingWindow(live + 1 if mode != "refuse" else live, 3600)
        backend = RedisBackend(connection, connection.config.keys, f"host-{live}")

        def one(backend: RedisBackend = backend, rule: SlidingWindow = rule) -> None:
            if mode == "peek":
                backend.peek(rule)
            else:
                assert backend.try_acquire(rule, 1, "c").granted == (mode == "take")

        commands = watched(redis_server, connection, one)
        assert commands, "MONITOR saw nothing of the script"
        unbounded = [words for words in commands if not bounded(words)]
        assert not unbounded
        # The same commands, whatever the log holds (names only: members and scores differ).
        shapes.append([words[0].upper() for words in commands])
    assert shapes[0] == shapes[1]


def test_a_reading_is_the_exact_summary_of_the_log(connection: Connection) -> None:
    now = server_now(connection)
    # 30 instants 10 s apart (the oldest 300 s ago), 3 permits each, in an hour's window.
    stamps = [now - 300 + 10 * (n // 3) for n in range(90)]
    fill(connection, stamps)
    rule = SlidingWindow(90, 3600)
    reading = RedisBackend(connection, connection.config.keys, "a").peek(rule)
    assert reading.used == 90
    assert not reading.granted
    # Full: the oldest permit (300 s ago) frees first, at 3,300 s from now.
    assert 3299 < reading.next_free <= 3300
    assert reading.wait == reading.next_free
    assert len(reading.oldest) == OLDEST_REPORTED
    assert [count for _, count in reading.oldest] == [3] * OLDEST_REPORTED
    ages = [age for age, _ in reading.oldest]
    assert 299 < ages[0] <= 300.5
    assert all(299 < ages[i] + 10 * i <= 300.5 for i in range(OLDEST_REPORTED))
    # Three permits at once must wait for the three oldest: still the same instant.
    refused = RedisBackend(connection, connection.config.keys, "b").try_acquire(rule, 3, "c")
    assert not refused.granted
    assert 3299 < refused.wait <= 3300


def test_a_log_written_by_an_earlier_forge_is_counted_as_it_is(connection: Connection) -> None:
    now = server_now(connection)
    # An older batch's log (members "<ticket>:<n>", scored by grant): two permits live.
    fill(connection, [now - 30, now - 20], prefix="old-host")
    rule = SlidingWindow(3, 60)
    backend = RedisBackend(connection, connection.config.keys, "new-host")
    granted = backend.try_acquire(rule, 1, "c")
    assert granted.granted
    assert granted.used == 3
    refused = backend.try_acquire(rule, 1, "c")
    assert not refused.granted
    assert 29 < refused.wait <= 30  # the permit of 30 s ago frees first
    assert connection.client.zcard(connection.config.keys.limiter_log) == 3


async def test_statistics_age_the_reading_on_the_limiter_s_clock(
    connection: Connection,
) -> None:
    now = server_now(connection)
    fill(connection, [now - 50] * 4 + [now - 10])  # 4 permits in one instant, then one
    clock = [0.0]
    limiter = RateLimiter(
        RedisBackend(connection, connection.config.keys, "a"), 6, 60, clock=lambda: clock[0]
    )
    await limiter.acquire("c")
    seen = limiter.statistics()
    assert (seen.used, seen.remaining) == (6, 0)
    assert 9.5 < seen.next_free_in <= 10  # the four of 50 s ago free first
    clock[0] += 11  # past the four oldest (50 s ago, in a 60 s window): nothing is asked
    assert (limiter.statistics().used, limiter.statistics().next_free_in) == (2, 0.0)
    clock[0] += 40  # past the one of 10 s ago
    assert limiter.statistics().used == 1


@pytest.mark.parametrize(
    ("key", "write", "kind"),
    [
        ("limiter_log", lambda client, key: client.rpush(key, "1733300000.5"), "list"),
        ("limiter_log", lambda client, key: client.set(key, "x"), "string"),
        ("limiter_pause", lambda client, key: client.set(key, "1733300000"), "string"),
        ("limiter_queue", lambda client, key: client.hset(key, "a", "1"), "hash"),
    ],
)
def test_a_limiter_key_of_a_foreign_type_is_named_never_overwritten(
    connection: Connection, key: str, write: object, kind: str
) -> None:
    name = getattr(connection.config.keys, key)
    assert callable(write)
    write(connection.client, name)
    backend = RedisBackend(connection, connection.config.keys, "a")
    with pytest.raises(ForeignLimiterKey) as raised:
        backend.try_acquire(SlidingWindow(3, 60), 1, "c")
    assert raised.value.key == name
    assert raised.value.kind == kind
    if key == "limiter_pause":  # a provider's pause cannot be written over it either
        with pytest.raises(ForeignLimiterKey):
            backend.pause(30, "provider limit")
    assert f"the fleet limiter's key {name} holds a {kind}" in str(raised.value)
    assert connection.client.type(name) == kind  # untouched
    log = connection.config.keys.limiter_log
    assert key == "limiter_log" or not connection.client.exists(log)  # nothing granted


def test_forge_fleet_status_names_a_foreign_limiter_key(
    tmp_path: Path, redis_server: RedisServer, connection: Connection
) -> None:
    (tmp_path / "nightly.toml").write_text('[[loop]]\nchange = "a"\ncmd = "true"\n')
    (tmp_path / "forge.toml").write_text('[fleet]\nname = "t"\n')
    env = {"FORGE_REDIS_URL": redis_server.url}
    assert (
        run_forge(["fleet", "submit", "--batch", "nightly.toml"], cwd=tmp_path, env=env).code == 0
    )
    log = connection.config.keys.limiter_log
    connection.client.rpush(log, "1733300000.5")
    status = run_forge(["fleet", "status"], cwd=tmp_path, env=env)
    # Like a sqlite log that is some other database: the state is unusable (exit 1).
    assert status.code == 1, status
    assert f"the fleet limiter's key {log} holds a list, where Forge keeps a zset" in status.err
    assert f"DEL {log}" in status.err
    assert "Traceback" not in status.err


def test_a_run_of_acquires_on_a_trio_clock_keeps_the_limit(connection: Connection) -> None:
    async def main() -> int:
        limiter = RateLimiter(
            RedisBackend(connection, connection.config.keys, "a", poll=0.01),
            5,
            0.5,
            clock=trio.current_time,
        )
        for _ in range(12):
            await limiter.acquire("c")
            assert limiter.statistics().used <= 5
        return limiter.statistics().used

    assert 1 <= trio.run(main) <= 5
    assert connection.client.zcard(connection.config.keys.limiter_log) <= 5
