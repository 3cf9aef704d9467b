"""Agent sessions: continued from one iteration to the next, fresh after the circuit opened."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import trio.testing

from orchestra._engine import DONE
from orchestra._executor import Executor, ExecutorSpec
from orchestra._policy import BreakerPolicy, Policy, RunPolicy, VerifyPolicy

from .test_supervised_loop import FAKE_AGENT, supervise_one


def session_agent(tmp_path: Path) -> Executor:
    """Claude-like output with a session id; each invocation's argv appended to argv.log."""
    out = [
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": text,
                "session_id": f"s{n}",
            }
        )
        for n, text in enumerate(["working", "working", "working", "FORGE_DONE"], start=1)
    ]
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"steps": [{"print": line + "\n"} for line in out]}))
    log = tmp_path / "argv.log"
    agent = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    wrapper = f'echo "$*" >> {shlex.quote(str(log))}; exec {agent}'
    return Executor(
        name="fake",
        spec=ExecutorSpec(
            argv=("sh", "-c", wrapper, "sh", "new"),
            resume_argv=("sh", "-c", wrapper, "sh", "resume", "{session}"),
            output="claude-json",
            session="continue",
        ),
    )


async def test_sessions_continue_and_start_fresh_after_the_circuit_opened(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    verdicts = tmp_path / "verdicts"
    # The verify fails once (at the second iteration): the circuit opens, cools down, probes.
    verify = f'n=$(cat {verdicts} 2>/dev/null || echo 0); echo $((n+1)) > {verdicts}; [ "$n" != 1 ]'
    policy = Policy(
        verify=VerifyPolicy(command=verify, specs=(), max_failures=1),
        run=RunPolicy(max_iterations=6),
        breaker=BreakerPolicy(max_opens=3),
    )
    executor = session_agent(tmp_path)
    summary, _, events = await supervise_one(tmp_path, mock_clock, policy, "", executor=executor)
    assert summary.reason == DONE
    assert "breaker.opened" in events
    calls = (tmp_path / "argv.log").read_text().splitlines()
    # 1: fresh; 2: continues s1; the verify fails, the circuit opens; 3 (the probe): fresh.
    assert calls[:3] == ["new", "resume s1", "new"]
    assert calls[3] == "resume s3"
    timeline = (tmp_path / ".forge" / "changes" / "c" / "timeline.jsonl").read_text()
    sessions = [
        json.loads(line)["session"]
        for line in timeline.splitlines()
        if json.loads(line)["event"] == "iteration.finished"
    ]
    assert sessions[:4] == ["s1", "s2", "s3", "s4"]
