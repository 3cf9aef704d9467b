"""The fleet end to end: several ``forge fleet work`` processes on one real Redis server."""

from __future__ import annotations

import itertools
import json
import signal
import time
from datetime import datetime
from pathlib import Path

import yaml

from .fleet_support import (
    Fleet,
    fleet_of,
    git,
    git_repo,
    group_members,
    kill_worker,
    most_starts_in_a_window,
    read_stamps,
    stamping_agent,
    wait_for,
)
from .redis_server import RedisServer
from .support import run_forge

# An executor starts some milliseconds after its permit is granted (a process
# to spawn, on a machine that may be busy with other tests); the window is exact
# on the server's grant times, and the executors' own stamps may lag them by up
# to this much. Unlimited, the 12 starts would all fall within about a second.
START_LAG = 1.0


def one_iteration_loops(fleet: Fleet, count: int, *, calls: int, window: str) -> str:
    agent = stamping_agent(fleet.tmp, "done", fleet.stamps, {"print": "FORGE_DONE\n"})
    lines = [
        "[verify]",
        'command = "true"',
        "specs = []",
        "[rate_limit]",
        f"calls = {calls}",
        f'window = "{window}"',
    ]
    for number in range(1, count + 1):
        change = f"c{number:02d}"
        folder = git_repo(fleet.tmp / "loops" / change)
        lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {json.dumps(agent)}")
    return "\n".join(lines) + "\n"


def test_three_workers_share_one_limit_and_run_every_loop_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        submitted = fleet.submit(one_iteration_loops(fleet, 12, calls=5, window="4s"))
        assert submitted.code == 0, submitted
        assert "submitted 12 loop(s)" in submitted.out
        for host in ("w1", "w2", "w3"):
            fleet.spawn(host, max_parallel=3)
        assert fleet.wait_all() == [0, 0, 0], [fleet.output(h) for h in ("w1", "w2", "w3")]

        stamps = read_stamps(fleet.stamps)
        starts = [s for s in stamps if s.what == "start"]
        ends = [s for s in stamps if s.what == "end"]
        # Every loop ran to its end exactly once.
        assert sorted(s.change for s in starts) == [f"c{n:02d}" for n in range(1, 13)]
        assert sorted(s.change for s in ends) == [f"c{n:02d}" for n in range(1, 13)]
        # Never more than 5 starts in any 4 s window, over the three hosts together.
        assert most_starts_in_a_window([s.at for s in starts], 4.0 - START_LAG) <= 5
        assert starts[-1].at - starts[0].at >= 8.0 - START_LAG  # 12 starts: 3 windows

        status = fleet.status()
        assert status["counts"] == {
            "queued": 0,
            "running": 0,
            "waiting": 0,
            "done": 12,
            "escalated": 0,
        }
        hosts = {loop["host"] for loop in status["loops"].values()}
        assert len(hosts) >= 2, hosts  # a host holds at most 3 loops at once
        assert all(info["finished"] for info in status["hosts"].values())
        for change in ("c01", "c12"):
            events = [e["event"] for e in fleet.timeline(change)]
            assert events.count("iteration.started") == 1
            assert events[-1] == "run.stopped"
        # Every host's summary gathers every loop of the batch.
        summary = fleet.output("w1")
        assert all(f"c{n:02d}" in summary for n in range(1, 13))
        # Every host saw the fleet-wide use: the warning at 80%, and the countdown.
        for host in ("w1", "w2", "w3"):
            assert "limiter: warn: rate limit: " in fleet.output(host)
        assert "next permit in" in "".join(fleet.output(h) for h in ("w1", "w2", "w3"))
        shown = fleet.forge("fleet", "status")
        assert shown.code == 0
        counted = "12 loop(s) — 0 queued, 0 running, 0 waiting, 12 done, 0 escalated"
        assert f'fleet "nightly": {counted}' in shown.out
        assert "rate limit: " in shown.out
        assert any(line.startswith("  w2: last heartbeat ") for line in shown.lines)


