"""Inside an agent's iteration, every control refuses and the agent's channel writes no state.

Real ``forge run`` with an agent that is a shell script running ``forge``
itself: the commands that start loops or change Forge's state refuse (exit 2,
``control.refused`` on the timeline); those that read are allowed; ``forge
checkpoint`` and ``forge event`` queue in the change's inbox for the loop to
run after the iteration, and ``forge verify --change`` verifies without
recording, for the loop's own change only. With the sandbox off, so that the
refusal itself is what stops the agent; one test runs in the sandbox.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

import pytest

from orchestra._cli._main import build_parser, parse_args
from orchestra._inside import CHANNELS, CONTROL_FLAGS, CONTROLS, control_of

from .support import FORGE, Repo

# What each command line the agent runs must do: (forge arguments, refused as).
CONTROL_LINES = [
    ("run --change x --cmd true --yes", "forge run"),
    ("supervise", "forge supervise"),
    ("fleet submit --batch batch.toml", "forge fleet submit"),
    ("fleet work", "forge fleet work"),
    ("fleet export", "forge fleet export"),
    ("init", "forge init"),
    ("loop start --change c --goal mine --restart", "forge loop start"),
    ("report", "forge report"),
    ("executors check", "forge executors check"),
]
READING_LINES = [
    "status",
    "timeline c",
    "policy show",
    "policy check",
    "spend c",
    "circuit c",
    "resume --change c",
    "init --dry-run",
    "secscan",
]


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", '[verify]\ncommand = ""\nspecs = []\n[sandbox]\nmode = "off"\n')
    repo.commit("policy")
    started = repo.forge("loop", "start", "--change", "c", "--goal", "a goal", "--rubric", "R1: ok")
    assert started.code == 0, started
    return repo


def _agent(repo: Repo, lines: list[str]) -> str:
    """The ``--cmd`` of an agent that runs each ``forge`` line, noting its exit code."""
    said = repo.root.parent / "said"
    said.mkdir(exist_ok=True)
    body = "".join(
        f'"$FORGE" {line} > {said}/{index}.out 2>&1; echo $? > {said}/{index}.rc\n'
        for index, line in enumerate(lines)
    )
    script = repo.root.parent / "agent.sh"
    script.write_text(f"#!/bin/sh\nFORGE={shlex.quote(str(FORGE))}\n{body}echo FORGE_DONE\n")
    script.chmod(0o755)
    return str(script)


def _said(repo: Repo, index: int) -> tuple[int, str]:
    said = repo.root.parent / "said"
    return int((said / f"{index}.rc").read_text()), (said / f"{index}.out").read_text()


def _events(repo: Repo, change: str, name: str) -> list[dict[str, Any]]:
    lines = (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if e["event"] == name]


def _run(repo: Repo, lines: list[str]) -> Any:
    done = repo.forge("run", "--change", "c", "--cmd", _agent(repo, lines), "--yes")
    assert done.code in (0, 1), done
    return done


def test_every_control_refuses_inside_the_iteration_and_is_recorded(project: Repo) -> None:
    project.write("batch.toml", '[[loop]]\nchange = "d"\ncmd = "true"\n')
    toml = (project.root / "forge.toml").read_text()
    _run(project, [line for line, _ in CONTROL_LINES])
    for index, (line, name) in enumerate(CONTROL_LINES):
        code, text = _said(project, index)
        assert code == 2, (line, text)
        assert f"{name} is a person's control and cannot run inside the executor" in text
    refused = _events(project, "c", "control.refused")
    assert [e["command"] for e in refused] == [name for _, name in CONTROL_LINES]
    # Nothing was started or written: no other change, no report, the same policy.
    assert not project.change_dir("x").exists()
    assert not project.change_dir("d").exists()
    assert not (project.root / ".forge" / "runs").exists()
    assert (project.root / "forge.toml").read_text() == toml
    [contract] = _events(project, "c", "forge.loop.started")
    assert contract["goal"] == "a goal"


def test_commands_that_read_are_allowed_inside_the_iteration(project: Repo) -> None:
    _run(project, READING_LINES)
    for index, line in enumerate(READING_LINES):
        code, text = _said(project, index)
        assert code == 0, (line, text)
    assert _events(project, "c", "control.refused") == []


def test_checkpoint_and_event_queue_in_the_inbox_and_the_loop_records_them(
    project: Repo,
) -> None:
    timeline = project.change_dir("c") / "timeline.jsonl"
    lines = [
        "checkpoint --change c --stage iteration-1 --next-action iterate",
        "event --change c forge.blocked --detail stuck",
        "event --change other forge.blocked --detail theirs",
        "checkpoint --change other --stage iteration-1",
        # During the iteration, nothing of it is on the timeline yet.
        f"timeline c --json; grep -c forge.blocked {timeline}",
    ]
    _run(project, lines)
    for index in (0, 1):
        code, text = _said(project, index)
        assert code == 0, text
        assert 'queued for change "c"' in text
        assert "the loop records it when the iteration ends" in text
    for index, command in ((2, "forge event"), (3, "forge checkpoint")):
        code, text = _said(project, index)
        assert code == 2, text
        assert f"{command} --change other names another change than its loop's" in text
    _, during = _said(project, 4)
    assert during.rstrip().endswith("0")
    # After the iteration the loop ran both, outside the agent's session.
    [checkpoint] = _events(project, "c", "forge.checkpoint")
    assert checkpoint["stage"] == "iteration-1"
    [blocked] = _events(project, "c", "forge.blocked")
    assert blocked["detail"] == "stuck"
    refused = _events(project, "c", "control.refused")
    assert [e["command"] for e in refused] == [
        "forge event --change other",
        "forge checkpoint --change other",
    ]
    assert not project.change_dir("other").exists()
    [log] = project.change_dir("c").glob("runs/*/iteration-1.log")
    assert "forge: from the inbox: forge checkpoint --change c" in log.read_text()
    assert list((project.change_dir("c") / "inbox").iterdir()) == []


def test_verify_for_its_own_change_records_nothing_and_another_is_refused(
    project: Repo,
) -> None:
    project.write(
        "forge.toml", '[verify]\ncommand = "false"\nspecs = []\n[sandbox]\nmode = "off"\n'
    )
    project.commit("a failing verify")
    _run(project, ["verify --change c", "verify --change other"])
    code, text = _said(project, 0)
    assert code == 0, text
    assert "Verdict: FAIL" in text
    assert 'Breaker: change "c" — run inside its loop: not recorded now; queued' in text
    code, text = _said(project, 1)
    assert code == 2, text
    assert "forge verify --change other names another change than its loop's" in text
    # The breaker saw no attempt of the agent's process: one the loop made
    # after the iteration for it, and none for the other change.
    [verify] = _events(project, "c", "verify")
    assert verify["verdict"] == "FAIL"
    [log] = project.change_dir("c").glob("runs/*/iteration-1.log")
    assert "forge: from the inbox: forge verify --change c: exit 0" in log.read_text()
    assert not project.change_dir("other").exists()
    [refused] = _events(project, "c", "control.refused")
    assert refused["command"] == "forge verify --change other"


def test_verify_inside_the_sandbox_runs_for_its_own_change(repo: Repo) -> None:
    repo.write(
        "forge.toml", '[verify]\ncommand = "true"\nspecs = []\n[sandbox]\nmode = "bubblewrap"\n'
    )
    repo.commit("policy")
    _run(repo, ["verify --change c"])
    code, text = _said(repo, 0)
    assert code == 0, text
    assert "Verdict: PASS" in text
    assert "not recorded now; queued, the loop runs it when the iteration ends" in text
    # Recorded once, by the loop, from outside the sandbox.
    [verify] = _events(repo, "c", "verify")
    assert verify["verdict"] == "PASS"


def test_a_ship_ready_checkpoint_under_forge_run_stands_on_the_agents_queued_verify(
    project: Repo,
) -> None:
    """forge run's own verify is read-only: the verify the agent asked for is what counts."""
    project.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\n[sandbox]\nmode = "off"\n')
    project.commit("policy")
    for stage, current in (
        ("discovery-complete", "plan"),
        ("plan-complete", "execute"),
        ("iteration-1", "verify"),
    ):
        walked = project.forge(
            "checkpoint", "--change", "c", "--stage", stage, "--current-stage", current
        )
        assert walked.code == 0, walked
    _run(
        project,
        [
            "verify --change c",
            "checkpoint --change c --stage ship-ready --rubric 'R1=pass:\"tests pass\"' "
            "--next-action ship",
        ],
    )
    [log] = project.change_dir("c").glob("runs/*/iteration-1.log")
    assert "from the inbox: forge checkpoint --change c --stage ship-ready" in log.read_text()
    [shipped] = _events(project, "c", "forge.ship.ready")
    assert shipped["change"] == "c"


