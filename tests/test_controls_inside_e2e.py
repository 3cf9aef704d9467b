"""Forge's controls refuse to run inside an agent's iteration, however the agent starts them.

Real ``forge run`` with an agent that is a shell script: it runs a person's
control (a waiver, a reset) from inside its iteration, directly or detached
(``setsid``, a double fork, its environment cleared). The control must refuse
(exit 2), record the refusal, and change nothing.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from orchestra._inside import Inside, inside_an_executor, is_loop_command

from .support import FORGE, Repo


@pytest.fixture
def project(repo: Repo) -> Repo:
    # The after-the-fact line is under test: the sandbox would stop the harm first.
    repo.write("forge.toml", '[verify]\ncommand = ""\n[sandbox]\nmode = "off"\n')
    repo.commit("policy")
    return repo


def _agent(repo: Repo, body: str) -> str:
    """The ``--cmd`` of an agent that is this shell script (then says it is done)."""
    script = repo.root.parent / "agent.sh"
    script.write_text(f"#!/bin/sh\nFORGE={shlex.quote(str(FORGE))}\n{body}\necho FORGE_DONE\n")
    script.chmod(0o755)
    return str(script)


def _events(repo: Repo, change: str) -> list[dict[str, Any]]:
    lines = (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _run(repo: Repo, cmd: str) -> Any:
    return repo.forge("run", "--change", "c", "--cmd", cmd, "--yes")


def test_a_waiver_from_inside_the_iteration_is_refused_and_recorded(project: Repo) -> None:
    out = project.root.parent / "waive.out"
    cmd = _agent(
        project,
        f'"$FORGE" secscan waive 0123456789abcdef --reason ok > {out} 2>&1\necho $? >> {out}',
    )
    done = _run(project, cmd)
    assert done.code == 0, done.err
    said = out.read_text().splitlines()
    assert said[-1] == "2"
    assert "forge secscan waive is a person's control" in said[0]
    assert 'inside the executor of change "c"' in said[0]
    assert not (project.root / ".forge" / "secscan-waivers.yaml").exists()
    [refused] = [e for e in _events(project, "c") if e["event"] == "control.refused"]
    assert refused["command"] == "forge secscan waive"
    assert refused["found_by"] == "process ancestry"


def test_a_reset_detached_with_setsid_and_a_bare_environment_is_refused(project: Repo) -> None:
    # A first run leaves the change's state; its circuit is then reset from inside.
    assert _run(project, _agent(project, "")).code == 0
    rc = project.root.parent / "reset.rc"
    # A double fork: the subshell exits, so the setsid'ed reset is orphaned
    # and adopted by Forge; its environment holds no FORGE_ variable.
    cmd = _agent(
        project,
        "(env -u FORGE_ITERATION -u FORGE_CHANGE -u FORGE_RUN_ID setsid sh -c "
        f"'\"$0\" circuit c --reset --reason fine > /dev/null 2>&1; echo $? > {rc}' "
        '"$FORGE" &)\n'
        f"while [ ! -s {rc} ]; do sleep 0.05; done",
    )
    done = _run(project, cmd)
    assert done.code == 0, done.err
    assert rc.read_text().strip() == "2"
    refused = [e for e in _events(project, "c") if e["event"] == "control.refused"]
    assert [e["command"] for e in refused] == ["forge circuit --reset"]
    assert not [e for e in _events(project, "c") if e["event"] == "breaker.reset"]


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "--change", "c", "--reset-breaker"),
        ("spend", "c", "--reset"),
        ("secscan", "waive", "0123456789abcdef", "--reason", "ok"),
        ("circuit", "c", "--reset", "--reason", "ok"),
        ("steer", "c", "decide it yourself"),
        ("pause", "c"),
        ("resume", "c"),
        ("stop", "c"),
    ],
)
def test_the_environment_is_a_seatbelt_too(project: Repo, args: tuple[str, ...]) -> None:
    """Outside any loop's tree, an executor's variables still refuse a control."""
    assert _run(project, _agent(project, "")).code == 0
    done = project.forge(*args, env={"FORGE_ITERATION": "3", "FORGE_CHANGE": "c"})
    assert done.code == 2, done.out
    assert "is a person's control" in done.err
    [refused] = [e for e in _events(project, "c") if e["event"] == "control.refused"]
    assert refused["found_by"] == "environment"


def test_a_person_outside_any_loop_is_not_refused(project: Repo) -> None:
    assert inside_an_executor() is None
    done = project.forge("secscan", "waive", "0123456789abcdef", "--reason", "fixture")
    assert done.code == 0, done.err


def test_a_waivers_file_the_agent_creates_is_removed_and_recorded(project: Repo) -> None:
    cmd = _agent(
        project,
        "printf -- '- fingerprint: 0123456789abcdef\\n  reason: ok\\n  who: me\\n' "
        "> .forge/secscan-waivers.yaml",
    )
    done = _run(project, cmd)
    assert done.code == 1
    assert "  gate:   integrity" in done.lines
    assert not (project.root / ".forge" / "secscan-waivers.yaml").exists()
    [violation] = [e for e in _events(project, "c") if e["event"] == "protect.violation"]
    [harm] = violation["harmed"]
    assert (harm["path"], harm["harm"], harm["action"]) == (
        ".forge/secscan-waivers.yaml",
        "added",
        "removed",
    )


@pytest.mark.parametrize(
    ("argv", "loop"),
    [
        (["/v/bin/python", "/v/bin/forge", "run", "--change", "c"], True),
        (["/v/bin/python", "-m", "orchestra", "supervise"], True),
        (["forge", "fleet", "work", "--redis", "x"], True),
        (["forge", "fleet", "status"], False),
        (["forge", "verify", "--change", "run"], False),
        (["/bin/sh", "-c", "forge run"], False),
    ],
)
def test_which_command_lines_are_loops(argv: list[str], loop: bool) -> None:
    assert is_loop_command(argv) is loop


def test_inside_names_what_it_found() -> None:
    inside = Inside(41, "c", "process ancestry")
    assert inside.describe() == (
        'inside the executor of change "c" (forge loop process 41, found by process ancestry)'
    )
