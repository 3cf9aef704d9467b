"""kill -9 of forge at seeded random instants during verify, run and supervise.

Hundreds of trials, each a few tenths of a second to a second and a half of
real activity (tiny verify commands, fake-agent iterations of 10-50 ms). After
every kill: every YAML, JSON and sqlite file under ``.forge`` reads, the
timeline has at most one torn last line (which ``forge timeline`` tolerates),
and no counter moved without its event beyond the one in flight. Every few
trials a run that is not killed must resume normally.

Guards: atomic_write (temp file, fsync, rename), the timeline's torn-line
handling, the order state-then-event, and the flock when kills land among
concurrent processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time

import pytest

from ..support import FORGE, Repo, failing_policy, forge_env
from .harness import (
    RUN_POLICY,
    SUPERVISE_POLICY,
    Tracker,
    agent_cmd,
    assert_clean_exit,
    kill_after,
    supervise_batch,
    timed,
    torn_is_tolerated,
)

pytestmark = pytest.mark.reliability

VERIFY = ("verify", "--change", "c")


def _after_kill(repo: Repo, tracker: Tracker) -> None:
    tracker.step()
    for change in tracker.torn():
        torn_is_tolerated(repo, change)


@pytest.mark.parametrize("seed", range(4))
def test_kill9_during_verify(repo: Repo, seed: int) -> None:
    failing_policy(repo, max_failures=1000)
    rng = random.Random(seed)
    tracker = Tracker(repo)
    done, span = timed(repo, *VERIFY)
    assert_clean_exit(done, 0)
    tracker.step(in_flight=0)
    for trial in range(40):
        # The state is written at the end of a verify: aim at its second half.
        kill_after(repo, rng.uniform(0.4, 1.1) * span, *VERIFY)
        _after_kill(repo, tracker)
        if trial % 5 == 4:
            assert_clean_exit(repo.forge(*VERIFY), 0)
            tracker.step(in_flight=0)
    assert_clean_exit(repo.forge(*VERIFY), 0)
    tracker.step(in_flight=0)


def _run_args(repo: Repo, iterations: int) -> tuple[str, ...]:
    cmd = agent_cmd(
        repo.root.parent,
        "worker",
        {"print": "working\n", "report": {"tokens": 7, "tool_calls": 1, "cost_usd": 0.001}},
        {"print": "more\n", "sleep": 0.04, "report": {"tokens": 3}},
        {"print": "again\n", "sleep": 0.01},
    )
    return ("run", "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", str(iterations))


@pytest.mark.parametrize("seed", range(3))
def test_kill9_during_run(repo: Repo, seed: int) -> None:
    rng = random.Random(100 + seed)
    repo.write("forge.toml", RUN_POLICY)
    tracker = Tracker(repo)
    args = _run_args(repo, 8)
    done, span = timed(repo, *args)
    assert_clean_exit(done, 1)  # iterations exhausted
    tracker.step(in_flight=0)
    for trial in range(25):
        kill_after(repo, rng.uniform(0.05, 1.05) * span, *args)
        _after_kill(repo, tracker)
        if trial % 5 == 4:
            assert_clean_exit(repo.forge(*_run_args(repo, 2)), 1)
            tracker.step(in_flight=0)
    facts = tracker.step(in_flight=0)
    counters = facts.changes["c"]
    assert counters.finished_events > 25


@pytest.mark.parametrize("seed", range(3))
def test_kill9_during_supervise(repo: Repo, seed: int) -> None:
    repo.write("forge.toml", SUPERVISE_POLICY)
    repo.commit("policy")
    rng = random.Random(200 + seed)
    tracker = Tracker(repo)
    done, span = timed(repo, *supervise_batch(repo, 0, iterations=6))
    assert_clean_exit(done, 1)
    tracker.step(in_flight=0)
    for trial in range(1, 21):
        batch = supervise_batch(repo, trial // 3, iterations=6)
        kill_after(repo, rng.uniform(0.1, 1.0) * span, *batch)
        _after_kill(repo, tracker)
        if trial % 3 == 2:  # the same loops, killed twice: they resume and finish
            assert_clean_exit(repo.forge(*batch), 1)
            tracker.step(in_flight=0)
    status = repo.forge("status", "--json")
    assert status.code == 0, status.err
    assert "Traceback" not in status.err


@pytest.mark.parametrize("seed", range(2))
def test_kill9_among_concurrent_verifies(repo: Repo, seed: int) -> None:
    """Ten verifies at once, four of them killed at random: the rest are all counted."""
    failing_policy(repo, max_failures=1000)
    rng = random.Random(300 + seed)
    tracker = Tracker(repo)
    _, span = timed(repo, *VERIFY)
    tracker.step(in_flight=0)
    for _ in range(3):
        processes = [
            subprocess.Popen(
                [str(FORGE), *VERIFY],
                cwd=repo.root,
                env=forge_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for _ in range(10)
        ]
        doomed = rng.sample(processes, 4)
        for process in doomed:
            try:
                process.wait(timeout=rng.uniform(0.3, 1.5) * span)
            except subprocess.TimeoutExpired:
                process.kill()
        survivors = 0
        for process in processes:
            _, err = process.communicate(timeout=120)
            if process not in doomed:
                assert process.returncode == 0, err
                assert b"Traceback" not in err
                survivors += 1
        before = tracker.facts.changes["c"]
        facts = tracker.step(in_flight=len(doomed))
        after = facts.changes["c"]
        # Every verify that was not killed was counted, in the state and the timeline.
        assert after.verify_events - before.verify_events >= survivors
        assert after.total_attempts - before.total_attempts >= survivors
    assert_clean_exit(repo.forge(*VERIFY), 0)
    tracker.step(in_flight=0)


def test_tampering_cut_short_by_kill9_leaves_the_victim_blocked(repo: Repo) -> None:
    """An agent deletes another change's open breaker and forge dies before its check.

    The in-memory snapshot dies with forge, so nothing restores the file; the
    victim's breaker is rebuilt from its timeline, the log of record, and the
    victim stays blocked.
    """
    # Outside the sandbox (which makes the file read-only to the agent, see
    # tests/test_sandbox_e2e.py): what the log of record does when the attack lands.
    repo.write(
        "forge.toml",
        RUN_POLICY + '[verify]\ncommand = "exit 1"\nspecs = []\n\n[sandbox]\nmode = "off"\n',
    )
    for _ in range(3):
        repo.forge(*("verify", "--change", "victim"))
    breaker = repo.change_dir("victim") / "verify-attempts.yaml"
    marker = repo.root.parent / "deleted"
    attack = agent_cmd(
        repo.root.parent,
        "attacker",
        {"delete": [str(breaker)], "shell": f"echo $PPID > {marker}", "sleep": 30},
    )
    process = subprocess.Popen(
        [str(FORGE), "run", "--yes", "--change", "attacker", "--cmd", attack],
        cwd=repo.root,
        env=forge_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(3000):
            if marker.exists():
                break
            time.sleep(0.01)  # waiting on a real process; there is no clock to mock
        assert not breaker.exists()
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        # Forge died with its executor still running: stop that tree here.
        if marker.exists() and marker.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(marker.read_text()), signal.SIGKILL)
    refused = repo.forge("run", "--yes", "--change", "victim", "--cmd", "echo FORGE_DONE")
    stopped = refused.lines.index("run: STOPPED after 0 iteration(s) — gate-open")
    assert refused.lines[stopped + 1] == "  gate:   verify circuit-breaker", refused
    rebuilt = (repo.change_dir("victim") / "timeline.jsonl").read_text()
    assert '"event":"state.rebuilt"' in rebuilt


_TAMPERS = [
    ("forge.toml", "edit"),
    ("forge.toml", "delete"),
    ("policies/a.toml", "delete"),
    ("policies/deep/b.toml", "edit"),
    ("policies/deep/b.toml", "delete"),
    ("policies/deep/planted.toml", "add"),
]


@pytest.mark.parametrize(("seed", "tamper"), list(enumerate(_TAMPERS)))
def test_kill9_mid_iteration_then_tamper_is_restored_by_the_next_run(
    repo: Repo, seed: int, tamper: tuple[str, str]
) -> None:
    """SIGKILL ``forge run`` mid-iteration, harm a frozen file, run again: put back, recorded.

    The killed run armed its check and never made it; the check it left
    pending on disk is finished by the next run on the change.
    """
    rng = random.Random(seed)
    # The default frozen list: forge.toml and policies/ (a large file too,
    # past what is snapshotted in memory).
    repo.write("forge.toml", RUN_POLICY)
    repo.write("policies/a.toml", "[run]\n")
    # Larger than what is snapshotted in memory: restored from a copy on disk.
    repo.write("policies/deep/b.toml", "# b\n" * rng.randint(70_000, 100_000))
    repo.commit("frozen policies")
    originals = {
        p: (repo.root / p).read_bytes()
        for p in ("forge.toml", "policies/a.toml", "policies/deep/b.toml")
    }
    marker = repo.root.parent / f"armed-{seed}"
    cmd = agent_cmd(
        repo.root.parent, f"sleeper-{seed}", {"shell": f"echo $PPID > {marker}", "sleep": 30}
    )
    process = subprocess.Popen(
        [str(FORGE), "run", "--yes", "--change", "c", "--cmd", cmd],
        cwd=repo.root,
        env=forge_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(3000):
            if marker.exists() and marker.read_text().strip():
                break
            time.sleep(0.01)  # waiting on a real process; there is no clock to mock
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        # Forge died with its executor still running: stop that tree here.
        if marker.exists() and marker.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(marker.read_text()), signal.SIGKILL)
    target, how = tamper
    if how == "edit":
        (repo.root / target).write_text("# tampered after the kill\n")
    elif how == "delete":
        (repo.root / target).unlink()
    else:
        (repo.root / target).write_text("planted\n")
    done = repo.forge("run", "--yes", "--change", "c", "--cmd", "echo FORGE_DONE")
    assert_clean_exit(done, 0)
    for path, content in originals.items():
        assert (repo.root / path).read_bytes() == content, (seed, how, path)
    assert not (repo.root / "policies/deep/planted.toml").exists()
    events = [
        json.loads(line)
        for line in (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
        if line.strip()
    ]
    [violation] = [e for e in events if e["event"] == "protect.violation"]
    [harm] = violation["harmed"]
    harm_names = {"edit": "modified", "delete": "deleted", "add": "added"}
    assert (harm["path"], harm["harm"]) == (target, harm_names[how])
    assert harm["action"] in ("restored", "removed")
    assert not (repo.change_dir("c") / "protect" / "pending.json").exists()
