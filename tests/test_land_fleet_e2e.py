"""``forge land --fleet``: a fleet batch's pushed branches fetched and landed as a local batch's.

Real all the way: a Redis server, a bare git repository the ``repo`` loops
clone and push to, ``forge fleet submit`` and two ``forge fleet work`` hosts
whose fake agents commit a file each, then ``forge land --fleet`` in a clone
of that repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .fleet_support import Fleet, fleet_of, git, git_repo, stamping_agent
from .redis_server import RedisServer, closed_port
from .support import Completed, run_forge

COMMIT_RESULT = (
    'echo "$FORGE_CHANGE" > "result-$FORGE_CHANGE.txt" && '
    'git add "result-$FORGE_CHANGE.txt" && git commit -q -m "work on $FORGE_CHANGE"'
)

# Submitted in this order (not the names' order): they land in it.
DONE = ("zulu", "alpha", "mike")


def _bare(tmp: Path, name: str) -> Path:
    origin = git_repo(tmp / f"{name}-origin")
    git(origin, "branch", "-M", "main")
    bare = tmp / f"{name}.git"
    git(tmp, "clone", "-q", "--bare", str(origin), str(bare))
    return bare


def _batch(fleet: Fleet, tmp: Path, log: Path) -> str:
    """Done repo loops, one whose branch the clone has apart, one not done, a dir, another repo."""
    verify = tmp / "verify.sh"
    # Each verify says where it ran and which results the tree has.
    verify.write_text(f'echo "$(pwd)|$(ls result-*.txt 2>/dev/null | tr "\\n" " ")" >> "{log}"\n')
    done = stamping_agent(
        tmp, "done", fleet.stamps, {"shell": COMMIT_RESULT, "print": "FORGE_DONE\n"}
    )
    working = stamping_agent(tmp, "working", fleet.stamps, {"shell": COMMIT_RESULT})
    lines = ["[verify]", f"command = {json.dumps(f'sh {verify}')}", "specs = []"]

    def repo_loop(change: str, repo: str, agent: str, *extra: str) -> None:
        lines.extend(["[[loop]]", f'change = "{change}"', f'repo = "{repo}"', 'ref = "main"'])
        lines.extend(["push = true", f"cmd = {json.dumps(agent)}", *extra])

    for change in DONE:
        repo_loop(change, "project.git", done)
    repo_loop("kilo", "project.git", done)
    repo_loop("stuck", "project.git", working, "max_iterations = 1")
    shared = git_repo(tmp / "shared-folder")
    lines += ["[[loop]]", 'change = "shared"', f"dir = {json.dumps(str(shared))}"]
    lines.append(f"cmd = {json.dumps(done)}")
    repo_loop("elsewhere", "other.git", done)
    return "\n".join(lines) + "\n"


def _land_clone(tmp: Path, bare: Path, fleet: Fleet) -> Path:
    """A clone of the project, its forge.toml naming the fleet; its own verify always fails."""
    clone = tmp / "clone"
    git(tmp, "clone", "-q", str(bare), str(clone))
    (clone / ".git" / "info" / "exclude").write_text(".forge/\nforge.toml\n")
    (clone / "forge.toml").write_text(
        f'[fleet]\nname = "nightly"\nlease = "{fleet.lease}"\nheartbeat = "{fleet.heartbeat}"\n'
        # Were the project's verify used instead of the loops' own, nothing would land.
        '[verify]\ncommand = "false"\nspecs = []\n'
    )
    return clone


def _forge(fleet: Fleet, clone: Path, *args: str, url: str | None = None) -> Completed:
    env = fleet.env({"FORGE_REDIS_URL": url} if url else None)
    return run_forge(args, cwd=clone, env=env, timeout=180)


def _events(clone: Path, change: str) -> list[dict[str, Any]]:
    timeline = clone / ".forge" / "changes" / change / "timeline.jsonl"
    if not timeline.exists():
        return []
    return [json.loads(line) for line in timeline.read_text().splitlines()]


def _branches(clone: Path) -> list[str]:
    return git(clone, "branch", "--list", "--format=%(refname:short)", "forge/*").split()


def test_a_fleet_batch_lands_in_submission_order_each_verified_on_the_combined_tree(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    bare = _bare(tmp_path, "project")
    _bare(tmp_path, "other")
    log = tmp_path / "verify.log"
    with fleet_of(tmp_path, redis_server) as fleet:
        # Cloned before the batch runs: no forge/* branch of the remote's is known here yet.
        clone = _land_clone(tmp_path, bare, fleet)
        assert fleet.submit(_batch(fleet, tmp_path, log)).code == 0
        fleet.spawn("w1", max_parallel=4)
        fleet.spawn("w2", max_parallel=4)
        assert sorted(fleet.wait_all()) == [1, 1], fleet.output("w1") + fleet.output("w2")
        loops = fleet.status()["loops"]
        assert loops["stuck"]["reason"] == "iterations-exhausted", loops["stuck"]
        assert all(loops[c]["reason"] == "done" for c in (*DONE, "kilo", "shared", "elsewhere"))

        # The person's own forge/kilo, with a commit the fleet's lacks: never clobbered.
        git(clone, "checkout", "-q", "-b", "forge/kilo")
        (clone / "mine.txt").write_text("mine\n")
        git(clone, "add", "mine.txt")
        git(clone, "commit", "-q", "-m", "my own kilo")
        git(clone, "checkout", "-q", "main")
        kilo = git(clone, "rev-parse", "forge/kilo").strip()
        before = git(clone, "rev-parse", "main").strip()

        planned = _forge(fleet, clone, "land", "--fleet", "--dry-run")
        assert planned.code == 0, planned.err
        plans = [line for line in planned.lines if line.startswith("plan ")]
        assert plans == [
            f"plan {n}: {c} — rebase onto main, then verify" for n, c in enumerate(DONE, 1)
        ] + ["plan 4: kilo — rebase onto main, then verify"], planned.out
        assert "land: zulu — would fetch forge/zulu from origin" in planned.lines
        assert (
            "land: kilo — would fetch forge/kilo from origin "
            "(taken only if it fast-forwards the local forge/kilo)"
        ) in planned.lines
        # A dry run fetches nothing and changes nothing.
        assert _branches(clone) == ["forge/kilo"]
        assert git(clone, "branch", "-r", "--list", "origin/forge/*") == ""
        assert not log.exists() or "/.forge/land/" not in log.read_text()

        landed = _forge(fleet, clone, "land", "--fleet", "--json")
        assert landed.code == 0, landed.out + landed.err
        document = json.loads(landed.out)
        assert [c["change"] for c in document["changes"]] == list(DONE)
        assert document["landed"] == 3
        assert document["not_landed"] == 0
        # The skipped ones in submission order too.
        assert [s["change"] for s in document["skipped"]] == [
            "kilo",
            "stuck",
            "shared",
            "elsewhere",
        ]
        skipped = {s["change"]: s["why"] for s in document["skipped"]}
        assert skipped["stuck"] == "its loop ended iterations-exhausted", skipped
        assert "not a fast-forward" in skipped["kilo"]
        assert "not clobbered" in skipped["kilo"]
        assert skipped["shared"].startswith("a dir loop"), skipped
        assert "is not a remote of this project" in skipped["elsewhere"], skipped

        # Each verify ran on the combined tree: the base with every change before it.
        scratch = [line for line in log.read_text().splitlines() if "/.forge/land/" in line]
        assert [line.split("|")[1].split() for line in scratch] == [
            ["result-zulu.txt"],
            ["result-alpha.txt", "result-zulu.txt"],
            ["result-alpha.txt", "result-mike.txt", "result-zulu.txt"],
        ], scratch
        head = git(clone, "rev-parse", "main").strip()
        assert head != before
        subjects = git(clone, "log", "--format=%s", f"{before}..main").splitlines()
        assert subjects == ["work on mike", "work on alpha", "work on zulu"]
        for change in DONE:
            assert (clone / f"result-{change}.txt").read_text() == f"{change}\n"
        assert not (clone / "result-kilo.txt").exists()
        assert git(clone, "status", "--porcelain", "--untracked-files=no") == ""
        # Landed branches are cleaned up here; the person's forge/kilo is as it was.
        assert _branches(clone) == ["forge/kilo"]
        assert git(clone, "rev-parse", "forge/kilo").strip() == kilo

        for order, change in enumerate(DONE, 1):
            done = [e for e in _events(clone, change) if e["event"] == "land.done"]
            assert len(done) == 1, done
            assert done[0]["order"] == order, done
            assert done[0]["verify"] == "PASS"
        # The server's timelines have the land events too: the fleet's report shows them.
        shown = _forge(fleet, clone, "timeline", "--fleet", "zulu", "--json")
        server = [e for e in json.loads(shown.out)["events"] if e["event"].startswith("land.")]
        assert [e["event"] for e in server] == ["land.done", "land.cleaned"], server
        report = _forge(fleet, clone, "report", "--fleet", "--markdown", str(tmp_path / "r.md"))
        assert report.code == 0, report.err
        markdown = (tmp_path / "r.md").read_text()
        assert "## Landed / Conflicts / Failed" in markdown
        landed_part = markdown.split("## Landed / Conflicts / Failed", 1)[1]
        assert all(change in landed_part for change in DONE)

        # Again: nothing left to land, and nothing sent twice.
        again = _forge(fleet, clone, "land", "--fleet")
        assert again.code == 0, again.err
        assert "land: zulu — skipped: already landed" in again.lines
        assert "land: 0 landed, 0 not landed of 0 onto main" in again.lines
        shown = _forge(fleet, clone, "timeline", "--fleet", "zulu", "--json")
        server = [e for e in json.loads(shown.out)["events"] if e["event"].startswith("land.")]
        assert len(server) == 2, server

        # Named, a loop is fetched whatever its ending; one that cannot be is refused.
        for change, why in (("shared", "a dir loop"), ("kilo", "not clobbered")):
            refused = _forge(fleet, clone, "land", "--fleet", change)
            assert refused.code == 2, refused
            assert f"error: change '{change}' is not landed from the fleet: " in refused.err
            assert why in refused.err
        assert git(clone, "rev-parse", "forge/kilo").strip() == kilo
        named = _forge(fleet, clone, "land", "--fleet", "stuck")
        assert named.code == 0, named.out + named.err
        assert (clone / "result-stuck.txt").read_text() == "stuck\n"
        assert [e["order"] for e in _events(clone, "stuck") if e["event"] == "land.done"] == [1]


def test_forge_land_fleet_refuses_without_a_batch_an_unreachable_server_pr_and_rework(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    bare = _bare(tmp_path, "project")
    with fleet_of(tmp_path, redis_server) as fleet:
        clone = _land_clone(tmp_path, bare, fleet)

        empty = _forge(fleet, clone, "land", "--fleet")
        assert empty.code == 2, empty
        assert 'no fleet batch to land: nothing is submitted under the fleet name "nightly"' in (
            empty.err
        )
        assert "hint: forge fleet submit" in empty.err

        gone = _forge(fleet, clone, "land", "--dry-run", url=f"redis://127.0.0.1:{closed_port()}/0")
        assert gone.code == 2, gone
        assert "cannot be reached" in gone.err
        assert "Traceback" not in gone.err

        pr = _forge(fleet, clone, "land", "--fleet", "--pr")
        assert pr.code == 2, pr
        assert "its branches are on the remote already" in pr.err

        rework = _forge(fleet, clone, "land", "--fleet", "--rework")
        assert rework.code == 2, rework
        assert "--rework does not take a fleet batch" in rework.err


def test_a_loop_s_repository_is_matched_to_the_project_s_remotes(tmp_path: Path) -> None:
    from orchestra._land import normalise_url, remote_for

    clone = git_repo(tmp_path / "clone")
    bare = tmp_path / "project.git"
    git(clone, "remote", "add", "origin", "../project.git/")
    git(clone, "remote", "add", "upstream", "https://example.com/team/project.git")
    assert remote_for(clone, str(bare)) == "origin"
    assert remote_for(clone, f"file://{tmp_path}/project") == "origin"
    assert remote_for(clone, "https://example.com/team/project/") == "upstream"
    assert remote_for(clone, "https://example.com/team/project") == "upstream"
    assert remote_for(clone, "https://example.com/team/other.git") is None
    assert normalise_url("git@host:team/x.git", clone) == "git@host:team/x"
