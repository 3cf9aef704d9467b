"""What the server keeps of a fleet batch: expiry, export, capped timelines, pruned hosts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from orchestra._durations import Duration
from orchestra._fleet import Connection, FleetConfig, Keys, RedisChangeStore
from orchestra._fleet._retention import expire_batch, prune_hosts, revive_batch
from orchestra._fleet._status import fleet_status
from orchestra._policy import FleetPolicy
from orchestra._state import IterationStarted, OtherEvent

from .fleet_support import Fleet, fleet_of, git_repo, stamping_agent, wait_for
from .redis_server import RedisServer
from .support import run_forge

NIGHTLY = Keys("nightly")  # the batch of tests/fleet_support.py
PREFIX = NIGHTLY.prefix


def connect(server: RedisServer, **fleet: object) -> Connection:
    policy = FleetPolicy(redis=server.url, name="t", **fleet)  # type: ignore[arg-type]  # a test's few keys
    return Connection(FleetConfig.from_policy(policy, environ={}))


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    opened = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield opened
    opened.close()


def done_batch(fleet: Fleet, count: int) -> str:
    agent = stamping_agent(fleet.tmp, "done", fleet.stamps, {"print": "FORGE_DONE\n"})
    lines = ["[verify]", 'command = "true"', "specs = []"]
    for number in range(1, count + 1):
        folder = git_repo(fleet.tmp / "loops" / f"c{number}")
        lines += ["[[loop]]", f'change = "c{number}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {json.dumps(agent)}")
    return "\n".join(lines) + "\n"


def with_fleet_keys(fleet: Fleet, *lines: str) -> None:
    """Add keys to the host's ``[fleet]`` table (the last table of its forge.toml)."""
    toml = fleet.host_dir / "forge.toml"
    toml.write_text(toml.read_text() + "\n".join(lines) + "\n")


def ttls(client: redis.Redis) -> dict[str, int]:
    return {str(key): int(client.pttl(key)) for key in client.scan_iter(match=f"{PREFIX}*")}


