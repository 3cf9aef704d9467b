"""``forge pause`` / ``forge resume`` / ``forge stop`` of one fleet loop, end to end.

Real ``forge fleet work`` hosts on a real server, fake-agent loops. A loop's
first iteration holds on a FIFO until the test lets it go, so a control is
given while that iteration runs; the server (each change's timeline stream,
the batch's status) says when the loop holds, goes on or ends.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from orchestra._fleet import Keys

from .fleet_support import Fleet, fleet_of, git, git_repo, kill_worker, wait_for
from .redis_server import RedisServer
from .support import FAKE_AGENT, FORGE


def _batch(fleet: Fleet, loops: dict[str, str]) -> str:
    lines = ["[verify]", 'command = "true"', "specs = []", "[stagnation]", "no_progress = 10"]
    for change, agent in loops.items():
        folder = git_repo(fleet.tmp / "loops" / change)
        lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {json.dumps(agent)}")
    return "\n".join(lines) + "\n"


def _agent(folder: Path, change: str, steps: list[dict[str, Any]]) -> str:
    script = folder / f"{change}.json"
    script.write_text(json.dumps({"steps": steps}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


class _Held:
    """A loop whose first iteration says it started, then waits to be let go."""

    def __init__(
        self, folder: Path, change: str, iterations: int, *, done_each: bool = False
    ) -> None:
        self.folder, self.change = folder, change
        self.started, self.go = folder / f"{change}.started", folder / f"{change}.go"
        os.mkfifo(self.started)
        os.mkfifo(self.go)
        hold = (
            f"echo up > {shlex.quote(str(self.started))}; read word < {shlex.quote(str(self.go))}"
        )
        steps: list[dict[str, Any]] = [{"shell": hold, "write": {"1.txt": "1\n"}}]
        for number in range(2, iterations + 1):
            ran = {str(folder / f"{change}.ran"): f"{number}\n"}
            steps.append({"write": {f"{number}.txt": f"{number}\n"}, "append": ran})
        for step in steps if done_each else steps[-1:]:
            step["print"] = "FORGE_DONE\n"
        self.cmd = _agent(folder, change, steps)

    def wait_started(self) -> None:
        with open(self.started, encoding="utf-8") as fifo:
            assert fifo.read() == "up\n"

    def let_go(self) -> None:
        with open(self.go, "w", encoding="utf-8") as fifo:
            fifo.write("go\n")

    def ran(self) -> list[str]:
        """The iterations after the first that the agent ran, in order."""
        ran = self.folder / f"{self.change}.ran"
        return ran.read_text().split() if ran.exists() else []

    def release(self) -> None:
        """Let the agent go if the test failed before it did (never blocks)."""
        for fifo in (self.go, self.started):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue  # no reader: nothing waits on it
            os.write(fd, b"go\n")
            os.close(fd)


@contextmanager
def _releasing(*held: _Held) -> Iterator[None]:
    try:
        yield
    finally:
        for one in held:
            one.release()


def _quick(folder: Path, change: str, iterations: int, first: str = "") -> str:
    """An agent that is done at ``iterations``; ``first`` runs as its first step's shell."""
    steps: list[dict[str, Any]] = [
        {"write": {f"{n}.txt": f"{n}\n"}} for n in range(1, iterations + 1)
    ]
    if first:
        steps[0]["shell"] = first
    steps[-1]["print"] = "FORGE_DONE\n"
    return _agent(folder, change, steps)


def _server(fleet: Fleet) -> redis.Redis:
    return redis.Redis.from_url(fleet.server.url, decode_responses=True)


def _kinds_on_server(client: redis.Redis, change: str) -> list[str]:
    """The change's timeline event names, read straight from its stream (cheap to poll)."""
    entries: Any = client.xrange(Keys("nightly").timeline(change), "-", "+")
    return [json.loads(data["event"])["event"] for _id, data in entries]


def _loop(client: redis.Redis, change: str) -> dict[str, Any]:
    text = client.hget(Keys("nightly").status, change)
    return {} if text is None else dict(json.loads(text))


def _ended(client: redis.Redis, change: str) -> bool:
    return _loop(client, change).get("state") in ("done", "escalated")