def test_a_killed_host_s_loops_finish_elsewhere_and_continue(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        report = {"report": {"tokens": 100, "cost_usd": 0.01}}
        agent = stamping_agent(
            tmp_path,
            "slow",
            fleet.stamps,
            {"hold": 0.8, "print": "working\n", **report},
            {"hold": 0.8, "print": "working\n", **report},
            {"hold": 0.8, "print": "working\n", **report},
            {"hold": 0.1, "print": "FORGE_DONE\n", **report},
        )
        lines = [
            "[verify]",
            # Fails once per loop folder: the circuit opens once, then a probe passes.
            'command = "test -f .verified || { touch .verified; exit 1; }"',
            "specs = []",
            "max_failures = 1",
            "[breaker]",
            'cooldown = "0.3s"',
            'cooldown_max = "0.6s"',
            "[rate_limit]",
            "calls = 100",
            'window = "1s"',
        ]
        for change in ("k1", "k2", "k3", "k4"):
            folder = git_repo(tmp_path / "loops" / change)
            lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
            lines += [f"cmd = {json.dumps(agent)}", "max_iterations = 8"]
        assert fleet.submit("\n".join(lines) + "\n").code == 0
        doomed = fleet.spawn("w1", max_parallel=2)
        wait_for(lambda: fleet.output("w1").count("claimed by w1") == 2, what="w1's claims")
        fleet.spawn("w2", max_parallel=2)
        fleet.spawn("w3", max_parallel=2)
        mine = [
            line.split(":")[0]
            for line in fleet.output("w1").splitlines()
            if "claimed by w1" in line
        ]

        def w1_mid_loop() -> bool:
            stamps = read_stamps(fleet.stamps)
            return any(s.change in mine and s.iteration >= 3 and s.what == "start" for s in stamps)

        wait_for(w1_mid_loop, what="w1 in the middle of a loop")
        groups = kill_worker(doomed)  # the worker alone: its executors must die with it
        killed_at = time.time()
        assert groups, "w1 had no executor running"
        wait_for(
            lambda: not any(group_members(g) for g in groups),
            timeout=5,
            what="w1's executors to die with it",
        )
        rest = fleet.workers[1:]
        assert [w.wait(timeout=120) for w in rest] == [0, 0], fleet.output("w2")

        status = fleet.status()
        assert status["counts"]["done"] == 4, status
        for change in mine:
            assert status["loops"][change]["host"] in ("w2", "w3")
        stamps = read_stamps(fleet.stamps)
        # The iterations w1's agents were in when it died were cut short with it:
        # no agent of w1 went on working (and stamping) after the kill.
        w1_started = {
            (s.change, s.iteration) for s in stamps if s.change in mine and s.at <= killed_at
        }
        late_ends = [
            s
            for s in stamps
            if s.what == "end" and s.at > killed_at and (s.change, s.iteration) in w1_started
        ]
        assert not late_ends, late_ends
        export = fleet.forge("fleet", "export", "--to", str(tmp_path / "exported"))
        assert export.code == 0, export
        for change in ("k1", "k2", "k3", "k4"):
            # Never on two hosts at once: each iteration starts after the previous one ended
            # (the one cut short by the kill ended with it).
            intervals = []
            for start in (s for s in stamps if s.change == change and s.what == "start"):
                end = [
                    s.at
                    for s in stamps
                    if s.change == change and s.what == "end" and s.iteration == start.iteration
                ]
                intervals.append((start.at, end[0] if end else killed_at))
            for (_, before_end), (after_start, _) in itertools.pairwise(intervals):
                assert after_start >= before_end, (change, intervals)
            events = fleet.timeline(change)
            started = [e["iteration"] for e in events if e["event"] == "iteration.started"]
            assert started == sorted(set(started)), (change, started)  # continuing, never again
            # The export is the files one machine keeps: forge reads them as its own.
            local = run_forge(["timeline", change, "--json"], cwd=tmp_path / "exported")
            assert json.loads(local.out)["events"] == events
            finished = [e for e in events if e["event"] == "iteration.finished"]
            folder = tmp_path / "exported" / ".forge" / "changes" / change
            spend = yaml.safe_load((folder / "spend.yaml").read_text())
            assert spend["tokens"] == 100 * len(finished), (change, spend, len(finished))
            breaker = yaml.safe_load((folder / "breaker.yaml").read_text())
            # Every opening counted, on whichever host it happened (the first host's
            # opening is not forgotten by the host that took the loop over).
            opened = [e for e in events if e["event"] == "breaker.opened"]
            assert breaker["opens"] == len(opened) >= 1, (change, breaker, len(opened))
            assert breaker["finished"] == "done"
        for change in mine:
            events = fleet.timeline(change)
            first_run = events[: [e["event"] for e in events].index("run.started", 1)]
            assert any(e["event"] == "breaker.opened" for e in first_run)
            runs = [e for e in events if e["event"] == "run.started"]
            assert len(runs) == 2  # the first host's run, then the one that took it over
            # Resumed, not restarted: every iteration the first host started is used
            # (its two loops need not have been at the same iteration when it died).
            started_before = [
                s.iteration
                for s in stamps
                if s.change == change and s.what == "start" and s.at <= killed_at
            ]
            assert runs[1]["plan"]["iterations_used"] >= max(started_before) >= 1
            # An agent w1 spawned just before it died may stamp its start a moment after
            # the kill (its interpreter was still starting); it never ends. The takeover
            # is the first iteration that starts after the kill and runs to its end.
            ended = {(s.iteration, s.at) for s in stamps if s.change == change and s.what == "end"}
            takeover = [
                s
                for s in stamps
                if s.change == change
                and s.what == "start"
                and s.at > killed_at
                and any(i == s.iteration and at > s.at for i, at in ended)
            ]
            # Taken over only once the lease lapsed (renewed every heartbeat until the kill).
            assert takeover[0].at >= killed_at + 2.0 - 0.3 - 0.1
        assert "lease lost" not in fleet.output("w2")


def test_hosts_whose_clocks_are_minutes_apart_change_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        batch = one_iteration_loops(fleet, 6, calls=3, window="2s")
        # Three loops whose verify always fails: each circuit opens, cools down for a
        # second, probes, opens again and escalates, keeping when it last opened.
        agent = stamping_agent(tmp_path, "stuck", fleet.stamps, {"print": "working\n"})
        for change in ("cool1", "cool2", "cool3"):
            folder = git_repo(tmp_path / "loops" / change)
            batch += "\n".join(
                [
                    "[[loop]]",
                    f'change = "{change}"',
                    f"dir = {json.dumps(str(folder))}",
                    f"cmd = {json.dumps(agent)}",
                    "[loop.verify]",
                    'command = "exit 1"',
                    "max_failures = 1",
                    "[loop.breaker]",
                    'cooldown = "1s"',
                    'cooldown_max = "2s"',
                    "max_opens = 1",
                    "",
                ]
            )
        assert fleet.submit(batch).code == 0
        began = time.time()
        for host, skew in (("behind", "-300"), ("true", "0"), ("ahead", "300")):
            fleet.spawn(host, max_parallel=3, extra={"FORGE_CLOCK_SKEW": skew})
        assert fleet.wait_all() == [1, 1, 1]  # the batch did not end all done
        ended = time.time()

        starts = [s for s in read_stamps(fleet.stamps) if s.what == "start"]
        assert most_starts_in_a_window([s.at for s in starts], 2.0 - START_LAG) <= 3
        assert len(starts) == 12  # six loops once, the three stuck ones twice
        status = fleet.status()
        assert status["counts"]["done"] == 6
        assert status["counts"]["escalated"] == 3
        skews = {host: info["clock_skew"] for host, info in status["hosts"].items()}
        assert abs(skews["behind"] + 300) < 5, skews
        assert abs(skews["ahead"] - 300) < 5, skews
        # Each circuit's times are the server's, whichever host's clock ran it: it
        # opened at a true time, events are stamped with true times, and the probe
        # waited its full second of cooldown.
        assert fleet.forge("fleet", "export", "--to", str(tmp_path / "out")).code == 0
        for change in ("cool1", "cool2", "cool3"):
            breaker_file = tmp_path / "out" / ".forge" / "changes" / change / "breaker.yaml"
            breaker = yaml.safe_load(breaker_file.read_text())
            assert breaker["opens"] == 2
            assert breaker["escalated"] is True
            assert began - 1 <= breaker["opened_at"] <= ended + 1, (change, breaker)
            # The spend's time too is the server's, not the skewed host's.
            spend_file = tmp_path / "out" / ".forge" / "changes" / change / "spend.yaml"
            updated = yaml.safe_load(spend_file.read_text())["updated_at"]
            at = datetime.fromisoformat(updated.replace("Z", "+00:00")).timestamp()
            assert began - 1 <= at <= ended + 1, (change, updated)
            for event in fleet.timeline(change):
                at = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
                assert began - 1 <= at <= ended + 1, event
            runs = [s for s in starts if s.change == change]
            assert runs[1].at - runs[0].at >= 1.0


def test_a_server_restart_mid_batch_loses_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="6s", heartbeat="0.4s") as fleet:
        report = {"report": {"tokens": 100}}
        agent = stamping_agent(
            tmp_path,
            "three",
            fleet.stamps,
            {"hold": 0.3, "print": "working\n", **report},
            {"hold": 0.3, "print": "working\n", **report},
            {"hold": 0.1, "print": "FORGE_DONE\n", **report},
        )
        lines = ["[verify]", 'command = "true"', "specs = []"]
        lines += ["[rate_limit]", "calls = 4", 'window = "2s"']
        changes = [f"r{n}" for n in range(1, 7)]
        for change in changes:
            folder = git_repo(tmp_path / "loops" / change)
            lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
            lines.append(f"cmd = {json.dumps(agent)}")
        assert fleet.submit("\n".join(lines) + "\n").code == 0
        fleet.spawn("w1", max_parallel=3)
        fleet.spawn("w2", max_parallel=3)
        wait_for(
            lambda: sum(s.what == "start" for s in read_stamps(fleet.stamps)) >= 5,
            what="the batch under way",
        )
        redis_server.stop(save=True)
        down_at = time.time()
        time.sleep(2.5)
        up_at = time.time()
        redis_server.start()
        assert fleet.wait_all() == [0, 0], fleet.output("w1") + fleet.output("w2")

        starts = [s for s in read_stamps(fleet.stamps) if s.what == "start"]
        # Nothing started while the server was down (a permit granted just before
        # may start its executor a moment later).
        assert not [s for s in starts if down_at + START_LAG < s.at < up_at], starts
        assert len(starts) == 18
        status = fleet.status()
        assert status["counts"]["done"] == 6, status
        assert fleet.forge("fleet", "export", "--to", str(tmp_path / "out")).code == 0
        for change in changes:
            events = fleet.timeline(change)
            started = [e["iteration"] for e in events if e["event"] == "iteration.started"]
            assert started == [1, 2, 3], (change, started)
            spend_file = tmp_path / "out" / ".forge" / "changes" / change / "spend.yaml"
            spent = yaml.safe_load(spend_file.read_text())
            brief = [(e["event"], e.get("iteration"), e.get("run_id"), e["ts"]) for e in events]
            assert spent["tokens"] == 300, (change, spent, brief, down_at, up_at)
        outputs = fleet.output("w1") + fleet.output("w2")
        assert "the Redis server cannot be reached" in outputs
        assert "the Redis server answers again" in outputs
        assert "limiter: unavailable: rate limit: UNAVAILABLE" in outputs
        assert "lease lost" not in outputs  # an outage shorter than a lease stops no loop


