"""A live supervised loop and its replay agree: same trips, at the same iterations, same ending.

Each case drives ``forge supervise`` into one kind of trip with the fake
agent, then replays the change's timeline with ``forge policy simulate``
under the same policy. The replay goes through the loop's own decision
function, so every circuit opening (a trip, or a failed probe) and the ending
must come out exactly as they were recorded.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .support import Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def result(**fields: Any) -> str:
    base = {"type": "result", "subtype": "success", "is_error": False, "result": "working"}
    return json.dumps(base | fields) + "\n"


def agent_cmd(repo: Repo, steps: list[dict[str, Any]]) -> str:
    script = repo.root.parent / "steps.json"
    script.write_text(json.dumps({"steps": steps}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def progress(n: int) -> dict[str, Any]:
    return {"print": f"step {n}\n", "append": {"work.py": f"# {n}\n"}}


CASES: dict[str, dict[str, Any]] = {
    "verify": {
        "verify": "exit 1",
        "extra": "[verify]\nmax_failures = 2\n[breaker]\nmax_opens = 1\n",
        "steps": [progress(n) for n in range(1, 8)],
        "ending": "circuit-open",
        "trip": "verify: 2 consecutive failures",
    },
    "budget": {
        "verify": "true",
        "extra": "[budget]\nmax_tokens = 250\n",
        "steps": [{**progress(n), "report": {"tokens": 100}} for n in range(1, 8)],
        "ending": "circuit-open",
        "trip": "budget: 300 tokens spent, ceiling 250",
    },
    "integrity": {
        "verify": "true",
        # The check after the iteration trips: in the sandbox the delete would fail.
        "extra": '[sandbox]\nmode = "off"\n',
        "steps": [progress(1), {"print": "tidying\n", "delete": ["forge.toml"]}],
        "ending": "circuit-open",
        "trip": "integrity:",
    },
    "identical-errors": {
        "verify": "true",
        "extra": "[stagnation]\nidentical_errors = 3\nno_progress = 9\n",
        # One stream only: stdout and stderr interleave differently from run to run.
        "steps": [{"print": "boom: the same error\n", "exit": 1}],
        "ending": "circuit-open",
        "trip": "stagnation: identical-errors (3)",
    },
    "no-progress-then-failed-probe": {
        "verify": "true",
        "extra": "[breaker]\nmax_opens = 2\n",
        "steps": [{"print": "thinking\n"}],
        "ending": "circuit-open",
        "trip": "probe failed: no progress",
    },
    "probe-closes": {
        "verify": "true",
        "extra": "",
        "steps": [
            {"print": "thinking\n"},
            {"print": "thinking\n"},
            {"print": "thinking\n"},
            progress(4),
            {"print": "FORGE_DONE\n"},
        ],
        "ending": "done",
        "trip": "stagnation: no-progress (3)",
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_replay_reaches_the_live_verdicts(repo: Repo, case: str) -> None:
    spec = CASES[case]
    cmd = agent_cmd(repo, spec["steps"])
    repo.write(
        "forge.toml",
        f'[verify]\ncommand = "{spec["verify"]}"\nspecs = []\n'
        '[rate_limit]\nbackend = "memory"\n'
        '[breaker]\ncooldown = "0.01s"\ncooldown_max = "0.02s"\n'
        + spec["extra"]
        + f'[[loop]]\nchange = "c"\ncmd = {json.dumps(cmd)}\nmax_iterations = 8\n',
    )
    # Tables may repeat across the snippets above: merge them as TOML would.
    repo.write("forge.toml", _merge_tables(repo.root / "forge.toml"))
    live = repo.forge("supervise", "--json")
    assert live.code in (0, 1), live
    ending = json.loads(live.out)["loops"][0]["reason"]
    assert ending == spec["ending"], live.out

    replay = json.loads(repo.forge("policy", "simulate", "--change", "c", "--json").out)
    rows = replay["iterations"]
    live_trips = [(r["iteration"], r["live_trip"]) for r in rows if r["live_trip"]]
    replayed = [(r["iteration"], r["would_trip"]) for r in rows if r["would_trip"]]
    assert live_trips, rows
    assert any(reason.startswith(spec["trip"]) for _, reason in live_trips), live_trips
    assert replayed == live_trips
    if ending != "done":
        assert replay["ending"]["reason"] == ending
        assert replay["ending"]["iteration"] == rows[-1]["iteration"]


def test_a_provider_limit_is_replayed_as_not_judged(repo: Repo) -> None:
    limited = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": time.time() - 1},
    }
    script = repo.root.parent / "claude.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {"print": json.dumps(limited) + "\n" + result(is_error=True)},
                    {"print": result(result="FORGE_DONE"), "append": {"work.py": "x\n"}},
                ]
            }
        )
    )
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write("executors/fakeclaude.toml", f'argv = {json.dumps(argv)}\noutput = "claude-json"\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[[loop]]\nchange = "c"\nexecutor = "fakeclaude"\nmax_iterations = 4\n',
    )
    live = repo.forge("supervise", "--json")
    assert live.code == 0, live
    timeline = (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    finished = [json.loads(line) for line in timeline if '"iteration.finished"' in line]
    assert [e["judged"] for e in finished] == [False, True]
    assert not [line for line in timeline if '"breaker.opened"' in line]
    replay = json.loads(repo.forge("policy", "simulate", "--change", "c", "--json").out)
    assert replay["first_trip"] is None
    assert replay["live_first_trip"] is None
    assert replay["ending"]["reason"] == "done"


def _merge_tables(path: Path) -> str:
    """Join repeated ``[table]`` headers of a small generated file into one each."""
    tables: dict[str, list[str]] = {}
    order: list[str] = []
    current = ""
    loops: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("[[loop]]"):
            current = "[[loop]]"
            loops.append(line)
            continue
        if current == "[[loop]]":
            loops.append(line)
            continue
        if line.startswith("["):
            current = line
            if current not in tables:
                tables[current] = []
                order.append(current)
            continue
        tables[current].append(line)
    parts = [f"{name}\n" + "\n".join(tables[name]) for name in order]
    return "\n".join(parts) + "\n" + "\n".join(loops) + "\n"
