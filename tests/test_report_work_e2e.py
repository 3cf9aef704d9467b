"""The morning report shows the work: diffs, one row per trip, labelled charts, recovered loops.

Each test goes through the real ``forge`` command (a real batch where git
matters), and the HTML through headless chromium where the page's look is the point.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .report_support import artefact, browse, check_page, write_run
from .support import Repo, run_forge

RUN = "20261130T220000Z-ab12"
TOKEN = "ghp_" + "abcdefghij" * 3 + "012345"  # built here: no secret in this file


def _files(root: Path, run_id: str) -> tuple[str, str]:
    folder = root / ".forge" / "runs" / run_id
    return (
        (folder / "report.html").read_text(encoding="utf-8"),
        (folder / "report.md").read_text(encoding="utf-8"),
    )


def _cards(markdown: str) -> dict[str, str]:
    """The escalations' cards by change."""
    escalations = markdown.split("## Escalations", 1)[1].split("## Loops", 1)[0]
    return {card.split(" ", 1)[0]: card for card in escalations.split("\n### ")[1:]}


def test_an_escalation_shows_the_redacted_bounded_diff_against_its_branch_point(
    repo: Repo, tmp_path: Path
) -> None:
    repo.write("app.py", "print('hello')\n")
    repo.commit("the app")
    work = repo.root.parent / "work.sh"
    # Many lines changed in a tracked file, a secret among them, and a new file.
    work.write_text(
        'for i in $(seq 1 300); do echo "line = $i" >> app.py; done\n'
        f"echo 'token = \"{TOKEN}\"' >> app.py\n"
        "echo 'NEW = 1' > new_module.py\n"
        "echo 'did some work'\n"
    )
    repo.write(
        "forge.toml",
        '[verify]\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "pay"\ncmd = "sh {work}"\nworktree = true\n'
        '[loop.verify]\ncommand = "false"\nmax_failures = 1\n'
        '[loop.breaker]\non_open = "escalate"\n',
    )
    done = repo.forge("supervise", "--plain")
    assert done.code == 1, done
    [run_id] = [p.name for p in (repo.root / ".forge" / "runs").iterdir()]
    html, markdown = _files(repo.root, run_id)
    card = _cards(markdown)["pay"]
    head = repo.git("rev-parse", "HEAD").strip()
    assert f"What the agent changed, against the branch point of forge/pay ({head[:10]})" in card
    assert "app.py                         | +301 -0\n" in card
    assert "new_module.py (new, untracked) | +1 -0\n" in card
    assert "2 file(s) changed, +302 -0\n" in card
    # Bounded, and saying by how much.
    assert "The diff, redacted (the first 200 of 314 lines; 114 cut, of 3.8 KB in all):" in card
    shown = card.split("```diff\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert len(shown) == 200
    assert shown[0] == "diff --git a/app.py b/app.py"
    # Redacted: the token is in the worktree, but in neither report.
    worktree = repo.root / ".forge" / "worktrees" / "pay"
    assert TOKEN in (worktree / "app.py").read_text()
    assert TOKEN not in html + markdown
    # The HTML shows the same, folded, under 20 KB.
    block = re.search(r'<details class="diff">.*?</details>', html, re.S)
    assert block is not None
    assert len(block.group(0).encode()) < 20_000
    assert "the first 200 of 314 lines; 114 cut" in block.group(0)
    assert "new_module.py (new, untracked) | +1 -0" in html
    seen = browse(
        repo.root / ".forge" / "runs" / run_id / "report.html",
        tmp_path / "profile",
        screenshot=artefact("report-diff.png"),
    )
    assert seen.console == [], seen.console
    assert 'class="diffstat"' in seen.dom


def test_the_diff_shows_secrets_redacted_when_the_whole_diff_fits(repo: Repo) -> None:
    write_run(repo.root, RUN, 2)  # loop-001 escalates; it records src/loop-001.py
    repo.write("src/loop-001.py", f"KEY = '{TOKEN}'\nprint('work')\n")
    done = repo.forge("report")
    assert done.code == 0, done
    html, markdown = _files(repo.root, RUN)
    card = _cards(markdown)["loop-001"]
    assert "What the agent changed, against HEAD, the files the loop changed" in card
    assert "src/loop-001.py (new, untracked) | +2 -0" in card
    assert "The diff, redacted:\n" in card  # nothing cut: no count of what was
    assert "+print('work')" in card
    assert "[redacted:" in card
    assert TOKEN not in html + markdown


def test_no_diff_is_said_in_one_line(repo: Repo, tmp_path: Path) -> None:
    # A project that is no git repository: the report says so, once a card.
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "forge.toml").write_text("[verify]\nspecs = []\n")
    write_run(plain, RUN, 3)
    done = run_forge(["report"], cwd=plain)
    assert done.code == 0, done
    html, markdown = _files(plain, RUN)
    cards = _cards(markdown)
    assert set(cards) == {"loop-001", "loop-002"}
    for card in cards.values():
        assert "\n_no diff: not a git repository with a commit._\n" in card
        assert "What the agent changed" not in card
    assert html.count('<p class="diff-missing">no diff: not a git repository') == 2
    # In a repository, a loop whose files are as HEAD has them: no change, in one line.
    write_run(repo.root, RUN, 2)
    assert repo.forge("report").code == 0
    _, markdown = _files(repo.root, RUN)
    assert (
        "\n_No change against HEAD, the files the loop changed (it works in the "
        "repository's own tree)._\n"
    ) in _cards(markdown)["loop-001"]


