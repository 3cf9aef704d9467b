"""Recovery after an opening and the watch after it, on trio's mock clock with a real fake agent.

The agent is a real process (``tests/fake_agent.py``) run as a named executor
whose argv carries ``{prompt}``, so what the probe is given is read back from
its own environment and arguments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from orchestra._durations import Duration
from orchestra._engine import CIRCUIT_OPEN, DONE
from orchestra._executor import Executor, ExecutorSpec
from orchestra._policy import (
    BreakerPolicy,
    Policy,
    RecoveryPolicy,
    RunPolicy,
    StagnationPolicy,
    VerifyPolicy,
)

from .test_supervised_loop import FAKE_AGENT, supervise_one, timeline

STRATEGIES = ("Re-read the plan.", "Split the task.", "Escalate: ask a person.")


def recovery_policy(**stagnation: Any) -> Policy:
    return Policy(
        verify=VerifyPolicy(command="", specs=()),
        run=RunPolicy(max_iterations=10),
        breaker=BreakerPolicy(cooldown=Duration(1800), cooldown_max=Duration(7200), max_opens=5),
        stagnation=StagnationPolicy(**stagnation),
        recovery=RecoveryPolicy(no_progress=STRATEGIES),
    )


def named_agent(tmp_path: Path, steps: list[dict[str, Any]]) -> Executor:
    """The fake agent as a named executor: its prompt arrives as an argument."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    argv = (sys.executable, str(FAKE_AGENT), str(script), "{prompt}")
    return Executor(name="fake", spec=ExecutorSpec(argv=argv))


def records(tmp_path: Path) -> Path:
    """Where the agent writes what it was given: outside the tree it works in."""
    folder = tmp_path.parent / f"{tmp_path.name}-records"
    folder.mkdir(exist_ok=True)
    return folder


def recorded(tmp_path: Path, n: int) -> dict[str, Any]:
    return {
        "print": "thinking\n",
        "record_env": str(records(tmp_path) / f"env-{n}.json"),
        "record_argv": str(records(tmp_path) / f"argv-{n}.json"),
    }


async def test_each_opening_hands_the_probe_the_next_strategy_then_escalates(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    loop_policy = recovery_policy(no_progress=1)
    loop_policy = attrs.evolve(loop_policy, run=RunPolicy(max_iterations=10, prompt="Work."))
    executor = named_agent(tmp_path, [recorded(tmp_path, n) for n in range(1, 6)])
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=executor
    )
    assert summary.reason == CIRCUIT_OPEN
    assert summary.iterations == 3
    assert waited == [1800, 3600]
    assert "no recovery strategy left for no-progress" in (summary.detail or "")

    first = json.loads((records(tmp_path) / "env-1.json").read_text())
    assert not any(key.startswith("FORGE_RECOVERY") for key in first)
    assert json.loads((records(tmp_path) / "argv-1.json").read_text()) == ["Work."]
    for n, step in ((2, 1), (3, 2)):
        env = json.loads((records(tmp_path) / f"env-{n}.json").read_text())
        assert env["FORGE_RECOVERY_TYPE"] == "no-progress"
        assert env["FORGE_RECOVERY_STEP"] == str(step)
        assert env["FORGE_RECOVERY_STRATEGY"] == STRATEGIES[step - 1]
        (prompt,) = json.loads((records(tmp_path) / f"argv-{n}.json").read_text())
        assert prompt.startswith("Work.\n\n")
        assert f"Strategy {step} of 3: {STRATEGIES[step - 1]}" in prompt
        assert env["FORGE_PROMPT"] == prompt

    steps = [e for e in timeline(tmp_path) if e["event"] == "recovery.step"]
    assert [(e["trip_kind"], e["step"], e["escalated"]) for e in steps] == [
        ("no-progress", 1, False),
        ("no-progress", 2, False),
        ("no-progress", 3, True),
    ]
    assert steps[-1]["strategy"] == STRATEGIES[-1]


