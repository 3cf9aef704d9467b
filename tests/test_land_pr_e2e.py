"""``forge land --pr`` and ``--status``: push to a real bare remote, pull requests via gh.

The remote is a real bare repository; ``gh`` is a small executable put first
on PATH that logs its arguments and the body file and answers as gh would.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.support import Repo

FAKE_GH = """#!{python}
import json, os, sys
args = sys.argv[1:]
body = ""
if "--body-file" in args:
    with open(args[args.index("--body-file") + 1], encoding="utf-8") as f:
        body = f.read()
with open(os.environ["FAKE_GH_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({{"args": args, "body": body}}) + "\\n")
if args[:2] == ["auth", "status"]:
    sys.exit(int(os.environ.get("FAKE_GH_AUTH", "0")))
if args[:2] == ["pr", "create"]:
    print("Creating pull request for " + args[args.index("--head") + 1])
    print("https://github.example/acme/shop/pull/12")
    sys.exit(0)
if args[:2] == ["pr", "view"]:
    print(json.dumps({{
        "number": 12, "state": "OPEN", "mergeable": "MERGEABLE",
        "statusCheckRollup": [
            {{"name": "tests", "status": "COMPLETED", "conclusion": "SUCCESS"}},
            {{"name": "lint", "status": "COMPLETED", "conclusion": "SUCCESS"}},
            {{"name": "e2e", "status": "IN_PROGRESS", "conclusion": ""}},
        ],
    }}))
    sys.exit(0)
sys.exit(3)
"""


def _project(repo: Repo, tmp_path: Path) -> Path:
    """A project on main with a bare repository as ``origin``; the remote's path."""
    repo.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\ntests = []\n')
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    repo.git("branch", "-M", "main")
    remote = tmp_path / "remote.git"
    Repo(tmp_path).git("init", "-q", "--bare", str(remote))
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "origin", "main")
    return remote


def _change(repo: Repo, name: str) -> Path:
    tree = repo.root / ".forge" / "worktrees" / name
    tree.parent.mkdir(parents=True, exist_ok=True)
    repo.git("worktree", "add", "-q", "-b", f"forge/{name}", str(tree), "HEAD")
    (tree / f"{name}.txt").write_text(f"{name}\n", encoding="utf-8")
    Repo(tree).commit(f"{name}: add {name}.txt")
    return tree


def _fake_gh(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment with the fake gh first on PATH, and its log."""
    folder = tmp_path / "bin"
    folder.mkdir()
    gh = folder / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable), encoding="utf-8")
    gh.chmod(0o755)
    log = tmp_path / "gh.log"
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "FAKE_GH_LOG": str(log)}, log


def _no_gh_path(tmp_path: Path) -> dict[str, str]:
    """A PATH with git but without any gh."""
    folder = tmp_path / "nogh"
    folder.mkdir()
    for tool in ("git", "sh", "true"):
        for entry in os.environ["PATH"].split(os.pathsep):
            found = Path(entry) / tool
            if found.exists():
                (folder / tool).symlink_to(found)
                break
    return {"PATH": str(folder)}


def _events(repo: Repo, change: str) -> list[dict[str, object]]:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    if not timeline.exists():
        return []
    return [json.loads(line) for line in timeline.read_text().splitlines()]


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_pr_pushes_the_branch_opens_a_pull_request_and_records_it(
    repo: Repo, tmp_path: Path
) -> None:
    remote = _project(repo, tmp_path)
    _change(repo, "checkout")
    # What the loop did: a verify on its timeline, its spend.
    verified = repo.forge("verify", "--change", "checkout")
    assert verified.code == 0, verified.err
    repo.write(
        ".forge/changes/checkout/spend.yaml",
        "tokens: 4321\ntool_calls: 7\ncost_usd: 0.42\niterations: 2\n",
    )
    env, log = _fake_gh(tmp_path)
    main_before = repo.git("rev-parse", "main")

    done = repo.forge("land", "checkout", "--pr", "--plain", env=env)

    assert done.code == 0, done.err
    assert done.lines[0] == (
        "land: checkout — pushed forge/checkout to origin, "
        "pull request https://github.example/acme/shop/pull/12"
    )
    tip = repo.git("rev-parse", "forge/checkout")
    assert Repo(remote).git("rev-parse", "refs/heads/forge/checkout") == tip
    calls = _calls(log)
    assert calls[0]["args"] == ["auth", "status"]
    create = calls[1]["args"]
    assert isinstance(create, list)
    assert create[:6] == ["pr", "create", "--base", "main", "--head", "forge/checkout"]
    assert create[6:8] == ["--title", "checkout: add checkout.txt"]
    assert create[8] == "--body-file"
    body = str(calls[1]["body"])
    assert "## checkout" in body
    assert "Last verify: PASS" in body
    assert "4321 tokens, 7 tool calls, $0.42" in body
    recorded = _events(repo, "checkout")[-1]
    assert recorded["event"] == "land.pr"
    assert recorded["url"] == "https://github.example/acme/shop/pull/12"
    assert recorded["branch"] == "forge/checkout"
    assert recorded["remote"] == "origin"
    assert recorded["base"] == "main"
    # Nothing local moved: the remote's checks decide.
    assert repo.git("rev-parse", "main") == main_before

    status = repo.forge("land", "--status", "--plain", env=env)
    assert status.code == 0, status.err
    assert status.lines == ["land: checkout — PR #12 open, checks: 2 passed, 1 pending"]
    view = _calls(log)[-1]["args"]
    assert view == [
        "pr",
        "view",
        "https://github.example/acme/shop/pull/12",
        "--json",
        "number,state,mergeable,statusCheckRollup",
    ]
    as_json = repo.forge("land", "--status", "--json", env=env)
    document = json.loads(as_json.out)
    assert document["pull_requests"][0]["passed"] == 2
    assert document["pull_requests"][0]["pending"] == 1
    assert document["pull_requests"][0]["state"] == "OPEN"

    again = repo.forge("land", "checkout", "--pr", "--plain", env=env)
    assert again.code == 0
    assert "skipped: its pull request is open" in again.out


def test_without_gh_the_branch_is_pushed_with_a_message(repo: Repo, tmp_path: Path) -> None:
    remote = _project(repo, tmp_path)
    _change(repo, "billing")

    no_gh = _no_gh_path(tmp_path)

    done = repo.forge("land", "billing", "--pr", "--plain", env=no_gh)

    assert done.code == 0, done.err
    assert done.lines[0] == (
        "land: billing — gh not found — pushed forge/billing to origin; open the pull request there"
    )
    tip = repo.git("rev-parse", "forge/billing")
    assert Repo(remote).git("rev-parse", "refs/heads/forge/billing") == tip
    assert _events(repo, "billing") == []
    status = repo.forge("land", "--status", env=no_gh)
    assert status.code == 2
    assert "gh not found" in status.err
    assert "Traceback" not in status.err


def test_unauthenticated_gh_pushes_only(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path)
    _change(repo, "search")
    env, log = _fake_gh(tmp_path)

    done = repo.forge("land", "search", "--pr", "--plain", env={**env, "FAKE_GH_AUTH": "1"})

    assert done.code == 0, done.err
    assert "gh not authenticated — pushed forge/search to origin" in done.lines[0]
    assert [c["args"] for c in _calls(log)] == [["auth", "status"]]


def test_a_failed_push_is_reported_with_exit_1(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path)
    _change(repo, "broken")
    repo.git("remote", "set-url", "origin", str(tmp_path / "no-such-remote.git"))
    env, _log = _fake_gh(tmp_path)

    done = repo.forge("land", "broken", "--pr", "--plain", env=env)

    assert done.code == 1
    assert done.lines[0].startswith("land: broken — FAILED: git push origin forge/broken failed")
    [failed] = _events(repo, "broken")
    assert failed["event"] == "land.pr.failed"
    assert failed["step"] == "push"
    assert failed["remote"] == "origin"
    assert str(failed["message"]).startswith("git push origin forge/broken failed")
    assert repo.forge("land", "--status", env=env).out.startswith("land: no pull requests")


def test_the_land_table_selects_pr_mode_and_its_remote(repo: Repo, tmp_path: Path) -> None:
    remote = _project(repo, tmp_path)
    repo.git("remote", "rename", "origin", "upstream")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\ntests = []\n\n'
        '[land]\nmode = "pr"\nremote = "upstream"\nbase = "release"\n',
    )
    repo.commit("pr mode")
    _change(repo, "tabled")
    env, log = _fake_gh(tmp_path)

    done = repo.forge("land", "tabled", "--plain", env=env)

    assert done.code == 0, done.err
    assert "pushed forge/tabled to upstream" in done.lines[0]
    assert Repo(remote).git("rev-parse", "refs/heads/forge/tabled").strip()
    create = _calls(log)[1]["args"]
    assert isinstance(create, list)
    assert create[2:4] == ["--base", "release"]


def test_bad_land_table_and_flags_are_usage_errors(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path)
    _change(repo, "one")
    repo.write("forge.toml", '[land]\nmode = "remote"\n')
    bad_mode = repo.forge("land", "one")
    assert bad_mode.code == 2
    assert "mode" in bad_mode.err
    assert "Traceback" not in bad_mode.err
    repo.write("forge.toml", '[land]\nremot = "origin"\n')
    typo = repo.forge("land", "one")
    assert typo.code == 2
    assert "remot" in typo.err
    repo.write("forge.toml", '[land]\nremote = "nowhere"\n')
    no_remote = repo.forge("land", "one", "--pr")
    assert no_remote.code == 2
    assert "no git remote 'nowhere'" in no_remote.err
    repo.write("forge.toml", "")
    squash = repo.forge("land", "one", "--pr", "--squash")
    assert squash.code == 2
    assert "--squash does not apply to pull requests" in squash.err


def test_the_land_tables_base_is_the_local_lands_default_base(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path)
    repo.git("branch", "release")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\ntests = []\n\n[land]\nbase = "release"\n',
    )
    repo.commit("release base")
    _change(repo, "local")

    plan = repo.forge("land", "local", "--dry-run", "--plain")

    assert plan.code == 0, plan.err
    assert plan.lines[0] == "plan 1: local — rebase onto release, then verify"