def test_repo_loops_are_cloned_and_their_branches_pushed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    origin = git_repo(tmp_path / "origin")
    bare = tmp_path / "project.git"
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(bare))
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(
            tmp_path,
            "commits",
            fleet.stamps,
            {
                "shell": 'echo "$FORGE_CHANGE" > "result-$FORGE_CHANGE.txt" && '
                'git add "result-$FORGE_CHANGE.txt" && git commit -q -m "work on $FORGE_CHANGE"',
                "print": "FORGE_DONE\n",
            },
        )
        lines = ["[verify]", 'command = "true"', "specs = []"]
        for change in ("alpha", "beta"):
            lines += ["[[loop]]", f'change = "{change}"', 'repo = "project.git"']
            lines += ['ref = "HEAD"', "push = true", f"cmd = {json.dumps(agent)}"]
        submitted = fleet.submit("\n".join(lines) + "\n")
        assert submitted.code == 0, submitted
        fleet.spawn("w1", max_parallel=2)
        fleet.spawn("w2", max_parallel=2)
        assert fleet.wait_all() == [0, 0], fleet.output("w1") + fleet.output("w2")

        branches = git(bare, "branch", "--list", "forge/*").split()
        assert branches == ["forge/alpha", "forge/beta"]
        for change in ("alpha", "beta"):
            shown = git(bare, "show", f"forge/{change}:result-{change}.txt")
            assert shown == f"{change}\n"
            log = git(bare, "log", "--format=%s", f"forge/{change}")
            assert log.splitlines() == [f"work on {change}", "initial"]
        assert "pushed forge/" in fleet.output("w1") + fleet.output("w2")


