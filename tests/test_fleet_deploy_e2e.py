"""The fleet on real deployments: a cluster, a sentinel's failover, passwords, ACL users, TLS.

Every server is a real ``redis-server`` started here on loopback ports (the
cluster and the sentinel once for the module: they take seconds to form);
every command is the real ``forge``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from orchestra._fleet import Connection, FleetConfig, Keys, fleet_status
from orchestra._fleet._connection import older_than_needed
from orchestra._fleet._deployment import parse_url, redact
from orchestra._fleet._queue import batch_keys
from orchestra._fleet._status import read_hosts
from orchestra._policy import FleetPolicy

from .fleet_support import (
    Fleet,
    children_of,
    fleet_of,
    git_repo,
    group_members,
    read_stamps,
    stamping_agent,
    wait_for,
)
from .redis_server import (
    RedisClusterNodes,
    RedisServer,
    SentinelSet,
    closed_port,
    make_certificates,
    redis_server_binary,
    started,
)
from .support import Completed

NIGHTLY = Keys("nightly")  # the batch's keys (tests/fleet_support.py names it "nightly")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    nodes = RedisClusterNodes(redis_server_binary(), tmp_path_factory.mktemp("cluster"))
    try:
        nodes.form()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[SentinelSet]:
    servers = SentinelSet(redis_server_binary(), tmp_path / "sentinel")
    try:
        servers.start_sentinel()
        yield servers
    finally:
        servers.stop()


def batch_of(fleet: Fleet, count: int, *, hold: float = 0.05, iterations: int = 1) -> str:
    """``count`` loops of ``iterations`` iterations each (the last one says FORGE_DONE).

    At most 3: the iterations change no file, and stagnation stops a 4th.
    """
    steps = [{"hold": hold, "print": "working\n"} for _ in range(iterations - 1)]
    steps.append({"hold": hold, "print": "FORGE_DONE\n"})
    agent = stamping_agent(fleet.tmp, "agent", fleet.stamps, *steps)
    lines = ['[run]\ngrace = "0.5s"', "[verify]", 'command = "true"', "specs = []"]
    for number in range(1, count + 1):
        change = f"c{number}"
        folder = git_repo(fleet.tmp / "loops" / change)
        lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {json.dumps(agent)}")
    return "\n".join(lines) + "\n"


def submit(fleet: Fleet, url: str, batch: str, *more: str) -> Completed:
    path = fleet.tmp / "nightly.toml"
    path.write_text(batch)
    return fleet.forge(
        "fleet", "submit", "--batch", str(path), *more, extra={"FORGE_REDIS_URL": url}
    )


def status(fleet: Fleet, url: str) -> dict[str, Any]:
    done = fleet.forge("fleet", "status", "--json", extra={"FORGE_REDIS_URL": url})
    assert done.code == 0, done
    data: dict[str, Any] = json.loads(done.out)
    return data


def test_a_batch_runs_on_a_three_node_cluster(tmp_path: Path, cluster: RedisClusterNodes) -> None:
    with fleet_of(tmp_path, cluster.nodes[0]) as fleet:
        batch = batch_of(fleet, 2)
        assert submit(fleet, cluster.url, batch).code == 0
        # Submitted again over the first: every key of the old one is found and dropped.
        again = submit(fleet, cluster.url, batch, "--replace")
        assert again.code == 0, again
        for host in ("w1", "w2"):
            fleet.spawn(host, max_parallel=1, extra={"FORGE_REDIS_URL": cluster.url})
        assert fleet.wait_all() == [0, 0], [fleet.output(h) for h in ("w1", "w2")]
        ends = [s.change for s in read_stamps(fleet.stamps) if s.what == "end"]
        assert sorted(ends) == ["c1", "c2"]
        assert status(fleet, cluster.url)["counts"] == {
            "queued": 0,
            "running": 0,
            "waiting": 0,
            "done": 2,
            "escalated": 0,
        }
    # Every key of the batch is in one slot, so on one node (the hash tag).
    slots, holders = set(), []
    for node in cluster.nodes:
        with node.client() as client:
            keys = list(client.scan_iter(match=f"{NIGHTLY.prefix}*"))
            slots |= {client.cluster("keyslot", key) for key in keys}
            holders += [node.port] if keys else []
    assert len(slots) == 1, slots
    assert len(holders) == 1, holders


def test_a_clusters_clock_and_scans_are_the_batch_nodes(cluster: RedisClusterNodes) -> None:
    policy = FleetPolicy(redis=cluster.url, name="clocks")
    connection = Connection(FleetConfig.from_policy(policy, environ={}))
    try:
        connection.once(lambda c: c.ping())  # the client is built on first use
        client = connection.client
        holder = client.get_node_from_key(connection.config.keys.batch)
        # The client's default node (where a keyless command goes) is another one.
        other = next(node for node in client.get_primaries() if node.name != holder.name)
        client.set_default_node(other)
        for node in cluster.nodes:
            with node.client() as each:
                each.config_resetstat()
        fleet_status(connection)
        read_hosts(connection)
        connection.server_time()
        connection.once(lambda c: batch_keys(c, connection.config.keys))
        calls = {}
        for node in cluster.nodes:
            with node.client() as each:
                stats = each.info("commandstats")
            calls[node.port] = {
                name: stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("time", "scan")
            }
        # Heartbeats are stamped with the holder's clock: status reads the same one.
        assert calls.pop(holder.port) == {"time": 3, "scan": 1}, calls
        assert all(seen == {"time": 0, "scan": 0} for seen in calls.values()), calls
    finally:
        connection.close()


def test_a_batch_goes_on_through_a_sentinel_failover(tmp_path: Path, sentinel: SentinelSet) -> None:
    # A lease long enough to outlast the failover (the sentinel waits 1 s for a
    # master that stopped answering, then promotes the replica).
    with fleet_of(tmp_path, sentinel.master, lease="8s", heartbeat="0.5s") as fleet:
        assert submit(fleet, sentinel.url, batch_of(fleet, 2, hold=0.4, iterations=3)).code == 0
        for host in ("w1", "w2"):
            fleet.spawn(host, max_parallel=1, extra={"FORGE_REDIS_URL": sentinel.url})
        # Both loops are under way when the master dies.
        wait_for(lambda: len(read_stamps(fleet.stamps)) >= 2, what="both loops to start")
        sentinel.master.stop()
        wait_for(
            lambda: sentinel.master_port() == sentinel.replica.port, what="the sentinel's failover"
        )
        assert fleet.wait_all() == [0, 0], [fleet.output(h) for h in ("w1", "w2")]
        counts = status(fleet, sentinel.url)["counts"]
        assert counts == {"queued": 0, "running": 0, "waiting": 0, "done": 2, "escalated": 0}
        # The loops waited for the server rather than ending early, and nothing ran twice.
        ends = sorted(s.change for s in read_stamps(fleet.stamps) if s.what == "end")
        assert ends == ["c1"] * 3 + ["c2"] * 3, ends
    with sentinel.replica.client() as client:
        assert client.info("replication")["role"] == "master"
        assert client.hlen(NIGHTLY.status) == 2


def test_a_forced_failover_is_followed_while_the_old_master_lives(
    tmp_path: Path, sentinel: SentinelSet
) -> None:
    with fleet_of(tmp_path, sentinel.master) as fleet:
        assert submit(fleet, sentinel.url, batch_of(fleet, 1)).code == 0
        # The sentinels name the replica; the old master still answers, as a master.
        assert sentinel.fail_over() == sentinel.replica.port
        fleet.spawn("w1", extra={"FORGE_REDIS_URL": sentinel.url})
        assert fleet.wait_all() == [0], fleet.output("w1")
        assert status(fleet, sentinel.url)["counts"]["done"] == 1
    with sentinel.replica.client() as client:
        assert client.hlen(NIGHTLY.status) == 1


def executor_groups(worker: int) -> list[int]:
    """The process groups of the executors a worker started (they lead groups of their own)."""
    groups = []
    for child in children_of(worker):
        with suppress(ProcessLookupError):
            group = os.getpgid(child)
            if group != worker:
                groups.append(group)
    return groups


def _refused(done: Completed, *words: str) -> None:
    assert done.code == 2, done
    assert "Traceback" not in done.err, done.err
    for word in words:
        assert word in done.err, done.err


def test_a_wrong_password_or_user_is_named_not_waited_for(tmp_path: Path) -> None:
    binary = redis_server_binary()
    rules = ("reader on >readpw ~* +@read", "worker on >workpw ~forge:* +@all")
    server = started(
        lambda: RedisServer(binary, tmp_path / "redis", password="s3cret", users=rules)
    )
    try:
        with fleet_of(tmp_path, server) as fleet:
            batch = batch_of(fleet, 1)
            port = server.port
            wrong = submit(fleet, f"redis://:nope@127.0.0.1:{port}/0", batch)
            _refused(wrong, "the Redis server refused the credentials", "redis://***@127.0.0.1")
            assert "nope" not in wrong.err
            unknown = submit(fleet, f"redis://ghost:pw@127.0.0.1:{port}/0", batch)
            _refused(unknown, "refused the credentials")
            none = submit(fleet, f"redis://127.0.0.1:{port}/0", batch)
            _refused(none, "refused the credentials: it needs a password, and the URL gives none")
            # A user that may only read: NOPERM on the first write.
            reader = submit(fleet, f"redis://reader:readpw@127.0.0.1:{port}/0", batch)
            _refused(reader, "refused the credentials", "permission")
            # The ACL user with the fleet's keys, and a database number.
            good = f"redis://worker:workpw@127.0.0.1:{port}/3"
            assert submit(fleet, good, batch).code == 0
            fleet.spawn("w1", extra={"FORGE_REDIS_URL": good})
            assert fleet.wait_all() == [0], fleet.output("w1")
        with server.client() as client:
            client.select(3)
            assert client.exists(NIGHTLY.batch)
    finally:
        server.stop()


@pytest.mark.parametrize("change", ["password rotated", "permission withdrawn"])
def test_credentials_refused_mid_batch_stop_the_worker(tmp_path: Path, change: str) -> None:
    binary = redis_server_binary()
    rules = ("worker on >workpw ~forge:* +@all",)
    server = started(lambda: RedisServer(binary, tmp_path / "redis", users=rules))
    url = f"redis://worker:workpw@127.0.0.1:{server.port}/0"
    try:
        with fleet_of(tmp_path, server) as fleet:
            assert submit(fleet, url, batch_of(fleet, 1, hold=30)).code == 0
            worker = fleet.spawn("w1", extra={"FORGE_REDIS_URL": url})
            wait_for(lambda: read_stamps(fleet.stamps), what="the loop to start")
            agents = executor_groups(worker.pid)
            with server.client() as client:
                if change == "password rotated":
                    client.acl_setuser("worker", passwords=["-workpw", "+rotated"])
                    # Connections already authenticated stay so: make the worker connect again.
                    client.client_kill_filter(_type="normal", skipme=True)
                else:
                    client.acl_setuser("worker", commands=["-@write"])
            # Not waited out as an outage: the worker stops, and its agent with it.
            assert worker.wait(timeout=60) == 2, fleet.output("w1")
            out = fleet.output("w1")
            assert "the Redis server refused the credentials" in out, out
            assert "Traceback" not in out, out
            assert agents, "the agent's process group was not found"
            wait_for(lambda: not any(group_members(g) for g in agents), what="the agent to stop")
    finally:
        server.stop()


def _unreachable(done: Completed, where: str) -> None:
    assert done.code == 1, done
    assert "Traceback" not in done.err, done.err
    assert "the fleet's Redis server cannot be reached" in done.err, done.err
    assert where in done.err, done.err


@pytest.mark.parametrize("scheme", ["redis+cluster", "redis+sentinel"])
def test_an_unreachable_cluster_or_sentinel_is_an_outage_not_a_traceback(
    tmp_path: Path, scheme: str
) -> None:
    server = RedisServer(redis_server_binary(), tmp_path / "never-started")
    port = closed_port()
    url = f"{scheme}://127.0.0.1:{port}/" + ("forgemaster" if scheme == "redis+sentinel" else "")
    with fleet_of(tmp_path, server) as fleet:
        # At start, every command stops with the outage's message (exit 1).
        _unreachable(submit(fleet, url, batch_of(fleet, 1)), f"{scheme}://127.0.0.1:{port}")
        env = {"FORGE_REDIS_URL": url}
        _unreachable(fleet.forge("fleet", "status", extra=env), "cannot be reached")
        _unreachable(fleet.forge("fleet", "work", "--host", "w1", extra=env), "cannot be reached")
        # forge status, without --fleet, shows this host's files instead.
        local = fleet.forge("status", extra=env)
        assert local.code == 0, local
        assert "Traceback" not in local.err, local.err
        assert "cannot be reached" in local.err, local.err
        assert "showing this host's files" in local.err, local.err


def test_a_cluster_url_at_a_plain_server_is_named(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        url = f"redis+cluster://127.0.0.1:{redis_server.port}/"
        done = submit(fleet, url, batch_of(fleet, 1))
        assert done.code == 1, done
        assert "Traceback" not in done.err, done.err
        assert "refused a command" in done.err, done.err
        assert "Cluster mode is not enabled" in done.err, done.err


def test_a_cluster_refusing_the_credentials_is_named(
    tmp_path: Path, cluster: RedisClusterNodes
) -> None:
    with fleet_of(tmp_path, cluster.nodes[0]) as fleet:
        url = cluster.url.replace("://", "://ghost:nope@", 1)
        done = submit(fleet, url, batch_of(fleet, 1))
        _refused(done, "the Redis server refused the credentials", "redis+cluster://***@")
        assert "nope" not in done.err


def test_tls_works_with_its_ca_and_each_mistake_is_named(tmp_path: Path) -> None:
    binary = redis_server_binary()
    certs = make_certificates(tmp_path / "certs")
    server = started(lambda: RedisServer(binary, tmp_path / "redis", tls=certs))
    try:
        with fleet_of(tmp_path, server) as fleet:
            batch = batch_of(fleet, 1)
            port = server.port
            no_ca = submit(fleet, f"rediss://127.0.0.1:{port}/0", batch)
            _refused(no_ca, "the TLS connection to the Redis server failed", "certificate")
            gone = submit(
                fleet, f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tmp_path}/no.crt", batch
            )
            _refused(gone, "the TLS connection to the Redis server failed")
            plain = submit(fleet, f"redis://127.0.0.1:{port}/0", batch)
            _refused(plain, "the Redis server speaks TLS", "rediss://")
            assert submit(fleet, server.url, batch).code == 0
            fleet.spawn("w1", extra={"FORGE_REDIS_URL": server.url})
            assert fleet.wait_all() == [0], fleet.output("w1")
    finally:
        server.stop()


def test_a_batch_lost_in_a_restart_without_persistence_is_named(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        assert fleet.submit(batch_of(fleet, 1, hold=30)).code == 0
        worker = fleet.spawn("w1")
        wait_for(lambda: read_stamps(fleet.stamps), what="the loop to start")
        agents = executor_groups(worker.pid)
        redis_server.stop()
        redis_server.start()  # the same port, nothing kept
        assert worker.wait(timeout=60) == 1, fleet.output("w1")
        assert agents, "the agent's process group was not found"
        wait_for(lambda: not any(group_members(g) for g in agents), what="the agent to stop")
        out = fleet.output("w1")
        assert "the batch nightly is no longer on the server" in out, out
        assert "submit it again" in out
        assert "6.2" not in out, out
        assert "Traceback" not in out, out
        # And a host started afterwards is told the same.
        late = fleet.forge("fleet", "work", "--host", "w2")
        assert late.code == 2, late
        assert 'nothing is submitted under the fleet name "nightly"' in late.err


def test_bad_deployment_urls_are_refused_before_anything_runs(tmp_path: Path) -> None:
    server = RedisServer(redis_server_binary(), tmp_path / "never-started")
    with fleet_of(tmp_path, server) as fleet:
        batch = batch_of(fleet, 1)
        cases = {
            "memcached://127.0.0.1:1/": "the scheme must be one of",
            "redis+sentinel://127.0.0.1:26379/": "names the master's service",
            "redis+cluster://127.0.0.1:7000/2": "only database 0",
            "redis+cluster:///": "no node",
            "redis+cluster://127.0.0.1:7000/?colour=red": "unknown URL parameter(s) colour",
            "redis://127.0.0.1:port/0": "Port could not be cast to integer",
            "redis://127.0.0.1:6379/zero": "the database must be a number",
            "rediss://127.0.0.1:6379/0?ssl_cert_reqs=maybe": "ssl_cert_reqs must be one of",
            "redis://127.0.0.1:6379/0?socket_timeout=soon": "Invalid value for 'socket_timeout'",
        }
        for url, words in cases.items():
            _refused(submit(fleet, url, batch), words)


def test_a_cluster_key_outside_the_batch_slot_is_never_built() -> None:
    # Keys of two batches hash apart; one batch's keys all hash alike.
    keys = Keys("nightly")
    built = [
        keys.batch,
        keys.loops,
        keys.status,
        keys.hosts,
        keys.change("c"),
        keys.timeline("c"),
        keys.fence("c"),
        keys.lease("c"),
        keys.limiter_log,
        keys.limiter_pause,
    ]
    assert {key_slot(key.encode()) for key in built} == {key_slot(b"nightly")}
    assert key_slot(Keys("other").batch.encode()) != key_slot(b"nightly")
    assert all(key.startswith("forge:{nightly}:") for key in built)


def test_deployment_urls_are_taken_apart() -> None:
    sentinel = parse_url(
        "redis+sentinel://app:p%40ss@s1:26379,s2/forgemaster/2?ssl_ca_certs=/ca.crt",
        source="fleet.redis",
    )
    assert sentinel.kind == "sentinel"
    assert sentinel.nodes == (("s1", 26379), ("s2", 26379))
    assert (sentinel.service, sentinel.db) == ("forgemaster", 2)
    assert (sentinel.username, sentinel.password) == ("app", "p@ss")
    assert sentinel.options == (("ssl_ca_certs", "/ca.crt"),)
    assert not sentinel.tls
    cluster = parse_url("rediss+cluster://:pw@n1:7000,n2:7001/", source="fleet.redis")
    assert (cluster.kind, cluster.tls, cluster.password) == ("cluster", True, "pw")
    assert cluster.nodes == (("n1", 7000), ("n2", 7001))
    assert parse_url("rediss://h:6380/0", source="x").kind == "server"
    assert redact("redis://user:secret@h:6379/0") == "redis://***@h:6379/0"
    assert redact("redis+cluster://:pw@a:1,b:2/") == "redis+cluster://***@a:1,b:2/"


def test_only_a_server_older_than_6_2_is_called_too_old() -> None:
    assert older_than_needed("6.0.16")
    assert older_than_needed("5.0.14")
    assert not older_than_needed("6.2.0")
    assert not older_than_needed("7.0.15")
    assert not older_than_needed("10.0.1")
