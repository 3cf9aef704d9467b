"""Loop-contract verdicts that hold, through the real commands: passes, failed verifies,
goal steps and the next iteration's prompt."""

from __future__ import annotations

import json
from typing import Any

from .support import Repo, failing_policy

START = [
    "loop",
    "start",
    "--change",
    "billing",
    "--goal",
    "Add invoice billing",
    "--scope",
    "billing/",
    "--non-goal",
    "refunds",
    "--rubric",
    "R1: tests pass",
    "--rubric",
    "R2: docs updated",
    "--max-fix-iterations",
    "3",
]
CHECKPOINT = ["checkpoint", "--change", "billing", "--stage"]


def started(repo: Repo, *extra: str) -> None:
    """A contract walked through discover and plan to execute, with a failing verify."""
    failing_policy(repo, max_failures=50)
    assert repo.forge(*START, *extra).code == 0
    for stage, current in (("discovery-complete", "plan"), ("plan-complete", "execute")):
        done = repo.forge(*CHECKPOINT, stage, "--current-stage", current)
        assert done.code == 0, done.err


def verify_fails(repo: Repo) -> None:
    done = repo.forge("verify", "--change", "billing")
    assert done.code == 0, done.err
    assert "Verdict: FAIL" in done.out


def timeline(repo: Repo) -> list[dict[str, Any]]:
    lines = (repo.change_dir("billing") / "timeline.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def passes_begun(repo: Repo) -> list[int | None]:
    return [e.get("iteration") for e in timeline(repo) if e["event"] == "forge.iteration.started"]


def checkpoint_of(repo: Repo) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo.change_dir("billing") / "checkpoint.json").read_text())
    return data


def test_one_forge_iteration_started_per_pass(repo: Repo) -> None:
    started(repo)
    for _ in range(4):  # every major iteration-N, with its rubric statuses
        assert repo.forge(*CHECKPOINT, "iteration-1", "--rubric", "R2=pending").code == 0
    done = repo.forge(*CHECKPOINT, "iteration-1", "--current-stage", "verify")
    assert done.code == 0, done.err
    assert passes_begun(repo) == [1]
    verify_fails(repo)
    failed = repo.forge(*CHECKPOINT, "verify-failed", "--failure", "R1", "--strategy-change", "a")
    assert failed.code == 0, failed.err
    assert "  next pass: iteration-2;" in failed.out
    for _ in range(3):  # the failed verify began pass 2; these report on it
        assert repo.forge(*CHECKPOINT, "iteration-2", "--current-task", "totals").code == 0
    assert passes_begun(repo) == [1, 2]
    assert checkpoint_of(repo)["iteration"] == 2
    over = repo.forge(*CHECKPOINT, "iteration-1")
    assert over.code == 2
    assert "--stage iteration-1: the pass in progress is 2" in over.err
    skipped = repo.forge(*CHECKPOINT, "iteration-4")
    assert skipped.code == 2
    assert "iteration-3 begins the next" in skipped.err
    assert repo.forge(*CHECKPOINT, "iteration-3").code == 0  # the next pass, once
    assert repo.forge(*CHECKPOINT, "iteration-3").code == 0
    assert passes_begun(repo) == [1, 2, 3]


def test_a_failed_verify_under_a_stop_begins_no_pass_until_iteration_n(repo: Repo) -> None:
    started(repo)
    repo.forge(*CHECKPOINT, "iteration-1", "--current-stage", "verify")
    verify_fails(repo)
    blocked = repo.forge(
        *CHECKPOINT, "verify-failed", "--strategy-change", "a", "--blocker", "needs the tax table"
    )
    assert blocked.code == 0, blocked.err
    assert passes_begun(repo) == [1]  # blocked: the fix cannot begin yet
    cleared = repo.forge(*CHECKPOINT, "iteration-2", "--clear-blockers")
    assert cleared.code == 0, cleared.err
    assert passes_begun(repo) == [1, 2]


def test_verify_failed_needs_a_recorded_verify_and_a_new_one_each_time(repo: Repo) -> None:
    started(repo)
    repo.forge(*CHECKPOINT, "iteration-1", "--current-stage", "verify")
    base = [*CHECKPOINT, "verify-failed", "--failure", "R1: fails"]
    never = repo.forge(*base, "--strategy-change", "split totals")
    assert never.code == 2
    assert "verify-failed needs a recorded verify" in never.err
    assert "hint: forge verify --change billing, then record its failure" in never.err
    data = checkpoint_of(repo)
    assert (data["stage"], data["budget"]["used_fix_iterations"]) == ("iteration-1", 0)
    verify_fails(repo)
    assert repo.forge(*base, "--strategy-change", "split totals").code == 0
    assert checkpoint_of(repo)["failed_verify_attempt"] == 1
    again = repo.forge(*base, "--strategy-change", "smaller steps")
    assert again.code == 2
    assert "verify-failed needs a new verify" in again.err
    assert "already counted by the previous verify-failed" in again.err
    assert checkpoint_of(repo)["budget"]["used_fix_iterations"] == 1  # one verify, one spend
    verify_fails(repo)
    assert repo.forge(*base, "--strategy-change", "smaller steps").code == 0
    assert checkpoint_of(repo)["budget"]["used_fix_iterations"] == 2