def test_a_paused_host_finds_its_loop_taken_over_and_writes_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        agent = stamping_agent(
            tmp_path,
            "steady",
            fleet.stamps,
            {"hold": 1.0, "print": "working\n"},
            {"hold": 0.3, "print": "working\n"},
            {"hold": 0.1, "print": "FORGE_DONE\n"},
        )
        folder = git_repo(tmp_path / "loops" / "p1")
        batch = "\n".join(
            [
                "[verify]",
                'command = "true"',
                "specs = []",
                "[stagnation]",
                "no_progress = 10",
                "[[loop]]",
                'change = "p1"',
                f"dir = {json.dumps(str(folder))}",
                f"cmd = {json.dumps(agent)}",
            ]
        )
        assert fleet.submit(batch + "\n").code == 0
        paused = fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="w1's first iteration")
        paused.send_signal(signal.SIGSTOP)  # a host that stalls longer than a lease
        try:
            fleet.spawn("w2", max_parallel=1)
            wait_for(lambda: "claimed by w2" in fleet.output("w2"), what="the takeover")
        finally:
            paused.send_signal(signal.SIGCONT)
        assert fleet.wait_all() == [0, 0], fleet.output("w1") + fleet.output("w2")

        assert "lease lost" in fleet.output("w1")
        assert fleet.status()["loops"]["p1"]["host"] == "w2"
        events = fleet.timeline("p1")
        started = [e["iteration"] for e in events if e["event"] == "iteration.started"]
        assert started == sorted(set(started)), started
        finished = [e["iteration"] for e in events if e["event"] == "iteration.finished"]
        # The stalled host's first iteration was never recorded: its write came too late.
        assert 1 not in finished
        assert finished == sorted(set(finished))
        assert [e["event"] for e in events].count("run.stopped") == 1  # only the one that ended