def test_an_ended_batch_is_exported_then_expires_and_a_requeue_lifts_the_expiry(
    tmp_path: Path, redis_server: RedisServer, client: redis.Redis
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        with_fleet_keys(fleet, 'keep = "1h"', 'export = "exports"')
        assert fleet.submit(done_batch(fleet, 2)).code == 0
        assert all(ttl == -1 for ttl in ttls(client).values())  # a live batch never expires
        fleet.spawn("w1", max_parallel=2)
        assert fleet.wait_all() == [0], fleet.output("w1")

        kept = ttls(client)
        assert f"{PREFIX}batch" in kept
        assert f"{PREFIX}timeline:c1" in kept
        assert all(0 < ttl <= 3600_000 for ttl in kept.values()), kept
        exported = fleet.host_dir / "exports" / ".forge" / "changes"
        assert sorted(p.name for p in exported.iterdir()) == ["c1", "c2"]
        assert "run.stopped" in (exported / "c1" / "timeline.jsonl").read_text()
        assert "exported the batch" in fleet.output("w1")
        # The automatic export holds the batch's summary too: a report reads it
        # anywhere, with no server named.
        folder = fleet.host_dir / "exports"
        [summary] = (folder / ".forge" / "runs").glob("*/summary.json")
        report = run_forge(["report", "--json", "--from", str(folder)], cwd=tmp_path, env={})
        assert report.code == 0, report
        reported = json.loads(report.out)
        assert reported["run_id"] == summary.parent.name
        assert {loop["change"]: loop["ending"] for loop in reported["loops"]} == {
            "c1": "done",
            "c2": "done",
        }
        assert client.xlen(f"{PREFIX}loops") == 0  # ended loops leave the stream
        shown = fleet.forge("fleet", "status")
        assert "the batch has ended: its keys expire in " in shown.out, shown.out
        assert 0 < json.loads(fleet.forge("fleet", "status", "--json").out)["expires_in"] <= 3600

        assert client.exists(NIGHTLY.notified("batch"))  # its end was told (and reported)
        assert fleet.forge("fleet", "requeue", "c1").code == 0
        assert not client.exists(NIGHTLY.notified("batch"))  # its next end is told again
        assert json.loads(fleet.forge("fleet", "status", "--json").out)["expires_in"] is None
        assert client.pttl(f"{PREFIX}batch") == -1  # live again: nothing expires
        assert client.pttl(f"{PREFIX}timeline:c1") == -1
        fleet.spawn("w2", max_parallel=2)
        assert fleet.wait_all()[-1] == 0, fleet.output("w2")
        assert all(0 < ttl <= 3600_000 for ttl in ttls(client).values())


def test_an_ended_batch_s_keys_are_gone_once_its_keep_has_passed(
    tmp_path: Path, redis_server: RedisServer, client: redis.Redis
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        with_fleet_keys(fleet, 'keep = "1s"')
        assert fleet.submit(done_batch(fleet, 1)).code == 0
        fleet.spawn("w1", max_parallel=1)
        assert fleet.wait_all() == [0], fleet.output("w1")
        wait_for(lambda: not ttls(client), what="the ended batch's keys to expire")
        status = fleet.forge("fleet", "status")
        assert status.code == 0
        assert "nothing submitted" in status.out


def test_the_limiter_s_own_shorter_expiry_is_kept(connection_t: Connection) -> None:
    client = connection_t.client
    keys = connection_t.config.keys
    client.set(keys.batch, "{}")
    client.set(keys.limiter_pause, "1", px=5000)
    client.hset(keys.status, "c", "{}")
    assert expire_batch(client, keys, 3600) == 2
    assert 0 < int(client.pttl(keys.limiter_pause)) <= 5000
    assert 5000 < int(client.pttl(keys.batch)) <= 3600_000
    revive_batch(client, keys)
    assert int(client.pttl(keys.batch)) == -1
    assert 0 < int(client.pttl(keys.limiter_pause)) <= 5000


def test_a_lease_keeps_its_own_expiry_through_an_expiry_and_a_revive(
    connection_t: Connection,
) -> None:
    client = connection_t.client
    keys = connection_t.config.keys
    client.set(keys.batch, "{}")
    client.hset(keys.status, "x", "{}")
    # A running loop's lease, and a cancelled one's left to lapse.
    client.set(keys.lease("x"), "h1 1", px=30_000)
    client.set(keys.lease("y"), "h2 1", px=30_000)
    expire_batch(client, keys, 3600)
    revive_batch(client, keys)  # another loop is requeued
    for change in ("x", "y"):
        assert 0 < int(client.pttl(keys.lease(change))) <= 30_000
    assert int(client.pttl(keys.batch)) == -1
    revive_batch(client, keys)  # a requeue of a live batch: the same
    assert 0 < int(client.pttl(keys.lease("x"))) <= 30_000


def test_the_limiter_s_counter_has_no_expiry_once_the_batch_is_live_again(
    connection_t: Connection,
) -> None:
    client = connection_t.client
    keys = connection_t.config.keys
    client.set(keys.batch, "{}")
    client.incrby(keys.limiter_seq, 41)  # as the limiter's script counts (no expiry)
    client.zadd(keys.limiter_log, {"h:41": 1.0})
    client.pexpire(keys.limiter_log, 5000)  # the window's own
    expire_batch(client, keys, 3600)
    assert 5000 < int(client.pttl(keys.limiter_seq)) <= 3600_000  # goes with the batch
    revive_batch(client, keys)
    # Were it to expire while the batch runs, its numbers would start again and
    # the log's members (``ticket:n``) collide.
    assert int(client.pttl(keys.limiter_seq)) == -1
    assert 0 < int(client.pttl(keys.limiter_log)) <= 5000


@pytest.fixture
def connection_t(redis_server: RedisServer) -> Iterator[Connection]:
    opened = connect(redis_server, timeline_max=20)
    yield opened
    opened.close()


def test_a_timeline_past_its_cap_keeps_the_latest_events_and_says_what_went(
    connection_t: Connection,
) -> None:
    keys = connection_t.config.keys
    token = int(connection_t.client.incr(keys.fence("c")))
    store = RedisChangeStore(connection_t, keys, "c", token, lambda: "2026-12-01T00:00:00.000Z")
    store.load()
    for iteration in range(1, 101):
        store.begin(IterationStarted(run_id="r", iteration=iteration))
        store.append(OtherEvent(name="note", fields={"n": iteration}))
    client: redis.Redis = connection_t.client
    entries: list[tuple[str, dict[str, str]]] = client.xrange(keys.timeline("c"))  # type: ignore[assignment]  # redis-py types a decoding client's replies as bytes or str
    events = [json.loads(fields["event"]) for _id, fields in entries]
    assert len(events) <= 20
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    markers = [event for event in events if event["event"] == "timeline.trimmed"]
    assert markers, "a trim leaves a marker"
    last = markers[-1]
    # Every event ever written is either still there or counted as dropped.
    assert last["dropped_total"] + len(events) == seqs[-1]
    # What is kept comes after what the last trim dropped.
    assert all(event["seq"] > last["last_seq"] for event in events)
    assert events[-1]["event"] == "note"
    assert events[-1]["n"] == 100  # the latest is kept
    assert int(str(client.hget(keys.change("c"), "trimmed"))) == last["dropped_total"]
    # A host taking the loop over still resumes from the latest iteration.
    taken = RedisChangeStore(
        connection_t, keys, "c", int(connection_t.client.incr(keys.fence("c"))), lambda: "x"
    )
    assert taken.load().circuit.iterations_used == 100


def test_hosts_that_left_a_lease_ago_and_lost_ones_past_forget_hosts_are_pruned(
    connection_t: Connection,
) -> None:
    client = connection_t.client
    keys = connection_t.config.keys
    now = 10_000.0

    def report(host: str, ago: float, **state: bool) -> None:
        client.hset(keys.hosts, host, json.dumps({"seen": now - ago, **state}))

    report("working", 1.0)
    report("just-finished", 1.0, finished=True)
    report("finished-long-ago", 60.0, finished=True)
    report("interrupted-long-ago", 60.0, interrupted=True)
    report("lost-a-while", 600.0)
    report("lost-for-good", 7200.0)
    client.hset(keys.hosts, "garbled", "not json")
    dropped = prune_hosts(client, keys, now, lease=30.0, forget=3600.0)
    assert sorted(dropped) == [
        "finished-long-ago",
        "garbled",
        "interrupted-long-ago",
        "lost-for-good",
    ]
    assert sorted(client.hkeys(keys.hosts)) == ["just-finished", "lost-a-while", "working"]


def test_a_loop_whose_host_was_pruned_shows_waiting(connection_t: Connection) -> None:
    client = connection_t.client
    keys = connection_t.config.keys
    running = json.dumps({"state": "running", "host": "pruned", "since": "x"})
    client.hset(keys.status, mapping={"gone": running, "held": running.replace("pruned", "new")})
    # "new" claimed its loop before its first heartbeat: its lease is held.
    client.set(keys.lease("held"), "new 1", px=30_000)
    loops = fleet_status(connection_t).loops
    assert loops["gone"]["state"] == "waiting"
    assert loops["gone"]["lease"].startswith("lapsed")
    assert loops["held"]["state"] == "running"


def test_host_ids_of_restarted_workers_do_not_pile_up(
    tmp_path: Path, redis_server: RedisServer, client: redis.Redis
) -> None:
    with fleet_of(tmp_path, redis_server, lease="1s", heartbeat="0.2s") as fleet:
        with_fleet_keys(fleet, 'keep = "1h"')
        agent = stamping_agent(tmp_path, "slow", fleet.stamps, {"hold": 1.5, "print": "x\n"})
        folder = git_repo(tmp_path / "loops" / "c1")
        batch = "\n".join(
            [
                "[run]",
                'grace = "0.2s"',
                "max_iterations = 3",
                "[verify]",
                'command = "true"',
                "specs = []",
                "[stagnation]",
                "no_progress = 10",
                "[[loop]]",
                'change = "c1"',
                f"dir = {json.dumps(str(folder))}",
                f"cmd = {json.dumps(agent)}",
            ]
        )
        assert fleet.submit(batch + "\n").code == 0
        first = fleet.spawn("first", max_parallel=1)
        wait_for(lambda: client.hexists(f"{PREFIX}hosts", "first"), what="first's heartbeat")
        first.terminate()  # SIGTERM: it gives its loop back and reports itself interrupted
        first.wait(timeout=30)
        fleet.spawn("second", max_parallel=1)
        # The second host's heartbeats prune the first once it left a lease ago.
        wait_for(
            lambda: not client.hexists(f"{PREFIX}hosts", "first"), what="the first host pruned"
        )
        fleet.stop_all()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('keeep = "7d"', "keeep"),
        ('keep = "forever"', "fleet.keep"),
        ("timeline_max = 3", "fleet.timeline_max"),
        ('forget_hosts = "-1h"', "fleet.forget_hosts"),
        # The tests' lease is 2s: a host would be dropped before it counts as lost.
        ('forget_hosts = "2s"', "fleet.forget_hosts: 2s is not longer than fleet.lease (2s)"),
    ],
)
def test_a_mistyped_retention_key_is_a_clear_error(
    tmp_path: Path, redis_server: RedisServer, line: str, said: str
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        with_fleet_keys(fleet, line)
        done = fleet.forge("fleet", "status")
        assert done.code == 2, done
        assert said in done.err
        assert "Traceback" not in done.err


def test_the_retention_defaults() -> None:
    policy = FleetPolicy()
    assert policy.keep == Duration(7 * 86400)
    assert policy.timeline_max == 2000
    assert policy.export == ""