def test_max_goal_steps_ends_the_loop_with_goal_steps_exhausted(repo: Repo) -> None:
    started(repo, "--route", "goal", "--max-goal-steps", "2")
    first = repo.forge(*CHECKPOINT, "iteration-1", "--current-stage", "verify")
    assert "  goal steps: 1/2 used" in first.lines
    verify_fails(repo)
    assert repo.forge(*CHECKPOINT, "verify-failed", "--strategy-change", "a").code == 0
    assert passes_begun(repo) == [1, 2]
    beyond = repo.forge(*CHECKPOINT, "iteration-3")
    assert beyond.code == 1
    assert "no goal step left: stop condition goal_steps_exhausted" in beyond.err
    assert "used 2 of 2 goal step(s)" in beyond.err
    verify_fails(repo)
    last = repo.forge(*CHECKPOINT, "verify-failed", "--strategy-change", "b")
    assert last.code == 0, last.err
    assert "stop condition: goal_steps_exhausted" in last.out
    data = checkpoint_of(repo)
    assert (data["stop_condition"], data["next_action"]) == ("goal_steps_exhausted", "ask")
    assert data["budget"]["remaining_fix_iterations"] == 1  # the goal steps ran out first
    assert passes_begun(repo) == [1, 2]  # no third step began
    resumed = repo.forge("resume", "--change", "billing")
    assert "  route:       goal, 2/2 goal step(s) used" in resumed.lines
    assert any(
        line.startswith("  stop:        goal_steps_exhausted — no goal step left")
        for line in resumed.lines
    )
    assert "  next action: ask" in resumed.lines
    assert "iterate" not in resumed.out
    verify_fails(repo)
    another = repo.forge(*CHECKPOINT, "verify-failed", "--strategy-change", "c")
    assert another.code == 1
    assert "goal_steps_exhausted" in another.err
    refused = repo.forge(*CHECKPOINT, "iteration-2", "--next-action", "iterate")
    assert refused.code == 2
    assert "contradicts the stop condition goal_steps_exhausted" in refused.err


def test_goal_steps_bound_milestones_too(repo: Repo) -> None:
    started(repo, "--route", "goal", "--max-goal-steps", "1")
    assert repo.forge(*CHECKPOINT, "iteration-1").code == 0
    next_milestone = repo.forge(*CHECKPOINT, "iteration-2")
    assert next_milestone.code == 1
    assert "goal_steps_exhausted" in next_milestone.err
    assert passes_begun(repo) == [1]


def test_the_next_prompt_carries_the_failed_rubric_items(repo: Repo) -> None:
    started(repo)
    repo.forge(
        *CHECKPOINT, "iteration-1", "--current-stage", "verify", "--rubric", 'R2=pass:"docs/b.md"'
    )
    before = json.loads(repo.forge("resume", "--change", "billing", "--json").out)
    assert before["next_prompt"] is None  # no verify failed yet: nothing to fix
    verify_fails(repo)
    failed = repo.forge(
        *CHECKPOINT,
        "verify-failed",
        "--rubric",
        'R1=fail:"pytest: test_invoice_total fails"',
        "--failure",
        "R1: test_invoice_total fails",
        "--strategy-change",
        "split totals from rounding",
    )
    assert failed.code == 0, failed.err
    prompt = json.loads(repo.forge("resume", "--change", "billing", "--json").out)["next_prompt"]
    assert prompt.splitlines() == [
        "Continue the loop for Add invoice billing.",
        "Failed rubric items:",
        "- R1: tests pass — evidence: pytest: test_invoice_total fails",
        "Preserve:",
        "- R2: docs updated — evidence: docs/b.md",
        "Constraints:",
        "- stay within billing/",
        "- do not expand beyond refunds",
        "Strategy change this pass:",
        "- split totals from rounding",
        "Required verification:",
        "- forge verify --change billing",
        "- evidence for every rubric item (ship-ready needs it and the verify's PASS)",
    ]
    human = repo.forge("resume", "--change", "billing").lines
    at = human.index("  next prompt:")
    assert human[at + 1 : at + 4] == [
        "    Continue the loop for Add invoice billing.",
        "    Failed rubric items:",
        "    - R1: tests pass — evidence: pytest: test_invoice_total fails",
    ]
    assert human[at - 1] == "  next action: iterate"


def test_a_failed_verify_that_marks_no_item_carries_every_open_one(repo: Repo) -> None:
    started(repo)
    repo.forge(*CHECKPOINT, "iteration-1", "--current-stage", "verify")
    verify_fails(repo)
    repo.forge(
        *CHECKPOINT, "verify-failed", "--failure", "pytest: 2 failed", "--strategy-change", "a"
    )
    prompt = json.loads(repo.forge("resume", "--change", "billing", "--json").out)["next_prompt"]
    assert "- R1: tests pass — evidence: pytest: 2 failed" in prompt.splitlines()
    assert "- R2: docs updated — evidence: pytest: 2 failed" in prompt.splitlines()
    assert "Preserve:\n- none\n" in prompt
    # Under a stop the loop asks or blocks: no prompt to iterate with.
    repo.forge("event", "--change", "billing", "forge.blocked", "--detail", "no API key")
    data = json.loads(repo.forge("resume", "--change", "billing", "--json").out)
    assert data["next_prompt"] is None
    assert "  next prompt:" not in repo.forge("resume", "--change", "billing").lines
