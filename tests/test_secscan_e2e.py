"""The secret scan end to end: ``forge secscan``, its waivers, and the gate of ``forge run``.

A secret written or printed by an agent must stop the loop and must never be
written out unredacted: not to the terminal, the timeline, or a log.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from .support import Repo
from .test_run_e2e import ESCALATE, agent, run


def github_token(seed: int = 7) -> str:
    """A token in GitHub's classic format, made up here (never a real one)."""
    chars = random.Random(seed).choices(string.ascii_letters + string.digits, k=36)
    return "ghp_" + "".join(chars)


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", '[verify]\ncommand = ""\n')
    repo.write(".gitignore", "ignored/\n")
    repo.commit("policy")
    return repo


def _everything_written(repo: Repo) -> str:
    """Every state, timeline and log file forge wrote, as one text."""
    return "\n".join(
        path.read_text(errors="replace")
        for path in (repo.root / ".forge").rglob("*")
        if path.is_file() and path.suffix in (".jsonl", ".yaml", ".log", ".json")
    )


def test_secscan_lists_an_untracked_env_file_and_a_waiver_clears_it(project: Repo) -> None:
    token = github_token()
    project.write(".env", f"GITHUB_TOKEN={token}\n")
    project.write("ignored/cache.txt", f"{github_token(8)}\n")
    found = project.forge("secscan", "--json")
    assert found.code == 1
    document = json.loads(found.out)
    [finding] = document["findings"]
    assert (finding["rule_id"], finding["path"], finding["severity"]) == (
        "github-pat",
        ".env",
        "high",
    )
    assert token not in found.out
    human = project.forge("secscan", "--plain")
    assert human.code == 1
    assert token not in human.out
    assert finding["fingerprint"] in human.out
    waived = project.forge("secscan", "waive", finding["fingerprint"], "--reason", "a fixture")
    assert waived.code == 0, waived.err
    assert project.forge("secscan").code == 0
    # A waiver survives an edit above the secret: the fingerprint has no line number.
    project.write(".env", f"# settings\nDEBUG=1\nGITHUB_TOKEN={token}\n")
    assert project.forge("secscan").code == 0


def test_an_expired_waiver_no_longer_waives(project: Repo) -> None:
    project.write(".env", f"GITHUB_TOKEN={github_token()}\n")
    fingerprint = json.loads(project.forge("secscan", "--json").out)["findings"][0]["fingerprint"]
    project.write(
        ".forge/secscan-waivers.yaml",
        f"- fingerprint: {fingerprint}\n  reason: was a fixture\n  who: someone\n"
        "  created: '2026-01-01T00:00:00Z'\n  expires: '2026-01-02T00:00:00Z'\n",
    )
    assert project.forge("secscan").code == 1


def test_a_corrupt_waivers_file_blocks_and_is_kept(project: Repo) -> None:
    project.write(".forge/secscan-waivers.yaml", "- fingerprint: [unclosed\n")
    cmd = agent(project, {"print": "FORGE_DONE\n"})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1
    assert "run: STOPPED after 0 iteration(s) — gate-error" in done.lines
    assert "  gate:   secscan" in done.lines
    aside = list((project.root / ".forge").glob("secscan-waivers.yaml.corrupt-*"))
    assert len(aside) == 1


def test_a_secret_already_in_the_tree_stops_the_run_before_it_starts(project: Repo) -> None:
    project.write("config/settings.env", f"TOKEN={github_token()}\n")
    cmd = agent(project, {"print": "FORGE_DONE\n"})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1
    assert "run: STOPPED after 0 iteration(s) — gate-open" in done.lines
    assert "  gate:   secscan" in done.lines
    detail = next(line for line in done.lines if line.startswith("  detail: "))
    assert "github-pat in config/settings.env:1 (ghp_…[redacted])" in detail
    assert done.lines[-1] == ESCALATE