def test_supervise_fleet_works_the_submitted_batch(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server) as fleet:
        assert fleet.submit(one_iteration_loops(fleet, 2, calls=10, window="1s")).code == 0
        worked = fleet.forge("supervise", "--fleet", "--plain")
        assert worked.code == 0, worked
        assert "c01: ended done on" in worked.out
        assert fleet.status()["counts"]["done"] == 2
        # A host that joins a finished batch has nothing to do: it reports the batch.
        late = fleet.forge("fleet", "work", "--json")
        assert late.code == 0, late
        summary = json.loads(late.out)
        assert summary["counts"]["done"] == 2
        assert sorted(summary["loops"]) == ["c01", "c02"]
        refused = fleet.forge("supervise", "--fleet", "--batch", str(tmp_path / "nightly.toml"))
        assert refused.code == 2
        assert "forge fleet submit" in refused.err


def test_a_host_stopped_with_sigterm_gives_its_loops_back_at_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    # A lease far longer than the test: only a loop given back can move this soon.
    with fleet_of(tmp_path, redis_server, lease="60s", heartbeat="0.3s") as fleet:
        agent = stamping_agent(
            tmp_path,
            "long",
            fleet.stamps,
            {"hold": 1.0, "print": "working\n"},
            {"hold": 0.1, "print": "FORGE_DONE\n"},
        )
        folder = git_repo(tmp_path / "loops" / "g1")
        batch = "\n".join(
            [
                "[verify]",
                'command = "true"',
                "specs = []",
                "[[loop]]",
                'change = "g1"',
                f"dir = {json.dumps(str(folder))}",
                f"cmd = {json.dumps(agent)}",
            ]
        )
        assert fleet.submit(batch + "\n").code == 0
        stopping = fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="w1's first iteration")
        stopping.send_signal(signal.SIGTERM)
        assert stopping.wait(timeout=30) == 130
        assert "given back by w1" in fleet.output("w1")
        # Its last heartbeat says so: the status shows no loop running on it.
        stopped = fleet.status()
        assert stopped["hosts"]["w1"]["state"] == "interrupted", stopped["hosts"]
        assert stopped["hosts"]["w1"]["running"] == []
        assert stopped["loops"]["g1"]["state"] == "queued"
        fleet.spawn("w2", max_parallel=1)
        assert fleet.workers[1].wait(timeout=30) == 0, fleet.output("w2")
        status = fleet.status()
        assert status["loops"]["g1"]["host"] == "w2"
        assert status["loops"]["g1"]["reason"] == "done"
        events = fleet.timeline("g1")
        runs = [e for e in events if e["event"] == "run.started"]
        assert runs[1]["plan"]["iterations_used"] == 1  # the interrupted iteration counts


