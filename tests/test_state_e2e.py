"""Durable state through the real command: concurrency, corruption, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from orchestra._state import ChangePaths, load_state
from orchestra._verify import VerifyAttempts

from .support import FORGE, Repo, failing_policy, forge_env


def test_twenty_concurrent_verifies_lose_no_update(repo: Repo) -> None:
    failing_policy(repo, max_failures=100)
    processes = [
        subprocess.Popen(
            [str(FORGE), "verify", "--change", "c"],
            cwd=repo.root,
            env=forge_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(20)
    ]
    codes = [(p.wait(timeout=120), p.stderr.read() if p.stderr else b"") for p in processes]
    for process in processes:
        if process.stderr:
            process.stderr.close()
    assert all(code == 0 for code, _ in codes), codes
    state = yaml.safe_load((repo.change_dir("c") / "verify-attempts.yaml").read_text())
    assert state["total_attempts"] == 20
    assert state["consecutive_failures"] == 20
    events = [
        json.loads(line)
        for line in (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    ]
    assert sorted(e["seq"] for e in events) == list(range(1, 21))
    assert sorted(e["consecutive_failures"] for e in events) == list(range(1, 21))


def test_corrupt_state_is_moved_aside_and_blocks_until_reset(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    state_file = repo.change_dir("checkout") / "verify-attempts.yaml"
    state_file.write_text("consecutive_failures: [unclosed\n")

    done = repo.forge("verify", "--change", "checkout")
    assert done.code == 1
    assert "Verdict: FAIL" in done.lines
    assert done.lines[-1].startswith('Breaker: BLOCKED — the verify state of change "checkout"')
    assert "forge verify --reset-breaker --change checkout" in done.lines[-1]
    assert "is corrupt" in done.err
    moved = sorted(repo.change_dir("checkout").glob("verify-attempts.yaml.corrupt-*"))
    assert len(moved) == 1
    assert moved[0].read_text() == "consecutive_failures: [unclosed\n"  # evidence kept whole

    # Even a passing verify does not clear a block: only a human does.
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    passing = repo.forge("verify", "--change", "checkout")
    assert passing.code == 1
    assert "Verdict: PASS" in passing.lines
    assert passing.lines[-1].startswith("Breaker: BLOCKED")

    reset = repo.forge("verify", "--reset-breaker", "--change", "checkout")
    assert reset.code == 0
    assert "cleared the block" in reset.out
    after = repo.forge("verify", "--change", "checkout")
    assert after.code == 0
    assert after.lines[-1].startswith('Breaker: 0/3 consecutive failures for change "checkout"')

    events = [
        json.loads(line)
        for line in (repo.change_dir("checkout") / "timeline.jsonl").read_text().splitlines()
    ]
    corrupt = [e for e in events if e["event"] == "state.corrupt"]
    assert len(corrupt) == 1
    assert corrupt[0]["moved_to"] == moved[0].name


def test_state_of_the_wrong_shape_is_corrupt_too(repo: Repo) -> None:
    failing_policy(repo)
    folder = repo.change_dir("checkout")
    folder.mkdir(parents=True)
    bad_states = [
        "consecutive_failures: two\nopen: false\nlast_verdict: FAIL\ntotal_attempts: 2\n",
        "- just\n- a list\n",
        "consecutive_failures: -1\nopen: false\nlast_verdict: FAIL\ntotal_attempts: 2\n",
        "open: false\n",
    ]
    for text in bad_states:
        (folder / "verify-attempts.yaml").write_text(text)
        done = repo.forge("verify", "--change", "checkout")
        assert done.code == 1, text
        assert "BLOCKED" in done.out
        assert "Traceback" not in done.err
        repo.forge("verify", "--reset-breaker", "--change", "checkout")
    assert len(list(folder.glob("verify-attempts.yaml.corrupt-*"))) == len(bad_states)


def test_invalid_utf8_state_is_corrupt(repo: Repo) -> None:
    failing_policy(repo)
    folder = repo.change_dir("checkout")
    folder.mkdir(parents=True)
    (folder / "verify-attempts.yaml").write_bytes(b"consecutive_failures: \xff\xfe\n")
    done = repo.forge("verify", "--change", "checkout")
    assert done.code == 1
    assert "BLOCKED" in done.out


WRITER = r"""
import sys
from pathlib import Path
from orchestra._state import ChangePaths, exclusive_lock, save_state
from orchestra._state._yamlstate import render_state
from orchestra._verify import NEW, record_verdict
paths = ChangePaths(Path(sys.argv[1]), "crash")
state = NEW
render_state(state)  # the writer (PyYAML, the converter) loaded: the kills land mid-write
print("ready", flush=True)
first = True
while True:
    with exclusive_lock(paths.lock):
        state = record_verdict(state, passed=False, max_failures=10**9, now="t")
        save_state(paths.verify_attempts, state)
    if first:  # one whole write done: the kills land on the ones after it
        print("written", flush=True)
        first = False
"""


def test_a_kill_at_any_instant_leaves_the_state_file_whole(tmp_path: Path) -> None:
    paths = ChangePaths(tmp_path, "crash")
    last_seen = 0
    for trial in range(12):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        if (
            trial % 2
        ):  # every other kill comes after a first whole write, however loaded the machine
            assert writer.stdout.readline() == "written\n"
        # Let it write a varying number of times before the kill lands.
        time.sleep(
            0.002 * (trial % 6 + 1)
        )  # real process, real time: the point is a random instant
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        state = load_state(paths.verify_attempts, VerifyAttempts)
        if state is not None:
            assert state.total_attempts >= 1
            assert state.consecutive_failures == state.total_attempts
            last_seen = max(last_seen, state.total_attempts)
        leftovers = list(paths.folder.glob(".verify-attempts.yaml.*.tmp"))
        for leftover in leftovers:  # a temp file a kill interrupted is never the state
            leftover.unlink()
    assert last_seen > 0


def test_deeply_nested_state_is_corrupt_not_a_crash(repo: Repo) -> None:
    failing_policy(repo)
    folder = repo.change_dir("c")
    folder.mkdir(parents=True)
    (folder / "verify-attempts.yaml").write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    done = repo.forge("verify", "--change", "c")
    assert done.code == 1
    assert "BLOCKED" in done.out
    assert "Traceback" not in done.err
    assert repo.forge("verify", "--reset-breaker", "--change", "c").code == 0
