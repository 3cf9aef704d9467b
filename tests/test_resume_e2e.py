"""Resuming an escalated loop: the report's own resume commands clear what holds it.

A loop escalated by its verify streak is held twice, by its loop circuit and
by the verify breaker. `forge circuit C --reset` clears both (journalling
each reset with the person's reason), so the commands the report prints are
the ones that resume the loop, and the resumed loop does not re-escalate in
its first iteration.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from .support import Completed, Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
REASON = "a person looked at it"


def escalating_loop(repo: Repo, verify: str, *, budget: str = "", tokens: int = 0) -> None:
    script = repo.root.parent / "agent.json"
    step: dict[str, object] = {"append": {"work.txt": "x\n"}}
    if tokens:
        step["report"] = {"tokens": tokens}  # and never done: the budget stops it
    else:
        step["print"] = "FORGE_DONE\n"
    script.write_text(json.dumps({"steps": [step]}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        f"[verify]\ncommand = {json.dumps(verify)}\nspecs = []\nmax_failures = 2\n"
        f'[breaker]\non_open = "escalate"\n{budget}\n'
        f'[[loop]]\nchange = "c"\ncmd = {json.dumps(cmd)}\nmax_iterations = 6\n',
    )
    repo.commit("the loop")


def resume_commands(repo: Repo) -> list[str]:
    """The commands `forge report` gives for loop c, checked against its Markdown page."""
    reported = repo.forge("report", "--json")
    assert reported.code == 0, reported
    document = json.loads(reported.out)
    [loop] = document["loops"]
    assert loop["escalated"] is True
    commands: list[str] = loop["resume"]
    page = Path(document["markdown"]).read_text(encoding="utf-8")
    for command in commands:
        assert f"\n{command}\n" in page, command  # the page shows the same steps
    return commands


def run_commands(repo: Repo, commands: list[str]) -> list[Completed]:
    """Run the report's commands as a person would, with a reason for WHY."""
    done = []
    for command in commands:
        words = shlex.split(command.replace("WHY", shlex.quote(REASON)))
        assert words[0] == "forge", command
        done.append(repo.forge(*words[1:]))
    return done


def supervised_loop(completed: Completed) -> dict[str, object]:
    [loop] = json.loads(completed.out)["loops"]
    assert isinstance(loop, dict)
    return loop


def test_the_reports_resume_commands_resume_a_loop_its_verify_escalated(repo: Repo) -> None:
    escalating_loop(repo, "test -f fixed.txt")
    first = repo.forge("supervise")
    assert first.code == 1, first
    assert "verify: 2 consecutive failures" in first.out
    commands = resume_commands(repo)
    assert commands == [
        "forge timeline c",
        "forge circuit c --reset --reason WHY",
        "forge supervise --only c",
    ]
    repo.write("fixed.txt", "the person's fix\n")
    repo.commit("the fix")
    *clearing, rerun = run_commands(repo, [*commands[:-1], f"{commands[-1]} --json"])
    assert all(step.code == 0 for step in clearing), clearing
    reset = clearing[-1].lines
    assert reset[0].startswith('Circuit: reset for change "c" — was open')
    assert reset[0].endswith(f"Reason: {REASON}")
    assert reset[1] == (
        'Breaker: reset for change "c" — cleared an OPEN circuit after 2 consecutive failures.'
    )
    assert rerun.code == 0, rerun
    loop = supervised_loop(rerun)
    assert loop["reason"] == "done"
    assert loop["iterations"] == 1
    # Both resets are journalled with the person's reason.
    timeline = (repo.change_dir("c") / "timeline.jsonl").read_text(encoding="utf-8")
    events = [json.loads(line) for line in timeline.splitlines()]
    resets = [(e["breaker"], e["reason"]) for e in events if e["event"] == "breaker.reset"]
    assert resets == [("loop circuit", REASON), ("verify", REASON)]


def test_a_resumed_loop_does_not_re_escalate_in_its_first_iteration(repo: Repo) -> None:
    escalating_loop(repo, "test -f fixed.txt")
    assert repo.forge("supervise").code == 1
    reset = repo.forge("circuit", "c", "--reset", "--reason", REASON)
    assert reset.code == 0, reset
    status = repo.forge("status")
    assert "0/2 consecutive failures, breaker closed" in status.out, status.out
    # Nothing was fixed: the verify streak builds again from 0, so the loop
    # runs two iterations before it escalates, not none.
    again = repo.forge("supervise", "--json")
    assert again.code == 1, again
    loop = supervised_loop(again)
    assert loop["reason"] == "circuit-open"
    assert loop["iterations"] == 2


def test_a_spent_budget_is_named_and_the_reports_steps_grant_it(repo: Repo) -> None:
    escalating_loop(
        repo,
        "true",
        budget="[budget]\nmax_tokens = 100\n",
        tokens=500,
    )
    assert repo.forge("supervise").code == 1
    commands = resume_commands(repo)
    assert commands == [
        "forge timeline c",
        "forge spend c --reset",
        "forge circuit c --reset --reason WHY",
        "forge supervise --only c",
    ]
    # The circuit's reset alone says what still holds the loop, and how to clear it.
    alone = repo.forge("circuit", "c", "--reset", "--reason", REASON)
    assert alone.code == 1, alone
    assert alone.lines[-1] == (
        "Still held: spend budget (500 tokens spent, ceiling 100) — "
        "clear it with: forge spend c --reset"
    )
    *clearing, rerun = run_commands(repo, [*commands[:-1], f"{commands[-1]} --json"])
    assert all(step.code == 0 for step in clearing), clearing
    assert not any("Still held" in step.out for step in clearing)
    assert rerun.code == 1, rerun  # the agent spends past its ceiling again ...
    assert supervised_loop(rerun)["iterations"] == 1  # ... but only after an iteration


def test_a_loops_own_budget_is_the_one_named_as_still_holding_it(repo: Repo) -> None:
    # The ceiling is the loop's own ([loop.budget]); the project sets none.
    escalating_loop(repo, "true", tokens=500)
    toml = repo.root / "forge.toml"
    toml.write_text(toml.read_text() + "[loop.budget]\nmax_tokens = 100\n")
    repo.commit("the loop's own budget")
    assert repo.forge("supervise").code == 1
    alone = repo.forge("circuit", "c", "--reset", "--reason", REASON)
    assert alone.code == 1, alone
    assert alone.lines[-1] == (
        "Still held: spend budget (500 tokens spent, ceiling 100) — "
        "clear it with: forge spend c --reset"
    )
    spend = repo.forge("spend", "c")
    assert "  tokens:     500 (ceiling 100)" in spend.lines, spend
