"""A person's controls of a fleet batch, end to end: ``forge fleet work`` hosts on a real server.

``forge fleet cancel`` stops a loop wherever it is, ``forge fleet requeue``
runs an ended one again with its state kept, ``forge circuit --reset`` on the
fleet resets the server's circuit and requeues an escalated loop, ``forge
spend`` reads the server's spend; each is journalled and refused from inside
an agent.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from orchestra._fleet import Connection, FleetConfig, Keys
from orchestra._fleet._control import cancel, requeue

from .fleet_support import (
    Fleet,
    children_of,
    fleet_of,
    git,
    git_repo,
    group_members,
    read_stamps,
    stamping_agent,
    wait_for,
)
from .redis_server import RedisServer
from .support import FORGE

# The agent's iteration a cancel interrupts: far longer than any test runs, so an
# ``end`` stamp would only appear if the agent were left running.
LONG_HOLD = 600.0


def batch_of(fleet: Fleet, loops: dict[str, str], *extra: str) -> str:
    lines = ["[verify]", 'command = "true"', "specs = []", "[stagnation]", "no_progress = 10"]
    lines += list(extra)
    for change, agent in loops.items():
        folder = git_repo(fleet.tmp / "loops" / change)
        lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {json.dumps(agent)}")
    return "\n".join(lines) + "\n"


def server(fleet: Fleet) -> redis.Redis:
    return redis.Redis.from_url(fleet.server.url, decode_responses=True)


def loop_of(fleet: Fleet, change: str) -> dict[str, Any]:
    loop: dict[str, Any] = fleet.status()["loops"][change]
    return loop


def test_a_running_loop_is_cancelled_and_its_agent_stopped_on_its_host(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(tmp_path, "slow", fleet.stamps, {"hold": LONG_HOLD, "print": "x\n"})
        assert fleet.submit(batch_of(fleet, {"c1": agent})).code == 0
        worker = fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="the agent's first iteration")
        # The executor leads a process group of its own (the worker's children in it).
        agents = [os.getpgid(pid) for pid in children_of(worker.pid)]
        agents = [group for group in agents if group != worker.pid]
        assert agents, "the executor runs in a process group of its own"

        cancelled = fleet.forge("fleet", "cancel", "c1", "--reason", "wrong ticket")
        assert cancelled.code == 0, cancelled
        assert "running on w1" in cancelled.out
        # Its only loop ended: the batch now expires after [fleet] keep.
        assert "the batch's keys expire in 7d" in cancelled.out

        # The batch has ended (its only loop cancelled): the host stops and exits 1.
        assert fleet.wait_all() == [1], fleet.output("w1")
        assert "c1: cancelled by " in fleet.output("w1")
        assert all(not group_members(group) for group in agents)
        assert [s.what for s in read_stamps(fleet.stamps)] == ["start"]  # never finished
        loop = loop_of(fleet, "c1")
        assert (loop["state"], loop["reason"]) == ("escalated", "cancelled")
        assert "wrong ticket" in loop["detail"]
        events = fleet.timeline("c1")
        [journal] = [e for e in events if e["event"] == "fleet.cancelled"]
        assert journal["reason"] == "wrong ticket"
        assert "@" in journal["by"]
        # The host's late writes were fenced out: it recorded no ending of its own.
        assert "run.stopped" not in [e["event"] for e in events]

        again = fleet.forge("fleet", "cancel", "c1")
        assert again.code == 2
        assert "already ended" in again.err


def test_a_queued_loop_is_cancelled_before_any_host_starts_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(tmp_path, "done", fleet.stamps, {"print": "FORGE_DONE\n"})
        assert fleet.submit(batch_of(fleet, {"c1": agent, "c2": agent})).code == 0
        cancelled = fleet.forge("fleet", "cancel", "c2", "--reason", "not tonight")
        assert cancelled.code == 0, cancelled
        assert "queued" in cancelled.out
        assert "expire" not in cancelled.out  # c1 is still to run: the batch is live

        fleet.spawn("w1", max_parallel=2)
        assert fleet.wait_all() == [1], fleet.output("w1")  # one loop did not end done
        assert {s.change for s in read_stamps(fleet.stamps)} == {"c1"}
        loops = fleet.status()["loops"]
        assert loops["c1"]["reason"] == "done"
        assert loops["c2"]["reason"] == "cancelled"
        # Every ended loop's stream entry is acknowledged and deleted.
        client = server(fleet)
        assert client.xlen(Keys("nightly").loops) == 0
        assert client.xpending(Keys("nightly").loops, "workers")["pending"] == 0


def test_an_ended_loop_is_requeued_with_its_iterations_and_spend_going_on(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(
            tmp_path,
            "done",
            fleet.stamps,
            {"print": "FORGE_DONE\n", "report": {"tokens": 100, "tool_calls": 2}},
        )
        assert fleet.submit(batch_of(fleet, {"c1": agent})).code == 0
        fleet.spawn("w1", max_parallel=1)
        assert fleet.wait_all() == [0], fleet.output("w1")
        spent = json.loads(fleet.forge("spend", "c1", "--json").out)["spend"]
        assert spent["iterations"] == 1

        requeued = fleet.forge("fleet", "requeue", "c1", "--reason", "rerun after the fix")
        assert requeued.code == 0, requeued
        assert loop_of(fleet, "c1")["state"] == "queued"

        fleet.spawn("w2", max_parallel=1)
        assert fleet.wait_all()[-1] == 0, fleet.output("w2")
        events = fleet.timeline("c1")
        started = [e["iteration"] for e in events if e["event"] == "iteration.started"]
        assert started == [1, 2]  # the second run goes on from the first's iterations
        [journal] = [e for e in events if e["event"] == "fleet.requeued"]
        assert journal["reason"] == "rerun after the fix"
        after = json.loads(fleet.forge("spend", "c1", "--json").out)["spend"]
        assert after["iterations"] == 2
        assert after["tokens"] == 2 * spent["tokens"]
        every = json.loads(fleet.forge("spend", "--fleet", "--json").out)["spend"]
        assert every["c1"]["iterations"] == 2

        running = fleet.forge("fleet", "requeue", "nope")
        assert running.code == 2
        assert 'no loop for change "nope"' in running.err


def test_a_circuit_reset_on_the_fleet_requeues_the_escalated_loop(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        fixed = tmp_path / "fixed"
        # Fails (exit 3, no progress) until the person's fix lands, then succeeds.
        command = f"test -e {shlex.quote(str(fixed))} && echo FORGE_DONE || exit 3"
        agent = stamping_agent(tmp_path, "flaky", fleet.stamps, {"shell": command})
        extra = [
            "[run]",
            "max_iterations = 2",
            'grace = "0.5s"',
            "[breaker]",
            'on_open = "escalate"',
        ]
        assert fleet.submit(batch_of(fleet, {"c1": agent}, *extra)).code == 0
        fleet.spawn("w1", max_parallel=1)
        assert fleet.wait_all() == [1], fleet.output("w1")
        before = loop_of(fleet, "c1")
        assert before["reason"] == "iterations-exhausted", before

        pointless = fleet.forge("fleet", "requeue", "c1")
        assert pointless.code == 2
        assert "used all 2 of its iterations" in pointless.err
        assert "forge circuit c1 --reset" in pointless.err

        unreasoned = fleet.forge("circuit", "c1", "--reset")
        assert unreasoned.code == 2
        assert "needs --reason" in unreasoned.err

        fixed.write_text("")
        reset = fleet.forge("circuit", "c1", "--reset", "--reason", "fixed the fixture")
        assert reset.code == 0, reset
        assert "Requeued" in reset.out
        assert loop_of(fleet, "c1")["state"] == "queued"
        shown = fleet.forge("circuit", "c1", "--json")
        assert json.loads(shown.out)["circuit"]["state"] == "closed"

        fleet.spawn("w2", max_parallel=1)
        assert fleet.wait_all()[-1] == 0, fleet.output("w2")
        assert loop_of(fleet, "c1")["reason"] == "done"
        resets = [e for e in fleet.timeline("c1") if e["event"] == "breaker.reset"]
        assert resets[0]["breaker"] == "loop circuit"
        assert resets[0]["reason"] == "fixed the fixture"
        assert "@" in resets[0]["by"]


def test_a_circuit_reset_is_refused_while_a_host_runs_the_loop(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(tmp_path, "slow", fleet.stamps, {"hold": LONG_HOLD, "print": "x\n"})
        assert fleet.submit(batch_of(fleet, {"c1": agent})).code == 0
        fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="the agent's first iteration")
        reset = fleet.forge("circuit", "c1", "--reset", "--reason", "now")
        assert reset.code == 2
        assert "running on w1" in reset.err
        assert "Traceback" not in reset.err
        spend_reset = fleet.forge("spend", "c1", "--reset")
        assert spend_reset.code == 2
        assert "running on w1" in spend_reset.err
        assert fleet.forge("fleet", "cancel", "c1").code == 0
        assert fleet.wait_all() == [1]


def test_the_controls_are_refused_from_inside_an_agent(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        answers = tmp_path / "answers"
        forge = shlex.quote(str(FORGE))
        tries = " ; ".join(
            f"{forge} {command} > /dev/null 2>> {shlex.quote(str(answers))}.err; "
            f"echo $? >> {shlex.quote(str(answers))}"
            for command in (
                "fleet cancel c1 --reason mine",
                "fleet requeue c1",
                "circuit c1 --reset --reason mine",
                "spend c1 --reset",
            )
        )
        agent = stamping_agent(
            tmp_path, "sneaky", fleet.stamps, {"shell": tries, "print": "FORGE_DONE\n"}
        )
        assert fleet.submit(batch_of(fleet, {"c1": agent})).code == 0
        fleet.spawn("w1", max_parallel=1)
        assert fleet.wait_all() == [0], fleet.output("w1")
        assert answers.read_text().split() == ["2", "2", "2", "2"]
        said = Path(f"{answers}.err").read_text()
        assert "forge fleet cancel is a person's control" in said
        assert "forge fleet requeue is a person's control" in said
        assert loop_of(fleet, "c1")["reason"] == "done"
        assert "fleet.cancelled" not in [e["event"] for e in fleet.timeline("c1")]


def test_spend_and_circuit_of_a_change_not_in_the_batch_stay_this_host_s(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(tmp_path, "done", fleet.stamps, {"print": "FORGE_DONE\n"})
        assert fleet.submit(batch_of(fleet, {"c1": agent})).code == 0
        local = fleet.forge("spend", "elsewhere")
        assert local.code == 2  # this host's files know no such change either
        assert "Traceback" not in local.err
        named = fleet.forge("spend", "elsewhere", "--fleet")
        assert named.code == 2
        assert 'no loop for change "elsewhere"' in named.err


# An agent that writes a line every 0.05 s while it runs (the machine's clock, and
# its process group: one per run), then one "end" line. Its first iteration holds
# far longer than the test; the next one ends the loop at once.
BEATING_AGENT = """
import os, sys, time
first = os.environ["FORGE_ITERATION"] == "1"
hold = float(sys.argv[2]) if first else 0.3
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
until = time.monotonic() + hold
while True:
    os.write(log, f"{time.time():.6f} {os.getpgid(0)} beat\\n".encode())
    if time.monotonic() >= until:
        break
    time.sleep(0.05)
