"""The verify report: checks in order, failure lines, scenario coverage, the verdict."""

from __future__ import annotations

import json

from .support import Repo


def test_tests_then_lint_then_scenarios(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        "[verify]\n"
        'command = "echo tests ran"\n'
        "lint = \"echo 'src/a.py:3:1: F401 unused'; exit 1\"\n",
    )
    repo.write(
        "specs/checkout.md",
        "# Checkout\n\n## Scenario: Checkout with a declined card\n\n### Scenario: Happy path\n",
    )
    repo.write("specs/search.feature", "Feature: Search\n  Scenario: Empty query\n")
    repo.write("tests/test_checkout.py", '"""scenario: happy-path"""\n# scenario: empty-query\n')
    done = repo.forge("verify")
    assert done.code == 0
    lines = done.lines
    tests = next(i for i, line in enumerate(lines) if line.startswith("tests: PASS (exit 0, "))
    lint = next(i for i, line in enumerate(lines) if line.startswith("lint: FAIL (exit 1, "))
    scenarios = lines.index("scenarios: 2/3 covered")
    assert tests < lint < scenarios
    assert "    src/a.py:3:1: F401 unused" in lines
    assert "  uncovered: checkout-with-a-declined-card (specs/checkout.md:3)" in lines
    assert lines[-1] == "Verdict: FAIL"


def test_all_scenarios_covered_passes(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    repo.write("specs/a.md", "## Scenario: One\n## Scenario: Two\n")
    repo.write("tests/test_a.py", "# scenario: one\n# scenario: two\n")
    done = repo.forge("verify")
    assert "scenarios: 2/2 covered" in done.lines
    assert done.lines[-1] == "Verdict: PASS"


def test_no_spec_files_do_not_count(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    done = repo.forge("verify")
    assert "scenarios: no spec files under specs/ — coverage not counted" in done.lines
    assert done.lines[-1] == "Verdict: PASS"


def test_a_command_that_is_not_found_fails(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "definitely-not-a-command-xyz"\n')
    done = repo.forge("verify", "--json")
    report = json.loads(done.out)
    assert report["verdict"] == "FAIL"
    assert report["checks"][0]["outcome"] == "exit 127 (command not found)"


def test_a_command_that_times_out_fails_and_says_so(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "sleep 30"\ntimeout = "0.5s"\n')
    done = repo.forge("verify")
    assert done.lines[0].startswith("tests: FAIL (timed out after 0.5s, ")
    assert done.lines[-1] == "Verdict: FAIL"


def test_nothing_to_verify_is_not_a_pass(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = ""\n')
    done = repo.forge("verify")
    assert any(line.startswith("nothing to verify") for line in done.lines)
    assert done.lines[-1] == "Verdict: FAIL"


def test_huge_output_is_reported_bounded(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "i=0; while [ $i -lt 3000 ]; do echo FAILED test_$i; '
        'i=$((i+1)); done; exit 1"\n',
    )
    report = json.loads(repo.forge("verify", "--json").out)
    check = report["checks"][0]
    assert len(check["failure_lines"]) == 20
    assert check["failure_lines"][0] == "FAILED test_0"
    assert len(check["last_lines"]) == 15
    assert check["last_lines"][-1] == "FAILED test_2999"
    assert check["output_bytes"] == sum(len(f"FAILED test_{i}\n") for i in range(3000))


def test_plain_output_has_no_control_codes(repo: Repo) -> None:
    repo.write("forge.toml", "[verify]\ncommand = \"echo '[red]markup[/red]'; exit 1\"\n")
    for args, env in ((["--plain"], None), ([], {"NO_COLOR": "1"}), ([], None)):
        done = repo.forge("verify", "--change", "c", *args, env=env)
        assert "\x1b" not in done.out
        assert "    [red]markup[/red]" in done.lines  # printed literally, never interpreted


def test_contract_lines_are_never_wrapped(repo: Repo) -> None:
    long_change = "a-very-long-change-name-that-would-wrap-at-eighty-columns-xx"
    repo.write("forge.toml", '[verify]\ncommand = "exit 1"\n')
    done = repo.forge("verify", "--change", long_change, env={"COLUMNS": "40"})
    assert done.lines[-1] == (
        f'Breaker: 1/3 consecutive failures for change "{long_change}" — fix the smallest '
        "cause and re-run."
    )
