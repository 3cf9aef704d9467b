"""The supervised loop's circuit on trio's mock clock: cooldowns, probes, doubling, escalation.

The executor and the verify are real processes; only the waiting is mocked. A
driver task lets everything settle, and when the loop is cooling down it jumps
the clock by exactly the cooldown left, recording each one.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
import yaml

from orchestra._circuit import OPEN, CircuitState
from orchestra._durations import Duration
from orchestra._engine import (
    CIRCUIT_OPEN,
    DONE,
    EXECUTOR_FAILED,
    LoopPlan,
    LoopProgress,
    LoopRules,
    LoopSettings,
    RunSummary,
    SecscanGate,
    run_loop,
    supervised_rules,
)
from orchestra._executor import Executor, ExecutorSpec, shell_command
from orchestra._policy import BreakerPolicy, BudgetPolicy, Policy, RunPolicy, VerifyPolicy
from orchestra._ratelimit import MemoryBackend, RateLimiter
from orchestra._state import ChangePaths, save_state

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
EPOCH = 1_800_000_000.0  # wall clock at trio time 0


def policy(verify: str, *, max_failures: int = 1, max_opens: int = 3, **breaker: Any) -> Policy:
    return Policy(
        verify=VerifyPolicy(command=verify, specs=(), max_failures=max_failures),
        run=RunPolicy(max_iterations=10),
        breaker=BreakerPolicy(
            cooldown=breaker.get("cooldown", Duration(1800)),
            cooldown_max=breaker.get("cooldown_max", Duration(3600)),
            max_opens=max_opens,
            on_open=breaker.get("on_open", "cooldown"),
        ),
        budget=breaker.get("budget", BudgetPolicy()),
    )


def agent(tmp_path: Path, *steps: dict[str, Any]) -> str:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


async def supervise_one(
    tmp_path: Path,
    clock: trio.testing.MockClock,
    loop_policy: Policy,
    cmd: str,
    on_cooldown: Any = None,
    executor: Executor | None = None,
    limiter: RateLimiter | None = None,
    workdir: Path | None = None,
    rules: LoopRules | None = None,
) -> tuple[RunSummary, list[float], list[str]]:
    """Run one supervised loop; return its summary, the cooldowns waited, and the events.

    ``rules``: another loop's (``first_trip_rules`` for a ``forge run``).
    """
    paths = ChangePaths(tmp_path, "c")
    plan = LoopPlan(
        paths=paths,
        executor=executor or shell_command(cmd),
        max_iterations=loop_policy.run.max_iterations,
        time_limit=600,
        grace=1,
        done_marker="FORGE_DONE",
        workdir=workdir or tmp_path,
        prompt=loop_policy.run.prompt,
    )
    progress = LoopProgress("c", plan.max_iterations)
    settings = LoopSettings(
        loop_policy,
        rules or supervised_rules(loop_policy),
        SecscanGate(),
        limiter,
        lambda: EPOCH + trio.current_time(),
    )
    events: list[str] = []
    waited: list[float] = []
    outcome: list[RunSummary] = []

    async def loop() -> None:
        outcome.append(
            await run_loop(
                plan,
                settings,
                progress=progress,
                on_event=lambda kind, change, text: events.append(kind),
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        while not outcome:
            await trio.testing.wait_all_tasks_blocked(cushion=0.002)
            if progress.status == "cooling down" and progress.cooldown_until is not None:
                left = progress.cooldown_until - trio.current_time()
                waited.append(left)
                if on_cooldown is not None:
                    on_cooldown(len(waited))
                clock.jump(left)
            elif progress.status == "waiting for the provider's reset":
                # forge run waits for a reset itself, never longer than this.
                clock.jump(loop_policy.run.max_limit_wait.seconds)
            elif progress.status == "waiting for a permit" and limiter is not None:
                left = limiter.statistics().next_free_in
                if left > 0:
                    waited.append(left)
                    clock.jump(left)
    return outcome[0], waited, events


def timeline(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / ".forge" / "changes" / "c" / "timeline.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def test_cooldown_doubles_to_its_cap_then_escalates(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy("exit 1", max_opens=3), "true"
    )
    assert waited == [1800, 3600, 3600]  # doubled, then capped at cooldown_max
    assert summary.reason == CIRCUIT_OPEN
    assert summary.iterations == 4  # the first failure and three probes
    kinds = [e["event"] for e in timeline(tmp_path) if e["event"].startswith("breaker.")]
    assert kinds == [
        "breaker.opened",
        "breaker.half_open",
        "breaker.opened",
        "breaker.half_open",
        "breaker.opened",
        "breaker.half_open",
        "breaker.opened",
    ]
    opened = [e for e in timeline(tmp_path) if e["event"] == "breaker.opened"]
    assert [e["cooldown"] for e in opened] == [1800, 3600, 3600, 3600]
    assert opened[-1]["escalated"] is True
    assert trio.current_time() == 1800 + 3600 + 3600  # waited on the trio clock, exactly


async def test_a_probe_that_passes_closes_the_circuit_and_resets_the_cooldown(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    marker = tmp_path / "fixed"
    work = str(tmp_path / "work.py")
    cmd = agent(
        tmp_path,
        {"print": "trying\n", "write": {work: "v1"}},
        {"print": "fixed it\n", "write": {work: "v2"}},
        {"print": "FORGE_DONE\n", "write": {work: "v3"}},
    )

    def fix(_count: int) -> None:
        marker.write_text("yes")  # a human (or the agent) fixes it during the cooldown

    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy(f"test -f {marker}"), cmd, on_cooldown=fix
    )
    assert waited == [1800]
    assert summary.reason == DONE
    assert summary.iterations == 3
    kinds = [e["event"] for e in timeline(tmp_path) if e["event"].startswith("breaker.")]
    assert kinds == ["breaker.opened", "breaker.half_open", "breaker.closed"]
    state = yaml.safe_load((tmp_path / ".forge" / "changes" / "c" / "breaker.yaml").read_text())
    assert state["state"] == "closed"
    assert state["cooldown"] is None
    assert state["finished"] == "done"


async def test_a_probe_runs_even_though_the_verify_breaker_is_open(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    calls = tmp_path / "calls"
    cmd = f"echo x >> {calls}"
    summary, _, _ = await supervise_one(tmp_path, mock_clock, policy("exit 1", max_opens=1), cmd)
    assert summary.reason == CIRCUIT_OPEN
    assert len(calls.read_text().splitlines()) == 2  # the tripping iteration and its probe


async def test_a_restarted_loop_honours_a_cooldown_that_began_before_it(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    paths = ChangePaths(tmp_path, "c")
    earlier = CircuitState(
        state=OPEN,
        reason="verify",
        opened_at=EPOCH - 600,
        cooldown=1800,
        opens=1,
        iterations_used=4,
    )
    save_state(paths.breaker, earlier)
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy("true"), agent(tmp_path, {"print": "FORGE_DONE\n"})
    )
    assert waited == [1200]  # thirty minutes less the ten already spent
    assert summary.reason == DONE
    assert summary.iterations == 5  # continues after the four used before the restart


async def test_an_opened_at_in_the_future_keeps_the_circuit_open(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    paths = ChangePaths(tmp_path, "c")
    skewed = CircuitState(state=OPEN, reason="r", opened_at=EPOCH + 86400, cooldown=1800, opens=1)
    save_state(paths.breaker, skewed)
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy("true"), agent(tmp_path, {"print": "FORGE_DONE\n"})
    )
    assert waited == [1800]  # neither closed early nor stuck for a day
    assert summary.reason == DONE


async def test_on_open_escalate_stops_at_the_first_trip(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy("exit 1", on_open="escalate"), "true"
    )
    assert waited == []
    assert summary.reason == CIRCUIT_OPEN
    assert summary.iterations == 1


async def test_a_spent_budget_escalates_without_a_cooldown(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    loop_policy = policy("true", budget=BudgetPolicy(max_tokens=100))
    cmd = agent(tmp_path, {"report": {"tokens": 60}})
    summary, waited, _ = await supervise_one(tmp_path, mock_clock, loop_policy, cmd)
    assert waited == []
    assert summary.reason == CIRCUIT_OPEN
    assert summary.iterations == 2
    assert summary.detail is not None
    assert "budget: 120 tokens spent, ceiling 100" in summary.detail


async def test_an_executor_failure_is_judged_not_fatal(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    work = str(tmp_path / "work.py")
    cmd = agent(
        tmp_path,
        {"exit": 3, "write": {work: "a"}},
        {"exit": 3, "write": {work: "b"}},
        {"print": "FORGE_DONE\n", "write": {work: "c"}},
    )
    summary, waited, _ = await supervise_one(tmp_path, mock_clock, policy("true"), cmd)
    assert waited == []
    assert summary.reason == DONE
    assert summary.iterations == 3


async def test_an_executor_that_cannot_start_escalates_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    summary, _, _ = await supervise_one(
        tmp_path, mock_clock, policy("true"), "", executor=missing_program()
    )
    assert summary.reason == EXECUTOR_FAILED
    assert summary.iterations == 1
    assert summary.detail is not None
    assert "could not start: /nonexistent/agent" in summary.detail


def missing_program() -> Executor:
    return Executor(name="ghost", spec=ExecutorSpec(argv=("/nonexistent/agent", "{prompt}")))


def rejected(resets_in: float) -> str:
    info = {"status": "rejected", "resetsAt": EPOCH + resets_in}
    return json.dumps({"type": "rate_limit_event", "rate_limit_info": info})


def result(text: str, *, is_error: bool = False) -> str:
    return json.dumps(
        {"type": "result", "subtype": "success", "is_error": is_error, "result": text}
    )


def fake_claude(tmp_path: Path, *outputs: str) -> Executor:
    """A fake agent speaking Claude's stream-json, one output per iteration."""
    script = tmp_path / "claude.json"
    script.write_text(json.dumps({"steps": [{"print": out} for out in outputs]}))
    argv = (sys.executable, str(FAKE_AGENT), str(script))
    return Executor(
        name="fake-claude",
        spec=ExecutorSpec(argv=argv, output="claude-stream-json"),
        templated=False,
    )