def test_pause_holds_one_fleet_loop_while_the_others_finish_and_resume_lets_it_go_on(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    billing = _Held(tmp_path, "billing", 3)
    loops = {
        "billing": billing.cmd,
        "search": _quick(tmp_path, "search", 2),
        "docs": _quick(tmp_path, "docs", 2),
    }
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing):
        assert fleet.submit(_batch(fleet, loops)).code == 0
        fleet.spawn("w1", max_parallel=3)
        client = _server(fleet)
        billing.wait_started()

        paused = fleet.forge("pause", "billing", "--fleet", "--reason", "reviewing its migration")
        assert paused.code == 0, paused
        assert 'pause: "billing" (fleet "nightly") holds before its next iteration' in paused.out
        again = fleet.forge("pause", "billing", "--fleet", "--reason", "a second look")
        assert again.code == 0, again
        assert 'pause: "billing" is already paused by ' in again.out
        assert "reviewing its migration" in again.out

        billing.let_go()
        wait_for(
            lambda: "loop.paused" in _kinds_on_server(client, "billing"),
            what="billing to hold before iteration 2",
        )
        # The others go on, and end, while billing holds.
        wait_for(
            lambda: _ended(client, "search") and _ended(client, "docs"),
            what="search and docs to end",
        )
        loops_now = fleet.status()["loops"]
        assert loops_now["search"]["reason"] == "done"
        assert loops_now["docs"]["reason"] == "done"
        assert loops_now["billing"]["state"] == "running"
        assert loops_now["billing"]["paused"]["reason"] == "reviewing its migration"
        shown = fleet.forge("fleet", "status")
        [line] = [line for line in shown.out.splitlines() if "paused by a person (" in line]
        assert "reviewing its migration — forge resume billing --fleet lets it go on" in line
        assert billing.ran() == []
        assert _kinds_on_server(client, "billing")[-1] == "loop.paused"

        resumed = fleet.forge("resume", "billing", "--fleet", "--reason", "looks right")
        assert resumed.code == 0, resumed
        assert 'resume: "billing" (fleet "nightly") goes on (paused by ' in resumed.out
        assert fleet.wait_all() == [0], fleet.output("w1")

    assert billing.ran() == ["2", "3"]
    assert _loop(client, "billing")["reason"] == "done"
    assert json.loads(client.hget(Keys("nightly").change("billing"), "controls") or "{}") == {}
    events = fleet.timeline("billing")
    kinds = [e["event"] for e in events]
    assert kinds.count("control.paused") == 1  # the second pause changed nothing
    order = ["control.paused", "loop.paused", "control.resumed", "loop.resumed"]
    assert [kind for kind in kinds if kind in order] == order
    [pause] = [e for e in events if e["event"] == "control.paused"]
    assert pause["reason"] == "reviewing its migration"
    assert "@" in pause["by"]
    [held] = [e for e in events if e["event"] == "loop.paused"]
    assert held["iteration"] == 2
    assert "reviewing its migration" in held["why"]
    [resume] = [e for e in events if e["event"] == "control.resumed"]
    assert resume["reason"] == "looks right"
    assert resume["held"].endswith(": reviewing its migration")
    [went_on] = [e for e in events if e["event"] == "loop.resumed"]
    assert went_on["iteration"] == 2
    assert went_on["waited"] > 0
    # Iteration 2 started only after the loop was let go.
    assert (
        kinds.index("loop.resumed")
        < [i for i, e in enumerate(events) if e["event"] == "iteration.started"][1]
    )
    for other in ("search", "docs"):
        assert "loop.paused" not in _kinds_on_server(client, other)
    nothing = fleet.forge("resume", "billing", "--fleet")
    assert nothing.code == 0, nothing
    assert 'resume: "billing" (fleet "nightly") is not paused: nothing to resume' in nothing.out