async def test_a_prompt_places_the_strategy_at_its_placeholder(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    loop_policy = recovery_policy(no_progress=1)
    run = RunPolicy(max_iterations=2, prompt="Before. {recovery} After.")
    executor = named_agent(tmp_path, [recorded(tmp_path, n) for n in range(1, 3)])
    await supervise_one(
        tmp_path, mock_clock, attrs.evolve(loop_policy, run=run), "", executor=executor
    )
    assert json.loads((records(tmp_path) / "argv-1.json").read_text()) == ["Before.  After."]
    (prompt,) = json.loads((records(tmp_path) / "argv-2.json").read_text())
    assert prompt.startswith("Before. Forge recovery: this loop stalled (no-progress). ")
    assert prompt.endswith(f"Strategy 1 of 3: {STRATEGIES[0]} After.")


async def test_stagnation_recurring_inside_the_watch_escalates_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    idle = {"print": "thinking\n"}
    work = {"print": "working\n", "append": {"work.py": "x = 1\n"}}
    steps: list[dict[str, Any]] = [idle, idle, work, idle, idle, idle]
    executor = named_agent(tmp_path, steps)
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, recovery_policy(no_progress=2), "", executor=executor
    )
    assert waited == [1800]  # one cooldown: the recurrence is not cooled down again
    assert summary.reason == CIRCUIT_OPEN
    assert summary.iterations == 5
    assert (summary.detail or "").startswith(
        "stagnation recurred within 3 iteration(s) after recovery: stagnation: no-progress (2)"
    )
    events = timeline(tmp_path)
    kinds = [e["event"] for e in events if e["event"].startswith("breaker.")]
    assert kinds == ["breaker.opened", "breaker.half_open", "breaker.closed", "breaker.opened"]
    assert [e for e in events if e["event"] == "breaker.opened"][-1]["escalated"] is True
    # The strategy stays in force for the watched iterations.
    finished = [e for e in events if e["event"] == "iteration.finished"]
    assert len(finished) == 5
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    circuit_lines = [line for line in status.splitlines() if line.startswith("- Circuit state:")]
    assert circuit_lines == [
        "- Circuit state: CLOSED",
        "- Circuit state: CLOSED (then opened: stagnation: no-progress (2))",
        "- Circuit state: HALF-OPEN (the probe closed it)",
        "- Circuit state: CLOSED",
        "- Circuit state: CLOSED (then opened for good: stagnation recurred within 3 "
        "iteration(s) after recovery: stagnation: no-progress (2))",
    ]
    strategy = [line for line in status.splitlines() if line.startswith("- Recovery strategy:")]
    assert strategy == [f"- Recovery strategy: no-progress 1/3: {STRATEGIES[0]}"] * 3


async def test_after_the_watch_a_new_stall_cools_down_with_the_next_strategy(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    idle = {"print": "thinking\n"}

    def work(n: int) -> dict[str, Any]:
        return {"print": "working\n", "append": {"work.py": f"x = {n}\n"}}

    # Stall (1-2), the probe works (3), three watched iterations work (4-6), a stall (7:
    # the score over the window turns negative), then the probe finishes.
    steps = [idle, idle, work(3), work(4), work(5), work(6), idle, {"print": "FORGE_DONE\n"}]
    executor = named_agent(tmp_path, steps)
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, recovery_policy(no_progress=2), "", executor=executor
    )
    assert summary.reason == DONE, summary.detail
    assert waited == [1800, 1800]
    steps_given = [
        (e["step"], e["escalated"]) for e in timeline(tmp_path) if e["event"] == "recovery.step"
    ]
    assert steps_given == [(1, False), (2, False)]


MISSING: dict[str, Any] = {"stderr": "ModuleNotFoundError: No module named 'requests'\n", "exit": 1}


