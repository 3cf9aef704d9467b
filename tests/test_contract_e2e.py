"""The loop contract through the real commands: start, checkpoint, event, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .support import FORGE, Repo, failing_policy, forge_env

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
    "2",
]


def to_verify(repo: Repo) -> None:
    """Walk a fresh contract through discover, plan and execute to verify."""
    for stage, current in (
        ("discovery-complete", "plan"),
        ("plan-complete", "execute"),
        ("iteration-1", "verify"),
    ):
        done = repo.forge(
            "checkpoint", "--change", "billing", "--stage", stage, "--current-stage", current
        )
        assert done.code == 0, done.err


def verify_fails(repo: Repo) -> None:
    """One ``forge verify --change billing`` that fails (the breaker stays closed)."""
    if not (repo.root / "forge.toml").exists():
        failing_policy(repo, max_failures=50)
    done = repo.forge("verify", "--change", "billing")
    assert done.code == 0, done.err
    assert "Verdict: FAIL" in done.out


def checkpoint_of(repo: Repo) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo.change_dir("billing") / "checkpoint.json").read_text())
    return data


def events_of(repo: Repo) -> list[str]:
    lines = (repo.change_dir("billing") / "timeline.jsonl").read_text().splitlines()
    return [json.loads(line)["event"] for line in lines]


def test_start_writes_the_checkpoint_schema_and_the_trace(repo: Repo) -> None:
    repo.write("PLAN.md", "# Plan\n\n- [ ] invoices\n\n## Notes\nkeep it small\n")
    done = repo.forge(*START, "--plan", "PLAN.md")
    assert done.code == 0, done.err
    data = checkpoint_of(repo)
    assert list(data)[:7] == [
        "stage",
        "mode",
        "goal",
        "scope",
        "non_goals",
        "rubric",
        "budget",
    ]
    assert (data["stage"], data["mode"], data["current_stage"]) == (
        "loop-start",
        "loop",
        "discover",
    )
    assert data["rubric"][0] == {
        "id": "R1",
        "text": "tests pass",
        "status": "pending",
        "evidence": None,
    }
    assert data["budget"] == {
        "max_fix_iterations": 2,
        "used_fix_iterations": 0,
        "remaining_fix_iterations": 2,
    }
    for key in ("discovery", "current_task", "next_action", "last_failure", "strategy_change"):
        assert key in data
    assert data["blockers"] == []
    assert data["residual_risks"] == []
    assert "route" not in data  # the Goal route's fields appear only on that route
    assert events_of(repo) == ["forge.loop.started"]
    plan = (repo.root / "PLAN.md").read_text().splitlines()
    trace = plan.index("## Loop Trace")
    assert plan[trace + 1].endswith(
        " — loop-start — loop started: Add invoice billing (2 rubric item(s))"
    )
    assert plan[trace + 1].startswith("- 20")
    assert "## Notes" in plan  # the rest of the plan is untouched


def test_the_goal_route_never_uses_mode_goal(repo: Repo) -> None:
    done = repo.forge(
        *START, "--route", "goal", "--autonomy-policy", "auto", "--max-goal-steps", "4"
    )
    assert done.code == 0
    data = checkpoint_of(repo)
    assert (data["route"], data["autonomy_policy"], data["max_goal_steps"]) == ("goal", "auto", 4)
    assert data["mode"] == "loop"
    refused = repo.forge(*START, "--mode", "goal", "--restart")
    assert refused.code == 2
    assert "never mode: goal" in refused.err
    for mode in ("structured", "direct-downgraded"):
        assert repo.forge(*START, "--mode", mode, "--restart").code == 0


def test_a_second_start_does_not_reset_a_contract(repo: Repo) -> None:
    repo.forge(*START)
    again = repo.forge(*START)
    assert again.code == 2
    assert "already has a loop contract" in again.err
    assert repo.forge(*START, "--restart").code == 0


def test_a_missing_or_read_only_plan_is_said_and_skipped(repo: Repo) -> None:
    missing = repo.forge(*START, "--plan", "NOPE.md")
    assert missing.code == 0
    assert "not found: no Loop Trace line written" in missing.err
    repo.write("RO.md", "# Plan\n")
    os.chmod(repo.root / "RO.md", 0o444)
    read_only = repo.forge(*START, "--plan", "RO.md", "--restart")
    assert read_only.code == 0
    if os.geteuid() != 0:  # root writes read-only files anyway
        assert "read-only" in read_only.err


def test_stages_in_order_and_refusals(repo: Repo) -> None:
    repo.write("PLAN.md", "# Plan\n")
    repo.forge(*START, "--plan", "PLAN.md")
    ok = repo.forge(
        "checkpoint",
        "--change",
        "billing",
        "--stage",
        "discovery-complete",
        "--current-stage",
        "plan",
    )
    assert ok.code == 0, ok.err
    skipped = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-1", "--current-stage", "verify"
    )
    assert skipped.code == 2
    assert "stage transition plan -> verify is out of order" in skipped.err
    goal = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-1", "--current-stage", "goal"
    )
    assert goal.code == 2
    unknown_id = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-1", "--rubric", "R9=pass"
    )
    assert unknown_id.code == 2
    assert "--rubric R9: no such rubric item" in unknown_id.err
    bad_status = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-1", "--rubric", "R1=done"
    )
    assert bad_status.code == 2
    assert "unknown status" in bad_status.err
    assert checkpoint_of(repo)["current_stage"] == "plan"  # refused updates change nothing
    trace = [
        line for line in (repo.root / "PLAN.md").read_text().splitlines() if line.startswith("- ")
    ]
    assert len(trace) == 2
    assert trace[1].endswith(" — discovery-complete — discover -> plan; next: -")


def test_verify_failed_needs_a_new_strategy_and_a_budget(repo: Repo) -> None:
    repo.forge(*START)
    base = ["checkpoint", "--change", "billing", "--stage", "verify-failed"]
    too_early = repo.forge(*base, "--strategy-change", "x")
    assert too_early.code == 2
    assert "verify first" in too_early.err
    to_verify(repo)
    verify_fails(repo)
    no_strategy = repo.forge(*base, "--failure", "R1: 2 tests fail")
    assert no_strategy.code == 2
    assert "needs --strategy-change" in no_strategy.err
    first = repo.forge(
        *base, "--failure", "R1: 2 tests fail", "--strategy-change", "split the task"
    )
    assert first.code == 0
    assert checkpoint_of(repo)["budget"]["used_fix_iterations"] == 1
    verify_fails(repo)
    same = repo.forge(*base, "--strategy-change", "split the task")
    assert same.code == 2
    assert "repeats an earlier failed one" in same.err
    second = repo.forge(*base, "--strategy-change", "smaller steps")
    assert second.code == 0
    assert "stop condition: budget_exhausted" in second.out
    assert checkpoint_of(repo)["stop_condition"] == "budget_exhausted"
    assert checkpoint_of(repo)["next_action"] == "ask"  # never iterate with no budget left
    verify_fails(repo)
    third = repo.forge(*base, "--strategy-change", "something else")
    assert third.code == 1
    assert "stop condition budget_exhausted" in third.err
    assert events_of(repo).count("forge.strategy.changed") == 2
    # iteration-1 began the first pass and the first failed verify the second;
    # the verify-failed that spent the budget began none.
    assert events_of(repo).count("forge.iteration.started") == 2


def passing_verify(repo: Repo) -> None:
    """A verify command that passes until a file named ``broken`` appears; committed."""
    repo.write("forge.toml", '[verify]\ncommand = "test ! -f broken"\n')
    repo.commit("verify policy")


def test_ship_ready_only_when_every_item_passes_or_is_out_of_scope(repo: Repo) -> None:
    passing_verify(repo)
    repo.forge(*START)
    base = ["checkpoint", "--change", "billing", "--stage", "ship-ready"]
    before_verify = repo.forge(*base, "--rubric", "R1=pass", "--rubric", "R2=pass")
    assert before_verify.code == 2
    to_verify(repo)
    assert repo.forge("verify", "--change", "billing").code == 0
    early = repo.forge(*base, "--rubric", 'R1=pass:"pytest: 12 passed"')
    assert early.code == 2
    assert "not yet: R2" in early.err
    done = repo.forge(
        *base,
        "--rubric",
        'R1=pass:"pytest: 12 passed"',
        "--rubric",
        'R2=out-of-scope:"owner: docs ship separately"',
    )
    assert done.code == 0, done.err
    data = checkpoint_of(repo)
    assert data["rubric"][0]["evidence"] == "pytest: 12 passed"
    assert data["stop_condition"] == "pass"
    assert (data["current_stage"], data["next_action"]) == ("ship", "ship")
    assert "forge.ship.ready" in events_of(repo)


def test_ship_ready_needs_a_pass_on_the_current_tree_and_evidence_for_every_item(
    repo: Repo,
) -> None:
    passing_verify(repo)
    repo.forge(*START)
    to_verify(repo)
    ship = [
        "checkpoint",
        "--change",
        "billing",
        "--stage",
        "ship-ready",
        "--rubric",
        'R1=pass:"pytest: 12 passed"',
        "--rubric",
        "R2=pass",
    ]
    never = repo.forge(*ship)
    assert never.code == 2
    assert "ship-ready refused; missing: evidence for R2; a forge verify" in never.err
    assert "(none recorded)" in never.err
    assert "forge verify --change billing" in never.err
    repo.write("broken", "x\n")
    assert repo.forge("verify", "--change", "billing").code == 0  # a FAIL, breaker still closed
    failed = repo.forge(*ship, "--rubric", 'R2=pass:"README.md:12"')
    assert failed.code == 2
    assert "missing: a passing verify (the last one was FAIL)" in failed.err
    assert "evidence" not in failed.err.split("missing:")[1]  # R2's evidence is not missing
    (repo.root / "broken").unlink()
    assert repo.forge("verify", "--change", "billing").code == 0  # a PASS
    repo.write("billing.py", "TOTAL = 1\n")  # the tree moves on after the PASS
    stale = repo.forge(*ship, "--rubric", 'R2=pass:"README.md:12"')
    assert stale.code == 2
    assert "a passing verify of the current tree" in stale.err
    assert checkpoint_of(repo)["current_stage"] == "verify"  # every refusal changed nothing
    assert "forge.ship.ready" not in events_of(repo)
    assert repo.forge("verify", "--change", "billing").code == 0
    shipped = repo.forge(*ship, "--rubric", 'R2=pass:"README.md:12"')
    assert shipped.code == 0, shipped.err
    assert checkpoint_of(repo)["stop_condition"] == "pass"
    alone = repo.forge("event", "--change", "billing", "forge.ship.ready")
    assert alone.code == 2
    assert "recorded by forge checkpoint --stage ship-ready" in alone.err


def test_budget_exhausted_stops_the_next_action_and_resume_agrees(repo: Repo) -> None:
    repo.forge(*START)
    to_verify(repo)
    base = ["checkpoint", "--change", "billing", "--stage", "verify-failed"]
    verify_fails(repo)
    assert repo.forge(*base, "--failure", "R1", "--strategy-change", "one").code == 0
    assert checkpoint_of(repo)["next_action"] == "iterate"
    verify_fails(repo)
    iterate = repo.forge(*base, "--strategy-change", "two", "--next-action", "iterate")
    assert iterate.code == 2
    assert "--next-action iterate contradicts the stop condition budget_exhausted" in iterate.err
    assert repo.forge(*base, "--strategy-change", "two").code == 0
    data = checkpoint_of(repo)
    assert (data["stop_condition"], data["next_action"]) == ("budget_exhausted", "ask")
    later = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-3", "--next-action", "iterate"
    )
    assert later.code == 2
    downgrade = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-3", "--next-action", "downgrade"
    )
    assert downgrade.code == 0, downgrade.err
    resumed = repo.forge("resume", "--change", "billing")
    assert "  next action: downgrade" in resumed.lines
    stop = next(i for i, line in enumerate(resumed.lines) if line.startswith("  stop:"))
    assert "budget_exhausted — no fix iteration left" in resumed.lines[stop]
    assert "iterate" not in resumed.out
    # A checkpoint from an older Forge that said iterate beside budget_exhausted
    # resumes as ask.
    path = repo.change_dir("billing") / "checkpoint.json"
    old = json.loads(path.read_text())
    old["next_action"] = "iterate"
    path.write_text(json.dumps(old))
    assert "  next action: ask" in repo.forge("resume", "--change", "billing").lines


def test_a_forge_blocked_event_blocks_the_contract(repo: Repo) -> None:
    passing_verify(repo)
    repo.forge(*START)
    to_verify(repo)
    bare = repo.forge("event", "--change", "billing", "forge.blocked")
    assert bare.code == 2
    assert "forge.blocked needs --detail" in bare.err
    done = repo.forge(
        "event", "--change", "billing", "forge.blocked", "--detail", "needs the tax table"
    )
    assert done.code == 0, done.err
    data = checkpoint_of(repo)
    assert data["blockers"] == ["needs the tax table"]
    assert (data["stop_condition"], data["next_action"]) == ("blocked", "block")
    resumed = repo.forge("resume", "--change", "billing")
    assert "  blockers:    needs the tax table" in resumed.lines
    assert "  next action: block" in resumed.lines
    assert events_of(repo).count("forge.blocked") == 1
    assert repo.forge("verify", "--change", "billing").code == 0
    ship = ["checkpoint", "--change", "billing", "--stage", "ship-ready"]
    ship += ["--rubric", 'R1=pass:"pytest ok"', "--rubric", 'R2=pass:"docs/x.md"']
    blocked = repo.forge(*ship)
    assert blocked.code == 2
    assert "missing: no open blocker (blocked: needs the tax table)" in blocked.err
    assert "--clear-blockers" in blocked.err
    iterate = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-2", "--next-action", "iterate"
    )
    assert iterate.code == 2
    assert "contradicts the stop condition blocked" in iterate.err
    cleared = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-2", "--clear-blockers"
    )
    assert cleared.code == 0, cleared.err
    data = checkpoint_of(repo)
    assert (data["blockers"], data["stop_condition"], data["next_action"]) == ([], None, None)
    assert repo.forge(*ship).code == 0


def test_a_blocker_checkpoint_emits_forge_blocked(repo: Repo) -> None:
    repo.forge(*START)
    base = ["checkpoint", "--change", "billing", "--stage", "discovery-complete"]
    lonely = repo.forge(*base, "--next-action", "block")
    assert lonely.code == 2
    assert "--next-action block needs a blocker" in lonely.err
    contradiction = repo.forge(*base, "--blocker", "no API key", "--next-action", "iterate")
    assert contradiction.code == 2
    done = repo.forge(*base, "--blocker", "needs the tax table", "--next-action", "block")
    assert done.code == 0, done.err
    assert "stop condition: blocked — blocked: needs the tax table" in done.out
    lines = (repo.change_dir("billing") / "timeline.jsonl").read_text().splitlines()
    blocked = [json.loads(line) for line in lines if '"forge.blocked"' in line]
    assert [e["detail"] for e in blocked] == ["needs the tax table"]
    data = checkpoint_of(repo)
    assert (data["stop_condition"], data["next_action"]) == ("blocked", "block")
    # The same blocker again is not a new forge.blocked; a new one is.
    repo.forge(*base, "--blocker", "needs the tax table", "--blocker", "no API key")
    assert events_of(repo).count("forge.blocked") == 2
    assert checkpoint_of(repo)["blockers"] == ["needs the tax table", "no API key"]


def test_an_owner_decision_stops_the_loop_until_it_is_made(repo: Repo) -> None:
    repo.forge(*START)
    base = ["checkpoint", "--change", "billing", "--stage", "discovery-complete"]
    none_pending = repo.forge(*base, "--decided", "yes")
    assert none_pending.code == 2
    assert "no owner decision is pending" in none_pending.err
    asked = repo.forge(*base, "--owner-decision", "Drop the legacy invoice format?")
    assert asked.code == 0, asked.err
    assert "owner_decision_required" in asked.out
    data = checkpoint_of(repo)
    assert data["owner_decision"] == "Drop the legacy invoice format?"
    assert (data["stop_condition"], data["next_action"]) == ("owner_decision_required", "ask")
    resumed = repo.forge("resume", "--change", "billing")
    assert "  owner decision: Drop the legacy invoice format?" in resumed.lines
    assert "  next action: ask" in resumed.lines
    assert "iterate" not in resumed.out
    assert repo.forge(*base, "--next-action", "iterate").code == 2
    second = repo.forge(*base, "--owner-decision", "Another?")
    assert second.code == 2
    assert "already pending" in second.err
    decided = repo.forge(*base, "--decided", "keep it, read-only")
    assert decided.code == 0, decided.err
    data = checkpoint_of(repo)
    assert (data["owner_decision"], data["stop_condition"], data["next_action"]) == (
        None,
        None,
        None,
    )
    lines = (repo.change_dir("billing") / "timeline.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert (last["decision"], last["decided"]) == (
        "Drop the legacy invoice format?",
        "keep it, read-only",
    )


def test_a_failed_strategy_never_comes_back_in_another_spelling(repo: Repo) -> None:
    repo.forge(*START[:-1], "5")
    to_verify(repo)
    base = ["checkpoint", "--change", "billing", "--stage", "verify-failed", "--failure", "R1"]
    verify_fails(repo)
    assert repo.forge(*base, "--strategy-change", "Split totals").code == 0
    verify_fails(repo)
    for again in ("split totals.", "  SPLIT,   totals! ", "split_totals"):
        refused = repo.forge(*base, "--strategy-change", again)
        assert refused.code == 2, again
        assert "repeats an earlier failed one ('Split totals')" in refused.err
    assert repo.forge(*base, "--strategy-change", "smaller steps").code == 0
    verify_fails(repo)
    earlier = repo.forge(*base, "--strategy-change", "Split totals")
    assert earlier.code == 2  # not only the last one: every earlier failed strategy
    assert "failed strategies so far: Split totals; smaller steps" in earlier.err
    assert repo.forge(*base, "--strategy-change", "...").code == 2  # no words, no strategy
    data = checkpoint_of(repo)
    assert data["tried_strategies"] == ["Split totals", "smaller steps"]
    assert data["budget"]["used_fix_iterations"] == 2


def test_events_known_and_unknown(repo: Repo) -> None:
    repo.forge(*START)
    ok = repo.forge("event", "--change", "billing", "forge.blocked", "--detail", "needs an API key")
    assert ok.code == 0
    refused = repo.forge("event", "--change", "billing", "forge.finished")
    assert refused.code == 2
    assert "unknown event 'forge.finished'" in refused.err


def test_resume_rebuilds_the_contract_from_the_files(repo: Repo) -> None:
    repo.forge(*START)
    to_verify(repo)
    verify_fails(repo)
    repo.forge(
        "checkpoint",
        "--change",
        "billing",
        "--stage",
        "verify-failed",
        "--failure",
        "R1 failed",
        "--strategy-change",
        "split",
        "--blocker",
        "needs the tax table",
        "--next-action",
        "block",
        "--rubric",
        "R2=pass",
    )
    repo.forge("event", "--change", "billing", "forge.blocked", "--detail", "no API key")
    human = repo.forge("resume", "--change", "billing")
    assert human.code == 0
    assert 'Resume: change "billing" — Add invoice billing' in human.lines
    assert "    [pending] R1: tests pass" in human.lines
    assert "    [pass] R2: docs updated" in human.lines
    assert "  budget:      1/2 fix iteration(s) used, 1 left" in human.lines
    assert "  blockers:    needs the tax table; no API key" in human.lines
    assert "  next action: block" in human.lines
    data = json.loads(repo.forge("resume", "--change", "billing", "--json").out)
    assert data["checkpoint"] == checkpoint_of(repo)
    assert [e["event"] for e in data["last_events"]][-1] == "forge.blocked"
    nothing = repo.forge("resume", "--change", "other")
    assert nothing.code == 2
    assert 'no change "other"' in nothing.err
    assert not repo.change_dir("other").exists()
    # A change that has begun (its timeline stays) but has no contract: none to resume.
    (repo.change_dir("billing") / "checkpoint.json").unlink()
    uncontracted = repo.forge("resume", "--change", "billing")
    assert uncontracted.code == 2
    assert "no loop contract" in uncontracted.err


def test_policy_check_says_when_the_fix_budget_and_the_breaker_disagree(repo: Repo) -> None:
    repo.write("forge.toml", "[verify]\nmax_failures = 3\n[contract]\nmax_fix_iterations = 5\n")
    done = repo.forge("policy", "check")
    assert done.code == 0
    assert "describe the same bound and disagree" in done.out
    assert "3 is the bound in force" in done.out
    repo.write("forge.toml", "[verify]\nmax_failures = 3\n[contract]\nmax_fix_iterations = 3\n")
    assert "disagree" not in repo.forge("policy", "check").out


WRITER = r"""
import sys
from pathlib import Path
from orchestra._contract import Update, apply, save_checkpoint, start
from orchestra._state import ChangePaths
paths = ChangePaths(Path(sys.argv[1]), "crash")
checkpoint = start(
    goal="g", scope=[], non_goals=[], rubric=["R1: r"], max_fix_iterations=10**9, now="0"
)
checkpoint = apply(checkpoint, Update(stage="iteration-1"), now="0")
save_checkpoint(paths, checkpoint)
print("ready", flush=True)
n = 0
while True:
    n += 1
    update = Update(stage=f"iteration-{n + 1}", current_task=f"task {n}")
    checkpoint = apply(checkpoint, update, now=str(n))
    save_checkpoint(paths, checkpoint)
