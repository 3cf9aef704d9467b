"""Concurrent forge processes on one change, and supervisors sharing one sqlite limiter.

Already covered elsewhere, and not repeated here: 20 simultaneous
``forge verify --change c`` (tests/test_state_e2e.py) and 8 processes sharing
one sqlite log through the library (tests/test_ratelimit_processes.py). Added
here: different commands racing on the same change's lock (verify, run and a
breaker reset), and separate ``forge supervise`` processes that must share one
rate limit through the real command.

Guards: the per-change flock around every read-modify-write and every timeline
append (without it updates are lost and seq numbers repeat), and the sqlite
limiter's cross-process transaction.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml

from ..support import FORGE, Repo, failing_policy, forge_env
from ..test_ratelimit import max_in_any_window
from .harness import agent_cmd, assert_clean_exit, inspect_state, wait_until


def _start(repo: Repo, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(FORGE), *args],
        cwd=repo.root,
        env=forge_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(processes: list[subprocess.Popen[bytes]]) -> list[tuple[int, str]]:
    ended = []
    for process in processes:
        _, err = process.communicate(timeout=120)
        ended.append((process.returncode, err.decode(errors="replace")))
    return ended


def test_verifies_a_reset_and_runs_racing_lose_no_update(repo: Repo) -> None:
    """Verifies and a breaker reset on one change, runs on three others, all at once.

    The runs share the secret-scan cache and the waivers lock with each other;
    the verifies and the reset share change c's lock.
    """
    # The verify commands wait at a barrier, so that all five record their
    # verdicts at the same instant: the lock, not luck, has to order them.
    barrier = repo.root.parent / "barrier"
    barrier.mkdir()
    command = (
        f"touch {barrier}/ready.$$; while [ ! -e {barrier}/go ]; do sleep 0.005; done; "
        "echo 'FAILED tests/test_cart.py::test_total'; exit 1"
    )
    repo.write("forge.toml", f"[verify]\ncommand = {json.dumps(command)}\nmax_failures = 1000\n")
    cmd = agent_cmd(
        repo.root.parent,
        "spender",
        {"print": "working\n", "report": {"tokens": 5, "tool_calls": 1, "cost_usd": 0.5}},
    )
    runs = [
        ("run", "--change", f"r{n}", "--cmd", cmd, "--yes", "--max-iterations", "2")
        for n in range(3)
    ]
    # Change c begins before the race (a reset refuses a change that has not begun).
    started = repo.forge("loop", "start", "--change", "c", "--goal", "totals", "--rubric", "R1: r")
    assert started.code == 0, started.err
    processes = [_start(repo, "verify", "--change", "c") for _ in range(5)]
    processes += [_start(repo, *run) for run in runs]
    processes.append(_start(repo, "verify", "--reset-breaker", "--change", "c"))
    wait_until(lambda: len(list(barrier.glob("ready.*"))) == 5, what="five verify commands")
    (barrier / "go").touch()
    ended = _finish(processes)
    for _code, err in ended:
        assert "Traceback" not in err, err
    # The runs exhaust their 2 iterations: exit 1, which is not a failure here.
    assert [code for code, _ in ended] == [0] * 5 + [1] * 3 + [0], ended

    facts = inspect_state(repo.root)  # seq strictly rising, every file parses
    counters = facts.changes["c"]
    assert counters.total_attempts == counters.verify_events == 5
    for n in range(3):
        spent = facts.changes[f"r{n}"]
        assert spent.spend_iterations == spent.finished_events == 2
        spend = yaml.safe_load((repo.change_dir(f"r{n}") / "spend.yaml").read_text())
        assert (spend["tokens"], spend["tool_calls"]) == (10, 2)
        assert spend["cost_usd"] == pytest.approx(1.0)
    events = [
        json.loads(line)
        for line in (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    ]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["event"] for e in events]
    assert kinds.count("breaker.reset") == 1
    # Streaks are a fold of the verdicts in lock order: each verify saw the one
    # before it, and the reset cleared the streak wherever it landed.
    reset_at = kinds.index("breaker.reset")
    before = [e["consecutive_failures"] for e in events[:reset_at] if e["event"] == "verify"]
    after = [e["consecutive_failures"] for e in events[reset_at:] if e["event"] == "verify"]
    assert before == list(range(1, len(before) + 1))
    assert after == list(range(1, len(after) + 1))


# Forge's own writes during an iteration are not agent harm (the forge-writes journal).


def test_the_agents_stop_hook_verify_during_a_run_iteration_is_kept(repo: Repo) -> None:
    failing_policy(repo, max_failures=1000)
    # Only outside the sandbox can the hook record: inside, .forge/ is read-only.
    policy = repo.root / "forge.toml"
    policy.write_text(policy.read_text() + '\n[sandbox]\nmode = "off"\n')
    assert repo.forge("verify", "--change", "c").code == 0  # the breaker file exists
    # What Claude Code's Stop hook does inside an iteration (FORGE_CHANGE is set by forge run).
    cmd = f"echo '{{}}' | {FORGE} hook stop >/dev/null; echo FORGE_DONE"
    done = repo.forge("run", "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "1")
    counters = inspect_state(repo.root).changes["c"]
    assert counters.verify_events == 2
    assert counters.total_attempts == 2  # fails: restored to 1, the hook's attempt is lost
    # Not harm (no gate-open on integrity); the failing verify keeps done from standing.
    assert done.code == 1, done.out
    assert "run: STOPPED after 1 iteration(s) — done-unverified" in done.lines, done.out


@pytest.mark.reliability
def test_two_runs_on_one_change_keep_both_spends(repo: Repo) -> None:
    slow = agent_cmd(repo.root.parent, "slow", {"sleep": 1.5, "report": {"tokens": 100}})
    quick = agent_cmd(repo.root.parent, "quick", {"report": {"tokens": 1}})
    assert_clean_exit(
        repo.forge("run", "--change", "c", "--cmd", quick, "--yes", "--max-iterations", "1"), 1
    )
    first = _start(repo, "run", "--change", "c", "--cmd", slow, "--yes", "--max-iterations", "1")
    timeline = repo.change_dir("c") / "timeline.jsonl"
    wait_until(lambda: timeline.read_text().count("iteration.started") == 2, what="iteration")
    second = repo.forge("run", "--change", "c", "--cmd", quick, "--yes", "--max-iterations", "1")
    _finish([first])
    assert "Traceback" not in second.err
    counters = inspect_state(repo.root).changes["c"]
    assert counters.finished_events == 3
    assert counters.spend_iterations == 3  # fails: the slow run restored spend.yaml
    spend = yaml.safe_load((repo.change_dir("c") / "spend.yaml").read_text())
    assert spend["tokens"] == 102


@pytest.mark.reliability
def test_three_supervisors_share_one_sqlite_rate_limit(repo: Repo) -> None:
    """Three ``forge supervise`` processes, one loop each, 4 starts per 1.5 s between them."""
    starts = repo.root.parent / "starts"
    agent = agent_cmd(
        repo.root.parent, "stamp", {"shell": f"date +%s.%N >> {starts}", "print": "x\n"}
    )
    calls, window = 4, 1.5
    batches = []
    for name in ("one", "two", "three"):
        batch = repo.root.parent / f"{name}.toml"
        batch.write_text(
            f'[[loop]]\nchange = "{name}"\ncmd = {json.dumps(agent)}\nmax_iterations = 4\n'
        )
        batches.append(batch)
    repo.write(
        "forge.toml",
        f'[verify]\ncommand = ""\nspecs = []\n[rate_limit]\ncalls = {calls}\nwindow = "{window}s"\n'
        "[stagnation]\nno_progress = 100\nwindow = 100\n",
    )
    repo.commit("policy")
    began = time.monotonic()
    ended = _finish([_start(repo, "supervise", "--batch", str(b)) for b in batches])
    elapsed = time.monotonic() - began
    for _code, err in ended:
        assert "Traceback" not in err, err
    stamps = [float(line) for line in starts.read_text().split()]
    assert len(stamps) == 12
    # An agent starts a moment after its permit: allow that much skew per window.
    assert max_in_any_window(stamps, window - 0.25) <= calls
    assert elapsed >= 2 * window  # 12 starts at 4 a window need two more windows
    inspect_state(repo.root)  # the shared database passes its integrity check
