"""``forge steer``: a person's guidance reaches exactly the next iteration of exactly one loop.

A real ``forge supervise`` of two fake-agent loops; each loop's first
iteration holds on a FIFO of its own until the test lets it go, so the
guidance is given while both loops run. Each later iteration records its
environment.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from tests.support import FAKE_AGENT, Repo, let_go, spawn_forge, wait_started


def _agent(folder: Path, change: str) -> tuple[str, Path, Path]:
    """A loop's agent: iteration 1 says it started and waits; 2 and 3 record their env."""
    started, go = folder / f"{change}.started", folder / f"{change}.go"
    os.mkfifo(started)
    os.mkfifo(go)
    hold = f'echo up > "{started}"; read word < "{go}"'
    steps: list[dict[str, Any]] = [
        {"shell": hold, "write": {f"{change}-1.txt": "1\n"}, "print": "one\n"},
        {"record_env": str(folder / f"{change}-2.json"), "write": {f"{change}-2.txt": "2\n"}},
        {
            "record_env": str(folder / f"{change}-3.json"),
            "write": {f"{change}-3.txt": "3\n"},
            "print": "FORGE_DONE\n",
        },
    ]
    script = folder / f"{change}.json"
    script.write_text(json.dumps({"steps": steps}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)]), started, go


def _events(repo: Repo, change: str) -> list[dict[str, Any]]:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    return [json.loads(line) for line in timeline.read_text().splitlines()]


def test_guidance_reaches_the_next_iteration_of_that_loop_only(repo: Repo, tmp_path: Path) -> None:
    search, search_started, search_go = _agent(tmp_path, "search")
    billing, billing_started, billing_go = _agent(tmp_path, "billing")
    prompt = "Work on the change.\\n{guidance}\\nGo on."
    repo.write(
        "forge.toml",
        f'[run]\nprompt = "{prompt}"\n[verify]\ncommand = "true"\nspecs = []\ntests = []\n'
        f'[[loop]]\nchange = "search"\ncmd = {json.dumps(search)}\nworktree = true\n'
        f'[[loop]]\nchange = "billing"\ncmd = {json.dumps(billing)}\nworktree = true\n',
    )
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    forge = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    try:
        wait_started(search_started)
        wait_started(billing_started)

        given = repo.forge("steer", "search", "the test fixture is in tests/conftest.py, use it")

        assert given.code == 0, given.err
        assert given.lines == [
            'steer: guidance for "search" waits for its next iteration (1 waiting)'
        ]
        listed = repo.forge("steer", "search", "--json")
        [waiting] = json.loads(listed.out)["waiting"]
        assert waiting["keep"] == "once"
        assert "@" in waiting["by"]
        status = repo.forge("status", "--plain")
        assert (
            f"  guidance: waiting (once, by {waiting['by']}): the test fixture is in "
            "tests/conftest.py, use it"
        ) in status.lines
    finally:
        let_go(search_go)
        let_go(billing_go)
        out, err = forge.communicate(timeout=120)
    assert forge.returncode == 0, out + err
    second = json.loads((tmp_path / "search-2.json").read_text())
    text = "the test fixture is in tests/conftest.py, use it"
    said = f"Guidance from a person ({waiting['by']}): {text}"
    assert second["FORGE_GUIDANCE"] == said
    # At the prompt's placeholder, not appended.
    assert second["FORGE_PROMPT"] == f"Work on the change.\n{said}\nGo on."
    # Once: the iteration after it has none; the other loop never had any.
    third = json.loads((tmp_path / "search-3.json").read_text())
    assert "FORGE_GUIDANCE" not in third
    assert third["FORGE_PROMPT"] == "Work on the change.\n\nGo on."
    for recorded in ("billing-2.json", "billing-3.json"):
        assert "FORGE_GUIDANCE" not in json.loads((tmp_path / recorded).read_text())
    kinds = [e["event"] for e in _events(repo, "search")]
    assert kinds.count("guidance.given") == 1
    [delivered] = [e for e in _events(repo, "search") if e["event"] == "guidance.delivered"]
    assert delivered["iteration"] == 2
    assert delivered["by"] == [waiting["by"]]
    assert "guidance.delivered" not in [e["event"] for e in _events(repo, "billing")]
    assert repo.forge("steer", "search", "--json").out.count('"waiting": []') == 1


def test_until_cleared_guidance_stays_and_clear_removes_it(repo: Repo, tmp_path: Path) -> None:
    seen = tmp_path / "env.jsonl"
    script = tmp_path / "agent.json"
    step = {"shell": f'env | grep ^FORGE_GUIDANCE= >> "{seen}" || echo none >> "{seen}"'}
    script.write_text(json.dumps({"steps": [step]}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write("forge.toml", '[verify]\ncommand = ""\n')
    repo.commit("project")
    unknown = repo.forge("steer", "nope", "hello")
    assert unknown.code == 2
    assert 'no change "nope"' in unknown.err
    first = repo.forge("run", "--yes", "--change", "c", "--cmd", cmd, "--max-iterations", "1")
    assert "Traceback" not in first.err
    assert repo.forge("steer", "c", "keep it small", "--until-cleared").code == 0
    empty = repo.forge("steer", "c", "  ")
    assert empty.code == 2

    repo.forge("run", "--yes", "--change", "c", "--cmd", cmd, "--max-iterations", "2")

    lines = seen.read_text().splitlines()
    assert lines[0] == "none"
    assert lines[1:] == [f"FORGE_GUIDANCE=Guidance from a person ({_by(repo)}): keep it small"] * 2
    cleared = repo.forge("steer", "c", "--clear")
    assert cleared.lines == ['steer: cleared 1 piece(s) of guidance for "c"']
    repo.forge("run", "--yes", "--change", "c", "--cmd", cmd, "--max-iterations", "1")
    assert seen.read_text().splitlines()[-1] == "none"
    kinds = [e["event"] for e in _events(repo, "c")]
    assert kinds.count("guidance.delivered") == 2
    assert "guidance.cleared" in kinds


def _by(repo: Repo) -> str:
    [given] = [e for e in _events(repo, "c") if e["event"] == "guidance.given"]
    return str(given["by"])
