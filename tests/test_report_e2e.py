"""``forge report``: the morning report, through the real command and a real headless browser."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from .report_support import (
    ENDINGS,
    TRIPS,
    artefact,
    browse,
    check_page,
    write_run,
)
from .support import Repo

RUN = "20261130T220000Z-ab12"
EARLIER = "20261129T220000Z-0001"
REPO_ROOT = Path(__file__).resolve().parent.parent


def report_files(repo: Repo, run_id: str) -> tuple[str, str]:
    folder = repo.root / ".forge" / "runs" / run_id
    return (
        (folder / "report.html").read_text(encoding="utf-8"),
        (folder / "report.md").read_text(encoding="utf-8"),
    )


@pytest.mark.parametrize("loops", [1, 50, 200])
def test_a_synthetic_batch_renders_every_loop(repo: Repo, loops: int) -> None:
    changes = write_run(repo.root, RUN, loops)
    done = repo.forge("report")
    assert done.code == 0, done
    folder = repo.root / ".forge" / "runs" / RUN
    assert f"report: {folder / 'report.html'}" in done.lines
    assert f"markdown: {folder / 'report.md'}" in done.lines
    html, markdown = report_files(repo, RUN)
    page = check_page(html)
    assert page.rows == changes  # every loop's row, in the declared order
    # Escalations come before everything but the header.
    assert page.section_order[0] == "escalations"
    assert page.section_order.index("escalations") < page.section_order.index("loops")
    for change in changes:
        assert f"| {change} |" in markdown
    assert markdown.index("## Escalations") < markdown.index("## Loops")
    if loops >= 50:
        assert len(html.encode()) < 6_000 * loops, len(html.encode())
    if loops == 50:
        text = " ".join(page.text)
        for ending in ENDINGS:
            assert ending in text, ending
        for trip in TRIPS:
            assert f"{trip} —" in text or f"{trip}: " in text, trip
        for word in (
            "no-files raised at iteration 1: no file modified for 3 iterations",
            "no-files cleared at iteration 1",
            "no-progress 1/4: Re-plan from scratch.",
            "every loop paused 1m",
        ):
            assert word in text, word
        assert "the provider refused" in text
        assert "(estimated)" in text
        assert "integrity: forge.toml deleted" in text
        # The output is shown as text, never as markup.
        assert "<script>alert(1)</script>" in text
        assert "\x1b" not in html


def test_the_header_and_an_escalation_say_what_a_person_needs(repo: Repo) -> None:
    write_run(repo.root, RUN, len(ENDINGS))  # one loop per ending
    done = repo.forge("report", "--json")
    assert done.code == 0, done
    document = json.loads(done.out)
    endings = {loop["change"]: loop["ending"] for loop in document["loops"]}
    assert sorted(endings.values()) == sorted(ENDINGS)
    escalated = {loop["change"] for loop in document["loops"] if loop["escalated"]}
    assert escalated == {c for c, e in endings.items() if e not in ("done", "interrupted")}
    _, markdown = report_files(repo, RUN)
    assert "**NEEDS A PERSON — 8 of 10 loop(s) escalated, 1 done**" in markdown
    assert "- Limiter waits: 7 time(s) a loop waited for a permit" in markdown
    # The circuit-open loop (index 1, trip stagnation): its trip, evidence and the commands.
    section = markdown.split("### loop-001")[1].split("###")[0]
    # The trip and the ending's detail in one row, nothing said twice.
    assert (
        "- Trip: stagnation — probe failed: stagnation (opened 2 times; max_opens is "
        "exhausted; escalated)\n"
    ) in section
    assert "- Detail:" not in section
    assert "- Evidence:" not in section  # the condition alone is said by the trip
    assert "last line of iteration 3" in section
    assert "forge circuit loop-001 --reset --reason WHY\nforge supervise --only loop-001" in section
    # A gate that opened: its own command to clear it.
    gate = markdown.split("### loop-002")[1].split("###")[0]
    assert "- Gate: secscan" in gate
    assert "forge secscan waive FINGERPRINT --reason WHY" in gate


def test_a_fleet_hosts_summary_is_not_taken_for_a_batch_it_can_report(repo: Repo) -> None:
    write_run(repo.root, EARLIER, 2)
    fleet_run = "20261201T040000Z-f1ee"
    folder = repo.root / ".forge" / "runs" / fleet_run
    folder.mkdir(parents=True)
    summary = {"fleet": "nightly", "host": "w1", "loops": {"a": {"state": "done"}}}
    (folder / "summary.json").write_text(json.dumps(summary))
    latest = repo.forge("report", "--json")
    assert latest.code == 0, latest
    assert json.loads(latest.out)["run_id"] == EARLIER  # the fleet host's summary is passed by
    named = repo.forge("report", "--run", fleet_run)
    assert named.code == 2, named
    assert "a fleet host's summary" in named.err
    assert "forge fleet status" in named.err
    assert "Traceback" not in named.err


def test_an_earlier_run_and_a_killed_run_have_their_reports(repo: Repo) -> None:
    write_run(repo.root, EARLIER, 3)
    write_run(repo.root, RUN, 6, summary=False)  # killed: no summary.json
    latest = repo.forge("report")
    assert latest.code == 0, latest
    html, markdown = report_files(repo, RUN)
    check_page(html)
    assert "UNFINISHED — the supervisor left no summary (killed?)" in markdown
    assert "_Built from the timelines alone: the run left no summary._" in markdown
    assert "- Exit code: none" in markdown
    # Loop 5 was running when the batch died (no ending in its timeline): unfinished.
    assert "| loop-005 | … unfinished |" in markdown
    assert "### loop-005" not in markdown.split("## Loops")[0]  # not an escalation
    earlier = repo.forge("report", "--run", EARLIER)
    assert earlier.code == 0, earlier
    _, old = report_files(repo, EARLIER)
    assert f"run `{EARLIER}`" in old
    assert "| loop-002 |" in old
    assert "| loop-005 |" not in old


def test_an_unreadable_summary_is_said_and_the_timelines_read(repo: Repo) -> None:
    write_run(repo.root, RUN, 3)
    summary = repo.root / ".forge" / "runs" / RUN / "summary.json"
    summary.write_text('{"run_id": ', encoding="utf-8")
    done = repo.forge("report")
    assert done.code == 0, done
    assert f"{summary}: unreadable" in done.err
    html, markdown = report_files(repo, RUN)
    check_page(html)
    assert "UNFINISHED — the supervisor left no summary" in markdown
    assert "## What could not be read" in markdown
    for change in ("loop-000", "loop-001", "loop-002"):
        assert f"| {change} |" in markdown


def test_the_latest_batch_is_not_a_persons_forge_run(repo: Repo) -> None:
    write_run(repo.root, RUN, 2)
    solo = repo.forge("run", "--change", "solo", "--cmd", "echo FORGE_DONE", "--yes")
    assert solo.code == 0, solo
    [solo_run] = (repo.change_dir("solo") / "runs").iterdir()
    assert solo_run.name > RUN  # the newer run
    latest = repo.forge("report", "--json")
    assert json.loads(latest.out)["run_id"] == RUN
    asked = repo.forge("report", "--run", solo_run.name, "--json")
    assert asked.code == 0, asked
    document = json.loads(asked.out)
    assert (
        document["outcome"]
        == "A forge run, not a supervised batch — 1 of 1 loop(s) done, 0 escalated"
    )
    assert [(loop["change"], loop["ending"]) for loop in document["loops"]] == [("solo", "done")]
    assert "summary" not in asked.err  # a forge run never has one: nothing is missing
    _, markdown = report_files(repo, solo_run.name)
    assert "_Built from the timeline: a forge run keeps no summary._" in markdown


def test_report_files_where_asked_and_clear_errors(repo: Repo, tmp_path: Path) -> None:
    write_run(repo.root, RUN, 2)
    html, markdown = tmp_path / "out.html", tmp_path / "out.md"
    done = repo.forge("report", "--run", RUN, "--html", str(html), "--markdown", str(markdown))
    assert done.code == 0, done
    assert f"report: {html}" in done.lines
    check_page(html.read_text(encoding="utf-8"))
    assert markdown.read_text(encoding="utf-8").startswith(f"# Forge morning report — run `{RUN}`")
    unknown = repo.forge("report", "--run", "20200101T000000Z-dead")
    assert unknown.code == 2
    assert "--run 20200101T000000Z-dead: no such run" in unknown.err
    assert RUN in unknown.err
    folder = repo.forge("report", "--html", str(tmp_path))
    assert folder.code == 2
    assert "is a folder" in folder.err
    assert "Traceback" not in unknown.err + folder.err


def test_no_runs_yet_is_a_clear_error(repo: Repo) -> None:
    done = repo.forge("report")
    assert done.code == 2
    assert "no runs yet" in done.err
    assert "Traceback" not in done.err


def test_the_browser_loads_the_page_with_no_error_and_no_request(
    repo: Repo, tmp_path: Path
) -> None:
    changes = write_run(repo.root, RUN, 50, secret_line="<img src=http://example.invalid/x.png>")
    assert repo.forge("report").code == 0
    page = repo.root / ".forge" / "runs" / RUN / "report.html"
    seen = browse(page, tmp_path / "profile", screenshot=artefact("report-50-loops.png"))
    assert seen.console == [], seen.console
    rows = re.findall(r'<tr id="row-[^"]+" data-change="([^"]+)"', seen.dom)
    assert rows == changes
    assert seen.dom.index('id="escalations"') < seen.dom.index('id="loops"')
    # A phone's width too.
    phone = browse(
        page, tmp_path / "phone", screenshot=artefact("report-phone.png"), size="390,2400"
    )
    assert phone.console == [], phone.console


def test_the_browser_check_catches_errors_and_requests(tmp_path: Path) -> None:
    # The harness itself: a page that makes a request and throws must not pass.
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        '<title>bad</title></head><body><img src="http://example.invalid/x.png" alt="x">'
        "</body></html>",
        encoding="utf-8",
    )
    seen = browse(bad, tmp_path / "profile")
    assert any("example.invalid" in message for message in seen.console), seen.stderr[-2000:]
    loose = tmp_path / "loose.html"
    loose.write_text(
        '<!DOCTYPE html><html lang="en"><head><title>t</title></head><body>'
        "<script>missingFunction()</script></body></html>",
        encoding="utf-8",
    )
    thrown = browse(loose, tmp_path / "profile2")
    assert any("missingFunction" in message for message in thrown.console), thrown.stderr[-2000:]
    with pytest.raises(AssertionError):
        check_page(loose.read_text(encoding="utf-8"))


def _demo_repo(repo: Repo) -> None:
    """This repository's demo (forge.toml's loops, the fake agent, its scripts) in ``repo``."""
    shutil.copy(REPO_ROOT / "forge.toml", repo.root / "forge.toml")
    (repo.root / "tests" / "demo").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tests" / "fake_agent.py", repo.root / "tests" / "fake_agent.py")
    for script in (REPO_ROOT / "tests" / "demo").glob("*.json"):
        shutil.copy(script, repo.root / "tests" / "demo" / script.name)
    repo.commit("the demo")


def test_the_demo_batch_ends_with_its_report(repo: Repo, tmp_path: Path) -> None:
    _demo_repo(repo)
    done = repo.forge("supervise")
    assert done.code == 1, done
    [folder] = (repo.root / ".forge" / "runs").iterdir()
    html_path = folder / "report.html"
    assert f"report: {html_path}" in done.lines
    html = html_path.read_text(encoding="utf-8")
    page = check_page(html)
    assert page.rows == ["demo-checkout", "demo-billing", "demo-search", "demo-docs"]
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert "**NEEDS A PERSON — 3 of 4 loop(s) escalated, 1 done**" in markdown
    cards = {
        card.split(" ", 1)[0]: card for card in markdown.split("## Loops")[0].split("### ")[1:]
    }
    # An integrity trip is said once: no Evidence or Detail row repeats it.
    docs = cards["demo-docs"]
    assert (
        "- Trip: integrity: forge.toml deleted (protected: frozen) — restored (opening 1, "
        "escalated)\n- Iterations: 1/5\n"
    ) in docs
    assert docs.count("forge.toml deleted") == 1, docs
    assert "- Trip: stagnation — probe failed: no progress (opened 2 times" in markdown
    assert "- Trip: verify: 4 consecutive failures (opened 3 times" in markdown
    assert "- Detail:" not in markdown
    # Steps handed out as a loop escalated are set apart, not listed as tried.
    billing = cards["demo-billing"]
    [tried] = [line for line in billing.splitlines() if line.startswith("- Recovery tried:")]
    assert "verify 2/4" in tried
    assert "not tried" not in tried
    assert "verify 3/4" not in tried
    assert "- Not tried (the loop escalated first): verify 3/4: " in billing
    # The shared rate window's alert is the batch's: said once, pinned on no loop.
    assert markdown.count("calls-remaining") == 1
    assert "\n- Batch alert: calls-remaining: raised " in markdown
    assert html.count("calls-remaining") == 1
    # The diff of what each agent did, against its worktree's branch point.
    assert "billing.py (new, untracked) | +1 -0" in billing
    assert "+ATTEMPT = 4" in billing
    assert "tried a fourth fix for the declined-card test" in markdown  # the last output
    assert "worktree" in markdown
    assert "`cart.py`" in markdown
    seen = browse(html_path, tmp_path / "profile", screenshot=artefact("report-demo.png"))
    assert seen.console == [], seen.console
    assert seen.dom.index('id="escalations"') < seen.dom.index('id="loops"')


def test_a_batch_can_leave_the_report_out(repo: Repo) -> None:
    script = repo.root.parent / "done.sh"
    script.write_text("echo FORGE_DONE\n")
    repo.write(
        "forge.toml",
        f'[verify]\ncommand = "true"\nspecs = []\n[report]\nwrite = false\n'
        f'[[loop]]\nchange = "one"\ncmd = "sh {script}"\n',
    )
    done = repo.forge("supervise")
    assert done.code == 0, done
    [folder] = (repo.root / ".forge" / "runs").iterdir()
    assert (folder / "summary.json").exists()
    assert not (folder / "report.html").exists()
    assert not any(line.startswith("report:") for line in done.lines)
    # forge report still writes it on demand.
    again = repo.forge("report")
    assert again.code == 0
    assert (folder / "report.html").exists()


def test_the_files_the_loop_changed_come_from_its_own_record(repo: Repo) -> None:
    write_run(repo.root, RUN, 2)
    # After the run: a person's own file, Forge's lessons file and a forge-writes journal.
    repo.write("notes-of-a-person.txt", "mine\n")
    repo.write("memory/forge-lessons.md", "# lessons\n")
    repo.write("src/.forge-writes", "journal\n")
    done = repo.forge("report")
    assert done.code == 0, done
    html, markdown = report_files(repo, RUN)
    assert "Files the loop changed: `src/loop-000.py`\n" in markdown
    assert "Files the loop changed: `src/loop-001.py`\n" in markdown
    [now] = {line for line in markdown.splitlines() if line.startswith("Files now in the worktree")}
    assert "`notes-of-a-person.txt`" in now
    assert "forge-lessons" not in markdown
    assert ".forge-writes" not in markdown
    assert "<summary>Files the loop changed (1)</summary>" in html
    assert "Files changed" not in html


def test_a_verify_escalation_shows_what_failed(repo: Repo) -> None:
    work = repo.root.parent / "work.sh"
    work.write_text("echo working >> notes.txt; echo 'did some work'\n")
    checks = repo.root.parent / "checks.sh"
    token = "ghp_" + "abcdefghij" * 3 + "012345"  # built here: no secret in this file
    checks.write_text(
        "echo 'collected 3 items'\necho 'FAILED tests/test_pay.py::test_refund - assert 2 == 3'\n"
        f"echo 'token={token}'\necho '1 failed, 2 passed'\nexit 1\n"
    )
    repo.write(
        "forge.toml",
        '[verify]\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "pay"\ncmd = "sh {work}"\n'
        f'[loop.verify]\ncommand = "sh {checks}"\nmax_failures = 1\n'
        '[loop.breaker]\non_open = "escalate"\n',
    )
    done = repo.forge("supervise", "--plain")
    assert done.code == 1, done
    timeline = [
        json.loads(line)
        for line in (repo.change_dir("pay") / "timeline.jsonl").read_text().splitlines()
    ]
    [verify] = [e for e in timeline if e["event"] == "verify"]
    [tests] = verify["checks"]
    assert tests["passed"] is False
    assert "FAILED tests/test_pay.py::test_refund - assert 2 == 3" in tests["failures"]
    assert tests["tail"][-1] == "1 failed, 2 passed"
    assert len(tests["tail"]) <= 10
    assert any(line.startswith("token=") for line in tests["tail"])
    assert not any(token in line for line in tests["tail"])  # redacted
    [run_id] = [p.name for p in (repo.root / ".forge" / "runs").iterdir()]
    html, markdown = report_files(repo, run_id)
    assert "- Last verify: tests: exit 1 (failed)\n" in markdown
    card = markdown.split("## Loops")[0]
    assert "What the failing verify check(s) printed:" in card
    assert "  FAILED tests/test_pay.py::test_refund - assert 2 == 3\n" in card
    assert "<dt>Last verify</dt><dd>tests: exit 1 (failed)</dd>" in html
    assert "- Trip: verify: 1 consecutive failures" in card  # the condition said once
    assert "verify — verify" not in html


def test_a_long_markdown_report_is_made_compact(repo: Repo) -> None:
    changes = write_run(repo.root, RUN, 200)
    done = repo.forge("report")
    assert done.code == 0, done
    html, markdown = report_files(repo, RUN)
    assert len(markdown) <= 60_000
    assert "## Escalations (" in markdown
    assert all(f"| {change} |" in markdown for change in changes)  # every row of the table
    assert "## Timelines" not in markdown
    folder = repo.root / ".forge" / "runs" / RUN
    assert (
        "_Compact report (kept under 60,000 characters): left out the per-loop timelines, "
        "the spend table, the escalations' output, the escalations' details (one line each). "
        f"The full report: `{folder / 'report.html'}`._"
    ) in markdown
    assert (
        "- **loop-001** — ❌ circuit-open: stagnation — probe failed: stagnation (opening 2, "
        "escalated); clear: `forge circuit loop-001 --reset --reason WHY`\n"
    ) in markdown
    assert 'id="timelines"' in html  # the HTML keeps everything
    repo.write("forge.toml", "[report]\nmarkdown_max = 0\n")
    assert repo.forge("report").code == 0
    _, whole = report_files(repo, RUN)
    assert len(whole) > 65_536
    assert "## Timelines" in whole
    assert "Compact report" not in whole
