"""``forge supervise``, ``forge status`` and ``forge circuit`` through the real command."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .support import Repo, spawn_forge

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def agent(folder: Path, name: str, *steps: dict[str, Any]) -> str:
    script = folder / f"{name}.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def loops_toml(repo: Repo, *, calls: int = 50) -> str:
    scripts = repo.root.parent
    done = agent(scripts, "done", {"print": "working\n"}, {"print": "FORGE_DONE\n"})
    stuck = agent(scripts, "stuck", {"print": "trying\n"})
    spin = agent(scripts, "spin", {"print": "hmm\n"})
    # One working tree per loop: the first works in the checkout, the others in worktrees.
    return f"""
[verify]
command = "true"
specs = []
[rate_limit]
calls = {calls}
window = "2s"
backend = "memory"

[[loop]]
change = "finishes"
cmd = {json.dumps(done)}

[[loop]]
change = "fails-verify"
cmd = {json.dumps(stuck)}
worktree = true
[loop.verify]
command = "exit 1"
max_failures = 1
[loop.breaker]
cooldown = "0.2s"
cooldown_max = "0.4s"
max_opens = 2

[[loop]]
change = "spins"
cmd = {json.dumps(spin)}
worktree = true
max_iterations = 3
"""


def summary_of(repo: Repo) -> dict[str, Any]:
    [path] = list((repo.root / ".forge" / "runs").glob("*/summary.json"))
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_several_loops_at_once_each_with_its_ending(repo: Repo) -> None:
    repo.write("forge.toml", loops_toml(repo))
    done = repo.forge("supervise")
    assert done.code == 1, done
    assert "Traceback" not in done.err
    lines = done.lines
    assert any(line.startswith("finishes  ") and " done " in line for line in lines)
    assert any(line.startswith("fails-verify") and "circuit-open" in line for line in lines)
    assert any(line.startswith("spins") and "iterations-exhausted" in line for line in lines)
    # No terminal: one plain line per event, named by loop.
    assert "fails-verify: circuit OPEN — verify: 1 consecutive failures; cooling down 0.2s" in lines
    assert "fails-verify: circuit HALF-OPEN — cooldown over; one probe iteration" in lines
    summary = summary_of(repo)
    reasons = {loop["change"]: loop["reason"] for loop in summary["loops"]}
    assert reasons == {
        "finishes": "done",
        "fails-verify": "circuit-open",
        "spins": "iterations-exhausted",
    }
    trips = {loop["change"]: loop["circuit_trips"] for loop in summary["loops"]}
    assert trips["fails-verify"] == 3
    assert summary["exit_code"] == 1
    assert summary["limiter"]["calls"] == 50


def test_exit_zero_when_every_loop_is_done_and_json(repo: Repo) -> None:
    repo.write("forge.toml", loops_toml(repo))
    done = repo.forge("supervise", "--only", "finishes", "--json")
    assert done.code == 0, done
    data = json.loads(done.out)
    assert [loop["change"] for loop in data["loops"]] == ["finishes"]
    assert data["loops"][0]["iterations"] == 2
    # A rerun of a finished loop does nothing and stays clean.
    again = repo.forge("supervise", "--only", "finishes", "--json")
    assert again.code == 0
    assert json.loads(again.out)["loops"][0]["detail"] == "done in an earlier run"


def test_only_names_declared_loops(repo: Repo) -> None:
    repo.write("forge.toml", loops_toml(repo))
    done = repo.forge("supervise", "--only", "finishes,nope")
    assert done.code == 2
    assert "--only names no declared loop: nope" in done.err


def test_dry_run_prints_every_plan_and_runs_nothing(repo: Repo) -> None:
    repo.write("forge.toml", loops_toml(repo))
    done = repo.forge("supervise", "--dry-run")
    assert done.code == 0
    plans = [line for line in done.lines if line.startswith("Loop: ")]
    assert plans == [
        'Loop: up to 5 iteration(s) on change "finishes"',
        'Loop: up to 5 iteration(s) on change "fails-verify"',
        'Loop: up to 3 iteration(s) on change "spins"',
    ]
    assert "  verify:   exit 1 after each iteration" in done.lines
    assert any(
        line.startswith("  circuit:  a trip opens the circuit: cooldown 0.2s")
        for line in done.lines
    )
    circuit = next(line for line in done.lines if line.startswith("  circuit:  a trip opens"))
    assert "one probe each; after " in circuit
    assert "opening(s), escalate" in circuit
    at = done.lines.index(circuit)
    assert done.lines[at + 1].startswith("  trips:    ")
    assert done.lines[at + 2].startswith("  recovery: strategies per kind: no-progress ")
    assert not (repo.root / ".forge").exists()


def test_no_loops_is_a_usage_error(repo: Repo) -> None:
    done = repo.forge("supervise")
    assert done.code == 2
    assert "no loops to supervise" in done.err


def test_invalid_loop_tables_name_file_loop_and_key(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[[loop]]\nchange = "a"\ncmd = "true"\nmax_iteratons = 3\n'
        '[[loop]]\nchange = "a"\ncmd = "true"\n'
        '[[loop]]\nchange = "Bad Name"\ncmd = "true"\n'
        '[[loop]]\nchange = "b"\ncmd = "true"\n[loop.breaker]\ncooldown = "soon"\n',
    )
    done = repo.forge("supervise")
    assert done.code == 2
    assert "forge.toml: loop[0].max_iteratons: unknown key" in done.err
    assert "did you mean 'max_iterations'?" in done.err
    assert "forge.toml: loop[1].change: 'a' is already loop[0]" not in done.err  # loop[0] failed
    assert "forge.toml: loop[2].change: expected a change name" in done.err
    assert "forge.toml: loop[3]: breaker.cooldown: expected a duration" in done.err
    assert "Traceback" not in done.err


def test_a_batch_file_with_loops_in_another_repository(repo: Repo, tmp_path: Path) -> None:
    other = tmp_path / "service-a"
    other.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=other, check=True)
    batch_dir = tmp_path / "batches"
    batch_dir.mkdir()
    cmd = agent(tmp_path, "other", {"write": {"touched.txt": "hi"}, "print": "FORGE_DONE\n"})
    (batch_dir / "nightly.toml").write_text(
        f'[[loop]]\nchange = "harden"\ndir = "../service-a"\ncmd = {json.dumps(cmd)}\n'
        '[loop.verify]\ncommand = "true"\nspecs = []\n'
    )
    done = repo.forge("supervise", "--batch", str(batch_dir / "nightly.toml"))
    assert done.code == 0, done
    assert (other / "touched.txt").read_text() == "hi"  # it worked in that repository
    assert (other / ".forge" / "changes" / "harden" / "timeline.jsonl").is_file()
    assert not (repo.root / ".forge" / "changes" / "harden").exists()
    assert summary_of(repo)["loops"][0]["dir"] == str(other)  # the summary stays here


def test_worktree_isolation_is_made_once_and_reused(repo: Repo) -> None:
    cmd = agent(repo.root.parent, "wt", {"write": {"feature.txt": "new"}, "print": "FORGE_DONE\n"})
    repo.write(
        "forge.toml",
        f'[[loop]]\nchange = "iso"\nworktree = true\ncmd = {json.dumps(cmd)}\n'
        '[loop.verify]\ncommand = "true"\nspecs = []\n',
    )
    repo.commit("policy")
    assert repo.forge("supervise").code == 0
    worktree = repo.root / ".forge" / "worktrees" / "iso"
    assert (worktree / "feature.txt").read_text() == "new"
    assert not (repo.root / "feature.txt").exists()
    branch = subprocess.run(
        ["git", "branch", "--show-current"], cwd=worktree, capture_output=True, text=True
    )
    assert branch.stdout.strip() == "forge/iso"
    repo.forge("circuit", "iso", "--reset", "--reason", "reviewed")
    assert repo.forge("supervise").code == 0  # the existing worktree is reused


def test_interrupt_writes_state_and_a_rerun_continues(repo: Repo) -> None:
    slow = agent(repo.root.parent, "slow", {"print": "working\n", "sleep": 600})
    repo.write(
        "forge.toml",
        f'[run]\ngrace = "1s"\n[[loop]]\nchange = "long"\ncmd = {json.dumps(slow)}\n'
        'max_iterations = 3\n[loop.verify]\ncommand = ""\n',
    )
    forge = spawn_forge(["supervise"], cwd=repo.root)
    timeline = repo.change_dir("long") / "timeline.jsonl"
    try:
        for _ in range(3000):
            if timeline.exists() and "iteration.started" in timeline.read_text():
                break
            time.sleep(0.01)  # waiting on a real process; there is no clock to mock
        time.sleep(0.2)  # let the agent start
        os.kill(forge.pid, signal.SIGTERM)
        out, err = forge.communicate(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.communicate()
    assert forge.returncode == 130, err
    assert "supervise: INTERRUPTED" in out
    assert summary_of(repo)["interrupted"] is True
    events = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert events[-1]["event"] == "run.stopped"
    assert events[-1]["reason"] == "interrupted"
    status = json.loads(repo.forge("status", "--json").out)
    [row] = status["changes"]
    assert row["iterations_used"] == 1  # the interrupted iteration counts as used


def test_status_and_circuit(repo: Repo) -> None:
    repo.write("forge.toml", loops_toml(repo))
    repo.forge("supervise", "--only", "fails-verify")
    status = repo.forge("status")
    assert status.code == 0
    assert "fails-verify" in status.lines
    assert any("escalated: a human must review" in line for line in status.lines)
    data = json.loads(repo.forge("status", "--json").out)
    row = next(r for r in data["changes"] if r["change"] == "fails-verify")
    assert row["circuit"] == "open"
    assert row["escalated"] is True
    shown = repo.forge("circuit", "fails-verify")
    assert shown.out.startswith('change "fails-verify": circuit open')
    reset = repo.forge("circuit", "fails-verify", "--reset", "--reason", "fixed the test")
    assert reset.code == 0
    assert reset.out.startswith('Circuit: reset for change "fails-verify" — was open')
    after = json.loads(repo.forge("circuit", "fails-verify", "--json").out)
    assert after["circuit"]["state"] == "closed"
    assert after["circuit"]["iterations_used"] == 0


def test_the_shared_limiter_makes_loops_wait(repo: Repo) -> None:
    repo.write("forge.toml", loops_toml(repo, calls=2))
    done = repo.forge("supervise", "--only", "finishes,spins")
    waits = [line for line in done.lines if line.startswith("limiter: wait")]
    assert waits
    assert summary_of(repo)["limiter"]["waits"] >= 1


def test_a_typo_in_a_loop_table_is_refused_not_ignored(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[[loop]]\nchange = "good"\ncmd = "true"\n'
        '[[loop]]\nchange = "typo"\ncmd = "true"\n[loop.verify]\nmax_failurs = 1\n',
    )
    done = repo.forge("supervise")
    assert done.code == 2
    assert "forge.toml: loop[1].verify.max_failurs: unknown key in [verify]" in done.err
    assert "did you mean 'max_failures'?" in done.err
    assert not (repo.root / ".forge").exists()  # nothing ran


def test_one_change_name_in_two_repositories(repo: Repo, tmp_path: Path) -> None:
    for name in ("svc-a", "svc-b"):
        folder = tmp_path / name
        folder.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    done_cmd = agent(tmp_path, "same", {"print": "FORGE_DONE\n"})
    fail_cmd = agent(tmp_path, "other", {"exit": 3})
    repo.write(
        "forge.toml",
        '[verify]\ncommand = ""\nspecs = []\n'
        f'[[loop]]\nchange = "harden"\ndir = "../svc-a"\ncmd = {json.dumps(done_cmd)}\n'
        f'[[loop]]\nchange = "harden"\ndir = "../svc-b"\ncmd = {json.dumps(fail_cmd)}\n'
        "max_iterations = 1\n",
    )
    done = repo.forge("supervise", "--json")
    assert done.code == 1  # one of the two did not end done
    loops = json.loads(done.out)["loops"]
    assert sorted(loop["reason"] for loop in loops) == ["done", "iterations-exhausted"]


def test_a_loop_overrides_its_recovery_and_alerts(repo: Repo) -> None:
    scripts = repo.root.parent
    spin = agent(scripts, "spin", {"print": "hmm\n"})
    repo.write(
        "forge.toml",
        '[policy]\nallow_relaxed = true\n[verify]\ncommand = ""\nspecs = []\n'
        '[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "quick"\ncmd = {json.dumps(spin)}\n'
        '[loop.recovery]\nno_progress = ["Try harder.", "Call a human."]\nwatch = 5\n'
        "[loop.alerts]\nenabled = false\n"
        f'[[loop]]\nchange = "usual"\ncmd = {json.dumps(spin)}\nworktree = true\n',
    )
    repo.commit("policy")
    check = repo.forge("policy", "check")
    assert check.code == 0, check.out + check.err
    dry = repo.forge("supervise", "--dry-run")
    assert dry.code == 0, dry.err
    recovery = [line for line in dry.lines if line.startswith("  recovery: ")]
    assert len(recovery) == 2
    assert "no-progress 2," in recovery[0]
    assert "watch 5 iteration(s)" in recovery[0]
    assert recovery[0].endswith("; alerts off")
    assert "no-progress 4," in recovery[1]
    assert recovery[1].endswith("; alerts on")
    circuits = [line for line in dry.lines if line.startswith("  circuit:  a trip opens")]
    assert circuits[0].endswith("after 3 opening(s), escalate (no-progress: 1)")
    assert circuits[1].endswith("after 3 opening(s), escalate")
