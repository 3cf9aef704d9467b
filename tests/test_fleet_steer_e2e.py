"""``forge steer CHANGE ... --fleet``: a person's guidance reaches a fleet loop, end to end.

Real ``forge fleet work`` hosts on a real server, fake-agent loops. An
iteration that must be running while the guidance is given or cleared says
it started on a FIFO and waits to be let go on another; the later
iterations record their environment (``FORGE_GUIDANCE``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from orchestra._fleet import (
    Connection,
    FleetConfig,
    Keys,
    LeaseLost,
    RedisChangeStore,
    clear_fleet_guidance,
    give_fleet_guidance,
    read_fleet_guidance,
)
from orchestra._fleet._store import TAKE_GUIDANCE
from orchestra._policy import FleetPolicy
from orchestra._state import UNTIL_CLEARED, Guidance

from .fleet_support import Fleet, fleet_of, git_repo
from .redis_server import RedisServer
from .support import FAKE_AGENT


class _Loop:
    """A loop's agent: the iterations in ``held`` wait to be let go; every one records its env."""

    def __init__(self, folder: Path, change: str, iterations: int, held: tuple[int, ...]) -> None:
        self.folder, self.change = folder, change
        self.fifos: dict[int, tuple[Path, Path]] = {}
        steps: list[dict[str, Any]] = []
        for number in range(1, iterations + 1):
            step: dict[str, Any] = {
                "record_env": str(self.env_path(number)),
                "write": {f"{number}.txt": f"{number}\n"},
            }
            if number in held:
                started = folder / f"{change}-{number}.started"
                go = folder / f"{change}-{number}.go"
                os.mkfifo(started)
                os.mkfifo(go)
                self.fifos[number] = (started, go)
                step["shell"] = (
                    f"echo up > {shlex.quote(str(started))}; read word < {shlex.quote(str(go))}"
                )
            steps.append(step)
        steps[-1]["print"] = "FORGE_DONE\n"
        script = folder / f"{change}.json"
        script.write_text(json.dumps({"steps": steps}))
        self.cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])

    def env_path(self, number: int) -> Path:
        return self.folder / f"{self.change}-{number}.env.json"

    def env(self, number: int) -> dict[str, str]:
        recorded: dict[str, str] = json.loads(self.env_path(number).read_text())
        return recorded

    def wait_started(self, number: int) -> None:
        with open(self.fifos[number][0], encoding="utf-8") as fifo:
            assert fifo.read() == "up\n"

    def let_go(self, number: int) -> None:
        with open(self.fifos[number][1], "w", encoding="utf-8") as fifo:
            fifo.write("go\n")

    def release(self) -> None:
        """Let every held iteration go if the test failed before it did (never blocks)."""
        for started, go in self.fifos.values():
            for fifo in (go, started):
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue  # no reader: nothing waits on it
                os.write(fd, b"go\n")
                os.close(fd)


@contextmanager
def _releasing(*loops: _Loop) -> Iterator[None]:
    try:
        yield
    finally:
        for loop in loops:
            loop.release()


