"""``forge policy simulate --sweep``: which value catches a stuck loop earliest, no false trip.

A real supervised batch of fake-agent loops under a cooling-down breaker (one
cooldown, then escalation): one loop spins (no progress at all), one finishes
steadily, one pauses twice then works, one works every third iteration. The
sweep replays the batch once per value of ``stagnation.no_progress``.
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
READING: dict[str, Any] = {"print": "reading\n"}


def cmd(repo: Repo, name: str, steps: list[dict[str, Any]]) -> str:
    script = repo.root.parent / f"{name}.json"
    script.write_text(json.dumps({"steps": steps}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def write(n: int, name: str, *, done: bool = False) -> dict[str, Any]:
    return {
        "print": "FORGE_DONE\n" if done else f"step {n}\n",
        "append": {f"{name}.py": f"# {n}\n"},
    }


LOOPS: dict[str, list[dict[str, Any]]] = {
    "spins": [{"print": "thinking\n"}],
    "finishes": [write(1, "f"), write(2, "f"), write(3, "f", done=True)],
    # Two quiet iterations, then steady work: a tighter no_progress trips it
    # once, and its probe (which works) closes the circuit again.
    "pauses": [READING, READING, write(3, "p"), write(4, "p"), write(5, "p", done=True)],
    # Work every third iteration: a tighter no_progress trips it twice, and the
    # second opening escalates (one cooldown allowed).
    "slow": [READING, READING, write(3, "s"), READING, READING, write(6, "s", done=True)],
}


@pytest.fixture
def batch(repo: Repo) -> str:
    # Each loop in a folder of its own: loops sharing one tree would see each
    # other's edits as their own progress.
    for name in LOOPS:
        repo.write(f"{name}/README.md", f"{name}\n")
    repo.commit("folders")
    tables = "".join(
        f'[[loop]]\nchange = "{name}"\ndir = "{name}"\ncmd = {json.dumps(cmd(repo, name, steps))}\n'
        for name, steps in LOOPS.items()
    )
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[run]\nmax_iterations = 8\n'
        '[rate_limit]\nbackend = "memory"\n'
        '[breaker]\ncooldown = "0.1s"\nmax_opens = 1\n'
        "[stagnation]\nno_progress = 3\n[stagnation.weights]\nno_files_modified = 0\n" + tables,
    )
    live = repo.forge("supervise", "--json")
    assert live.code == 1, live
    summary = json.loads(live.out)
    ended = {loop["change"]: (loop["reason"], loop["iterations"]) for loop in summary["loops"]}
    assert ended == {
        "spins": ("circuit-open", 4),  # tripped at 3, its probe at 4 made no progress
        "finishes": ("done", 3),
        "pauses": ("done", 5),
        "slow": ("done", 6),
    }
    run_id: str = summary["run_id"]
    return run_id


def sweep(repo: Repo, *args: str) -> dict[str, Any]:
    done = repo.forge("policy", "simulate", "--json", "--sweep", *args)
    assert done.code == 0, done
    result: dict[str, Any] = json.loads(done.out)["sweep"]
    return result


def cells(result: dict[str, Any]) -> dict[str, list[str]]:
    """Each change's cells, as the matrix shows them, in the sweep's order."""
    return {row["change"]: [cell["text"] for cell in row["cells"]] for row in result["matrix"]}


def test_the_matrix_says_what_each_loop_did_under_each_value(repo: Repo, batch: str) -> None:
    result = sweep(repo, "stagnation.no_progress=2,3,4")
    assert result["key"] == "stagnation.no_progress"
    # The stuck loop first, then the others in the batch's order.
    assert cells(result) == {
        "spins": ["trip @2", "trip @3", "trip @4"],
        "finishes": ["done", "done", "done"],
        # Tripped at 2, cooled down, its probe worked, then it finished: a cost.
        "pauses": ["recovered — cost one cooldown", "done", "done"],
        # Tripped at 2, and again at 5 after its probe: escalated, never finished.
        "slow": ["false trip @2", "done", "done"],
    }
    assert [row["change"] for row in result["matrix"]] == ["spins", "finishes", "pauses", "slow"]
    assert [row["stuck"] for row in result["matrix"]] == [True, False, False, False]
    values = {value["value"]: value for value in result["values"]}
    assert values["2"]["false_trips"] == ["slow"]
    assert values["2"]["recovered"] == ["pauses"]
    assert values["2"]["cooldowns"] == 1
    assert [values[v]["caught"] for v in ("2", "3", "4")] == [{"spins": n} for n in (2, 3, 4)]
    assert result["best"] == ["3"]
    assert result["verdict"] == (
        "3 catches the stuck loop spins @3 earliest, with no false trip; "
        "2 catches earlier but trips slow, which finished"
    )
    # The file the batch ran with, as a candidate, sweeps the same.
    assert (
        sweep(repo, "stagnation.no_progress=2,3,4", "--policy", "forge.toml")["matrix"]
        == (result["matrix"])
    )
    human = repo.forge("policy", "simulate", "--sweep", "stagnation.no_progress=2,3,4")
    assert human.code == 0, human
    assert human.lines[0].startswith(f"sweep: stagnation.no_progress over run {batch}, 4 change(s)")
    header, *rows = human.lines[1:6]
    assert header.split() == ["change", "recorded", *(f"no_progress={v}" for v in (2, 3, 4))]
    assert rows[0].split() == [
        "spins",
        "circuit-open",
        "@4",
        "trip",
        "@2",
        "trip",
        "@3",
        "trip",
        "@4",
    ]
    assert rows[2].startswith("pauses ")
    assert "recovered — cost one cooldown" in rows[2]
    assert rows[3].split()[:6] == ["slow", "done", "@6", "false", "trip", "@2"]
    assert human.lines[-1] == f"verdict: {result['verdict']}"


def test_the_verdict_says_why_no_value_fits(repo: Repo, batch: str) -> None:
    tight = sweep(repo, "stagnation.no_progress=2")
    assert tight["best"] == []
    assert tight["verdict"] == (
        "no value catches the stuck loops without a false trip: "
        "2 trips slow, which finished in the record"
    )
    loose = sweep(repo, "stagnation.no_progress=5,6")
    assert cells(loose)["spins"] == ["past the record", "past the record"]
    assert loose["best"] == []
    assert loose["verdict"] == (
        "no value without a false trip catches a stuck loop within the recorded iterations "
        "(spins runs past the record under 5 and 6)"
    )


def test_one_change_is_swept_over_its_history(repo: Repo, batch: str) -> None:
    alone = sweep(repo, "stagnation.no_progress=2,3", "--change", "pauses")
    assert cells(alone) == {"pauses": ["recovered — cost one cooldown", "done"]}
    assert alone["verdict"].startswith("no loop was stuck in the record")
    spins = sweep(repo, "stagnation.no_progress=2,3", "--change", "spins")
    assert cells(spins) == {"spins": ["trip @2", "trip @3"]}
    # Alone, the spinner cannot show what 2 does to the loops that finished.
    assert spins["best"] == ["2"]
    assert spins["verdict"].endswith("so none can show a false trip: sweep the whole batch")
    human = repo.forge(
        "policy", "simulate", "--change", "spins", "--sweep", "stagnation.no_progress=2,3"
    )
    assert human.code == 0, human
    assert human.lines[0].startswith('sweep: stagnation.no_progress over change "spins", 1 change')
    # --run and --all name a whole batch: not with one change.
    both = repo.forge(
        "policy", "simulate", "--change", "spins", "--all", "--sweep", "run.max_iterations=2"
    )
    assert both.code == 2, both


def test_a_bad_sweep_names_the_key_or_the_value(repo: Repo) -> None:
    typo = repo.forge("policy", "simulate", "--all", "--sweep", "stagnation.no_progres=2,3")
    assert typo.code == 2, typo
    assert (
        "--sweep stagnation.no_progres=2,3: stagnation.no_progres: unknown key in [stagnation]; "
        "did you mean 'no_progress'?" in typo.err
    ), typo
    assert "hint: stagnation.no_progress takes an integer >= 1 (default 3)" in typo.err, typo
    value = repo.forge("policy", "simulate", "--all", "--sweep", "stagnation.no_progress=2,x,5")
    assert value.code == 2, value
    assert "error: --sweep stagnation.no_progress: 1 of 3 value(s) invalid" in value.err, value
    assert (
        '--sweep stagnation.no_progress=2,x,5: value 2 of 3 ("x"): expected an integer, '
        "got a string ('x')" in value.err
    ), value
    # Every bad value is named, each by its place in the list.
    durations = repo.forge("policy", "simulate", "--all", "--sweep", "breaker.cooldown=30m,x,-5")
    assert durations.code == 2, durations
    assert 'value 2 of 3 ("x"): expected a duration' in durations.err, durations
    assert 'value 3 of 3 ("-5"): expected a duration' in durations.err, durations
    assert 'hint: breaker.cooldown takes a duration like "30m"' in durations.err, durations
    malformed = repo.forge("policy", "simulate", "--all", "--sweep", "no_progress")
    assert malformed.code == 2, malformed
    assert "expected TABLE.KEY=V1,V2,..." in malformed.err, malformed
    # --set in a replay is checked as everywhere else, with its suggestion.
    for scope in (("--all",), ("--change", "spins")):
        setting = repo.forge("policy", "simulate", *scope, "--set", "stagnation.no_progres=2")
        assert setting.code == 2, setting
        assert "did you mean 'no_progress'?" in setting.err, setting