def test_an_agent_that_writes_and_prints_a_secret_is_stopped_and_never_echoed(
    project: Repo,
) -> None:
    token = github_token()
    cmd = agent(
        project,
        {
            "write": {str(project.root / "deploy.sh"): f"export GH_TOKEN={token}\n"},
            "print": f"wrote the deploy script with {token}\nerror: then it failed\n",
            "stderr": f"debug: token={token}\n",
        },
    )
    done = run(project, "--change", "c", "--cmd", cmd, "--yes", "--json")
    assert done.code == 1
    summary = json.loads(done.out)
    assert (summary["reason"], summary["gate"], summary["iterations"]) == (
        "gate-open",
        "secscan",
        1,
    )
    assert token not in done.out + done.err
    written = _everything_written(project)
    assert token not in written
    assert "[redacted:github-pat]" in written  # the log kept the line, not the secret


def test_an_executor_failure_shows_redacted_last_lines(project: Repo) -> None:
    token = github_token()
    cmd = agent(project, {"print": f"calling the api with {token}\n", "exit": 3})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes", "--plain")
    assert "run: STOPPED after 1 iteration(s) — executor-failed" in done.lines
    assert "    calling the api with [redacted:github-pat]" in done.lines
    assert token not in done.out + done.err + _everything_written(project)


def test_an_allow_marker_added_by_the_agent_is_itself_a_finding(project: Repo) -> None:
    token = github_token()
    cmd = agent(
        project,
        {"write": {str(project.root / "ci.sh"): f"TOKEN={token}  # gitleaks:allow\n"}},
    )
    done = run(project, "--change", "c", "--cmd", cmd, "--yes", "--json")
    summary = json.loads(done.out)
    assert (summary["reason"], summary["gate"]) == ("gate-open", "secscan")
    assert "allow-marker in ci.sh:1" in summary["detail"]
    # The next run does not take the agent's marker as given either.
    again = json.loads(run(project, "--change", "c", "--cmd", cmd, "--yes", "--json").out)
    assert (again["iterations"], again["gate"]) == (0, "secscan")
    assert "allow-marker in ci.sh:1" in again["detail"]


def test_an_allow_marker_a_human_committed_is_honoured(project: Repo) -> None:
    project.write("tests/fixture.sh", f"TOKEN={github_token()}  # gitleaks:allow\n")
    project.commit("a fixture")
    cmd = agent(project, {"print": "FORGE_DONE\n"})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 0, done.out
    assert project.forge("secscan").code == 0


def test_verify_output_is_redacted(project: Repo) -> None:
    token = github_token()
    # The command assembles the token, so only its output holds it whole.
    command = f"printf 'FAILED auth with %s%s\\n' {token[:4]} {token[4:]}; exit 1"
    project.write("forge.toml", f"[verify]\ncommand = {json.dumps(command)}\n")
    done = project.forge("verify", "--change", "c", "--plain")
    assert "Verdict: FAIL" in done.lines
    assert "    FAILED auth with [redacted:github-pat]" in done.lines
    assert token not in done.out + done.err
    assert token not in _everything_written(project)


def test_with_the_scan_off_the_gate_stays_closed(project: Repo) -> None:
    project.write("forge.toml", '[verify]\ncommand = ""\n\n[secscan]\nenabled = false\n')
    project.write(".env", f"GITHUB_TOKEN={github_token()}\n")
    cmd = agent(project, {"print": "FORGE_DONE\n"})
    done = run(project, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 0
    plan = run(project, "--change", "c", "--cmd", cmd)
    assert (
        "  secscan:  off ([secscan] enabled = false) — the secscan gate stays closed" in plan.lines
    )


def test_a_bad_rules_file_is_a_configuration_error(project: Repo) -> None:
    project.write("policies/my-rules.toml", '[[rule]]\nid = "x"\nregex = "("\n')
    project.write(
        "forge.toml", '[verify]\ncommand = ""\n\n[secscan]\nrules = "policies/my-rules.toml"\n'
    )
    done = project.forge("secscan")
    assert done.code == 2
    assert "policies/my-rules.toml" in done.err
    assert "Traceback" not in done.err
    cmd = agent(project, {"print": "FORGE_DONE\n"})
    assert run(project, "--change", "c", "--cmd", cmd, "--yes").code == 2


def test_findings_are_listed_with_path_relative_to_the_project(project: Repo) -> None:
    (project.root / "deep" / "er").mkdir(parents=True)
    Path(project.root / "deep" / "er" / "k.py").write_text(f'KEY = "{github_token()}"\n')
    document = json.loads(project.forge("secscan", "--json").out)
    assert [f["path"] for f in document["findings"]] == ["deep/er/k.py"]
