"""``forge policy simulate`` replays a live supervised run, trip for trip."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from .support import Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def spinning_loop(repo: Repo) -> None:
    script = repo.root.parent / "spin.json"
    steps: list[dict[str, Any]] = [
        {"print": "edited\n", "write": {"a.py": "1"}},
        {"print": "thinking\n"},
        {"print": "thinking\n"},
        {"print": "thinking\n"},
        {"print": "thinking\n"},
        {"print": "thinking\n"},
    ]
    script.write_text(json.dumps({"steps": steps}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "spin"\ncmd = {json.dumps(cmd)}\nmax_iterations = 6\n'
        '[loop.breaker]\ncooldown = "0.1s"\nmax_opens = 1\n',
    )


def test_simulate_reproduces_the_live_trip_and_moves_it(repo: Repo) -> None:
    spinning_loop(repo)
    live = repo.forge("supervise")
    assert live.code == 1, live
    opened = [
        json.loads(line)
        for line in (repo.change_dir("spin") / "timeline.jsonl").read_text().splitlines()
        if '"breaker.opened"' in line
    ]
    # 1 (one file) - 3 - 3 (nothing modified) = -5 over the window of 3.
    assert opened[0]["reason"] == "stagnation: score (-5 over 3)"
    assert opened[0]["evidence"] == {
        "condition": "stagnation",
        "detector": "score",
        "scores": [1, -3, -3],
    }

    same = json.loads(repo.forge("policy", "simulate", "--change", "spin", "--json").out)
    assert same["first_trip"] == {"iteration": 3, "reason": "stagnation: score (-5 over 3)"}
    assert same["live_first_trip"] == same["first_trip"]
    assert [row["score"] for row in same["iterations"]][:4] == [1, -3, -3, -3]

    human = repo.forge("policy", "simulate", "--change", "spin")
    assert "first trip: iteration 3 — stagnation: score (-5 over 3)" in human.lines
    assert "live run:   iteration 3 — stagnation: score (-5 over 3) (the same)" in human.lines

    moved = json.loads(
        repo.forge(
            "policy",
            "simulate",
            "--change",
            "spin",
            "--json",
            "--set",
            "stagnation.window=5",
        ).out
    )
    # A longer window leaves it to no-progress: iterations 2, 3 and 4 changed nothing.
    assert moved["first_trip"] == {"iteration": 4, "reason": "stagnation: no-progress (3)"}

    other = repo.write("strict.toml", "[stagnation]\nno_progress = 2\n")
    stricter = json.loads(
        repo.forge("policy", "simulate", "--change", "spin", "--json", "--policy", str(other)).out
    )
    assert stricter["first_trip"] == {"iteration": 3, "reason": "stagnation: no-progress (2)"}


def test_simulate_a_change_without_recorded_signals(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    assert repo.forge("verify", "--change", "nothing").code == 0  # begun, never iterated
    done = repo.forge("policy", "simulate", "--change", "nothing")
    assert done.code == 0, done.err
    assert "nothing to replay" in done.out
    bad = repo.forge("policy", "simulate", "--change", "nothing", "--set", "stagnation.window=0")
    assert bad.code == 2
    assert "stagnation.window" in bad.err
    # A change with no state at all is a typo, as for every command.
    unknown = repo.forge("policy", "simulate", "--change", "nothin")
    assert unknown.code == 2
    assert 'no change "nothin"' in unknown.err


def test_a_probe_with_progress_closes_and_the_simulator_agrees(repo: Repo) -> None:
    script = repo.root.parent / "recover.json"
    steps: list[dict[str, Any]] = [
        {"print": "thinking\n"},
        {"print": "thinking\n"},
        {"print": "thinking\n"},
        {"print": "fixed it\n", "write": {"a.py": "1"}},
        {"print": "FORGE_DONE\n"},
    ]
    script.write_text(json.dumps({"steps": steps}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "spin"\ncmd = {json.dumps(cmd)}\nmax_iterations = 6\n'
        '[loop.breaker]\ncooldown = "0.1s"\n',
    )
    live = repo.forge("supervise")
    assert live.code == 0, live.out  # tripped, probed with progress, closed, then done
    kinds = [
        json.loads(line)["event"]
        for line in (repo.change_dir("spin") / "timeline.jsonl").read_text().splitlines()
        if '"breaker.' in line
    ]
    assert kinds == ["breaker.opened", "breaker.half_open", "breaker.closed"]
    replay = json.loads(repo.forge("policy", "simulate", "--change", "spin", "--json").out)
    trips = [
        (row["iteration"], row["would_trip"]) for row in replay["iterations"] if row["would_trip"]
    ]
    assert trips == [(3, "stagnation: no-progress (3)")]  # the probe and the done are not trips
    assert replay["first_trip"] == replay["live_first_trip"]