os.write(log, f"{time.time():.6f} {os.getpgid(0)} end\\n".encode())
print("working" if first else "FORGE_DONE")
"""


def runs_of(beats: Path) -> dict[int, list[tuple[float, str]]]:
    """Each run's lines (by its process group), in the order the runs started."""
    runs: dict[int, list[tuple[float, str]]] = {}
    for line in beats.read_text().splitlines() if beats.exists() else ():
        at, group, what = line.split()
        runs.setdefault(int(group), []).append((float(at), what))
    return runs


@pytest.mark.parametrize("hosts", [2, 1], ids=["another-host", "the-same-host"])
def test_a_loop_requeued_right_after_its_cancel_never_runs_beside_its_cancelled_agent(
    tmp_path: Path, redis_server: RedisServer, hosts: int
) -> None:
    # Another host, or the same one (a free slot), takes the requeued loop: only once
    # the cancelled agent is gone. A long heartbeat: the cancelled host only notices
    # at its next renewal.
    with fleet_of(tmp_path, redis_server, lease="6s", heartbeat="2.5s") as fleet:
        beats = tmp_path / "beats.log"
        script = tmp_path / "beating.py"
        script.write_text(BEATING_AGENT)
        beating = f"{sys.executable} {script} {beats} {LONG_HOLD:g}"
        # c2 keeps the batch live while c1 is cancelled.
        busy = stamping_agent(
            tmp_path, "busy", fleet.stamps, {"hold": 8.0, "print": "FORGE_DONE\n"}
        )
        batch = batch_of(fleet, {"c2": busy})
        # c1 is a repository loop: each host works in its own clone, as on two
        # machines (a dir loop's folder is one on this machine for both hosts).
        bare = tmp_path / "project.git"
        git(tmp_path, "clone", "-q", "--bare", str(git_repo(tmp_path / "origin")), str(bare))
        batch += f'[[loop]]\nchange = "c1"\nrepo = {json.dumps(str(bare))}\n'
        batch += f"cmd = {json.dumps(beating)}\n"
        assert fleet.submit(batch).code == 0
        fleet.spawn("w1", max_parallel=2 if hosts == 2 else 3)
        wait_for(lambda: bool(runs_of(beats)), what="c1's agent under way")
        if hosts == 2:
            fleet.spawn("w2", max_parallel=2)
        wait_for(lambda: loop_of(fleet, "c2")["state"] == "running", what="c2 under way")

        # Right after w1 renewed c1's lease (its next renewal a heartbeat away), a
        # cancel and at once a requeue, as a person's two commands (in this process:
        # without the commands' start-up between them).
        lease = Keys("nightly").lease("c1")
        client = server(fleet)
        wait_for(lambda: client.pttl(lease) > 5_800, what="a renewal of c1's lease")
        connection = Connection(FleetConfig(fleet.server.url, "nightly", 6.0, 2.5, 5.0, 5.0))
        assert cancel(connection, "c1", reason="wrong ticket").was == "running"
        assert requeue(connection, "c1", reason="right ticket after all").requeued
        names = ["w1", "w2"][:hosts]
        assert fleet.wait_all() == [0] * hosts, "".join(map(fleet.output, names))
        runs = list(runs_of(beats).values())
        assert len(runs) == 2, runs
        cancelled, again = runs
        assert "end" not in [what for _at, what in cancelled]  # stopped, not ended
        assert again[-1][1] == "end"
        # The requeued agent started only after the cancelled one had stopped.
        assert max(at for at, _ in cancelled) < min(at for at, _ in again), runs
        for host in names:
            assert "Traceback" not in fleet.output(host), fleet.output(host)
        assert loop_of(fleet, "c1")["reason"] == "done"