"""


def test_a_contract_resumed_after_a_crash_is_byte_for_byte_what_was_written(
    tmp_path: Path,
) -> None:
    from orchestra._contract import load_checkpoint, render
    from orchestra._state import ChangePaths

    paths = ChangePaths(tmp_path, "crash")
    for trial in range(8):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        time.sleep(0.003 * (trial % 4 + 1))  # a real process killed at a random instant
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        on_disk = (paths.folder / "checkpoint.json").read_bytes()
        resumed = load_checkpoint(paths)
        assert resumed is not None
        assert render(resumed) == on_disk
        assert resumed.stage == f"iteration-{int(resumed.updated_at or 0) + 1}"


def test_odd_stages_and_next_actions_are_refused(repo: Repo) -> None:
    repo.write("PLAN.md", "# Plan\n")
    repo.forge(*START, "--plan", "PLAN.md")
    for stage in ("goal", "loop-start", "iteration-0", "iteration-1\n## Injected"):
        done = repo.forge("checkpoint", "--change", "billing", "--stage", stage)
        assert done.code == 2, stage
        assert "not a checkpoint stage" in done.err
    bad_next = repo.forge(
        "checkpoint", "--change", "billing", "--stage", "iteration-1", "--next-action", "verify"
    )
    assert bad_next.code == 2
    ok = repo.forge(
        "checkpoint",
        "--change",
        "billing",
        "--stage",
        "discovery-complete",
        "--current-stage",
        "plan",
        "--next-action",
        "ask",
        "--discovery-depth",
        "D1",
        "--discovery-file",
        "billing/invoice.py",
        "--impact",
        "tests/test_invoice.py",
        "--risk",
        "medium",
    )
    assert ok.code == 0, ok.err
    assert checkpoint_of(repo)["discovery"] == {
        "depth": "D1",
        "files": ["billing/invoice.py"],
        "impact_surface": ["tests/test_invoice.py"],
        "risk": "medium",
    }
    assert checkpoint_of(repo)["next_action"] == "ask"
    assert "## Injected" not in (repo.root / "PLAN.md").read_text()


def test_a_hand_edited_checkpoint_with_bad_values_is_corrupt(repo: Repo) -> None:
    repo.forge(*START)
    path = repo.change_dir("billing") / "checkpoint.json"
    data = json.loads(path.read_text())
    data["current_stage"] = "goal"
    path.write_text(json.dumps(data))
    done = repo.forge("resume", "--change", "billing")
    assert done.code == 1
    assert "checkpoint.json is corrupt" in done.err
    assert "Traceback" not in done.err
    assert list(path.parent.glob("checkpoint.json.corrupt-*"))


def test_a_current_folder_deleted_under_forge_is_a_clear_error(tmp_path: Path) -> None:
    """Every command finds its project from the current folder; gone, it says so (exit 2)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{FORGE}" status'],
        capture_output=True,
        text=True,
        env=forge_env(),
        check=False,
    )
    assert done.returncode == 2, done
    assert done.stderr == "forge: the current folder no longer exists: cd into the project\n"
