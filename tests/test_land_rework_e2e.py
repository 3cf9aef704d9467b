"""``forge land --rework``: a change that did not land goes back to its loop, and lands next.

Real ``forge supervise`` batches of fake-agent loops in worktrees, real git:
the agent that gets a change back plays its ``when_env`` steps (it has
``FORGE_BRIEF``), which apply a scripted resolution.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import FAKE_AGENT, Repo


def _agent(folder: Path, name: str, steps: list[dict[str, Any]], **when: Any) -> str:
    script = folder / f"{name}.json"
    script.write_text(json.dumps({"steps": steps, "when_env": when}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def _loop(change: str, cmd: str, extra: str = "") -> str:
    return f'[[loop]]\nchange = "{change}"\ncmd = {json.dumps(cmd)}\nworktree = true\n{extra}'


def _events(repo: Repo, change: str) -> list[dict[str, Any]]:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    return [json.loads(line) for line in timeline.read_text().splitlines()]


def _kinds(repo: Repo, change: str) -> list[str]:
    return [str(e["event"]) for e in _events(repo, change)]


def _start(repo: Repo, toml: str) -> None:
    repo.write("forge.toml", toml)
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    repo.git("branch", "-M", "main")


def test_a_conflict_goes_back_to_its_loop_which_resolves_it_and_lands_next(
    repo: Repo, tmp_path: Path
) -> None:
    seen = tmp_path / "rework-env.json"
    left = _agent(tmp_path, "left", [{"write": {"README.md": "left\n"}, "print": "FORGE_DONE\n"}])
    # Its first round writes its own line; handed back, it resolves the conflict.
    resolve = {
        "record_env": str(seen),
        "write": {"README.md": "left\nright\n"},
        "print": "FORGE_DONE\n",
    }
    right = _agent(
        tmp_path,
        "right",
        [{"write": {"README.md": "right\n"}, "print": "FORGE_DONE\n"}],
        FORGE_BRIEF=[resolve],
    )
    verify = "[verify]\ncommand = \"! grep -q '<<<<<<<' README.md\"\nspecs = []\ntests = []\n"
    _start(repo, verify + _loop("left", left) + _loop("right", right))
    assert repo.forge("supervise", "--plain").code == 0

    first = repo.forge("land", "--rework", "--plain")

    assert first.code == 1, first.out + first.err
    lines = [line for line in first.lines if "committed its uncommitted work" not in line]
    assert lines[0].startswith("land: left — landed on main (")
    assert lines[1] == "land: right — CONFLICT in README.md; base unchanged"
    main = repo.git("rev-parse", "main").strip()
    assert (
        f"land: right — handed back to its loop: main ({main[:7]}) merged into forge/right, "
        "conflicts marked in README.md"
    ) in lines
    assert "land: right — its rework ended done: the next forge land lands it" in lines
    assert "land: 1 of 1 handed back ended done — forge land lands them" in lines
    # The loop's iteration was told what stands in the way and which base it must fit.
    env = json.loads(seen.read_text())
    assert env["FORGE_BRIEF"].startswith(
        f"Forge land: this change could not land on main: it conflicts with main ({main[:7]}) "
        "in README.md."
    )
    assert env["FORGE_PROMPT"].endswith(env["FORGE_BRIEF"])
    assert env["FORGE_ITERATION"] == "1"
    kinds = _kinds(repo, "right")
    conflict = kinds.index("land.conflict")
    assert kinds[conflict + 1 : conflict + 3] == ["breaker.reset", "land.rework"]
    rework = _events(repo, "right")[conflict + 2]
    assert rework["base"] == "main"
    assert rework["commit"] == main
    assert rework["kind"] == "conflict"
    assert rework["files"] == ["README.md"]
    assert "iteration.finished" in kinds[conflict:]
    # The rework's own batch reports the change ready to land again.
    report = (repo.root / ".forge" / "runs" / rework["run"] / "report.md").read_text()
    ready = report.split("## Ready to land (1)", 1)[1].split("\n## ", 1)[0]
    assert "right" in ready
    status = repo.forge("status", "--json")
    changes = {c["change"]: c for c in json.loads(status.out)["changes"]}
    assert changes["right"]["land"] == f"ready, reworked against main ({main[:7]})"

    second = repo.forge("land", "--plain")

    assert second.code == 0, second.out + second.err
    assert any(line.startswith("land: right — landed on main (") for line in second.lines)
    assert repo.git("show", "main:README.md") == "left\nright\n"
    assert (repo.root / "README.md").read_text() == "left\nright\n"
    done = _events(repo, "right")[-2]
    assert done["event"] == "land.done"
    assert done["mode"] == "fast-forward"  # its branch holds main: nothing replayed again
    assert not (repo.root / ".forge" / "worktrees" / "right").exists()


def test_a_change_failing_on_the_combined_tree_goes_back_with_its_checks(
    repo: Repo, tmp_path: Path
) -> None:
    seen = tmp_path / "rework-env.json"
    # Each change alone passes; together they need glue.txt, which the rework adds.
    check = "test ! -e a.txt || test ! -e b.txt || test -e glue.txt"
    a = _agent(tmp_path, "a", [{"write": {"a.txt": "a\n"}, "print": "FORGE_DONE\n"}])
    b = _agent(
        tmp_path,
        "b",
        [{"write": {"b.txt": "b\n"}, "print": "FORGE_DONE\n"}],
        FORGE_BRIEF=[
            {"record_env": str(seen), "write": {"glue.txt": "g\n"}, "print": "FORGE_DONE\n"}
        ],
    )
    toml = (
        f"[verify]\ncommand = {json.dumps(check)}\nspecs = []\ntests = []\n"
        "[land]\nrework = true\n"  # the setting, not the flag
    )
    _start(repo, toml + _loop("a", a) + _loop("b", b))
    assert repo.forge("supervise", "--plain").code == 0

    dry = repo.forge("land", "--dry-run", "--plain")
    assert (
        "plan 2: b — rebase onto main, then verify; a conflict or FAIL goes back to its loop"
        in (dry.lines)
    )
    first = repo.forge("land", "--json")

    assert first.code == 1, first.err
    document = json.loads(first.out)
    assert [c["result"] for c in document["changes"]] == ["landed", "failed"]
    assert document["rework"]["loops"] == [{"change": "b", "reason": "done"}]
    assert document["rework"]["refused"] == []
    brief = json.loads(seen.read_text())["FORGE_BRIEF"]
    assert "on top of main" in brief
    assert "its verify fails (tests). main is merged into your branch forge/b." in brief
    rework = [e for e in _events(repo, "b") if e["event"] == "land.rework"][-1]
    assert rework["kind"] == "failed"
    assert rework["run"] == document["rework"]["run_id"]

    second = repo.forge("land", "--plain")

    assert second.code == 0, second.out
    files = set(repo.git("ls-tree", "--name-only", "main").split())
    assert {"a.txt", "b.txt", "glue.txt"} <= files


def test_a_change_its_loop_cannot_take_back_is_left_for_a_person(
    repo: Repo, tmp_path: Path
) -> None:
    # "stuck" escalates at once: its circuit is open, and a rework is no way around it.
    done = _agent(tmp_path, "done", [{"write": {"x.txt": "x\n"}, "print": "FORGE_DONE\n"}])
    toml = (
        '[verify]\ncommand = "test ! -e x.txt || test ! -e y.txt"\nspecs = []\ntests = []\n'
        + _loop("first", done)
        + _loop(
            "stuck",
            _agent(tmp_path, "stuck", [{"write": {"y.txt": "y\n"}, "print": "FORGE_DONE\n"}]),
            '[loop.verify]\ncommand = "exit 1"\nmax_failures = 1\n'
            '[loop.breaker]\non_open = "escalate"\n',
        )
    )
    _start(repo, toml)
    assert repo.forge("supervise", "--plain").code == 1
    # A branch of a change no loop declares.
    stray = repo.root / ".forge" / "worktrees" / "stray"
    repo.git("worktree", "add", "-q", "-b", "forge/stray", str(stray), "main")
    (stray / "x.txt").write_text("other\n")
    assert repo.forge("land", "first").code == 0
    before = repo.git("rev-parse", "main")

    held = repo.forge("land", "stuck", "stray", "--rework", "--plain")

    assert held.code == 1, held.out + held.err
    assert (
        "land: stuck — not reworked: its circuit is open (escalated); a person resets it "
        "first: forge circuit stuck --reset --reason WHY"
    ) in held.lines
    assert "land: stray — not reworked: no [[loop]] in forge.toml declares it" in held.lines
    assert "land: nothing handed back — escalate: see the lines above" in held.lines
    assert repo.git("rev-parse", "main") == before
    assert "land.rework" not in _kinds(repo, "stuck")
    refused = repo.forge("land", "--rework", "--pr")
    assert refused.code == 2
    assert "--rework does not apply to pull requests" in refused.err


def test_a_branch_holding_a_merge_is_merged_not_replayed(repo: Repo) -> None:
    # Its merge resolved a conflict; a rebase would replay its first commit onto
    # a README.md it conflicts with again.
    _start(repo, '[verify]\ncommand = "true"\nspecs = []\ntests = []\n')
    tree = repo.root / ".forge" / "worktrees" / "fix"
    repo.git("worktree", "add", "-q", "-b", "forge/fix", str(tree), "main")
    branch = Repo(tree)
    branch.write("README.md", "fix\n")
    branch.commit("fix: work")
    repo.write("README.md", "base\n")
    repo.commit("main moves")
    merged = subprocess.run(["git", "merge", "-q", "main"], cwd=tree, capture_output=True)
    assert merged.returncode != 0  # a conflict, resolved by hand
    branch.write("README.md", "base\nfix\n")
    branch.commit("resolved")
    repo.write("other.txt", "o\n")
    repo.commit("main moves on")

    done = repo.forge("land", "fix", "--plain")

    assert done.code == 0, done.out + done.err
    landed = _events(repo, "fix")[0]
    assert landed["mode"] == "merge"
    assert repo.git("show", "main:README.md") == "base\nfix\n"
    assert repo.git("show", "main:other.txt") == "o\n"
