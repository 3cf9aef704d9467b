"""The night hears its warnings: a loop announces its breaker, a batch says what it runs under.

``forge supervise`` prints the circuit breaker's announcement once, then the
warnings ``forge policy check`` gives (a relaxed policy) and each accepted cost
ceiling that cannot be counted; the summary keeps them and the morning report
shows them. ``forge run --yes`` announces too. With ``--json`` stdout holds the
document alone: the announcement goes to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .support import Repo
from .test_run_e2e import ANNOUNCE
from .test_supervise_e2e import FAKE_AGENT, agent, summary_of

COOLDOWN = 'warning: loop a: breaker.cooldown = "5m" is under the 30-minute minimum'
UNPRICED = (
    "warning: loop a: [budget] max_cost_usd is set but executor 'bare' reports no cost and "
    "its model has no price in its [prices]: the cost ceiling cannot be counted "
    "(accepted: [budget] allow_unpriced = true)"
)


def _night(repo: Repo) -> None:
    script = repo.root.parent / "codex.json"
    script.write_text(json.dumps({"steps": [{"print": "working\n"}]}))
    argv = json.dumps([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write("executors/bare.toml", f'argv = {argv}\noutput = "codex-json"\n')
    repo.write(
        "forge.toml",
        """
[verify]
command = "true"
specs = []
[budget]
max_cost_usd = 5.0
allow_unpriced = true
[rate_limit]
backend = "memory"

[[loop]]
change = "a"
executor = "bare"
max_iterations = 1
[loop.breaker]
cooldown = "5m"
""",
    )
    repo.commit("the night")


def _warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("warning: ")]


def test_supervise_says_its_warnings_at_the_start_and_the_report_keeps_them(repo: Repo) -> None:
    _night(repo)
    done = repo.forge("supervise")
    assert done.code == 1, done  # one iteration used without done
    assert "Traceback" not in done.err
    lines = done.lines
    assert lines.count(ANNOUNCE) == 1
    warnings = _warnings(lines)
    assert len(warnings) == 2, lines
    assert warnings[0].startswith(COOLDOWN)
    assert warnings[1] == UNPRICED
    # At the start: before the first iteration's line.
    first = next(i for i, line in enumerate(lines) if line.startswith("a: "))
    assert lines.index(ANNOUNCE) < lines.index(warnings[0]) < lines.index(UNPRICED) < first
    # The same words as forge policy check's.
    check = repo.forge("policy", "check")
    assert warnings[0] in check.lines
    summary = summary_of(repo)
    assert summary["warnings"] == warnings
    # The morning report, written at the end and on demand.
    run = Path(summary["root"]) / ".forge" / "runs" / summary["run_id"]
    markdown = (run / "report.md").read_text()
    assert "## The policy's warnings (2)" in markdown
    assert f"- {UNPRICED}" in markdown
    html = (run / "report.html").read_text()
    assert 'id="warnings"' in html
    assert "breaker.cooldown = &quot;5m&quot; is under the 30-minute minimum" in html
    (run / "report.md").unlink()
    again = repo.forge("report", "--run", summary["run_id"])
    assert again.code == 0, again
    assert f"- {UNPRICED}" in (run / "report.md").read_text()


def test_supervise_json_keeps_stdout_one_document(repo: Repo) -> None:
    _night(repo)
    done = repo.forge("supervise", "--json")
    data = json.loads(done.out)
    assert len(data["warnings"]) == 2
    assert ANNOUNCE not in done.out
    assert done.err.splitlines().count(ANNOUNCE) == 1
    assert data["warnings"][1] in done.err.splitlines()


def test_an_acknowledged_policy_starts_with_no_warning(repo: Repo) -> None:
    finishes = agent(repo.root.parent, "done", {"print": "FORGE_DONE\n"})
    repo.write(
        "forge.toml",
        f"""
[verify]
command = "true"
specs = []
[policy]
allow_relaxed = true
[breaker]
cooldown = "1m"
[[loop]]
change = "a"
cmd = {json.dumps(finishes)}
""",
    )
    repo.commit()
    done = repo.forge("supervise")
    assert done.code == 0, done
    assert done.lines[0] == ANNOUNCE
    assert _warnings(done.lines) == []
    assert summary_of(repo)["warnings"] == []
    markdown = next((repo.root / ".forge" / "runs").glob("*/report.md")).read_text()
    assert "warnings" not in markdown


def test_forge_run_announces_once_as_it_starts_and_not_in_a_dry_run(repo: Repo) -> None:
    finishes = agent(repo.root.parent, "done", {"print": "working\n"}, {"print": "FORGE_DONE\n"})
    repo.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\n')
    repo.commit()
    plan = repo.forge("run", "--change", "c", "--cmd", finishes)
    assert ANNOUNCE not in plan.out
    done = repo.forge("run", "--change", "c", "--cmd", finishes, "--yes")
    assert done.code == 0, done
    assert done.lines[0] == ANNOUNCE
    assert done.lines.count(ANNOUNCE) == 1
    assert done.lines[-1] == "run: DONE after 2 iteration(s)"
    quiet = repo.forge("run", "--change", "d", "--cmd", finishes, "--yes", "--json")
    assert json.loads(quiet.out)["status"] == "DONE"
    assert quiet.err.splitlines().count(ANNOUNCE) == 1