def test_the_trip_is_one_row_and_steps_not_tried_are_set_apart(repo: Repo) -> None:
    write_run(repo.root, RUN, 10)
    done = repo.forge("report")
    assert done.code == 0, done
    html, markdown = _files(repo.root, RUN)
    cards = _cards(markdown)
    # loop-002: the integrity trip behind the secscan gate.
    card = cards["loop-002"]
    trip_rows = [line for line in card.splitlines() if line.startswith("- Trip:")]
    assert trip_rows == [
        "- Trip: integrity — probe failed: integrity (opening 2, escalated); secscan is open"
    ]
    for change, card in cards.items():
        assert "- Detail:" not in card or "- Trip:" not in card, change
        assert "(not tried" not in card, change
    article = re.search(
        r'<article class="escalation" id="esc-l2-loop-002">.*?</article>', html, re.S
    )
    assert article is not None
    assert "<dt>Trip</dt>" in article.group(0)
    assert "<dt>Detail</dt>" not in article.group(0)
    assert "<dt>Evidence</dt>" not in article.group(0)


def test_a_loop_done_after_a_trip_is_marked_recovered(repo: Repo) -> None:
    write_run(repo.root, RUN, 11, recovered=True)  # loops 0 and 10 end done, after a trip
    done = repo.forge("report", "--json")
    assert done.code == 0, done
    document = json.loads(done.out)
    recovered = {loop["change"] for loop in document["loops"] if loop["recovered"]}
    assert recovered == {"loop-000", "loop-010"}
    assert "2 done, 2 of them recovered after a trip" in document["outcome"]
    html, markdown = _files(repo.root, RUN)
    assert "| loop-000 | ✅ done (recovered) |" in markdown
    assert "| loop-010 | ✅ done (recovered) |" in markdown
    assert "✅ done: 2 (2 recovered after a trip)" in markdown
    assert "### loop-000 — ✅ done (recovered)" in markdown  # its timeline's card
    page = check_page(html)
    assert "(2 recovered after a trip)" in " ".join(page.text)
    row = re.search(r'<tr id="row-l0-loop-000".*?</tr>', html)
    assert row is not None
    assert '<span class="recovered">(recovered)</span>' in row.group(0)
    # A loop done without a trip is not called recovered.
    write_run(repo.root, "20261201T220000Z-cd34", 1)
    assert repo.forge("report").code == 0
    _, plain = _files(repo.root, "20261201T220000Z-cd34")
    assert "recovered" not in plain


def test_charts_have_labelled_axes_and_a_legend_of_only_the_symbols_shown(
    repo: Repo, tmp_path: Path
) -> None:
    write_run(repo.root, RUN, 2)  # one loop done, one that tripped twice and escalated
    assert repo.forge("report").code == 0
    page_path = repo.root / ".forge" / "runs" / RUN / "report.html"
    html = page_path.read_text(encoding="utf-8")
    check_page(html)
    seen = browse(page_path, tmp_path / "profile", screenshot=artefact("report-axes.png"))
    assert seen.console == [], seen.console
    dom = seen.dom
    legend = re.search(r'<ul class="legend".*?</ul>', dom, re.S)
    assert legend is not None
    kinds = re.findall(r"<b>(\w+):</b>", legend.group(0))
    assert kinds == ["Iterations", "Waits", "Circuit"]  # no alert, recovery, verify or other
    words = re.sub(r"<svg.*?</svg>|<[^>]+>", "", legend.group(0))
    for shown in ("went well", "failed or tripped", "cooldown", "opened"):
        assert shown in words, words
    for absent in ("alert", "recovery", "verify", "path restored", "other"):
        assert absent not in words, words
    assert len(words) < 200, words  # short enough to hold in mind
    # The strips: a time axis with the batch's times; the score charts: iteration and score.
    axis = re.search(r'<g id="time-axis".*?</g>', dom, re.S)
    assert axis is not None
    assert ">time since the batch started</text>" in axis.group(0)
    assert ">0s</text>" in axis.group(0)
    assert dom.count('<use href="#time-axis"></use>') == 2
    axes = re.search(r'<g id="score-axes".*?</g>', dom, re.S)
    assert axes is not None
    assert ">iteration</text>" in axes.group(0)
    assert ">score</text>" in axes.group(0)
    assert dom.count('<use href="#score-axes"></use>') == 2
    score = re.search(r'<svg class="score".*?</svg>', dom, re.S)
    assert score is not None
    ticks = re.findall(r'text-anchor="middle">(\d+)</text>', score.group(0))
    assert ticks == ["1", "2"]


def test_durations_read_as_people_write_them(repo: Repo) -> None:
    write_run(repo.root, RUN, 10)
    assert repo.forge("report").code == 0
    html, markdown = _files(repo.root, RUN)
    assert "every loop paused 1m" in markdown
    assert "(cooldown 30s after" in markdown or "cooldown 30s after" in markdown
    spelled = re.findall(r"\b\d+(?:h\d\dm|m\d\ds|m|s|h)\b", markdown)
    assert spelled, "no duration in the report"
    zero_parts = re.findall(r"\b\d+(?:m00s|h00m)\b", html + markdown)
    assert zero_parts == []


def test_a_batch_wide_alert_is_said_once_for_the_batch(repo: Repo) -> None:
    write_run(repo.root, RUN, 3, batch_alert=True)  # every loop saw the calls run low
    assert repo.forge("report").code == 0
    html, markdown = _files(repo.root, RUN)
    [line] = [line for line in markdown.splitlines() if "calls-remaining" in line]
    assert line.startswith("- Batch alert: calls-remaining: raised 3× (by loop-000, loop-001, ")
    assert html.count("calls-remaining") == 1
    assert "<dt>Batch alerts</dt>" in html
    for card in _cards(markdown).values():
        assert "calls-remaining" not in card
