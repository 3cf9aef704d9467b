"""The replay agrees with the live loop where a person stepped in between runs.

A reset starts a change afresh: the iterations are counted again from the
first, and calls a provider refused before it no longer shift the iteration
cap. ``forge policy simulate`` folds the same reset through the same rule, so
its cap falls where the live loop's fell.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from orchestra._engine import CIRCUIT_OPEN, EXHAUSTED, PROVIDER_LIMIT, replay
from orchestra._policy import AlertsPolicy, RunPolicy, load_policy
from orchestra._ratelimit import MemoryBackend, RateLimiter
from orchestra._state import read_timeline

from .conftest import check_replay
from .support import SUPERVISED, Repo
from .test_monitoring_e2e import quiet_policy, work
from .test_supervised_loop import agent, supervise_one, timeline

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def _result(**fields: Any) -> str:
    base = {"type": "result", "subtype": "success", "is_error": False, "result": "working"}
    return json.dumps(base | fields) + "\n"


def _progress(n: int) -> dict[str, Any]:
    return {"print": _result(result=f"step {n}"), "append": {"work.py": f"# {n}\n"}}


def _refused() -> dict[str, Any]:
    # A reset time already past: the loop does not wait for it.
    limited = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": time.time() - 1},
    }
    return {"print": json.dumps(limited) + "\n" + _result(is_error=True)}


def test_the_iteration_cap_after_a_reset_that_followed_refusals(repo: Repo) -> None:
    script = repo.root.parent / "claude.json"
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write("executors/fakeclaude.toml", f'argv = {json.dumps(argv)}\noutput = "claude-json"\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[run]\nmax_iterations = 3\n[[loop]]\nchange = "c"\nexecutor = "fakeclaude"\n',
    )
    # First run: one refused call, then three iterations that use the cap.
    script.write_text(json.dumps({"steps": [_refused(), *(_progress(n) for n in range(2, 6))]}))
    first = repo.forge("supervise", "--json")
    assert first.code == 1, first
    assert json.loads(first.out)["loops"][0]["reason"] == EXHAUSTED
    reset = repo.forge("circuit", "c", "--reset", "--reason", "reviewed")
    assert reset.code == 0, reset
    # After the reset: three iterations, no refusal; the cap falls at the third.
    script.write_text(json.dumps({"steps": [_progress(n) for n in range(1, 6)]}))
    second = repo.forge("supervise", "--json")
    assert second.code == 1, second
    loop = json.loads(second.out)["loops"][0]
    assert loop["reason"] == EXHAUSTED

    policy = load_policy(repo.root / "forge.toml", root=repo.root).policy
    events = read_timeline(repo.change_dir("c") / "timeline.jsonl").typed()
    replayed = replay(events, policy)
    endings = [
        (step.record.iteration, step.ending.reason)
        for step in replayed.steps
        if step.ending is not None
    ]
    # Each run's cap where the live loop's fell: the refused call before the reset
    # shifts the first run's cap, not the second's.
    assert endings == [(4, EXHAUSTED), (3, EXHAUSTED)], endings
    assert replayed.not_run == 0


async def test_the_replay_raises_and_clears_the_live_alerts_calls_remaining_included(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    limiter = RateLimiter(MemoryBackend(trio.current_time), 5, 3600.0, 0.8, clock=trio.current_time)
    policy = attrs.evolve(
        quiet_policy(),
        run=RunPolicy(max_iterations=8),
        alerts=AlertsPolicy(no_tasks=3),
    )
    (tmp_path / "tasks.md").write_text("- [ ] the task\n")
    steps = [work(1), work(2), work(3), work(4, task=True), *(work(n) for n in range(5, 9))]
    cmd = agent(tmp_path, *steps)
    await supervise_one(tmp_path, mock_clock, policy, cmd, limiter=limiter)
    events = timeline(tmp_path)
    live_raised = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.raised"]
    live_cleared = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.cleared"]
    assert (5, "calls-remaining") in live_raised, live_raised
    assert (3, "no-tasks") in live_raised, live_raised

    replayed = replay(read_timeline(tmp_path / ".forge/changes/c/timeline.jsonl").typed(), policy)
    raised = [(s.record.iteration, name) for s in replayed.steps for name in s.raised]
    cleared = [(s.record.iteration, name) for s in replayed.steps for name in s.cleared]
    assert raised == live_raised
    assert cleared == live_cleared
    # The risk each iteration recorded is the one the replay reaches.
    live_risk = [e["risk"] for e in events if e["event"] == "iteration.finished"]
    assert [s.risk for s in replayed.steps] == live_risk


def test_a_batch_file_run_replays_under_the_batchs_own_layering(repo: Repo, tmp_path: Path) -> None:
    # The project's policy lets an idle loop spin; the batch file tightens the
    # detectors and its loop table escalates at the first trip.
    idle = shlex.join([sys.executable, str(FAKE_AGENT), str(tmp_path / "idle.json")])
    (tmp_path / "idle.json").write_text(json.dumps({"steps": [{"print": "hmm\n"}]}))
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        "[run]\nmax_iterations = 6\n[stagnation]\nno_progress = 5\n",
    )
    batch = tmp_path / "nightly.toml"
    batch.write_text(
        "[stagnation]\nno_progress = 2\n"
        f'[[loop]]\nchange = "spins"\ncmd = {json.dumps(idle)}\n'
        'max_iterations = 4\n[loop.breaker]\non_open = "escalate"\n'
    )
    done = repo.forge("supervise", "--batch", str(batch), "--json")
    assert done.code == 1, done
    [loop] = json.loads(done.out)["loops"]
    assert (loop["reason"], loop["iterations"]) == (CIRCUIT_OPEN, 2), loop
    [supervised] = [run for run in SUPERVISED if "--batch" in run.args]
    # Under the project's policy alone the loop would have spun on: the layering matters ...
    alone = repo.forge("policy", "simulate", "--run", str(supervised.run_id), "--json")
    assert alone.code == 0, alone
    [row] = json.loads(alone.out)["changes"]
    assert row["moved"], row
    assert row["ending_now"] is None, row  # it would run past the record
    # ... and under the batch's own it moves nothing (as the autouse check asserts too).
    check_replay(supervised)


def _idle(n: int) -> dict[str, Any]:
    return {"print": _result(result=f"thinking {n}")}


def _live_verdicts(events: list[dict[str, Any]]) -> list[tuple[str, int, bool, str | None]]:
    """Each recorded iteration: its run, its number, whether it was judged, its trip."""
    return [
        (e["run_id"], e["iteration"], e["judged"], e["trip"])
        for e in events
        if e["event"] == "iteration.finished"
    ]


def _live_stops(events: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [
        (e["run_id"], e["reason"], e["iterations"]) for e in events if e["event"] == "run.stopped"
    ]


def test_supervised_then_a_forge_run_with_refusals_then_supervised_again(repo: Repo) -> None:
    """Each kind of run counts the refused calls as live does, and the replay agrees.

    A supervised loop goes on counting its iterations (and the calls refused
    among them) from its earlier supervised runs; ``forge run`` counts its own
    from the first, and its refusals shift no supervised run's cap.
    """
    script = repo.root.parent / "claude.json"
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write("executors/fakeclaude.toml", f'argv = {json.dumps(argv)}\noutput = "claude-json"\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[run]\nexecutor = "fakeclaude"\nmax_iterations = 4\nmax_refusals = 1\n'
        '[[loop]]\nchange = "c"\nexecutor = "fakeclaude"\n',
    )
    repo.commit("policy")
    # 1. Supervised: one iteration of work, then two refusals in a row (more than
    #    max_refusals): it stops at 3 with one iteration counted, two calls refused.
    script.write_text(json.dumps({"steps": [_progress(1), _refused(), _refused()]}))
    first = repo.forge("supervise", "--json")
    assert first.code == 1, first
    assert json.loads(first.out)["loops"][0]["reason"] == PROVIDER_LIMIT
    # 2. forge run of the same change: its own iterations from 1, three refusals among them.
    script.write_text(json.dumps({"steps": [_refused(), _progress(2), _refused(), _refused()]}))
    run = repo.forge("run", "--change", "c", "--yes", "--json")
    assert run.code == 1, run
    assert json.loads(run.out)["refused_calls"] == 3, run.out
    # 3. Supervised again: iterations 4 on; the cap counts the two calls its own
    #    earlier run had refused, not the forge run's three: it falls at 6.
    script.write_text(json.dumps({"steps": [*(_progress(n) for n in range(1, 9))]}))
    third = repo.forge("supervise", "--json")
    assert third.code == 1, third
    loop = json.loads(third.out)["loops"][0]
    assert (loop["reason"], loop["iterations"]) == (EXHAUSTED, 6), loop

    text = (repo.change_dir("c") / "timeline.jsonl").read_text()
    events = [json.loads(line) for line in text.splitlines()]
    policy = load_policy(repo.root / "forge.toml", root=repo.root).policy
    replayed = replay(read_timeline(repo.change_dir("c") / "timeline.jsonl").typed(), policy)
    steps = [step for step in replayed.steps if step.ran]
    assert replayed.not_run == 0
    assert [
        (s.record.run_id, s.record.iteration, s.judged, s.would_open) for s in steps
    ] == _live_verdicts(events)
    endings = [(s.record.run_id, s.ending.reason, s.record.iteration) for s in steps if s.ending]
    assert endings == _live_stops(events)


def test_a_forge_run_between_supervised_runs_leaves_the_detectors_streak_as_live(
    repo: Repo,
) -> None:
    """A forge run measures no signals: the next supervised run's streak starts on its own.

    A restarted loop's detectors look back on the timeline's measured iterations
    (since the circuit last opened); the replay takes up the same history at
    each new run, so it trips where the live loop tripped.
    """
    script = repo.root.parent / "claude.json"
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write("executors/fakeclaude.toml", f'argv = {json.dumps(argv)}\noutput = "claude-json"\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[run]\nexecutor = "fakeclaude"\nmax_iterations = 6\nmax_refusals = 1\n'
        '[stagnation]\nno_progress = 2\n[breaker]\non_open = "escalate"\n'
        '[[loop]]\nchange = "c"\nexecutor = "fakeclaude"\n',
    )
    repo.commit("policy")
    script.write_text(json.dumps({"steps": [_progress(1), _refused(), _refused()]}))
    assert repo.forge("supervise").code == 1
    # forge run: an idle iteration, then refusals until it stops.
    script.write_text(json.dumps({"steps": [_idle(1), _refused(), _refused()]}))
    assert repo.forge("run", "--change", "c", "--yes").code == 1
    # Supervised again: the forge run's idle iteration measured nothing, so the
    # streak of two idle iterations is this run's own, 4 and 5.
    script.write_text(json.dumps({"steps": [_idle(n) for n in range(1, 9)]}))
    third = repo.forge("supervise", "--json")
    assert third.code == 1, third
    loop = json.loads(third.out)["loops"][0]
    assert (loop["reason"], loop["iterations"]) == (CIRCUIT_OPEN, 5), loop

    text = (repo.change_dir("c") / "timeline.jsonl").read_text()
    events = [json.loads(line) for line in text.splitlines()]
    policy = load_policy(repo.root / "forge.toml", root=repo.root).policy
    replayed = replay(read_timeline(repo.change_dir("c") / "timeline.jsonl").typed(), policy)
    steps = [step for step in replayed.steps if step.ran]
    assert [
        (s.record.run_id, s.record.iteration, s.judged, s.would_open) for s in steps
    ] == _live_verdicts(events)
    endings = [(s.record.run_id, s.ending.reason, s.record.iteration) for s in steps if s.ending]
    assert endings == _live_stops(events)