def _handlers(parser: argparse.ArgumentParser) -> set[str]:
    found = {str(parser.get_default("handler"))} if parser.get_default("handler") else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _handlers(sub)
    return found


# Every command that is neither a control nor the agent's channel: it reads,
# or writes only where its caller names (as a shell redirect would).
READING_HANDLERS = {
    "_status_cmd:status",
    "_completion:run",
    "_timeline_cmd:run",
    "_attach_cmd:run",
    "_secscan_cmd:scan",
    "_fleet_cmd:status_cmd",
    "_hook_cmd:guard",
    "_hook_cmd:pre_tool_use",
    "_hook_cmd:stop",
    "_contract_cmd:resume",
    "_policy_cmd:show",
    "_policy_cmd:check",
    "_policy_cmd:dump",
    "_policy_cmd:schema",
    "_policy_cmd:diff",
    "_simulate_cmd:run",
}


def test_every_command_is_known_as_a_control_a_channel_or_a_reading() -> None:
    """A command added to forge must be placed: a control, the channel, or a reading."""
    flagged = {handler for handler, _ in CONTROL_FLAGS}
    assert _handlers(build_parser()) == set(CONTROLS) | flagged | set(CHANNELS) | (READING_HANDLERS)


@pytest.mark.parametrize(
    ("argv", "control"),
    [
        (["init"], "forge init"),
        (["init", "--dry-run"], None),
        (["spend", "c"], None),
        (["spend", "c", "--reset"], "forge spend --reset"),
        (["verify", "--change", "c"], None),
        (["policy", "dump", "-o", "x.toml"], None),
        (["fleet", "status"], None),
    ],
)
def test_which_command_lines_are_controls(argv: list[str], control: str | None) -> None:
    assert control_of(parse_args(argv)) == control