async def test_a_stall_on_one_repeated_error_is_handed_the_identical_errors_strategy(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # no-progress (3) trips before identical-errors (5) could: the repeated error names the kind.
    steps = [{**MISSING, **recorded(tmp_path, n)} for n in range(1, 6)]
    loop_policy = attrs.evolve(recovery_policy(), run=RunPolicy(max_iterations=5))
    _, _, _ = await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=named_agent(tmp_path, steps)
    )
    events = timeline(tmp_path)
    opened = [e for e in events if e["event"] == "breaker.opened"]
    assert opened[0]["reason"] == "stagnation: no-progress (3)"
    steps_given = [(e["trip_kind"], e["step"]) for e in events if e["event"] == "recovery.step"]
    # The probe fails on the same error: the next strategy of the same kind.
    assert steps_given[:2] == [("identical-errors", 1), ("identical-errors", 2)]
    probe = json.loads((records(tmp_path) / "env-4.json").read_text())
    assert probe["FORGE_RECOVERY_TYPE"] == "identical-errors"
    assert probe["FORGE_RECOVERY_STRATEGY"] == RecoveryPolicy().identical_errors[0]
    # The status log lists the error itself, not the exit code.
    status = (tmp_path / ".forge/changes/c/status.md").read_text()
    errors = [line for line in status.splitlines() if line.startswith("- Errors encountered:")]
    assert errors[0] == "- Errors encountered: ModuleNotFoundError: No module named 'requests'"
    # forge policy simulate replays the same decision.
    from orchestra._engine import replay
    from orchestra._state import read_timeline

    replayed = replay(
        read_timeline(tmp_path / ".forge/changes/c/timeline.jsonl").typed(), loop_policy
    )
    given = [step.recovery for step in replayed.steps if step.recovery]
    assert given[0].startswith("identical-errors 1/")
    assert given[1].startswith("identical-errors 2/")


async def test_a_probe_failing_on_the_error_the_loop_stalled_on_switches_to_identical_errors(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    idle: dict[str, Any] = {"print": "thinking\n"}
    # Iteration 1 had no error: the stall is no-progress; the probe then repeats iteration 3's.
    steps = [idle, MISSING, MISSING, MISSING, MISSING]
    loop_policy = attrs.evolve(recovery_policy(), run=RunPolicy(max_iterations=4))
    await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=named_agent(tmp_path, steps)
    )
    steps_given = [
        (e["trip_kind"], e["step"]) for e in timeline(tmp_path) if e["event"] == "recovery.step"
    ]
    assert steps_given == [("no-progress", 1), ("identical-errors", 1)]


async def test_the_plan_states_the_opening_that_really_escalates(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    from orchestra._engine import escalation_text, openings_before_escalation

    # A two-step list escalates at its second opening, well before max_opens = 3 is spent.
    loop_policy = attrs.evolve(
        recovery_policy(no_progress=1),
        breaker=BreakerPolicy(cooldown=Duration(1800), cooldown_max=Duration(7200), max_opens=3),
        recovery=RecoveryPolicy(no_progress=("Try harder.", "Call a human.")),
    )
    counts = openings_before_escalation(loop_policy)
    assert counts["no-progress"] == 1
    assert counts["identical-errors"] == 3  # its shipped list is longer than max_opens
    text = escalation_text(loop_policy)
    assert text.startswith("after 3 opening(s), escalate (")
    assert "no-progress: 1" in text
    # What the live loop does: one cooldown, then the second opening escalates.
    idle = {"print": "thinking\n"}
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, loop_policy, "", executor=named_agent(tmp_path, [idle])
    )
    assert summary.reason == CIRCUIT_OPEN
    assert len(waited) == counts["no-progress"]


def test_the_plan_with_long_lists_escalates_at_max_opens_or_the_list() -> None:
    from orchestra._engine import escalation_text, recovery_text

    four = ("a", "b", "c", "Escalate.")
    recovery = RecoveryPolicy(
        no_progress=four,
        identical_errors=four,
        test_fix_loop=four,
        circular=four,
        permission_denials=four,
        verify=four,
        watch=2,
    )
    policy = Policy(breaker=BreakerPolicy(max_opens=5), recovery=recovery)
    assert escalation_text(policy) == "after 3 opening(s), escalate"
    assert recovery_text(policy) == (
        "strategies per kind: no-progress 4, identical-errors 4, test-fix-loop 4, circular 4, "
        "permission-denials 4, verify 4; watch 2 iteration(s) after a probe closes the circuit; "
        "alerts on"
    )
