"""A project laid out for Ralph-style loops runs under the default policy.

``.ralph/`` and ``.ralphrc`` may be updated but never deleted, and the checked
boxes of ``.ralph/fix_plan.md`` count as tasks completed. Real ``forge
supervise`` and ``forge run`` with the fake agent, in a scratch git repository.
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
PLAN = "- [ ] parse the totals\n- [ ] print the report\n"


# The agents here delete what must exist, to test the check after the
# iteration: the sandbox would refuse the delete outright (tests/test_sandbox_e2e.py).
NO_SANDBOX = '[sandbox]\nmode = "off"\n'


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", '[verify]\ncommand = ""\n' + NO_SANDBOX)
    repo.write(".ralph/fix_plan.md", PLAN)
    repo.write(".ralph/PROMPT.md", "work through the plan\n")
    repo.write(".ralphrc", "MAX_CALLS=100\n")
    repo.commit("a Ralph layout")
    return repo


def _loop(repo: Repo, change: str, *steps: dict[str, Any], iterations: int = 3) -> None:
    script = repo.root.parent / f"{change}.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))} {shlex.quote(str(script))}"
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\n\n[rate_limit]\nbackend = "memory"\n\n' + NO_SANDBOX + "\n"
        f'[[loop]]\nchange = "{change}"\ncmd = {json.dumps(cmd)}\n'
        f"max_iterations = {iterations}\n",
    )
    repo.commit("a loop")


def _events(repo: Repo, change: str, name: str) -> list[dict[str, Any]]:
    lines = (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def test_an_agent_checking_a_box_in_the_fix_plan_is_progress_not_harm(project: Repo) -> None:
    _loop(
        project,
        "plan",
        {
            "write": {".ralph/fix_plan.md": "- [x] parse the totals\n- [ ] print the report\n"},
            "append": {".ralphrc": "MAX_CALLS=50\n"},
        },
        {
            "write": {".ralph/fix_plan.md": "- [x] parse the totals\n- [x] print the report\n"},
            "print": "FORGE_DONE\n",
        },
    )
    done = project.forge("supervise", "--plain")
    assert done.code == 0, done.out + done.err
    assert _events(project, "plan", "protect.violation") == []
    finished = _events(project, "plan", "iteration.finished")
    assert [e["integrity"] for e in finished] == [[], []]
    assert [e["trip"] for e in finished] == [None, None]
    assert [e["signals"]["tasks_completed"] for e in finished] == [1, 1]
    # The agent's updates stand.
    assert (project.root / ".ralph/fix_plan.md").read_text().count("- [x]") == 2
    assert (project.root / ".ralphrc").read_text().endswith("MAX_CALLS=50\n")


def test_deleting_the_fix_plan_is_restored_and_trips_integrity(project: Repo) -> None:
    _loop(project, "wipe", {"delete": [".ralph/fix_plan.md"]})
    done = project.forge("supervise", "--plain")
    assert done.code == 1, done.out + done.err
    [opened] = _events(project, "wipe", "breaker.opened")
    assert opened["reason"].startswith(
        "integrity: .ralph/fix_plan.md deleted (protected: exist) — restored"
    )
    assert opened["evidence"]["condition"] == "integrity"
    assert (project.root / ".ralph/fix_plan.md").read_text() == PLAN


def test_forge_run_lets_the_agent_update_ralph_files_but_not_delete_them(project: Repo) -> None:
    script = project.root.parent / "run.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {"append": {".ralph/fix_plan.md": "- [x] a found task\n"}},
                    {"delete": [".ralphrc"]},
                ]
            }
        )
    )
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))} {shlex.quote(str(script))}"
    done = project.forge("run", "--yes", "--change", "r", "--cmd", cmd, "--max-iterations", "3")
    assert done.code == 1, done.out + done.err
    assert "run: STOPPED after 2 iteration(s) — gate-open" in done.lines
    assert "  gate:   integrity" in done.lines
    detail = next(line for line in done.lines if line.startswith("  detail: "))
    assert ".ralphrc deleted (protected: exist) — restored" in detail
    assert (project.root / ".ralphrc").read_text() == "MAX_CALLS=100\n"
    assert (project.root / ".ralph/fix_plan.md").read_text().endswith("- [x] a found task\n")
