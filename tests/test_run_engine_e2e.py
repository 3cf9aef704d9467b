"""forge run on the one loop engine: loop circuit, shared limiter, provider limits, agent errors.

Each test drives the real ``forge`` in a scratch repository with the
scriptable fake agent; a JSON-speaking agent is declared as a project
executor (``executors/fakeclaude.toml``) whose output is read as Claude's.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from orchestra._circuit import OPEN, CircuitState
from orchestra._state import ChangePaths, save_state

from .support import Repo, spawn_forge
from .test_run_e2e import ANNOUNCE, ESCALATE, agent, calls, events, run

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def claude_agent(repo: Repo, *steps: dict[str, Any]) -> None:
    """A project executor ``fakeclaude``: the fake agent, its output read as Claude's JSON."""
    script = repo.root.parent / "claude-script.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write(
        "executors/fakeclaude.toml",
        f'argv = {json.dumps(argv)}\noutput = "claude-stream-json"\n',
    )


def result(**fields: Any) -> str:
    base = {"type": "result", "subtype": "success", "is_error": False, "result": "working"}
    return json.dumps(base | fields) + "\n"


def rate_limited(resets_at: float | None) -> str:
    info: dict[str, Any] = {"status": "rejected", "rateLimitType": "five_hour"}
    if resets_at is not None:
        info["resetsAt"] = resets_at
    event = {"type": "rate_limit_event", "rate_limit_info": info}
    return json.dumps(event) + "\n" + result(is_error=True, result="usage limit reached")


def write_circuit(repo: Repo, change: str, circuit: CircuitState) -> None:
    save_state(ChangePaths(repo.root, change).breaker, circuit)


# --- the loop circuit ----------------------------------------------------------------


def test_run_refuses_an_escalated_loop_circuit(repo: Repo) -> None:
    write_circuit(
        repo,
        "spin",
        CircuitState(
            state=OPEN,
            reason="stagnation: no-progress (3)",
            opened_at=1.0,
            cooldown=1800.0,
            opens=1,
            escalated=True,
        ),
    )
    done = run(repo, "--change", "spin", "--cmd", agent(repo, {"print": "bypass\n"}), "--yes")
    assert done.code == 1
    assert done.lines == [
        ANNOUNCE,
        "run: STOPPED after 0 iteration(s) — gate-open",
        "  gate:   loop circuit",
        "  detail: escalated: stagnation: no-progress (3)",
        ESCALATE,
    ]
    assert calls(repo) == []  # zero executor invocations


def test_run_refuses_a_circuit_that_is_cooling_down_and_says_how_long(repo: Repo) -> None:
    write_circuit(
        repo,
        "c",
        CircuitState(
            state=OPEN,
            reason="verify: 3 consecutive failures",
            opened_at=time.time(),
            cooldown=1800.0,
            opens=1,
        ),
    )
    done = run(repo, "--change", "c", "--cmd", agent(repo, {"print": "FORGE_DONE\n"}), "--yes")
    assert done.code == 1
    assert done.lines[:3] == [
        ANNOUNCE,
        "run: STOPPED after 0 iteration(s) — gate-open",
        "  gate:   loop circuit",
    ]
    detail = done.lines[3]
    assert detail.startswith("  detail: open: verify: 3 consecutive failures; cooldown ")
    assert detail.endswith(" left")
    assert calls(repo) == []


def test_a_closed_circuit_left_by_supervise_does_not_stop_a_run(repo: Repo) -> None:
    write_circuit(repo, "c", CircuitState(opens=2, iterations_used=7))
    done = run(repo, "--change", "c", "--cmd", agent(repo, {"print": "FORGE_DONE\n"}), "--yes")
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    # forge run reads the loop circuit; it does not move it.
    kept = yaml.safe_load(ChangePaths(repo.root, "c").breaker.read_text())
    assert (kept["opens"], kept["iterations_used"]) == (2, 7)


# --- the shared rate limiter ---------------------------------------------------------


def test_every_executor_start_takes_a_permit_from_the_shared_limiter(repo: Repo) -> None:
    repo.write("forge.toml", '[rate_limit]\ncalls = 1\nwindow = "1h"\n')
    cmd = agent(repo, {"print": "working\n"})
    first = run(repo, "--change", "a", "--cmd", cmd, "--yes", "--max-iterations", "1")
    assert first.code == 1, first
    assert (repo.root / ".forge" / "ratelimit.sqlite3").is_file()
    # The window's one permit is used: a second run (another change, another
    # process) waits for it rather than start its executor.
    second = spawn_forge(
        ["run", "--change", "b", "--cmd", cmd, "--yes", "--max-iterations", "1"], cwd=repo.root
    )
    try:
        assert second.stderr is not None
        # Blocks until forge says why it waits (the 80% warning may come first).
        seen = [second.stderr.readline() for _ in range(2)]
        assert any(line.startswith("rate limit: waiting ") for line in seen), seen
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=60)
    finally:
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert second.returncode == 130
    assert "run: INTERRUPTED after 0 iteration(s)" in out
    assert not [e for e in events(repo, "b") if e["event"] == "iteration.started"]


