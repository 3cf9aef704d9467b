"""Done means verified, in forge run too: a failing verify keeps done from standing."""

from __future__ import annotations

import json

from .support import Repo


def policy(repo: Repo, verify: str) -> None:
    repo.write(
        "forge.toml",
        f"[verify]\ncommand = {json.dumps(verify)}\nspecs = []\n"
        '[run]\ncmd = "echo FORGE_DONE"\n[rate_limit]\nbackend = "memory"\n',
    )
    repo.commit("policy")


def test_forge_run_does_not_call_a_failing_change_done(repo: Repo) -> None:
    policy(repo, "false")
    plan = repo.forge("run", "--change", "c")
    assert any(
        line.startswith("  done:     the executor signals done and the verify passes")
        for line in plan.lines
    ), plan.out
    ran = repo.forge("run", "--change", "c", "--yes")
    assert ran.code == 1, ran
    assert "run: STOPPED after 1 iteration(s) — done-unverified" in ran.lines
    assert "escalate: a human should review before continuing" in ran.lines
    detail = next(line for line in ran.lines if line.startswith("  detail:"))
    assert "the verify failed" in detail
    # The run's gates stay read-only: the verify at done fed no breaker.
    assert not (repo.change_dir("c") / "verify-attempts.yaml").exists()
    timeline = (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in timeline]
    assert not [e for e in events if e["event"] == "verify.recorded"]
    [finished] = [e for e in events if e["event"] == "iteration.finished"]
    assert (finished["verify"], finished["verify_read_only"]) == ("FAIL", True)


def test_forge_run_with_a_passing_verify_is_done(repo: Repo) -> None:
    policy(repo, "true")
    ran = repo.forge("run", "--change", "c", "--yes")
    assert ran.code == 0, ran
    assert "run: DONE after 1 iteration(s)" in ran.lines
    assert any("(verify PASS)" in line for line in ran.lines), ran.out
    assert not (repo.change_dir("c") / "verify-attempts.yaml").exists()


def test_every_task_ticked_is_a_done_signal_under_the_same_verification(repo: Repo) -> None:
    repo.write("tasks.md", "- [x] one\n- [ ] two\n")
    tick = "sed -i 's/- \\[ \\] two/- [x] two/' tasks.md"
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "c"\ncmd = {json.dumps(tick)}\nmax_iterations = 3\n',
    )
    repo.commit("tasks")
    ran = repo.forge("supervise")
    assert ran.code == 0, ran
    lines = (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    stopped = [(e["reason"], e["iterations"]) for e in events if e["event"] == "run.stopped"]
    assert stopped == [("done", 1)]


def test_every_task_ticked_with_a_failing_verify_is_not_done(repo: Repo) -> None:
    repo.write("tasks.md", "- [x] one\n")
    policy(repo, "false")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "false"\nspecs = []\n[run]\ncmd = "true"\n'
        '[rate_limit]\nbackend = "memory"\n',
    )
    repo.commit("tasks")
    ran = repo.forge("run", "--change", "c", "--yes")
    assert ran.code == 1, ran
    assert "run: STOPPED after 1 iteration(s) — done-unverified" in ran.lines