def test_stop_ends_one_running_fleet_loop_after_its_iteration_and_the_others_go_on(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    billing = _Held(tmp_path, "billing", 3)
    search = _Held(tmp_path, "search", 2)
    loops = {"billing": billing.cmd, "search": search.cmd, "docs": _quick(tmp_path, "docs", 1)}
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing, search):
        assert fleet.submit(_batch(fleet, loops)).code == 0
        # Two at a time: billing and search run, docs waits in the queue.
        fleet.spawn("w1", max_parallel=2)
        client = _server(fleet)
        billing.wait_started()
        search.wait_started()

        queued = fleet.forge("stop", "docs", "--fleet")
        assert queued.code == 0, queued
        assert 'stop: "docs" (fleet "nightly") is queued, not running: nothing to stop' in (
            queued.out
        )
        assert "forge fleet cancel docs" in queued.out

        stopped = fleet.forge(
            "stop", "billing", "--fleet", "--reason", "superseded by refunds", "--json"
        )
        assert stopped.code == 0, stopped
        document = json.loads(stopped.out)
        assert (document["control"], document["changed"]) == ("stopped", True)
        # The current iteration finishes; then the loop ends, stopped.
        billing.let_go()
        wait_for(lambda: _ended(client, "billing"), what="billing to end")
        assert _loop(client, "search")["state"] == "running"  # the others go on
        search.let_go()
        assert fleet.wait_all() == [1], fleet.output("w1")  # one loop did not end done

    assert billing.ran() == []  # its one iteration, then nothing
    loops_now = fleet.status()["loops"]
    assert (loops_now["billing"]["state"], loops_now["billing"]["reason"]) == (
        "escalated",
        "stopped",
    )
    assert "superseded by refunds" in loops_now["billing"]["detail"]
    assert loops_now["search"]["reason"] == "done"
    assert loops_now["docs"]["reason"] == "done"
    events = fleet.timeline("billing")
    [asked] = [e for e in events if e["event"] == "control.stop"]
    assert asked["reason"] == "superseded by refunds"
    [ending] = [e for e in events if e["event"] == "run.stopped"]
    assert ending["reason"] == "stopped"
    assert ending["iterations"] == 1
    assert ending["detail"].startswith("stopped by ")
    assert ending["detail"].endswith(": superseded by refunds")
    # The stop was taken as the loop obeyed it: nothing is left to stop a later run.
    assert json.loads(client.hget(Keys("nightly").change("billing"), "controls") or "{}") == {}

    again = fleet.forge("stop", "billing", "--fleet")
    assert again.code == 0, again
    assert 'stop: "billing" (fleet "nightly") is escalated, not running: nothing to stop' in (
        again.out
    )

    # Requeued, the loop goes on where it stopped and ends done.
    requeued = fleet.forge("fleet", "requeue", "billing", "--reason", "refunds fell through")
    assert requeued.code == 0, requeued
    fleet.spawn("w2", max_parallel=1)
    assert fleet.wait_all()[-1] == 0, fleet.output("w2")
    assert billing.ran() == ["2", "3"]
    assert _loop(client, "billing")["reason"] == "done"


