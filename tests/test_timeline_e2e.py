"""``forge timeline``: the lines in words, the raw table, JSON, filters, torn lines, --follow."""

from __future__ import annotations

import json
import subprocess
import unicodedata
from typing import Any

from .support import FORGE, Repo, failing_policy, forge_env


def test_raw_table_and_json(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    repo.forge("verify", "--reset-breaker", "--change", "checkout")
    table = repo.forge("timeline", "checkout", "--raw")
    assert table.code == 0
    assert len(table.lines) == 2
    assert table.lines[0].split()[0] == "1"
    assert table.lines[0].split()[2] == "verify"
    assert table.lines[1].split()[2] == "breaker.reset"
    assert "verdict=FAIL consecutive_failures=1" in table.lines[0]
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


# --- the lines in words --------------------------------------------------------------

WIDE = {"COLUMNS": "60", "TZ": "UTC"}
LONG_DETAIL = (
    "needs the tax table from finance, which has not been sent although it was asked "
    "for twice: 漢字漢字漢字漢字 and a longwordthatmustnotbesplitanywhere at the end"
)


def _recorded(repo: Repo) -> list[dict[str, Any]]:
    """A change with two verifies, a reset, a run of one iteration and a blocker."""
    failing_policy(repo, max_failures=2)
    repo.forge("verify", "--change", "checkout")
    repo.forge("verify", "--change", "checkout")
    repo.forge("verify", "--reset-breaker", "--change", "checkout")
    repo.forge("run", "--change", "checkout", "--cmd", "echo FORGE_DONE", "--yes")
    repo.forge("event", "--change", "checkout", "forge.blocked", "--detail", LONG_DETAIL)
    events: list[dict[str, Any]] = json.loads(repo.forge("timeline", "checkout", "--json").out)[
        "events"
    ]
    return events


def test_each_event_is_one_line_in_words_led_by_its_time_and_iteration(repo: Repo) -> None:
    events = _recorded(repo)
    shown = repo.forge("timeline", "checkout", env={"COLUMNS": "200", "TZ": "UTC"})
    assert shown.code == 0
    assert len(shown.lines) == len(events) == 8
    for line, event in zip(shown.lines, events, strict=True):
        assert line[:8] == event["ts"][11:19]  # HH:MM:SS, here in UTC
        assert "=" not in line  # words, never key=value
        assert "{" not in line  # nor JSON
    by_kind = dict(zip([e["event"] for e in events], shown.lines, strict=False))
    assert "verify FAIL (2 of 2 consecutive failures), failed: tests" in by_kind["verify"]
    assert "verify breaker OPEN" in shown.lines[1]
    assert by_kind["breaker.reset"].endswith("a person reset the verify breaker")
    assert "run started: up to" in by_kind["run.started"]
    assert by_kind["iteration.started"][8:].split()[:4] == ["#1", "iteration", "1", "started"]
    assert "#1    iteration 1, exit 0" in by_kind["iteration.finished"]
    assert "run stopped: done-unverified after 1 iteration" in by_kind["run.stopped"]
    assert by_kind["forge.blocked"].endswith(f"blocked: {LONG_DETAIL}")
    # Local time: the same moment, an hour on in Paris in winter.
    paris = repo.forge("timeline", "checkout", "-n", "1", env={"TZ": "Europe/Paris"})
    hour = int(events[-1]["ts"][11:13])
    assert paris.lines[0][:2] == f"{(hour + 1) % 24:02d}"


def _cells(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def test_no_line_is_wider_than_the_terminal_and_a_cut_ends_at_a_word(repo: Repo) -> None:
    _recorded(repo)
    for columns in ("60", "41", "25"):
        shown = repo.forge("timeline", "checkout", env={"COLUMNS": columns, "TZ": "UTC"})
        assert shown.code == 0
        assert all(_cells(line) <= int(columns) for line in shown.lines), shown.out
    blocked = repo.forge("timeline", "checkout", "-n", "1", env=WIDE).lines[0]
    assert blocked.endswith("…")
    words = blocked[16:-1]  # after the time and the empty iteration column
    assert LONG_DETAIL.startswith(words.removeprefix("blocked: "))
    assert LONG_DETAIL[len(words.removeprefix("blocked: "))] in " ,:"  # cut at a word's end
    # A word too long for what is left is dropped whole, never split.
    narrow = repo.forge("timeline", "checkout", "-n", "1", env={"COLUMNS": "150", "TZ": "UTC"})
    assert "longword" not in narrow.lines[0]
    assert narrow.lines[0].endswith("漢字漢字漢字漢字 and a…")


def test_n_since_and_kind_choose_the_lines(repo: Repo) -> None:
    events = _recorded(repo)
    last_two = repo.forge("timeline", "checkout", "-n", "2", env=WIDE)
    assert [line[:8] for line in last_two.lines] == [e["ts"][11:19] for e in events[-2:]]
    assert "blocked:" in last_two.lines[-1]  # newest last
    verifies = repo.forge("timeline", "checkout", "--kind", "verify", env=WIDE)
    assert len(verifies.lines) == 2
    assert all("verify FAIL" in line for line in verifies.lines)
    # A prefix names a family of kinds; --kind repeats.
    iterations = repo.forge("timeline", "checkout", "--kind", "iteration", "--kind", "run")
    assert len(iterations.lines) == 4
    assert (
        repo.forge("timeline", "checkout", "--kind", "forge", "-n", "5").lines[0].count("blocked:")
    )
    assert len(repo.forge("timeline", "checkout", "--since", "1h").lines) == 8
    later = repo.forge("timeline", "checkout", "--since", "2999-01-01T00:00")
    assert later.code == 0
    assert later.lines == ['none of the 8 events of "checkout" match']
    data = json.loads(
        repo.forge("timeline", "checkout", "--json", "--kind", "breaker", "-n", "1").out
    )
    assert [e["event"] for e in data["events"]] == ["breaker.reset"]
    raw = repo.forge("timeline", "checkout", "--raw", "--kind", "breaker.reset")
    assert len(raw.lines) == 1
    assert "breaker=verify" in raw.lines[0]


def test_an_unknown_kind_or_since_is_a_usage_error_with_a_suggestion(repo: Repo) -> None:
    _recorded(repo)
    typo = repo.forge("timeline", "checkout", "--kind", "verfy")
    assert typo.code == 2
    assert "unknown event kind 'verfy'; did you mean 'verify'?" in typo.err
    assert typo.out == ""
    family = repo.forge("timeline", "checkout", "--kind", "circut")
    assert family.code == 2
    assert "did you mean 'circuit'?" in family.err
    since = repo.forge("timeline", "checkout", "--since", "yesterday")
    assert since.code == 2
    assert "--since 'yesterday' is neither a span nor a time" in since.err
    negative = repo.forge("timeline", "checkout", "-n", "-1")
    assert negative.code == 2


def test_follow_prints_new_events_in_words(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    follower = subprocess.Popen(
        [str(FORGE), "timeline", "checkout", "--follow", "--kind", "verify"],
        cwd=repo.root,
        env=forge_env({"COLUMNS": "70"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline()
        assert "verify FAIL (1 of 3 consecutive failures)" in first
        repo.forge("verify", "--reset-breaker", "--change", "checkout")  # not a verify
        repo.forge("verify", "--change", "checkout")
        second = follower.stdout.readline()
        assert "verify FAIL (1 of 3 consecutive failures)" in second
        assert len(second.rstrip("\n")) <= 70
    finally:
        follower.terminate()
        follower.wait(timeout=10)
        if follower.stdout:
            follower.stdout.close()
