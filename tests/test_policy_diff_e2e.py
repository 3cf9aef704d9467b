"""``forge policy diff``: two effective policies, key by key, through the real command."""

from __future__ import annotations

import json

from .support import Repo


def two_policies(repo: Repo) -> None:
    repo.write("policies/base.toml", '[run]\ntimeout = "1h"\n')
    repo.write(
        "a.toml",
        'extends = ["policies/base.toml"]\n[verify]\nmax_failures = 3\n'
        '[breaker]\ncooldown = "10m"\n',
    )
    repo.write(
        "b.toml",
        '[verify]\nmax_failures = 5\n[breaker]\ncooldown = "600"\n[rate_limit]\ncalls = 7\n',
    )


def test_diff_lists_each_differing_key_with_both_values_and_sources(repo: Repo) -> None:
    two_policies(repo)
    done = repo.forge("policy", "diff", "a.toml", "b.toml", "--plain")
    assert done.code == 0, done.err
    assert done.lines[:2] == [
        "a: a.toml (policies/base.toml, a.toml)",
        "b: b.toml (b.toml)",
    ]
    rows = [" ".join(line.split()) for line in done.lines[2:]]
    # breaker.cooldown is "10m" on both sides (600 seconds): not a difference.
    assert rows == [
        "rate_limit.calls 100 (default) -> 7 (b.toml)",
        "run.timeout " + '"1h" (policies/base.toml) -> "15m" (default)',
        "verify.max_failures 3 (a.toml) -> 5 (b.toml)",
    ]


def test_diff_as_json(repo: Repo) -> None:
    two_policies(repo)
    done = repo.forge("policy", "diff", "a.toml", "b.toml", "--json", "--set", "run.grace=20")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["a"] == {
        "argument": "a.toml",
        "files": ["policies/base.toml", "a.toml"],
        "set": [],
    }
    assert report["b"]["set"] == ["run.grace=20"]
    assert [d["key"] for d in report["differences"]] == [
        "rate_limit.calls",
        "run.grace",
        "run.timeout",
        "verify.max_failures",
    ]
    assert report["differences"][1] == {
        "key": "run.grace",
        "a": "10s",
        "b": "20s",
        "a_source": "default",
        "b_source": "flag --set run.grace",
    }


def test_set_a_applies_to_a_and_identical_policies_are_a_clean_report(repo: Repo) -> None:
    two_policies(repo)
    done = repo.forge(
        "policy",
        "diff",
        "a.toml",
        "b.toml",
        "--json",
        "--set-a",
        "verify.max_failures=5",
        "--set-a",
        "rate_limit.calls=7",
        "--set",
        'run.timeout="1h"',
    )
    assert done.code == 0, done.err
    assert json.loads(done.out)["differences"] == []
    same = repo.forge("policy", "diff", "b.toml", "b.toml")
    assert same.code == 0
    assert "no differences" in same.out
    flagged = json.loads(
        repo.forge("policy", "diff", "b.toml", "b.toml", "--json", "--set-a", "run.grace=1").out
    )
    assert flagged["differences"][0]["a_source"] == "flag --set-a run.grace"


def test_dash_is_the_project_policy_and_a_name_is_a_shipped_policy(repo: Repo) -> None:
    repo.write("forge.toml", 'extends = ["default"]\n[verify]\nlint = "ruff"\n')
    done = repo.forge("policy", "diff", "default", "-", "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["a"]["files"] == ["default.toml (shipped)"]
    assert report["b"]["files"] == ["default.toml (shipped)", "forge.toml"]
    assert report["differences"] == [
        {
            "key": "verify.lint",
            "a": "",
            "b": "ruff",
            "a_source": "default.toml (shipped)",
            "b_source": "forge.toml",
        }
    ]


def test_a_bad_argument_is_a_usage_error(repo: Repo) -> None:
    two_policies(repo)
    missing = repo.forge("policy", "diff", "a.toml", "nowhere.toml")
    assert missing.code == 2
    assert "'nowhere.toml' is neither a policy file nor a shipped policy" in missing.err
    repo.write("bad.toml", "[verify]\nmax_failurs = 3\n")
    invalid = repo.forge("policy", "diff", "bad.toml", "b.toml")
    assert invalid.code == 2
    assert "did you mean 'max_failures'?" in invalid.err
    assert repo.forge("policy", "diff", "a.toml").code == 2
    assert repo.forge("policy", "diff", "a.toml", "b.toml", "--set-a", "nonsense").code == 2