def mock_limiter() -> RateLimiter:
    return RateLimiter(
        MemoryBackend(trio.current_time),
        100,
        3600.0,
        0.8,
        clock=trio.current_time,
        wall_clock=lambda: EPOCH + trio.current_time(),
    )


async def test_a_provider_limit_pauses_instead_of_tripping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    claude = fake_claude(
        tmp_path,
        f"{rejected(300)}\n{result('usage limit', is_error=True)}\n",
        f"{result('FORGE_DONE')}\n",
    )
    summary, waited, events = await supervise_one(
        tmp_path, mock_clock, policy("true"), "", executor=claude, limiter=mock_limiter()
    )
    assert summary.reason == DONE
    assert summary.iterations == 2
    assert waited == [300]  # every acquirer waits for the provider's reset
    assert "breaker.opened" not in events


async def test_a_provider_limit_with_a_failing_verify_trips_nothing(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    claude = fake_claude(tmp_path, f"{rejected(60)}\n", f"{result('FORGE_DONE')}\n")
    limiter = mock_limiter()
    verified = tmp_path / "verified"
    summary, waited, events = await supervise_one(
        tmp_path,
        mock_clock,
        policy(f"echo x >> {verified}; exit 1", max_opens=1),
        "",
        executor=claude,
        limiter=limiter,
    )
    # The refused iteration was neither verified nor judged: the first verify,
    # and the first trip, come with the second iteration.
    assert len(verified.read_text().splitlines()) == 2  # iterations 2 and the probe
    assert waited == [60, 1800]
    assert events.count("breaker.opened") == 2
    assert summary.reason == CIRCUIT_OPEN


async def test_a_verify_breaker_open_at_start_is_a_trip_then_a_probe(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    from orchestra._verify import NEW

    paths = ChangePaths(tmp_path, "c")
    save_state(
        paths.verify_attempts,
        attrs.evolve(NEW, consecutive_failures=3, open=True, total_attempts=3, max_failures=3),
    )
    work = str(tmp_path / "w.py")
    cmd = agent(tmp_path, {"print": "FORGE_DONE\n", "write": {work: "x"}})
    summary, waited, events = await supervise_one(tmp_path, mock_clock, policy("true"), cmd)
    assert waited == [1800]
    assert events[:3] == ["breaker.opened", "circuit", "breaker.half_open"]
    assert summary.reason == DONE
    assert summary.iterations == 1


async def test_a_shell_command_not_found_escalates_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    summary, _, _ = await supervise_one(tmp_path, mock_clock, policy("true"), "claudee -p x")
    assert summary.reason == EXECUTOR_FAILED
    assert summary.iterations == 1


async def test_a_reset_during_the_cooldown_is_kept(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    from orchestra._circuit import reset_circuit
    from orchestra._verify import reset_breaker

    work = str(tmp_path / "work.py")
    cmd = agent(
        tmp_path,
        {"print": "trying\n", "write": {work: "v1"}},
        {"print": "FORGE_DONE\n", "write": {work: "v2"}},
    )
    marker = tmp_path / "fixed"

    def person_resets(count: int) -> None:
        if count == 1:  # from another terminal, mid-cooldown: both breakers
            marker.write_text("yes")
            reset_circuit(ChangePaths(tmp_path, "c"))
            reset_breaker(ChangePaths(tmp_path, "c"))

    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy(f"test -f {marker}"), cmd, on_cooldown=person_resets
    )
    assert summary.reason == DONE
    assert waited == [1800]
    kinds = [e["event"] for e in timeline(tmp_path) if e["event"].startswith("breaker.")]
    # Opened, reset by the person; no half-open written over the reset.
    assert kinds == ["breaker.opened", "breaker.reset", "breaker.reset"]
    state = yaml.safe_load((tmp_path / ".forge" / "changes" / "c" / "breaker.yaml").read_text())
    assert (state["state"], state["opens"]) == ("closed", 0)


async def test_persisted_times_are_the_loop_s_wall_clock(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # A fleet passes its server's clock as the wall clock: the spend's and the
    # verify streak's times are that clock's, not this machine's.
    summary, _, _ = await supervise_one(
        tmp_path, mock_clock, policy("true"), shlex.join(["echo", "FORGE_DONE"])
    )
    assert summary.reason == DONE
    folder = tmp_path / ".forge" / "changes" / "c"
    spend = yaml.safe_load((folder / "spend.yaml").read_text())
    assert spend["updated_at"].startswith("2027-01-15T08:00:"), spend
    verify = (folder / "verify-attempts.yaml").read_text()
    stamps = [word for word in verify.split() if word.strip("'\"").startswith("20")]
    assert stamps, verify
    assert all(stamp.strip("'\"").startswith("2027-01-15T08:00:") for stamp in stamps), verify
