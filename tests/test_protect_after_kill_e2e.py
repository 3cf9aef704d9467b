"""A check cut short by the kill of Forge is finished by the next run on the change.

Real ``forge run`` with an agent that is a shell script: it edits a frozen
file and kills its own ``forge run`` with SIGKILL, so that no check follows
its iteration. The next run on the change must find the harm, put it back
and record it before its first iteration.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .support import Repo

# The after-the-fact line is under test: the sandbox would stop the harm first.
_POLICY = '[sandbox]\nmode = "off"\n[verify]\ncommand = ""\n'

# Climbs from the script to the `forge run` that started it, and kills it.
_KILL_MY_FORGE = """
p=$$
while [ "$p" -gt 1 ]; do
  p=$(awk '{print $4}' /proc/$p/stat)
  if tr '\\0' ' ' < /proc/$p/cmdline | grep -q 'forge run'; then kill -9 "$p"; exit 0; fi
done
exit 1
"""


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", _POLICY)
    repo.write("specs/cart.md", "# cart\n")
    repo.commit("policy and specs")
    return repo


def _script(repo: Repo, name: str, body: str) -> str:
    script = repo.root.parent / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def _events(repo: Repo, change: str, name: str) -> list[dict[str, Any]]:
    lines = (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if e["event"] == name]


def test_an_agent_that_kills_its_forge_cannot_keep_its_edit(project: Repo) -> None:
    attack = _script(
        project,
        "attack.sh",
        "echo 'max_failures = 99' >> forge.toml\nrm specs/cart.md\n" + _KILL_MY_FORGE,
    )
    killed = project.forge("run", "--change", "c", "--cmd", attack, "--yes")
    assert killed.code == -9, killed.err
    assert (project.root / "forge.toml").read_text() != _POLICY
    [started] = _events(project, "c", "iteration.started")

    done = project.forge(
        "run", "--change", "c", "--cmd", _script(project, "done.sh", "echo FORGE_DONE"), "--yes"
    )
    assert done.code == 0, done.err
    assert (project.root / "forge.toml").read_text() == _POLICY
    assert (project.root / "specs/cart.md").read_text() == "# cart\n"
    [violation] = _events(project, "c", "protect.violation")
    assert (violation["run_id"], violation["iteration"]) == (started["run_id"], 1)
    assert "the loop that armed the check was killed" in violation["found"]
    harmed = {h["path"]: (h["harm"], h["action"]) for h in violation["harmed"]}
    assert harmed == {
        "forge.toml": ("modified", "restored"),
        "specs/cart.md": ("deleted", "restored"),
    }
    # Finished once: a third run finds nothing pending.
    again = project.forge(
        "run", "--change", "c", "--cmd", str(project.root.parent / "done.sh"), "--yes"
    )
    assert again.code == 0, again.err
    assert len(_events(project, "c", "protect.violation")) == 1


def test_a_run_that_was_not_killed_leaves_nothing_pending(project: Repo) -> None:
    script = _script(project, "done.sh", "echo FORGE_DONE")
    assert project.forge("run", "--change", "c", "--cmd", script, "--yes").code == 0
    assert not (project.change_dir("c") / "protect" / "pending.json").exists()
    # What a person edits between runs is theirs: no check was pending.
    project.write("forge.toml", _POLICY + "# tuned\n")
    assert project.forge("run", "--change", "c", "--cmd", script, "--yes").code == 0
    assert (project.root / "forge.toml").read_text() == _POLICY + "# tuned\n"
    assert _events(project, "c", "protect.violation") == []


def test_deleted_iteration_logs_are_undone_a_deleted_rate_limit_log_is_recorded(
    project: Repo,
) -> None:
    attack = _script(
        project,
        "wipe.sh",
        'if [ "$FORGE_ITERATION" = 2 ]; then\n'
        "  rm -rf .forge/changes/c/runs .forge/ratelimit.sqlite3\n"
        "fi\necho working",
    )
    done = project.forge("run", "--change", "c", "--cmd", attack, "--yes")
    assert done.code == 1, done.err
    assert "  gate:   integrity" in done.lines
    [violation] = _events(project, "c", "protect.violation")
    [started, _] = _events(project, "c", "iteration.started")
    run = f".forge/changes/c/runs/{started['run_id']}"
    harmed = {h["path"]: (h["harm"], h["action"]) for h in violation["harmed"]}
    assert harmed == {
        ".forge/changes/c/runs": ("deleted", "restored"),
        run: ("deleted", "restored"),
        f"{run}/iteration-1.log": ("deleted", "restored"),
        # Never opened, so never copied (see LiveDatabase): there is nothing to restore.
        ".forge/ratelimit.sqlite3": ("deleted", "not restored: nothing to restore it from"),
    }
    assert "working" in (project.root / run / "iteration-1.log").read_text()
    # The next run begins a new log of the window and takes a permit from it.
    assert (
        project.forge(
            "run", "--change", "d", "--cmd", _script(project, "d.sh", "echo FORGE_DONE"), "--yes"
        ).code
        == 0
    )


def test_an_earlier_iteration_log_rewritten_is_put_back(project: Repo) -> None:
    attack = _script(
        project,
        "rewrite.sh",
        'if [ "$FORGE_ITERATION" = 2 ]; then\n'
        '  for log in .forge/changes/c/runs/*/iteration-1.log; do echo nothing > "$log"; done\n'
        "fi\necho evidence",
    )
    done = project.forge("run", "--change", "c", "--cmd", attack, "--yes")
    assert done.code == 1, done.err
    [violation] = _events(project, "c", "protect.violation")
    [harm] = violation["harmed"]
    assert harm["path"].endswith("/iteration-1.log")
    assert (harm["harm"], harm["action"]) == ("modified", "restored")
    [log] = (project.change_dir("c") / "runs").glob("*/iteration-1.log")
    assert "evidence" in log.read_text()
