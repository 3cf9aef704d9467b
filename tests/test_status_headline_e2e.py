"""``forge status``: its headline, and what each loop that needs a person waits on."""

from __future__ import annotations

import json

from .support import Repo

POLICY = '[verify]\ncommand = "test ! -f fail.flag"\nmax_failures = 2\n'


def _four_loops(repo: Repo) -> None:
    """``held``: its verify breaker open; ``blocked``: a blocker; ``shipped``: done; ``live``."""
    repo.write("forge.toml", POLICY)
    repo.write("fail.flag", "")
    repo.forge("verify", "--change", "held")
    repo.forge("verify", "--change", "held")
    repo.forge("loop", "start", "--change", "blocked", "--goal", "refunds", "--rubric", "R1: ok")
    blocker = ("--stage", "iteration-1", "--blocker", "needs the tax table")
    assert repo.forge("checkpoint", "--change", "blocked", *blocker).code == 0
    (repo.root / "fail.flag").unlink()
    done = repo.forge("run", "--change", "shipped", "--cmd", "echo FORGE_DONE", "--yes")
    assert done.code == 0, done.out
    # A run that has begun and recorded no ending yet (its process is still at work).
    timeline = repo.change_dir("live") / "timeline.jsonl"
    timeline.parent.mkdir(parents=True)
    started = {"ts": "2026-12-03T10:00:00Z", "seq": 1, "event": "run.started", "change": "live"}
    timeline.write_text(json.dumps({**started, "run_id": "r1", "supervised": True}) + "\n")


def test_the_headline_counts_the_loops_as_the_rows_stand(repo: Repo) -> None:
    _four_loops(repo)
    shown = repo.forge("status")
    assert shown.code == 0
    assert shown.lines[0] == "4 loops: 2 need you · 1 running · 1 done"
    standing = {
        name: shown.lines[shown.lines.index(name) + 1]
        for name in ("held", "blocked", "shipped", "live")
    }
    assert standing == {
        "held": "  standing: needs you",
        "blocked": "  standing: needs you",
        "shipped": "  standing: done",
        "live": "  standing: running",
    }


def test_a_loop_that_needs_you_says_what_to_decide_and_the_command(repo: Repo) -> None:
    _four_loops(repo)
    lines = repo.forge("status").lines
    assert (
        "  decide:   verify breaker OPEN: 2/2 consecutive failures — "
        "forge verify --change held --reset-breaker"
    ) in lines
    assert (
        "  decide:   blocked: needs the tax table — "
        "forge checkpoint --change blocked --stage iteration-1 --clear-blockers"
    ) in lines
    # The person decides: the loop needs nobody any more.
    repo.forge("verify", "--change", "held", "--reset-breaker")
    after = repo.forge("status").lines
    assert after[0] == "4 loops: 1 needs you · 1 running · 1 idle · 1 done"
    assert not any("forge verify --change held" in line for line in after)


def test_the_loop_contracts_owner_decision_holds_until_decided(repo: Repo) -> None:
    _four_loops(repo)
    change = ("checkpoint", "--change", "blocked", "--stage", "iteration-2")
    assert repo.forge(*change, "--clear-blockers").code == 0
    assert repo.forge("status").lines[0] == "4 loops: 1 needs you · 1 running · 1 idle · 1 done"
    assert repo.forge(*change, "--owner-decision", "ship without the tax table?").code == 0
    lines = repo.forge("status").lines
    assert lines[0] == "4 loops: 2 need you · 1 running · 1 done"
    assert (
        "  decide:   owner decision: ship without the tax table? — "
        "forge checkpoint --change blocked --stage iteration-2 --decided TEXT"
    ) in lines
    assert repo.forge(*change, "--decided", "yes, ship").code == 0
    assert repo.forge("status").lines[0] == "4 loops: 1 needs you · 1 running · 1 idle · 1 done"


def test_a_run_stopped_by_a_gate_names_the_gate_and_its_reason(repo: Repo) -> None:
    repo.write("forge.toml", POLICY)
    repo.write("fail.flag", "")
    stopped = repo.forge("run", "--change", "unverified", "--cmd", "echo FORGE_DONE", "--yes")
    assert stopped.code == 1
    lines = repo.forge("status").lines
    assert lines[0] == "1 loop: 1 needs you"
    blocker = next(line for line in lines if line.startswith("  blocker:  "))
    assert blocker.startswith("  blocker:  done-unverified — the executor signalled done")


def test_json_gains_the_headline_and_each_loops_needs(repo: Repo) -> None:
    _four_loops(repo)
    data = json.loads(repo.forge("status", "--json").out)
    assert data["headline"] == "4 loops: 2 need you · 1 running · 1 done"
    assert data["counts"] == {"needs you": 2, "running": 1, "interrupted": 0, "idle": 0, "done": 1}
    rows = {row["change"]: row for row in data["changes"]}
    assert rows["held"]["standing"] == "needs you"
    assert rows["held"]["blocker"] is None
    assert rows["held"]["decisions"] == [
        {
            "what": "verify breaker OPEN: 2/2 consecutive failures",
            "command": "forge verify --change held --reset-breaker",
        }
    ]
    assert rows["shipped"]["decisions"] == []
    assert rows["live"]["standing"] == "running"
    # The fields status had keep their names and meaning.
    assert rows["held"]["verify"] == "FAIL, 2/2 consecutive failures, breaker OPEN"
    assert {"circuit", "escalated", "spend", "last_event", "alerts"} <= set(rows["held"])