def test_pause_resume_and_stop_are_refused_from_inside_an_agent(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    answers = tmp_path / "answers"
    forge = shlex.quote(str(FORGE))
    tries = " ; ".join(
        f"{forge} {command} > /dev/null 2>> {shlex.quote(str(answers))}.err; "
        f"echo $? >> {shlex.quote(str(answers))}"
        for command in (
            "pause search --fleet --reason mine",
            "stop search --fleet",
            "resume search --fleet",
            "stop docs --fleet",
        )
    )
    # search holds its first iteration while docs tries the controls on it and on itself.
    docs = _quick(tmp_path, "docs", 1, first=tries)
    search = _Held(tmp_path, "search", 2)
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(search):
        assert fleet.submit(_batch(fleet, {"search": search.cmd, "docs": docs})).code == 0
        fleet.spawn("w1", max_parallel=2)
        client = _server(fleet)
        search.wait_started()
        wait_for(lambda: _ended(client, "docs"), what="docs to end")
        search.let_go()
        assert fleet.wait_all() == [0], fleet.output("w1")

    assert answers.read_text().split() == ["2", "2", "2", "2"]
    said = Path(f"{answers}.err").read_text()
    assert "forge pause is a person's control" in said
    assert "forge stop is a person's control" in said
    assert "forge resume is a person's control" in said
    for change in ("search", "docs"):
        assert client.hget(Keys("nightly").change(change), "controls") is None
        assert _loop(client, change)["reason"] == "done"
        kinds = set(_kinds_on_server(client, change))
        assert not {"control.paused", "control.stop", "control.resumed", "loop.paused"} & kinds
    assert search.ran() == ["2"]
    # Each refusal is recorded on the server, on the timeline of the loop whose agent tried.
    refused = [e for e in fleet.timeline("docs") if e["event"] == "control.refused"]
    assert [e["command"] for e in refused] == [
        "forge pause",
        "forge stop",
        "forge resume",
        "forge stop",
    ]


def test_a_stop_while_the_host_readies_the_loop_is_obeyed_before_its_first_iteration(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The status says running from the claim on: a stop then is meant for this run."""
    # The host's clone of the loop's repository holds until the test lets it go.
    started, go = tmp_path / "clone.started", tmp_path / "clone.go"
    os.mkfifo(started)
    os.mkfifo(go)
    tools = tmp_path / "bin"
    tools.mkdir()
    real_git = shutil.which("git")
    assert real_git is not None
    wrapper = tools / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = clone ]; then echo up > {shlex.quote(str(started))}; '
        f"read word < {shlex.quote(str(go))}; fi\n"
        f'exec {shlex.quote(real_git)} "$@"\n'
    )
    wrapper.chmod(0o755)
    agent = _quick(tmp_path, "billing", 2)
    with fleet_of(tmp_path, redis_server) as fleet:
        bare = tmp_path / "project.git"
        git(tmp_path, "clone", "-q", "--bare", str(git_repo(tmp_path / "origin")), str(bare))
        batch = _batch(fleet, {})
        batch += f'[[loop]]\nchange = "billing"\nrepo = {json.dumps(str(bare))}\n'
        batch += f"cmd = {json.dumps(agent)}\n"
        assert fleet.submit(batch).code == 0
        path = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"
        fleet.spawn("w1", max_parallel=1, extra={"PATH": path})
        client = _server(fleet)
        try:
            with open(started, encoding="utf-8") as fifo:
                assert fifo.read() == "up\n"
            assert _loop(client, "billing")["state"] == "running"
            stopped = fleet.forge("stop", "billing", "--fleet", "--reason", "wrong repo")
            assert stopped.code == 0, stopped
            assert "stops after its current iteration" in stopped.out
        finally:
            with open(go, "w", encoding="utf-8") as fifo:
                fifo.write("go\n")
        assert fleet.wait_all() == [1], fleet.output("w1")

    loop = _loop(client, "billing")
    assert (loop["state"], loop["reason"]) == ("escalated", "stopped"), loop
    assert "wrong repo" in loop["detail"]
    kinds = _kinds_on_server(client, "billing")
    assert "iteration.started" not in kinds
    assert kinds[-1] == "run.stopped"


def test_a_stop_of_a_loop_whose_host_was_lost_is_obeyed_by_the_host_that_takes_it_over(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    billing = _Held(tmp_path, "billing", 2)
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing):
        assert fleet.submit(_batch(fleet, {"billing": billing.cmd})).code == 0
        lost = fleet.spawn("w1", max_parallel=1)
        client = _server(fleet)
        billing.wait_started()
        kill_worker(lost)  # as the OOM killer would: its lease lapses, nobody ends the run
        stopped = fleet.forge("stop", "billing", "--fleet", "--reason", "host gone, drop it")
        assert stopped.code == 0, stopped
        assert "stops after its current iteration" in stopped.out
        fleet.spawn("w2", max_parallel=1)
        assert fleet.wait_all()[-1] == 1, fleet.output("w2")
        assert "billing: claimed by w2" in fleet.output("w2")

    loop = _loop(client, "billing")
    assert (loop["state"], loop["reason"], loop["host"]) == ("escalated", "stopped", "w2"), loop
    assert "host gone, drop it" in loop["detail"]
    assert billing.ran() == []  # w2 ran no iteration of it
    kinds = _kinds_on_server(client, "billing")
    assert kinds.count("iteration.started") == 1  # w1's, cut short
    assert kinds[-1] == "run.stopped"


def test_a_stop_the_run_never_took_is_dropped_by_a_requeue(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A stop asked during the loop's last iteration: it ends done; a requeue runs it again."""
    billing = _Held(tmp_path, "billing", 2, done_each=True)
    controls = Keys("nightly").change("billing")
    with fleet_of(tmp_path, redis_server) as fleet, _releasing(billing):
        assert fleet.submit(_batch(fleet, {"billing": billing.cmd})).code == 0
        fleet.spawn("w1", max_parallel=1)
        client = _server(fleet)
        billing.wait_started()
        assert fleet.forge("stop", "billing", "--fleet").code == 0
        billing.let_go()
        assert fleet.wait_all() == [0], fleet.output("w1")
        assert _loop(client, "billing")["reason"] == "done"
        assert "stop" in json.loads(client.hget(controls, "controls") or "{}")

        paused = fleet.forge("pause", "billing", "--fleet", "--reason", "one more look")
        assert paused.code == 0, paused
        requeued = fleet.forge("fleet", "requeue", "billing")
        assert requeued.code == 0, requeued
        left = json.loads(client.hget(controls, "controls") or "{}")
        assert "stop" not in left
        assert left["paused"]["reason"] == "one more look"  # a pause stands for the next run
        assert fleet.forge("resume", "billing", "--fleet").code == 0
        fleet.spawn("w2", max_parallel=1)
        assert fleet.wait_all()[-1] == 0, fleet.output("w2")

    assert billing.ran() == ["2"]
    assert _loop(client, "billing")["reason"] == "done"
