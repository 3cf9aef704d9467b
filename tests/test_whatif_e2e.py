"""What-if over a whole batch: a real supervised batch replayed under other policies.

Four fake-agent loops run under ``forge supervise``: one finishes, one spins
(no progress), one repeats the same error, one works slowly (progress every
other iteration, then done). ``forge policy simulate --run`` then replays the
batch through the loop's own decision function.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from .support import Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def cmd(repo: Repo, name: str, steps: list[dict[str, Any]]) -> str:
    script = repo.root.parent / f"{name}.json"
    script.write_text(json.dumps({"steps": steps}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def write(n: int, name: str) -> dict[str, Any]:
    return {"print": f"step {n}\n", "append": {f"{name}.py": f"# {n}\n"}}


@pytest.fixture
def batch(repo: Repo) -> dict[str, Any]:
    loops = {
        "finishes": [write(1, "f"), write(2, "f"), {"print": "FORGE_DONE\n"}],
        "spins": [{"print": "thinking\n"}],
        "errors": [{**write(1, "e"), "print": "boom: the same error\n", "exit": 1}],
        "slow": [
            {"print": "reading\n"},
            {"print": "reading\n"},
            write(3, "s"),
            {"print": "reading\n"},
            {**write(5, "s"), "print": "FORGE_DONE\n"},
        ],
    }
    # Each loop in a folder of its own: loops sharing one tree would see each
    # other's edits as their own progress.
    for name in loops:
        repo.write(f"{name}/README.md", f"{name}\n")
    repo.commit("folders")
    tables = "".join(
        f'[[loop]]\nchange = "{name}"\ndir = "{name}"\ncmd = {json.dumps(cmd(repo, name, steps))}\n'
        for name, steps in loops.items()
    )
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[run]\nmax_iterations = 6\n'
        '[rate_limit]\nbackend = "memory"\n[breaker]\non_open = "escalate"\n'
        "[stagnation]\nno_progress = 3\nidentical_errors = 3\n"
        "[stagnation.weights]\nno_files_modified = 0\n" + tables,
    )
    live = repo.forge("supervise", "--json")
    assert live.code == 1, live
    summary = json.loads(live.out)
    return {loop["change"]: loop for loop in summary["loops"]} | {"run_id": summary["run_id"]}


def simulate(repo: Repo, *args: str) -> dict[str, Any]:
    done = repo.forge("policy", "simulate", "--json", *args)
    assert done.code == 0, done
    data: dict[str, Any] = json.loads(done.out)
    return data


def by_change(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["change"]: row for row in result["changes"]}


def test_the_same_policy_reproduces_every_outcome(repo: Repo, batch: dict[str, Any]) -> None:
    assert {name: batch[name]["reason"] for name in ("finishes", "spins", "errors", "slow")} == {
        "finishes": "done",
        "spins": "circuit-open",
        "errors": "circuit-open",
        "slow": "done",
    }
    result = simulate(repo, "--run", batch["run_id"])
    rows = by_change(result)
    assert set(rows) == {"finishes", "spins", "errors", "slow"}
    for name, row in rows.items():
        assert row["moved"] is False, row
        assert row["ending_now"] == row["ending_then"], row
        assert row["ending_then"]["reason"] == batch[name]["reason"]
        assert row["iterations_now"] == row["iterations_then"] == batch[name]["iterations"]
    assert rows["spins"]["first_trip_then"] == {
        "iteration": 3,
        "reason": "stagnation: no-progress (3)",
    }
    assert rows["errors"]["first_trip_now"]["reason"].startswith("stagnation: identical-errors")
    assert result["totals"]["iterations_saved"] == 0
    # The latest run is the default.
    assert simulate(repo)["run_id"] == batch["run_id"]


def test_a_tighter_policy_moves_the_spinner_earlier_and_trips_the_slow_worker(
    repo: Repo, batch: dict[str, Any]
) -> None:
    result = simulate(repo, "--set", "stagnation.no_progress=2")
    rows = by_change(result)
    assert rows["spins"]["ending_now"] == {"iteration": 2, "reason": "circuit-open"}
    assert rows["spins"]["iterations_saved"] == 1
    assert rows["slow"]["ending_now"] == {"iteration": 2, "reason": "circuit-open"}
    assert rows["slow"]["false_trip"] is True  # done in reality, stopped by the candidate
    assert rows["slow"]["iterations_saved"] == 3
    assert rows["finishes"]["moved"] is False
    assert rows["errors"]["moved"] is False
    # The moved changes come first, then the totals add up.
    assert [row["moved"] for row in result["changes"]] == [True, True, False, False]
    assert result["totals"] == {
        "changes": 4,
        "moved": 2,
        "false_trips": 1,
        "iterations_then": 14,
        "iterations_now": 10,
        "iterations_saved": 4,
        "tokens_saved": 0,
        "cost_saved": 0.0,
    }


def test_a_looser_policy_lets_the_spinner_run_past_the_record(
    repo: Repo, batch: dict[str, Any]
) -> None:
    rows = by_change(simulate(repo, "--set", "stagnation.no_progress=5"))
    assert rows["spins"]["ending_now"] is None  # nothing recorded says how it would end
    assert rows["spins"]["first_trip_now"] is None
    assert rows["spins"]["moved"] is True
    assert rows["errors"]["moved"] is False


def test_a_sweep_gives_a_cell_per_change_and_value(repo: Repo, batch: dict[str, Any]) -> None:
    sweep = simulate(repo, "--sweep", "stagnation.no_progress=2,3,5")["sweep"]
    assert sweep["key"] == "stagnation.no_progress"
    cells = {row["change"]: [cell["text"] for cell in row["cells"]] for row in sweep["matrix"]}
    assert cells == {
        "spins": ["trip @2", "trip @3", "past the record"],
        "errors": ["trip @3", "trip @3", "trip @3"],
        "finishes": ["done", "done", "done"],
        "slow": ["false trip @2", "done", "done"],  # the breaker escalates: no cooldown
    }
    values = {value["value"]: value for value in sweep["values"]}
    assert values["2"]["false_trips"] == ["slow"]
    assert values["3"]["false_trips"] == []
    assert values["2"]["iterations_saved"] == 4
    assert values["3"]["stopped"] == ["errors", "spins"]
    assert values["5"]["caught"] == {"errors": 3}
    assert sweep["best"] == ["3"]
    assert sweep["verdict"] == (
        "3 catches the 2 stuck loops (spins @3, errors @3) earliest, with no false trip; "
        "2 catches earlier but trips slow, which finished"
    )
    human = repo.forge("policy", "simulate", "--sweep", "stagnation.no_progress=2,3,5")
    assert human.code == 0
    assert human.lines[0].startswith("sweep: stagnation.no_progress over run ")
    slow = next(line for line in human.lines if line.startswith("slow "))
    assert slow.split() == ["slow", "done", "@5", "false", "trip", "@2", "done", "done"]
    assert human.lines[-1] == f"verdict: {sweep['verdict']}"


def test_batch_flags_are_checked(repo: Repo, batch: dict[str, Any]) -> None:
    assert repo.forge("policy", "simulate", "--run", "20990101T000000Z-0000").code == 2
    assert repo.forge("policy", "simulate", "--sweep", "no_progress").code == 2
    assert repo.forge("policy", "simulate", "--change", "spins", "--all").code == 2
    assert repo.forge("policy", "simulate", "--change", "spins", "--run").code == 2
    everything = simulate(repo, "--all")
    assert everything["run_id"] is None
    assert {row["change"] for row in everything["changes"]} == {
        "finishes",
        "spins",
        "errors",
        "slow",
    }


def test_a_forge_run_history_replays_with_its_hook_verdicts(repo: Repo) -> None:
    # The agent's Stop hook runs the verify breaker during each iteration: the
    # breaker opens at iteration 2 and forge run stops on it, as a gate.
    from .support import FORGE

    repo.write(
        "forge.toml",
        '[verify]\ncommand = "exit 1"\nspecs = []\nmax_failures = 2\n'
        '[rate_limit]\nbackend = "memory"\n'
        # The agent's Stop hook records only outside the sandbox.
        '[sandbox]\nmode = "off"\n',
    )
    stop = f"echo '{{}}' | {FORGE} hook stop --change c > /dev/null 2>&1"
    hook = {**write(1, "w"), "shell": stop}
    done = repo.forge("run", "--yes", "--change", "c", "--cmd", cmd(repo, "hooked", [hook]))
    assert "run: STOPPED after 2 iteration(s) — gate-open" in done.lines, done
    same = by_change(simulate(repo, "--all"))["c"]
    assert same["moved"] is False, same
    assert same["ending_now"] == same["ending_then"] == {"iteration": 2, "reason": "gate-open"}
    tighter = by_change(simulate(repo, "--all", "--set", "verify.max_failures=1"))["c"]
    assert tighter["ending_now"] == {"iteration": 1, "reason": "gate-open"}
    assert tighter["iterations_saved"] == 1


def test_the_batch_file_itself_moves_nothing_with_loop_overrides(repo: Repo) -> None:
    # Two loops whose own [[loop]] tables override the batch's policy: the
    # spinner trips at 2 (not the file's 4), the worker runs past the file's cap.
    steps = {
        "spins": [{"print": "thinking\n"}],
        "works": [write(n, "w") for n in range(1, 5)] + [{"print": "FORGE_DONE\n"}],
    }
    for name in steps:
        repo.write(f"{name}/README.md", f"{name}\n")
    repo.commit("folders")
    spins, works = (json.dumps(cmd(repo, name, steps[name])) for name in ("spins", "works"))
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[run]\nmax_iterations = 3\n'
        '[rate_limit]\nbackend = "memory"\n[breaker]\non_open = "escalate"\n'
        "[stagnation]\nno_progress = 4\n[stagnation.weights]\nno_files_modified = 0\n"
        f'[[loop]]\nchange = "spins"\ndir = "spins"\ncmd = {spins}\n'
        "[loop.stagnation]\nno_progress = 2\n"
        f'[[loop]]\nchange = "works"\ndir = "works"\ncmd = {works}\n'
        "max_iterations = 6\n",
    )
    live = repo.forge("supervise", "--json")
    assert live.code == 1, live
    ended = {loop["change"]: loop for loop in json.loads(live.out)["loops"]}
    assert ended["spins"]["reason"] == "circuit-open"
    assert ended["works"]["reason"] == "done"
    for candidate in (("--policy", "forge.toml"), ()):
        rows = by_change(simulate(repo, *candidate))
        for name in ("spins", "works"):
            assert rows[name]["moved"] is False, (candidate, rows[name])
            assert rows[name]["iterations_now"] == ended[name]["iterations"], rows[name]
    # A shipped policy by name is a candidate too (its own thresholds, no loop tables).
    shipped = simulate(repo, "--policy", "default")
    assert set(by_change(shipped)) == {"spins", "works"}
