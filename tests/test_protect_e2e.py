"""Protected paths end to end: an agent that harms them is undone and stopped.

Real ``forge run`` and ``forge supervise`` in a scratch git repository, with
the fake agent deleting and editing protected files.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .support import Repo, spawn_forge
from .test_run_e2e import ANNOUNCE, ESCALATE, agent, run

# These agents do the harm the sandbox would refuse outright: what is under
# test here is the check after each iteration (restore, quarantine, stop), so
# the sandbox is off (tests/test_sandbox_e2e.py has the kernel refuse it).
NO_SANDBOX = '[sandbox]\nmode = "off"\n'


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", '[verify]\ncommand = ""\n' + NO_SANDBOX)
    repo.write("specs/cart.md", "# cart\n")
    repo.write("specs/api/login.md", "# login\n")
    repo.write("AGENTS.md", "be careful\n")
    repo.write("policies/strict.toml", "[run]\nmax_iterations = 2\n")
    repo.commit("protected content")
    return repo


def _events(repo: Repo, change: str, name: str) -> list[dict[str, Any]]:
    lines = (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return [e for e in events if e["event"] == name]


def test_run_restores_what_the_agent_deleted_and_edited_then_stops(project: Repo) -> None:
    cmd = agent(
        project,
        {"print": "tidying\n"},
        {
            "shell": "rm -rf specs AGENTS.md && echo 'max_failures = 99' >> forge.toml",
            "print": "cleaned up\n",
        },
    )
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1, done.err
    assert "run: STOPPED after 2 iteration(s) — gate-open" in done.lines
    assert "  gate:   integrity" in done.lines
    detail = next(line for line in done.lines if line.startswith("  detail: "))
    for harm in (
        "AGENTS.md deleted (protected: exist) — restored",
        "specs/api/login.md deleted (protected: exist) — restored",
        "forge.toml modified (protected: frozen) — restored",
    ):
        assert harm in detail
    assert done.lines[-1] == ESCALATE
    # Everything is back, byte for byte, and git sees no change to it.
    assert (project.root / "specs/api/login.md").read_text() == "# login\n"
    assert (project.root / "AGENTS.md").read_text() == "be careful\n"
    assert project.git("status", "--porcelain", "--", "specs", "AGENTS.md", "forge.toml") == ""
    [violation] = _events(project, "c", "protect.violation")
    assert violation["iteration"] == 2
    harmed = {h["path"]: (h["harm"], h["action"]) for h in violation["harmed"]}
    assert harmed["specs"] == ("deleted", "restored")
    assert harmed["forge.toml"] == ("modified", "restored")


def test_edits_to_exist_paths_and_new_files_are_not_violations(project: Repo) -> None:
    cmd = agent(
        project,
        {
            "shell": "echo more >> AGENTS.md && echo '# new' > specs/new.md && mkdir -p memory",
            "print": "FORGE_DONE\n",
        },
    )
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 0, done.out + done.err
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    assert _events(project, "c", "protect.violation") == []


def test_an_interrupted_iteration_is_still_checked(project: Repo) -> None:
    # The agent deletes a protected file and then runs past its time limit.
    cmd = agent(project, {"shell": "rm AGENTS.md", "sleep": 30})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes", "--timeout", "1s")
    assert done.code == 1
    assert "  gate:   integrity" in done.lines
    assert (project.root / "AGENTS.md").read_text() == "be careful\n"


def test_a_file_added_to_a_frozen_folder_is_moved_aside_not_lost(project: Repo) -> None:
    cmd = agent(project, {"write": {"policies/lax.toml": "[budget]\n"}})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert "  gate:   integrity" in done.lines
    assert not (project.root / "policies/lax.toml").exists()
    [violation] = _events(project, "c", "protect.violation")
    [harm] = violation["harmed"]
    assert harm["harm"] == "added"
    assert Path(harm["quarantined"]).read_text() == "[budget]\n"


def test_supervised_loop_opens_its_circuit_with_reason_integrity(project: Repo) -> None:
    script = project.root.parent / "harm.json"
    script.write_text(json.dumps({"steps": [{"shell": "rm -rf specs"}]}))
    fake = Path(__file__).with_name("fake_agent.py")
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(fake))} {shlex.quote(str(script))}"
    project.write(
        "forge.toml",
        '[verify]\ncommand = ""\n\n[rate_limit]\nbackend = "memory"\n\n' + NO_SANDBOX + "\n"
        f'[[loop]]\nchange = "harm"\ncmd = {json.dumps(cmd)}\nmax_iterations = 3\n',
    )
    project.commit("a loop")
    done = project.forge("supervise", "--plain")
    assert done.code == 1, done.out + done.err
    [opened] = _events(project, "harm", "breaker.opened")
    assert opened["reason"].startswith("integrity: specs deleted (protected: exist) — restored")
    assert opened["escalated"] is True
    assert opened["evidence"]["condition"] == "integrity"
    assert (project.root / "specs/cart.md").read_text() == "# cart\n"
    [stopped] = _events(project, "harm", "run.stopped")
    assert stopped["reason"] == "circuit-open"
    assert stopped["iterations"] == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_harm_done_before_an_interruption_is_restored(project: Repo, sig: signal.Signals) -> None:
    marker = project.root.parent / "deleted"
    cmd = agent(project, {"shell": f"rm -rf specs && touch {marker}", "sleep": 60})
    forge = spawn_forge(["run", "--change", "c", "--cmd", cmd, "--yes"], cwd=project.root)
    try:
        for _ in range(3000):
            if marker.exists() or forge.poll() is not None:
                break
            time.sleep(0.01)  # polling a real process's progress; no clock to mock here
        assert not (project.root / "specs").exists()
        forge.send_signal(sig)
        out, err = forge.communicate(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.communicate()
    assert forge.returncode == 130, err
    assert "run: INTERRUPTED after" in out
    assert (project.root / "specs/api/login.md").read_text() == "# login\n"
    [violation] = _events(project, "c", "protect.violation")
    assert {h["path"] for h in violation["harmed"]} >= {"specs", "specs/cart.md"}


def test_an_agent_cannot_clear_another_changes_open_breaker(repo: Repo) -> None:
    # change "victim": its verify breaker is open after 3 failures.
    repo.write("forge.toml", '[verify]\ncommand = "exit 1"\nspecs = []\n' + NO_SANDBOX)
    for _ in range(3):
        repo.forge("verify", "--change", "victim")
    victim = repo.change_dir("victim")
    kept = (victim / "verify-attempts.yaml").read_bytes()
    attack = "rm -f .forge/changes/victim/verify-attempts.yaml; echo FORGE_DONE"
    done = repo.forge("run", "--yes", "--change", "attacker", "--cmd", attack)
    assert done.code == 1, done
    assert "run: STOPPED after 1 iteration(s) — gate-open" in done.lines
    assert "  gate:   integrity" in done.lines
    assert (victim / "verify-attempts.yaml").read_bytes() == kept  # restored
    # The victim stays blocked: its breaker still refuses to start a loop.
    refused = repo.forge("run", "--yes", "--change", "victim", "--cmd", "echo FORGE_DONE")
    assert refused.lines[:3] == [
        ANNOUNCE,
        "run: STOPPED after 0 iteration(s) — gate-open",
        "  gate:   verify circuit-breaker",
    ]


def test_an_agent_cannot_append_events_to_another_changes_timeline(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\n' + NO_SANDBOX)
    repo.forge(
        "run", "--yes", "--change", "victim", "--cmd", "echo working", "--max-iterations", "1"
    )
    timeline = repo.change_dir("victim") / "timeline.jsonl"
    kept = timeline.read_bytes()
    last = json.loads(kept.splitlines()[-1])["seq"]
    fake = json.dumps({"seq": last + 1, "event": "run.stopped", "reason": "done", "iterations": 9})
    attack = f"echo {shlex.quote(fake)} >> {timeline}; echo FORGE_DONE"
    done = repo.forge("run", "--yes", "--change", "attacker", "--cmd", attack)
    assert done.code == 1, done
    assert "run: STOPPED after 1 iteration(s) — gate-open" in done.lines
    assert "  gate:   integrity" in done.lines
    assert timeline.read_bytes() == kept  # the agent's event is gone
    [violation] = _events(repo, "attacker", "protect.violation")
    assert "victim/timeline.jsonl" in json.dumps(violation["harmed"])


def test_a_timeline_may_only_grow(repo: Repo) -> None:
    repo.write("forge.toml", NO_SANDBOX)
    # Some history first: the timeline the agent will attack.
    repo.forge(
        "run", "--yes", "--change", "self1", "--cmd", "echo working", "--max-iterations", "2"
    )
    timeline = repo.change_dir("self1") / "timeline.jsonl"
    kept = timeline.read_bytes()
    truncate = f"head -c 40 {timeline} > t.tmp && mv t.tmp {timeline}; echo FORGE_DONE"
    done = repo.forge("run", "--yes", "--change", "self1", "--cmd", truncate)
    assert "  gate:   integrity" in done.lines, done
    after = timeline.read_bytes()
    assert after.startswith(kept)  # the lost lines are back, the run's own after them
    events = [json.loads(line) for line in after.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["event"] == "run.stopped"
    violation = next(e for e in events if e["event"] == "protect.violation")
    assert "timeline.jsonl" in json.dumps(violation["harmed"])
    # Deleting another change's timeline is harm too; appending is what forge does.
    attack = "rm -f .forge/changes/self1/timeline.jsonl; echo FORGE_DONE"
    other = repo.forge("run", "--yes", "--change", "other", "--cmd", attack)
    assert "  gate:   integrity" in other.lines
    assert timeline.read_bytes().startswith(kept)
