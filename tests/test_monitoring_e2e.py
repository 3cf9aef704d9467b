"""The monitoring layer through a real loop: alerts, the status log, lessons, forge status.

In-process loops run on trio's mock clock with the fake agent as a real
process; the last test drives the real ``forge`` command in a git repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing

from orchestra._durations import Duration
from orchestra._engine import DONE
from orchestra._policy import BreakerPolicy, Policy, RunPolicy, StagnationPolicy, VerifyPolicy

from .support import Repo
from .test_supervised_loop import FAKE_AGENT, agent, supervise_one, timeline

IDLE = {"print": "thinking\n"}


def work(n: int, *, task: bool = False) -> dict[str, Any]:
    step: dict[str, Any] = {"print": "working\n", "append": {"work.py": f"x = {n}\n"}}
    if task:
        step["append"]["tasks.md"] = f"- [x] task {n}\n"
    return step


def quiet_policy() -> Policy:
    """Stagnation trips far away: only the alerts speak."""
    return Policy(
        verify=VerifyPolicy(command="", specs=()),
        run=RunPolicy(max_iterations=10),
        breaker=BreakerPolicy(cooldown=Duration(1800), cooldown_max=Duration(3600)),
        stagnation=StagnationPolicy(window=10, no_progress=10, output_decline=1.0),
    )


async def test_alerts_are_raised_and_cleared_in_the_timeline_and_the_status_log(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    (tmp_path / "tasks.md").write_text("- [ ] task 4\n")  # a tasks file: tasks are counted
    cmd = agent(tmp_path, IDLE, IDLE, IDLE, work(4, task=True), {"print": "FORGE_DONE\n"})
    summary, _, _ = await supervise_one(tmp_path, mock_clock, quiet_policy(), cmd)
    assert summary.reason == DONE
    events = timeline(tmp_path)
    raised = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.raised"]
    cleared = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.cleared"]
    assert raised == [(3, "negative-score"), (3, "no-files"), (3, "no-tasks")]
    assert cleared == [(4, "negative-score"), (4, "no-files"), (4, "no-tasks")]
    detail = next(e for e in events if e["event"] == "alert.raised" and e["alert"] == "no-files")
    assert detail["detail"] == "no file modified for 3 iterations"
    assert (detail["value"], detail["threshold"]) == (3, 3)

    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    sections = re.split(r"\n(?=## Iteration )", status)
    assert sections[0].startswith("# Status of c")
    assert len(sections) == 6  # the heading and five iterations
    third = sections[3]
    lines = third.splitlines()
    assert re.fullmatch(r"## Iteration 3 — \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*", lines[0])
    assert lines[1:9] == [
        "- Circuit state: CLOSED",
        "- Tasks completed: 0",
        "- Files modified: none",
        "- Tests: no report",
        "- Errors encountered: none",
        "- Progress score: -3",
        "- API calls remaining: unlimited",
        # Medium by the stagnation detectors alone; the three alerts holding make it high.
        "- Stagnation risk: HIGH",
    ]
    assert lines[9] == (
        "- Alerts: negative-score (progress score negative for 3 iterations); "
        "no-files (no file modified for 3 iterations); no-tasks (no task completed for 3 "
        "iterations)"
    )
    fourth = sections[4].splitlines()
    assert fourth[2:4] == ["- Tasks completed: 1", "- Files modified: tasks.md, work.py"]
    assert fourth[6] == "- Progress score: +7"


async def test_the_status_log_keeps_the_last_n_and_reads_test_totals(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    junit = (
        '<testsuite><testcase classname="t" name="a"/>'
        '<testcase classname="t" name="b"><failure message="x"/></testcase>'
        '<testcase classname="t" name="c"><skipped/></testcase></testsuite>'
    )
    report = tmp_path / ".forge" / "junit.xml"
    report.parent.mkdir(parents=True, exist_ok=True)
    writes = f"printf '%s' {shlex.quote(junit)} > {shlex.quote(str(report))}"
    policy = quiet_policy()
    import attrs

    from orchestra._policy import AlertsPolicy

    policy = attrs.evolve(
        policy,
        verify=VerifyPolicy(command=writes, specs=()),
        run=RunPolicy(max_iterations=4),
        alerts=AlertsPolicy(status_log=2),
    )
    cmd = agent(tmp_path, work(1), work(2), work(3), work(4))
    await supervise_one(tmp_path, mock_clock, policy, cmd)
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    assert [int(n) for n in re.findall(r"^## Iteration (\d+)", status, re.M)] == [3, 4]
    assert "- Tests: 1 passed, 1 failed, 0 skipped" not in status
    assert "- Tests: 1 passed, 1 failed, 1 skipped" in status
    assert "- Errors encountered: t::b: x" in status


def test_lessons_are_kept_and_forge_status_shows_recovery_and_alerts(repo: Repo) -> None:
    script = repo.root.parent / "steps.json"
    script.write_text(json.dumps({"steps": [IDLE]}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        '[policy]\nallow_relaxed = true\n[verify]\ncommand = ""\nspecs = []\n'
        '[rate_limit]\nbackend = "memory"\n'
        '[breaker]\ncooldown = "0.01s"\ncooldown_max = "0.02s"\nmax_opens = 1\n'
        # The lessons file lies under a frozen path: Forge's own write must not trip it.
        '[protect]\nfrozen = ["forge.toml", "policies/", "memory/"]\n'
        f'[[loop]]\nchange = "c"\ncmd = {json.dumps(cmd)}\nmax_iterations = 8\n',
    )
    repo.write("memory/notes.md", "kept\n")
    repo.write("tasks.md", "- [ ] the one task\n")
    repo.commit("policy")
    live = repo.forge("supervise", "--json")
    assert live.code == 1, live
    loop = json.loads(live.out)["loops"][0]
    assert loop["reason"] == "circuit-open"
    assert sorted(loop["alerts"]) == ["negative-score", "no-files", "no-tasks"]

    events = [
        json.loads(line)
        for line in (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    ]
    assert not [e for e in events if e["event"] == "protect.violation"]
    lessons = (repo.root / "memory" / "forge-lessons.md").read_text()
    entries = lessons.split("\n## ")[1:]
    assert len(entries) == 2  # the opening, then the failed probe that escalated
    first, second = entries
    assert first.splitlines()[0].endswith("— c, iteration 3: no-progress")
    assert "- Evidence: stagnation: no-progress (3);" in first
    assert "- Strategy tried: none (the loop's own approach)" in first
    assert first.splitlines()[-1].startswith(
        "- Outcome: circuit opened; next strategy: no-progress 1/4:"
    )
    assert "- Strategy tried: no-progress 1/4: Re-plan from scratch" in second
    assert "- Outcome: escalated to a person: probe failed: no progress" in second
    # The failed probe's own measures, not an empty evidence.
    assert "- Evidence: probe failed: no progress; {" in second
    assert '"files_modified": 0' in second
    assert '"score": -3' in second
    assert '"tasks_completed": 0' in second
    # Files a person or the agent reads get an ordinary file's mode, not 0600.
    mask = os.umask(0o022)
    os.umask(mask)
    for path in (repo.root / "memory" / "forge-lessons.md", repo.change_dir("c") / "status.md"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path
    # Forge's journal beside the lessons file stays out of the agent's commits.
    untracked = repo.git("status", "--porcelain", "--untracked-files=all")
    assert ".forge-writes" not in untracked
    assert "memory/forge-lessons.md" in untracked

    status = repo.forge("status", "--plain")
    assert status.code == 0, status.err
    assert any(
        line.startswith("  recovery: escalated after no-progress 1/4: Re-plan from scratch")
        for line in status.lines
    ), status.out
    # The figure as of the last iteration (the probe made it 4), not as raised.
    assert "  alert:    no-files — no file modified for 4 iterations" in status.lines
    reset = repo.forge("circuit", "c", "--reset", "--reason", "looked at it")
    assert reset.code == 0, reset.err
    after = json.loads(repo.forge("status", "--json").out)
    (row,) = [r for r in after["changes"] if r["change"] == "c"] if "changes" in after else [after]
    assert row["risk"] is None
    assert row["score"] is None
    simulated = repo.forge("policy", "simulate", "--change", "c", "--plain")
    assert "recovery: no-progress 1/4: Re-plan from scratch" in simulated.out
    assert "alerts: negative-score, no-files, no-tasks" in simulated.out


async def test_output_that_fell_back_to_plain_text_is_flagged_for_review(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    from orchestra._executor import Executor, ExecutorSpec

    script = tmp_path.parent / f"{tmp_path.name}-steps.json"
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "FORGE_DONE"}
    steps = [{"print": "no json here\nFORGE_DONE\n"}, {"print": json.dumps(result) + "\n"}]
    script.write_text(json.dumps({"steps": steps}))
    argv = (sys.executable, str(FAKE_AGENT), str(script))
    executor = Executor(name="fake", spec=ExecutorSpec(argv=argv, output="claude-json"))
    summary, _, _ = await supervise_one(tmp_path, mock_clock, quiet_policy(), "", executor=executor)
    # Unreadable output is never a clean ending, whatever done marker it carries:
    # it is one failed iteration, and the loop goes on to the readable done.
    assert (summary.reason, summary.iterations) == (DONE, 2)
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    review = [line for line in status.splitlines() if line.startswith("- Review: ")]
    assert summary.last is not None
    run = summary.last.log_path.parent.name
    assert review == [
        '- Review: the output fell back to plain text (no {"type": "result"} object in the '
        f"output; read as plain text); see runs/{run}/iteration-1.log"
    ]
    # No stagnation risk is claimed from output that could not be read.
    assert "- Stagnation risk: NOT MEASURED" in status


def test_the_supervise_summary_lists_output_to_review(repo: Repo) -> None:
    script = repo.root.parent / "steps.json"
    script.write_text(json.dumps({"steps": [{"print": "plain words\nFORGE_DONE\n"}]}))
    repo.write(
        "executors/fakejson.toml",
        f"argv = {json.dumps([sys.executable, str(FAKE_AGENT), str(script)])}\n"
        'output = "claude-json"\n',
    )
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[[loop]]\nchange = "c"\nexecutor = "fakejson"\nmax_iterations = 2\n',
    )
    repo.commit("policy")
    done = repo.forge("supervise", "--plain")
    assert done.code == 1, done.out + done.err
    assert any(
        line.startswith("  review: iteration 1: the output fell back to plain text")
        for line in done.lines
    ), done.out
    summary_path = next(line for line in done.lines if line.startswith("summary: "))[9:]
    summary = json.loads(Path(summary_path).read_text())
    assert summary["loops"][0]["review"][0].startswith(
        "iteration 1: the output fell back to plain text"
    )


async def test_the_dashboard_row_marks_alerts_and_the_recovery_in_force(
    autojump_clock: trio.testing.MockClock,
) -> None:
    import io

    from rich.console import Console

    from orchestra._engine import LoopProgress
    from orchestra._supervise import Dashboard

    loop = LoopProgress("billing", 10, status="probing", iteration=4, circuit="half-open")
    loop.score, loop.risk = -3, "high"
    loop.alerts = ["no-files", "no-tasks"]
    loop.recovery = "no-progress 2/4: Split the task you are stuck on."
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    console.print(Dashboard(console, [loop], None).render())
    row = next(line for line in buffer.getvalue().splitlines() if "billing" in line)
    assert "half-open · recovery no-progress 2/4" in row
    assert "-3 (high) ⚠ no-files, no-tasks" in row


async def test_calls_remaining_in_the_record_the_status_log_and_its_alert(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    import attrs

    from orchestra._ratelimit import MemoryBackend, RateLimiter

    limiter = RateLimiter(MemoryBackend(trio.current_time), 5, 3600.0, 0.8, clock=trio.current_time)
    policy = attrs.evolve(quiet_policy(), run=RunPolicy(max_iterations=6))
    # A task left open: every task ticked would be a done signal.
    (tmp_path / "tasks.md").write_text("- [ ] the rest\n")
    cmd = agent(tmp_path, *[work(n, task=True) for n in range(1, 7)])
    summary, waited, _ = await supervise_one(tmp_path, mock_clock, policy, cmd, limiter=limiter)
    assert summary.iterations == 6
    assert waited == [3600]  # the sixth iteration waits for the window
    events = timeline(tmp_path)
    finished = [e for e in events if e["event"] == "iteration.finished"]
    assert [e["calls_remaining"] for e in finished] == [4, 3, 2, 1, 0, 4]
    raised = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.raised"]
    cleared = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.cleared"]
    assert raised == [(5, "calls-remaining")]
    assert cleared == [(6, "calls-remaining")]
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    assert "- API calls remaining: 0\n- Stagnation risk: LOW\n- Alerts: calls-remaining" in status


async def test_a_probe_after_a_promoted_loop_count_must_complete_a_task_to_close(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    import attrs

    from orchestra._policy import AlertsPolicy

    (tmp_path / "tasks.md").write_text("- [ ] the task\n")
    policy = attrs.evolve(
        quiet_policy(),
        run=RunPolicy(max_iterations=5),
        alerts=AlertsPolicy(loop_count=2, trip_on=("loop-count",)),
    )
    # Files change every iteration (score +1), but no task is completed until the fifth.
    cmd = agent(tmp_path, work(1), work(2), work(3), work(4), work(5, task=True))
    await supervise_one(tmp_path, mock_clock, policy, cmd)
    events = timeline(tmp_path)
    breaker = [
        (e["event"], e.get("reason", "")) for e in events if e["event"].startswith("breaker.")
    ]
    assert [kind for kind, _ in breaker] == [
        "breaker.opened",
        "breaker.half_open",
        "breaker.opened",  # the probe edited a file but completed no task
        "breaker.half_open",
        "breaker.closed",
    ]
    assert breaker[0][1].startswith("alert: loop-count (3 iterations without a task completed)")
    assert breaker[2][1] == "probe failed: the loop-count alert still holds"


def _junit(passed: int, failed: int) -> str:
    cases = [f'<testcase classname="t" name="ok{n}"/>' for n in range(passed)]
    cases += [
        f'<testcase classname="t" name="bad{n}"><failure message="assert {n} == 0"/></testcase>'
        for n in range(failed)
    ]
    return f"<testsuite>{''.join(cases)}</testsuite>"


async def test_raised_quality_alerts_raise_the_stagnation_risk(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    (tmp_path / "tasks.md").write_text("- [ ] a\n- [ ] b\n- [ ] c\n- [ ] d\n- [ ] e\n- [ ] f\n")
    # Every iteration edits a file and completes a task, while the tests fail one more each time.
    steps = [{**work(n), "write": {".forge/junit.xml": _junit(6 - n, n)}} for n in range(1, 7)]
    for n, step in enumerate(steps, start=1):
        step["append"]["tasks.md"] = f"- [x] done {n}\n"
    import attrs

    policy = attrs.evolve(quiet_policy(), run=RunPolicy(max_iterations=6))
    await supervise_one(tmp_path, mock_clock, policy, agent(tmp_path, *steps))
    events = timeline(tmp_path)
    raised = [(e["iteration"], e["alert"]) for e in events if e["event"] == "alert.raised"]
    assert (4, "pass-rate") in raised
    assert (4, "error-frequency") in raised
    finished = [e for e in events if e["event"] == "iteration.finished"]
    # Progress by the stagnation score alone: two quality alerts holding make the risk high.
    assert [e["risk"] for e in finished][3:] == ["high", "high", "high"]
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    sections = re.split(r"\n(?=## Iteration )", status)[1:]
    risks = [line for s in sections for line in s.splitlines() if "Stagnation risk" in line]
    assert risks == ["- Stagnation risk: LOW"] * 3 + ["- Stagnation risk: HIGH"] * 3


async def test_without_a_tasks_file_the_change_is_the_task_and_loop_count_counts_its_iterations(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    import attrs

    from orchestra._policy import AlertsPolicy

    policy = attrs.evolve(
        quiet_policy(), run=RunPolicy(max_iterations=5), alerts=AlertsPolicy(loop_count=3)
    )
    cmd = agent(tmp_path, *(work(n) for n in range(1, 6)))
    await supervise_one(tmp_path, mock_clock, policy, cmd)
    events = timeline(tmp_path)
    raised = [
        (e["iteration"], e["alert"], e["detail"]) for e in events if e["event"] == "alert.raised"
    ]
    # More iterations than loop_count on one task, the change: no-tasks has nothing to count.
    assert raised == [
        (4, "loop-count", "4 iterations on the change (no tasks file to count tasks in)")
    ]
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    assert status.count("- Tasks completed: not measured") == 5