def repo_batch(fleet: Fleet, agent: str, *changes: str) -> str:
    lines = ["[verify]", 'command = "true"', "specs = []"]
    for change in changes:
        lines += ["[[loop]]", f'change = "{change}"', 'repo = "project.git"']
        lines += ['ref = "HEAD"', "push = true", f"cmd = {json.dumps(agent)}"]
    return "\n".join(lines) + "\n"


def bare_remote(tmp_path: Path) -> Path:
    origin = git_repo(tmp_path / "origin")
    bare = tmp_path / "project.git"
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(bare))
    return bare


COMMIT_ITERATION = (
    'echo "$FORGE_ITERATION" >> "work.txt" && git add work.txt && '
    'git commit -q -m "iteration $FORGE_ITERATION"'
)


def test_a_taken_over_repo_loop_keeps_the_dead_host_s_commits(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    bare = bare_remote(tmp_path)
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        step = {"hold": 0.5, "print": "working\n", "shell": COMMIT_ITERATION}
        agent = stamping_agent(
            tmp_path,
            "commits",
            fleet.stamps,
            dict(step),
            dict(step),
            dict(step),
            dict(step),
            {"hold": 0.1, "print": "FORGE_DONE\n", "shell": COMMIT_ITERATION},
        )
        assert fleet.submit(repo_batch(fleet, agent, "r1")).code == 0
        doomed = fleet.spawn("w1", max_parallel=1)
        wait_for(
            lambda: any(s.iteration == 3 and s.what == "start" for s in read_stamps(fleet.stamps)),
            what="w1 in its third iteration",
        )
        kill_worker(doomed)
        fleet.spawn("w2", max_parallel=1)
        assert fleet.workers[1].wait(timeout=120) == 0, fleet.output("w2")

        assert fleet.status()["loops"]["r1"]["host"] == "w2"
        log = git(bare, "log", "--format=%s", "forge/r1").splitlines()
        # The two iterations w1 recorded were pushed as they ended: w2 went on from them
        # (the third, cut short by the kill, was never committed).
        assert log[-3:] == ["iteration 2", "iteration 1", "initial"], log
        assert log[0] == "iteration 5", log
        assert "iteration 3" not in log
        assert "pushed forge/r1" in fleet.output("w2")


def test_a_loop_whose_branch_cannot_be_pushed_is_not_done(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    bare = bare_remote(tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'this remote takes no pushes' >&2\nexit 1\n")
    hook.chmod(0o755)
    with fleet_of(tmp_path, redis_server) as fleet:
        agent = stamping_agent(
            tmp_path, "commits", fleet.stamps, {"print": "FORGE_DONE\n", "shell": COMMIT_ITERATION}
        )
        assert fleet.submit(repo_batch(fleet, agent, "np")).code == 0
        fleet.spawn("w1", max_parallel=1)
        assert fleet.wait_all() == [1], fleet.output("w1")

        loop = fleet.status()["loops"]["np"]
        assert loop["state"] == "escalated", loop
        assert loop["reason"] == "push-failed", loop
        assert "this remote takes no pushes" in loop["detail"], loop
        assert "np  push-failed" in fleet.output("w1")
        assert git(bare, "branch", "--list", "forge/*") == ""


def test_the_lease_is_renewed_while_the_last_push_takes_longer_than_a_lease(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    bare = bare_remote(tmp_path)
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        # Every push waits 3 s on the remote; pushes after iterations are made
        # while the loop runs, the last one after the loop has ended.
        hook = bare / "hooks" / "pre-receive"
        hook.write_text("#!/bin/sh\ncat >/dev/null\nsleep 3\n")
        hook.chmod(0o755)
        agent = stamping_agent(
            tmp_path, "commits", fleet.stamps, {"print": "FORGE_DONE\n", "shell": COMMIT_ITERATION}
        )
        assert fleet.submit(repo_batch(fleet, agent, "slow")).code == 0
        fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="the loop under way")
        fleet.spawn("w2", max_parallel=1)  # ready to take over a lease that lapsed
        assert fleet.wait_all(timeout=180) == [0, 0], fleet.output("w1") + fleet.output("w2")

        loop = fleet.status()["loops"]["slow"]
        assert loop["host"] == "w1", loop
        assert loop["reason"] == "done", loop
        assert len(read_stamps(fleet.stamps)) == 2  # one iteration, run once
        assert "claimed by w2" not in fleet.output("w2")
        assert "lease lost" not in fleet.output("w1")
        assert git(bare, "log", "--format=%s", "forge/slow").splitlines()[0] == "iteration 1"


def test_a_dead_host_is_shown_lost_and_its_loops_waiting_for_takeover(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="2s", heartbeat="0.3s") as fleet:
        agent = stamping_agent(tmp_path, "long", fleet.stamps, {"hold": 60, "print": "working\n"})
        folder = git_repo(tmp_path / "loops" / "d1")
        batch = "\n".join(
            [
                "[verify]",
                'command = "true"',
                "specs = []",
                "[[loop]]",
                'change = "d1"',
                f"dir = {json.dumps(str(folder))}",
                f"cmd = {json.dumps(agent)}",
            ]
        )
        assert fleet.submit(batch + "\n").code == 0
        doomed = fleet.spawn("w1", max_parallel=1)
        wait_for(lambda: bool(read_stamps(fleet.stamps)), what="w1's first iteration")
        alive = fleet.status()
        assert alive["hosts"]["w1"]["state"] == "working"
        assert alive["loops"]["d1"]["state"] == "running"
        kill_worker(doomed)

        def lost() -> bool:
            return bool(fleet.status()["hosts"]["w1"]["state"] == "lost")

        wait_for(lost, timeout=10, what="w1 shown lost")
        status = fleet.status()
        assert status["hosts"]["w1"]["last_heartbeat_ago"] > 2.0
        assert status["loops"]["d1"]["state"] == "waiting", status["loops"]
        assert status["counts"]["running"] == 0
        assert status["counts"]["waiting"] == 1
        shown = fleet.forge("fleet", "status")
        assert "1 loop(s) — 0 queued, 0 running, 1 waiting, 0 done, 0 escalated" in shown.out
        assert "w1: last heartbeat" in shown.out
        assert "LOST (no heartbeat for longer than a lease)" in shown.out
        assert "d1  waiting for takeover" in shown.out
        assert "its host w1 was lost" in shown.out
        # Another host claims it: it runs again, on that host.
        fleet.spawn("w2", max_parallel=1)
        wait_for(lambda: "claimed by w2" in fleet.output("w2"), what="the takeover")
        wait_for(
            lambda: fleet.status()["loops"]["d1"]["state"] == "running",
            timeout=10,
            what="the loop running on w2",
        )
        assert fleet.status()["loops"]["d1"]["host"] == "w2"


def test_a_host_cut_off_from_the_server_stops_its_executor_before_the_lease_runs_out(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    lease, grace = 6.0, 2.0
    with fleet_of(tmp_path, redis_server, lease=f"{lease:g}s", heartbeat="1s") as fleet:
        began, died = tmp_path / "began", tmp_path / "died"
        agent = stamping_agent(
            tmp_path,
            "trapped",
            fleet.stamps,
            {
                "hold": 0,
                "print": "working\n",
                "shell": f"trap 'date +%s.%N > {died}; exit 1' TERM; "
                f"date +%s.%N > {began}; sleep 60 & wait",
            },
        )
        folder = git_repo(tmp_path / "loops" / "s1")
        batch = "\n".join(
            [
                "[run]",
                f'grace = "{grace:g}s"',
                "[verify]",
                'command = "true"',
                "specs = []",
                "[[loop]]",
                'change = "s1"',
                f"dir = {json.dumps(str(folder))}",
                f"cmd = {json.dumps(agent)}",
            ]
        )
        assert fleet.submit(batch + "\n").code == 0
        fleet.spawn("w1", max_parallel=1)
        wait_for(began.exists, what="the executor under way")
        redis_server.stop()
        down_at = time.time()
        # The shell creates the file before `date` writes into it: wait for the time itself.
        wait_for(
            lambda: died.exists() and died.read_text().strip() != "",
            timeout=lease + grace + 5,
            what="the executor stopped",
        )
        stopped_at = float(died.read_text())
        # Its lease was last renewed before the server went: SIGTERM came early enough
        # for the grace to pass (SIGKILL) before the lease could lapse.
        assert stopped_at - down_at <= lease - grace, (stopped_at - down_at, lease - grace)
        wait_for(lambda: "lease lost" in fleet.output("w1"), what="the loop given up")