# --- provider limits -----------------------------------------------------------------


def test_a_provider_limit_past_its_reset_is_not_judged_and_the_run_goes_on(repo: Repo) -> None:
    claude_agent(
        repo, {"print": rate_limited(time.time() - 5)}, {"print": result(result="FORGE_DONE")}
    )
    done = run(repo, "--change", "c", "--executor", "fakeclaude", "--yes")
    assert done.code == 0, done
    # The ending counts what the progress lines count: the refused call used no iteration.
    assert done.lines[-2:] == [
        "refused: 1 call(s) refused by a provider limit, not counted",
        "run: DONE after 1 iteration(s)",
    ]
    assert done.lines[0] == ANNOUNCE
    assert done.lines[1].startswith("iteration 1 (not counted): refused by a provider limit in ")
    # The done call is the second run of the executor, and the first iteration counted.
    assert done.lines[2].startswith("iteration 2 (1/5 counted): done in ")
    finished = [e for e in events(repo, "c") if e["event"] == "iteration.finished"]
    assert [e["judged"] for e in finished] == [False, True]


def test_a_provider_limit_beyond_max_limit_wait_stops_with_its_own_ending(repo: Repo) -> None:
    resets = time.time() + 5 * 3600
    claude_agent(repo, {"print": rate_limited(resets)})
    done = run(repo, "--change", "c", "--executor", "fakeclaude", "--yes")
    assert done.code == 1
    assert done.lines[-5:-2] == [
        "refused: 1 call(s) refused by a provider limit, not counted",
        "run: STOPPED after 0 iteration(s) — provider-limit",
        "  gate:   provider limit",
    ]
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(resets))
    assert done.lines[-2] == (
        f"  detail: the provider refused the call until {when}, longer than "
        "[run] max_limit_wait (300s)"
    )
    assert done.lines[-1] == ESCALATE
    assert calls(repo) == ["c 1"]  # one executor start, then no retry into the exhausted quota
    spend = yaml.safe_load(ChangePaths(repo.root, "c").spend.read_text())
    assert spend["iterations"] == 1


def test_a_provider_limit_without_a_reset_time_stops_at_once(repo: Repo) -> None:
    claude_agent(repo, {"print": rate_limited(None)})
    done = run(repo, "--change", "c", "--executor", "fakeclaude", "--yes")
    assert done.code == 1
    assert "run: STOPPED after 0 iteration(s) — provider-limit" in done.lines
    assert "  detail: the provider refused the call and gave no reset time" in done.lines


# --- an error the agent reports --------------------------------------------------------


def test_an_error_the_agent_reports_is_a_failed_iteration(repo: Repo) -> None:
    claude_agent(
        repo,
        {
            "print": result(
                subtype="error_max_turns",
                is_error=True,
                result="Reached the maximum number of turns (10)",
                total_cost_usd=0.5,
            )
        },
    )
    done = run(repo, "--change", "c", "--executor", "fakeclaude", "--yes", "--json")
    assert done.code == 1
    summary = json.loads(done.out)
    assert summary["reason"] == "executor-failed"
    assert summary["iterations"] == 1
    assert (
        summary["detail"] == "the agent reported an error: Reached the maximum number of turns (10)"
    )
    assert summary["spend"]["cost_usd"] == 0.5
    human = run(repo, "--change", "d", "--executor", "fakeclaude", "--yes")
    assert "run: STOPPED after 1 iteration(s) — executor-failed" in human.lines
    assert (
        "  executor: the agent reported an error: Reached the maximum number of turns (10)"
        in human.lines
    )
    assert human.lines[-1] == ESCALATE


def test_the_run_plan_json_and_flags_share_the_timeout_rule(repo: Repo) -> None:
    repo.write(
        "executors/slow.toml",
        'argv = ["sh", "-c", "echo FORGE_DONE"]\ntimeout = "2h"\n',
    )
    started = [
        e
        for e in (
            run(repo, "--change", "t", "--executor", "slow", "--yes", "--timeout", "7s"),
            None,
        )
        if e is not None
    ]
    assert started[0].code == 0
    plan = next(e for e in events(repo, "t") if e["event"] == "run.started")["plan"]
    assert plan["timeout"] == 7.0  # a flag beats the executor definition's own
    run(repo, "--change", "u", "--executor", "slow", "--yes")
    plan = next(e for e in events(repo, "u") if e["event"] == "run.started")["plan"]
    assert plan["timeout"] == 7200.0


def _quote(path: Path) -> str:
    return shlex.quote(str(path))