def _batch(fleet: Fleet, *loops: _Loop) -> str:
    lines = ["[verify]", 'command = "true"', "specs = []", "[stagnation]", "no_progress = 10"]
    for loop in loops:
        folder = git_repo(fleet.tmp / "loops" / loop.change)
        lines += ["[[loop]]", f'change = "{loop.change}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {json.dumps(loop.cmd)}")
    return "\n".join(lines) + "\n"


def _server(fleet: Fleet) -> redis.Redis:
    return redis.Redis.from_url(fleet.server.url, decode_responses=True)


def _guidance_field(client: redis.Redis, change: str) -> Any:
    return client.hget(Keys("nightly").change(change), "guidance")


def _said(by: str, text: str) -> str:
    return f"Guidance from a person ({by}): {text}"


def test_guidance_given_to_a_fleet_loop_reaches_its_next_iteration_and_no_other_loop(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    billing = _Loop(tmp_path, "billing", 3, held=(1,))
    search = _Loop(tmp_path, "search", 3, held=(1,))
    text = "the migration must stay reversible"
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing, search):
        assert fleet.submit(_batch(fleet, billing, search)).code == 0
        fleet.spawn("w1", max_parallel=2)
        client = _server(fleet)
        billing.wait_started(1)
        search.wait_started(1)

        given = fleet.forge("steer", "billing", text, "--fleet")
        assert given.code == 0, given
        assert given.lines == [
            'steer: guidance for "billing" (fleet "nightly") waits for its next iteration, '
            "on whichever host runs it (1 waiting)"
        ]
        listed = fleet.forge("steer", "billing", "--fleet", "--json")
        assert listed.code == 0, listed
        document = json.loads(listed.out)
        [waiting] = document["waiting"]
        assert (waiting["text"], waiting["keep"]) == (text, "once")
        assert "@" in waiting["by"]
        assert document["blocked"] is None
        plain = fleet.forge("steer", "billing", "--fleet")
        assert plain.lines == [f"steer: waiting (once, by {waiting['by']}): {text}"]
        # It waits on the server, not in the host folder's files.
        assert not (fleet.host_dir / ".forge" / "changes" / "billing" / "guidance.yaml").exists()
        unknown = fleet.forge("steer", "nope", "hello", "--fleet")
        assert unknown.code == 2, unknown
        assert 'the fleet batch "nightly" has no loop for change "nope"' in unknown.err

        billing.let_go(1)
        search.let_go(1)
        assert fleet.wait_all() == [0], fleet.output("w1")

    said = _said(waiting["by"], text)
    second = billing.env(2)
    assert second["FORGE_GUIDANCE"] == said
    assert said in second["FORGE_PROMPT"]
    # Once: the iteration after it has none; the other loop never had any.
    assert "FORGE_GUIDANCE" not in billing.env(3)
    for number in (1, 2, 3):
        assert "FORGE_GUIDANCE" not in search.env(number)
    assert "FORGE_GUIDANCE" not in billing.env(1)
    assert _guidance_field(client, "billing") is None
    events = fleet.timeline("billing")
    [recorded] = [e for e in events if e["event"] == "guidance.given"]
    assert (recorded["text"], recorded["keep"], recorded["by"]) == (text, "once", waiting["by"])
    [delivered] = [e for e in events if e["event"] == "guidance.delivered"]
    assert delivered["iteration"] == 2
    assert delivered["by"] == [waiting["by"]]
    assert delivered["texts"] == [text]
    kinds = [e["event"] for e in fleet.timeline("search")]
    assert "guidance.delivered" not in kinds
    assert "guidance.given" not in kinds
    after = fleet.forge("steer", "billing", "--fleet")
    assert after.lines == ['steer: no guidance waiting for "billing"']


def test_until_cleared_guidance_reaches_every_fleet_iteration_until_cleared(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    billing = _Loop(tmp_path, "billing", 4, held=(1, 3))
    text = "keep every change small"
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing):
        assert fleet.submit(_batch(fleet, billing)).code == 0
        fleet.spawn("w1", max_parallel=1)
        client = _server(fleet)
        billing.wait_started(1)

        given = fleet.forge("steer", "billing", text, "--until-cleared", "--fleet")
        assert given.code == 0, given
        assert "waits for every iteration until --clear" in given.out
        billing.let_go(1)
        billing.wait_started(3)
        # Iterations 2 and 3 were given it; it still waits for the next.
        listed = fleet.forge("steer", "billing", "--fleet", "--json")
        [waiting] = json.loads(listed.out)["waiting"]
        assert (waiting["text"], waiting["keep"]) == (text, "until-cleared")
        cleared = fleet.forge("steer", "billing", "--clear", "--fleet")
        assert cleared.code == 0, cleared
        assert cleared.lines == [
            'steer: cleared 1 piece(s) of guidance for "billing" (fleet "nightly")'
        ]
        assert _guidance_field(client, "billing") is None
        again = fleet.forge("steer", "billing", "--clear", "--fleet")
        assert again.lines == [
            'steer: cleared 0 piece(s) of guidance for "billing" (fleet "nightly")'
        ]
        billing.let_go(3)
        assert fleet.wait_all() == [0], fleet.output("w1")

    said = _said(waiting["by"], text)
    assert "FORGE_GUIDANCE" not in billing.env(1)
    assert billing.env(2)["FORGE_GUIDANCE"] == said
    assert billing.env(3)["FORGE_GUIDANCE"] == said
    assert "FORGE_GUIDANCE" not in billing.env(4)
    events = fleet.timeline("billing")
    delivered = [e["iteration"] for e in events if e["event"] == "guidance.delivered"]
    assert delivered == [2, 3]
    [gone] = [e for e in events if e["event"] == "guidance.cleared"]
    assert gone["count"] == 1
    assert "@" in gone["by"]


def test_unreadable_guidance_on_the_server_delivers_nothing_until_cleared(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    billing = _Loop(tmp_path, "billing", 3, held=(1, 2))
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing):
        assert fleet.submit(_batch(fleet, billing)).code == 0
        fleet.spawn("w1", max_parallel=1)
        client = _server(fleet)
        billing.wait_started(1)
        client.hset(Keys("nightly").change("billing"), "guidance", "[{not json")

        listed = fleet.forge("steer", "billing", "--fleet")
        assert listed.code == 0, listed
        assert listed.lines == [
            'steer: no guidance waiting for "billing"',
            "steer: the guidance waiting is unreadable on the fleet's server: nothing is "
            "delivered until forge steer billing --clear --fleet",
        ]
        refused = fleet.forge("steer", "billing", "lost words", "--fleet")
        assert refused.code == 1, refused
        assert "is unreadable" in refused.err
        assert "forge steer billing --clear --fleet" in refused.err
        billing.let_go(1)
        billing.wait_started(2)

        cleared = fleet.forge("steer", "billing", "--clear", "--fleet")
        assert cleared.code == 0, cleared
        assert "the unreadable guidance on the fleet's server is gone too" in cleared.out
        given = fleet.forge("steer", "billing", "now it is read", "--fleet")
        assert given.code == 0, given
        billing.let_go(2)
        assert fleet.wait_all() == [0], fleet.output("w1")

    assert "FORGE_GUIDANCE" not in billing.env(2)
    assert billing.env(3)["FORGE_GUIDANCE"].endswith("): now it is read")
    events = fleet.timeline("billing")
    assert [e["text"] for e in events if e["event"] == "guidance.given"] == ["now it is read"]
    [gone] = [e for e in events if e["event"] == "guidance.cleared"]
    assert gone["count"] == 0
    delivered = [e["iteration"] for e in events if e["event"] == "guidance.delivered"]
    assert delivered == [3]


def test_the_loop_s_take_never_loses_guidance_given_meanwhile(redis_server: RedisServer) -> None:
    """The take is written only over the guidance it read; sent again, it is applied once."""
    policy = FleetPolicy(redis=redis_server.url, name="t")
    connection = Connection(FleetConfig.from_policy(policy, environ={}))
    try:
        keys = connection.config.keys
        connection.client.hset(keys.status, "c", json.dumps({"state": "running"}))
        token = int(connection.client.incr(keys.fence("c")))
        store = RedisChangeStore(connection, keys, "c", token, lambda: "2026-12-01T00:00:00.000Z")
        first = Guidance(text="first", by="a@h", at="2026-12-01T00:00:00.000Z")
        kept = Guidance(text="kept", by="a@h", at="2026-12-01T00:00:01.000Z", keep=UNTIL_CLEARED)
        give_fleet_guidance(connection, "c", first)
        read = connection.client.hget(keys.change("c"), "guidance")
        give_fleet_guidance(connection, "c", kept)  # given after the loop read the guidance

        script = connection.script(TAKE_GUIDANCE)
        script_keys = [keys.fence("c"), keys.change("c")]
        assert script(keys=script_keys, args=[token, "take-1", read, ""]) == 0
        assert store.guidance_waiting()
        assert store.take_guidance() == (first, kept)
        assert store.take_guidance() == (kept,)  # until cleared
        after = connection.client.hget(keys.change("c"), "guidance")
        # A take whose answer was lost, sent again: applied once, nothing more removed.
        took = connection.client.hget(keys.change("c"), "guidance_take")
        assert script(keys=script_keys, args=[token, took, "stale", ""]) == 1
        assert connection.client.hget(keys.change("c"), "guidance") == after
        cleared = clear_fleet_guidance(connection, "c", by="a@h", when="2026-12-01T00:00:02.000Z")
        assert cleared.entries == (kept,)
        assert not store.guidance_waiting()
        assert store.take_guidance() == ()

        give_fleet_guidance(connection, "c", first)
        connection.client.incr(keys.fence("c"))  # another host claimed the change
        with pytest.raises(LeaseLost):
            store.take_guidance()
        assert read_fleet_guidance(connection, "c").entries == (first,)
        entries: Any = connection.client.xrange(keys.timeline("c"))
        events = [json.loads(data["event"]) for _id, data in entries]
        assert [(e["seq"], e["event"]) for e in events] == [
            (1, "guidance.given"),
            (2, "guidance.given"),
            (3, "guidance.cleared"),
            (4, "guidance.given"),
        ]
    finally:
        connection.close()
