"""``forge timeline``: the table, JSON, torn lines, and --follow."""

from __future__ import annotations

import json
import subprocess

from .support import FORGE, Repo, failing_policy, forge_env


def test_table_and_json(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    repo.forge("verify", "--reset-breaker", "--change", "checkout")
    table = repo.forge("timeline", "checkout")
    assert table.code == 0
    assert len(table.lines) == 2
    assert table.lines[0].split()[0] == "1"
    assert table.lines[0].split()[2] == "verify"
    assert table.lines[1].split()[2] == "breaker.reset"
    data = json.loads(repo.forge("timeline", "checkout", "--json").out)
    assert [e["event"] for e in data["events"]] == ["verify", "breaker.reset"]
    assert data["torn_last_line"] is False


def test_torn_last_line_is_reported_and_tolerated(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    timeline = repo.change_dir("checkout") / "timeline.jsonl"
    with timeline.open("a") as handle:
        handle.write('{"ts": "2026-01-01T00:00:00Z", "seq": 2, "ev')
    done = repo.forge("timeline", "checkout", "--json")
    assert done.code == 0
    data = json.loads(done.out)
    assert len(data["events"]) == 1
    assert data["torn_last_line"] is True
    assert "torn" in done.err
    # The next event starts on a fresh line; the torn one stays reported, not glued.
    repo.forge("verify", "--change", "checkout")
    data = json.loads(repo.forge("timeline", "checkout", "--json").out)
    assert [e["seq"] for e in data["events"]] == [1, 2]
    assert data["bad_lines"] == [2]


def test_a_change_with_no_state_is_a_usage_error(repo: Repo) -> None:
    done = repo.forge("timeline", "nothing-yet")
    assert done.code == 2
    assert 'no change "nothing-yet"' in done.err


def test_follow_prints_new_events(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    follower = subprocess.Popen(
        [str(FORGE), "timeline", "checkout", "--follow", "--json"],
        cwd=repo.root,
        env=forge_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["seq"] == 1
        repo.forge("verify", "--change", "checkout")
        second = json.loads(follower.stdout.readline())
        assert second["seq"] == 2
        assert second["consecutive_failures"] == 2
    finally:
        follower.terminate()
        follower.wait(timeout=10)
        if follower.stdout:
            follower.stdout.close()
