"""The replay agrees with the live loop where a person stepped in between runs.

A reset starts a change afresh: the iterations are counted again from the
first, and calls a provider refused before it no longer shift the iteration
cap. ``forge policy simulate`` folds the same reset through the same rule, so
its cap falls where the live loop's fell.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from orchestra._engine import EXHAUSTED, replay
from orchestra._policy import load_policy
from orchestra._state import read_timeline

from .support import Repo

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
