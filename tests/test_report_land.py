"""The morning report and ``forge status`` show where each change stands with landing.

A real ``forge supervise`` batch of loops in worktrees that end done; the
``land.*`` events ``forge land`` writes are appended to their timelines
through the state API, and ``forge report`` / ``forge status`` read them.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from orchestra._state import ChangePaths, OtherEvent, append_event, exclusive_lock

from .support import FAKE_AGENT, Repo

CHANGES = ("ready", "shipped", "clash", "broken")


def _agent(repo: Repo, change: str) -> str:
    script = repo.root.parent / f"{change}.json"
    step = {
        "write": {f"src/{change}.py": "print('work')\nprint('more')\n"},
        "shell": f"git add -A && git commit -q -m '{change} work'",
        "print": "FORGE_DONE\n",
    }
    script.write_text(json.dumps({"steps": [step]}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def _event(repo: Repo, change: str, name: str, **fields: Any) -> None:
    paths = ChangePaths(repo.root, change)
    with exclusive_lock(paths.lock):
        append_event(paths.timeline, change, OtherEvent(name=name, fields=fields))


def _batch(repo: Repo) -> str:
    repo.git("branch", "-M", "main")
    loops = "".join(
        f'[[loop]]\nchange = "{c}"\nworktree = true\ncmd = {json.dumps(_agent(repo, c))}\n'
        for c in CHANGES
    )
    repo.write(
        "forge.toml",
        f'[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n{loops}',
    )
    repo.commit("policy")
    done = repo.forge("supervise", "--plain")
    assert done.code == 0, done
    [run_id] = [p.name for p in (repo.root / ".forge" / "runs").iterdir()]
    return run_id


def _land_some(repo: Repo) -> str:
    repo.git("merge", "-q", "--no-ff", "-m", "land shipped", "forge/shipped")
    head = repo.git("rev-parse", "HEAD").strip()
    _event(
        repo, "shipped", "land.done", base="main", commit=head, mode="merge", verify="PASS", order=1
    )
    _event(repo, "clash", "land.conflict", base="main", files=["src/x.py", "src/y.py"])
    _event(repo, "broken", "land.failed", base="main", checks=["tests"], verify="FAIL")
    return head


def _reports(root: Path, run_id: str) -> tuple[str, str]:
    folder = root / ".forge" / "runs" / run_id
    return (
        (folder / "report.html").read_text(encoding="utf-8"),
        (folder / "report.md").read_text(encoding="utf-8"),
    )


def test_the_report_lists_ready_and_landed_changes(repo: Repo) -> None:
    run_id = _batch(repo)
    html, markdown = _reports(repo.root, run_id)
    # Before any land: every loop that ended done is ready, none landed.
    assert "## Ready to land (4)" in markdown
    assert "Landed / Conflicts / Failed" not in markdown + html

    head = _land_some(repo)
    done = repo.forge("report")
    assert done.code == 0, done
    html, markdown = _reports(repo.root, run_id)
    ready = markdown.split("## Ready to land (1)", 1)[1].split("\n## ", 1)[0]
    assert "- ready — verify PASS" in ready
    assert "Against the branch point of forge/ready" in ready
    assert "src/ready.py | +2 -0" in ready
    assert "1 file(s) changed, +2 -0" in ready
    assert "shipped" not in ready
    landed = markdown.split("## Landed / Conflicts / Failed", 1)[1].split("\n## ", 1)[0]
    assert f"### Landed (1)\n\n- shipped — on main at {head[:7]} (merge)" in landed
    assert "### Conflicts (1)\n\n- clash — conflicts with main in src/x.py, src/y.py" in landed
    assert "### Failed (1)\n\n- broken — verify failed on main: tests" in landed
    # The same page in HTML.
    assert '<h2 id="ready-to-land-h">Ready to land (1)</h2>' in html
    assert "src/ready.py | +2 -0" in html
    assert '<h2 id="landed-h">Landed / Conflicts / Failed</h2>' in html
    assert f"on main at {head[:7]} (merge)" in html
    assert "conflicts with main in src/x.py, src/y.py" in html
    assert "verify failed on main: tests" in html


def test_status_shows_each_change_s_land_state(repo: Repo) -> None:
    _batch(repo)
    head = _land_some(repo)
    _event(repo, "ready", "land.abandoned", reason="superseded", by="me")
    shown = repo.forge("status")
    assert shown.code == 0, shown
    blocks = {b.split("\n", 1)[0].split()[0]: b for b in shown.out.split("\n\n")[1:]}
    assert f"  land:     landed on main ({head[:7]})" in blocks["shipped"]
    assert "  land:     conflict (src/x.py, src/y.py)" in blocks["clash"]
    assert "  land:     failed (tests)" in blocks["broken"]
    assert "  land:     abandoned" in blocks["ready"]
    rows = {row["change"]: row for row in json.loads(repo.forge("status", "--json").out)["changes"]}
    assert rows["shipped"]["land"] == f"landed on main ({head[:7]})"
    assert rows["broken"]["land"] == "failed (tests)"


def test_status_says_ready_until_a_land_is_recorded(repo: Repo) -> None:
    _batch(repo)
    rows = {row["change"]: row for row in json.loads(repo.forge("status", "--json").out)["changes"]}
    assert {row["land"] for row in rows.values()} == {"ready"}
    assert "  land:     ready" in repo.forge("status").out


def test_clean_after_a_real_batch_removes_only_the_landed_change(repo: Repo) -> None:
    _batch(repo)
    head = _land_some(repo)
    dry = repo.forge("clean", "--dry-run", "--abandon", "ready", "--reason", "superseded")
    assert dry.code == 0, dry
    assert "would remove ready" in dry.out
    assert (repo.root / ".forge" / "worktrees" / "ready").is_dir()
    assert "land.abandoned" not in ChangePaths(repo.root, "ready").timeline.read_text()
    done = repo.forge("clean", "--json")
    assert done.code == 0, done
    shown = json.loads(done.out)
    assert [entry["change"] for entry in shown["removed"]] == ["shipped"]
    assert sorted(entry["change"] for entry in shown["kept"]) == ["broken", "clash", "ready"]
    assert not (repo.root / ".forge" / "worktrees" / "shipped").exists()
    # Cleaned, it has still landed.
    rows = {row["change"]: row for row in json.loads(repo.forge("status", "--json").out)["changes"]}
    assert rows["shipped"]["land"] == f"landed on main ({head[:7]})"
    assert rows["ready"]["land"] == "ready"