def test_a_ship_ready_checkpoint_is_judged_on_the_loops_verify_of_the_iteration(
    project: Repo,
) -> None:
    """The agent's verify records nothing; its ship-ready stands on the loop's verify after."""
    cmd = _agent(
        project,
        [
            "verify --change c",
            "checkpoint --change c --stage ship-ready --rubric 'R1=pass:\"tests pass\"' "
            "--next-action ship",
        ],
    )
    project.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[sandbox]\nmode = "off"\n'
        '[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "c"\ncmd = {json.dumps(cmd)}\nmax_iterations = 1\n',
    )
    project.commit("a supervised loop")
    for stage, current in (
        ("discovery-complete", "plan"),
        ("plan-complete", "execute"),
        ("iteration-1", "verify"),
    ):
        walked = project.forge(
            "checkpoint", "--change", "c", "--stage", stage, "--current-stage", current
        )
        assert walked.code == 0, walked
    done = project.forge("supervise")
    assert done.code == 0, done
    assert _said(project, 1)[0] == 0
    [log] = project.change_dir("c").glob("runs/*/iteration-1.log")
    assert "forge checkpoint --change c --stage ship-ready" in log.read_text()
    assert "exit 0" in log.read_text()
    [shipped] = _events(project, "c", "forge.ship.ready")
    assert shipped["change"] == "c"
    # One attempt for one tree: the loop's own; the agent's is not run again.
    [verify] = _events(project, "c", "verify")
    assert verify["verdict"] == "PASS"
    assert "forge verify --change c: not run: the loop recorded its own verify" in log.read_text()
