"""``forge verify --change``: the breaker's progression, to the letter, through the real command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from .support import FORGE, Repo, failing_policy, forge_env, run_forge


def breaker_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("Breaker:")]
    assert len(lines) == 1, out
    return lines[0]


def test_the_breaker_progression_to_the_letter(repo: Repo) -> None:
    failing_policy(repo)
    expected = [
        (
            'Breaker: 1/3 consecutive failures for change "checkout" — fix the smallest cause '
            "and re-run.",
            0,
        ),
        (
            'Breaker: 2/3 consecutive failures for change "checkout" — fix the smallest cause '
            "and re-run.",
            0,
        ),
        ('Breaker: CIRCUIT OPEN — 3 consecutive verify failures for change "checkout".', 1),
        ('Breaker: CIRCUIT OPEN — 4 consecutive verify failures for change "checkout".', 1),
    ]
    for line, code in expected:
        done = repo.forge("verify", "--change", "checkout")
        assert done.code == code, done
        assert "Verdict: FAIL" in done.lines
        assert breaker_line(done.out) == line
        # The verdict comes before the breaker line, which ends the report.
        assert done.lines.index("Verdict: FAIL") < done.lines.index(line)


def test_state_file_keeps_the_documented_keys_in_order(repo: Repo) -> None:
    failing_policy(repo)
    for _ in range(3):
        repo.forge("verify", "--change", "checkout")
    text = (repo.change_dir("checkout") / "verify-attempts.yaml").read_text()
    keys = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert keys[:4] == ["consecutive_failures", "open", "last_verdict", "total_attempts"]
    state = yaml.safe_load(text)
    assert state["consecutive_failures"] == 3
    assert state["open"] is True
    assert state["last_verdict"] == "FAIL"
    assert state["total_attempts"] == 3
    head = repo.git("rev-parse", "HEAD").strip()
    assert state["last_commit"] == head
    assert state["last_tree"].startswith("sha256:")


def test_a_pass_resets_the_streak_and_closes_the_breaker(repo: Repo) -> None:
    failing_policy(repo)
    for _ in range(3):
        repo.forge("verify", "--change", "checkout")
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    done = repo.forge("verify", "--change", "checkout")
    assert done.code == 0
    assert "Verdict: PASS" in done.lines
    assert breaker_line(done.out) == (
        'Breaker: 0/3 consecutive failures for change "checkout" — closed '
        "(a streak of 3 was reset)."
    )
    state = yaml.safe_load((repo.change_dir("checkout") / "verify-attempts.yaml").read_text())
    assert (state["consecutive_failures"], state["open"], state["total_attempts"]) == (0, False, 4)


def test_reset_breaker_clears_it_and_records_it(repo: Repo) -> None:
    failing_policy(repo)
    for _ in range(3):
        repo.forge("verify", "--change", "checkout")
    done = repo.forge("verify", "--reset-breaker", "--change", "checkout")
    assert done.code == 0
    assert done.out.strip() == (
        'Breaker: reset for change "checkout" — cleared an OPEN circuit after 3 consecutive '
        "failures."
    )
    # The streak starts again from one.
    again = repo.forge("verify", "--change", "checkout")
    assert again.code == 0
    assert breaker_line(again.out).startswith("Breaker: 1/3 consecutive failures")
    events = [
        json.loads(line)
        for line in (repo.change_dir("checkout") / "timeline.jsonl").read_text().splitlines()
    ]
    reset = [e for e in events if e["event"] == "breaker.reset"]
    assert len(reset) == 1
    assert reset[0]["cleared_consecutive_failures"] == 3
    assert reset[0]["was_open"] is True


def test_reset_breaker_needs_a_change(repo: Repo) -> None:
    done = repo.forge("verify", "--reset-breaker")
    assert done.code == 2
    assert "--change" in done.err
    assert "Traceback" not in done.err


def test_max_failures_flag_overrides_the_threshold(repo: Repo) -> None:
    failing_policy(repo)
    first = repo.forge("verify", "--change", "c1", "--max-failures", "2")
    assert breaker_line(first.out).startswith('Breaker: 1/2 consecutive failures for change "c1"')
    second = repo.forge("verify", "--change", "c1", "--max-failures", "2")
    assert second.code == 1
    assert breaker_line(second.out) == (
        'Breaker: CIRCUIT OPEN — 2 consecutive verify failures for change "c1".'
    )


def test_policy_threshold_applies(repo: Repo) -> None:
    failing_policy(repo, max_failures=1)
    done = repo.forge("verify", "--change", "checkout")
    assert done.code == 1
    assert "CIRCUIT OPEN — 1 consecutive verify failures" in breaker_line(done.out)


def test_bare_verify_reports_and_never_gates(repo: Repo) -> None:
    failing_policy(repo)
    for _ in range(4):
        done = repo.forge("verify")
        assert done.code == 0
        assert done.lines[-1] == "Verdict: FAIL"
        assert not any(line.startswith("Breaker:") for line in done.lines)
    assert not (repo.root / ".forge").exists()


def test_changes_are_independent(repo: Repo) -> None:
    failing_policy(repo, max_failures=2)
    repo.forge("verify", "--change", "alpha")
    repo.forge("verify", "--change", "alpha")
    beta = repo.forge("verify", "--change", "beta")
    assert beta.code == 0
    assert breaker_line(beta.out).startswith('Breaker: 1/2 consecutive failures for change "beta"')


def test_invalid_change_names_are_refused(repo: Repo) -> None:
    for name in ["../x", "a/b", "", "Upper", ".hidden", "-dash", "x" * 65]:
        done = repo.forge("verify", "--change", name)
        assert done.code == 2, name
        assert "Traceback" not in done.err
    assert not (repo.root / ".forge").exists()
    assert not (repo.root.parent / "x").exists()


def test_json_report_carries_the_breaker(repo: Repo) -> None:
    failing_policy(repo)
    done = repo.forge("verify", "--change", "checkout", "--json")
    assert done.code == 0
    report = json.loads(done.out)
    assert report["verdict"] == "FAIL"
    assert report["change"] == "checkout"
    assert report["breaker"]["consecutive_failures"] == 1
    assert report["breaker"]["exit_code"] == 0
    assert report["breaker"]["message"].startswith("Breaker: 1/3")
    assert report["checks"][0]["failure_lines"] == [
        "FAILED tests/test_cart.py::test_total - assert 3 == 4"
    ]


def test_bare_json_report(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    done = repo.forge("verify", "--json")
    report = json.loads(done.out)
    assert report["verdict"] == "PASS"
    assert report["breaker"] is None
    assert done.code == 0


def test_verify_event_in_timeline(repo: Repo) -> None:
    failing_policy(repo)
    repo.forge("verify", "--change", "checkout")
    repo.forge("verify", "--change", "checkout")
    lines = (repo.change_dir("checkout") / "timeline.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["seq"] for e in events] == [1, 2]
    assert all(e["event"] == "verify" and e["change"] == "checkout" for e in events)
    assert events[1]["verdict"] == "FAIL"
    assert events[1]["consecutive_failures"] == 2
    assert events[1]["open"] is False
    assert events[0]["checks"][0]["name"] == "tests"
    assert "duration" in events[0]


def test_verify_runs_from_a_subfolder(repo: Repo) -> None:
    failing_policy(repo)
    sub = repo.root / "pkg" / "deep"
    sub.mkdir(parents=True)
    done = run_forge(["verify", "--change", "checkout"], cwd=sub)
    assert done.code == 0
    assert (repo.change_dir("checkout") / "verify-attempts.yaml").is_file()
    assert not (sub / ".forge").exists()


def test_no_traceback_on_unwritable_state(repo: Repo, tmp_path: Path) -> None:
    failing_policy(repo)
    (repo.root / ".forge").write_text("not a folder\n")
    done = repo.forge("verify", "--change", "checkout")
    assert done.code == 1
    assert "Traceback" not in done.err
    assert "error:" in done.err


def test_a_reader_that_stops_early_costs_no_attempt(repo: Repo) -> None:
    failing_policy(repo)
    codes = []
    for _ in range(4):
        done = subprocess.run(
            f"{FORGE} verify --change c | head -c 1 > /dev/null; echo ${{PIPESTATUS[0]}}",
            shell=True,
            executable="/bin/bash",
            cwd=repo.root,
            env=forge_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        codes.append(int(done.stdout.strip()))
    assert codes == [0, 0, 1, 1]  # the breaker's own exit codes, pipe or no pipe
    state = yaml.safe_load((repo.change_dir("c") / "verify-attempts.yaml").read_text())
    assert state["total_attempts"] == 4


def test_force_color_never_reaches_a_pipe(repo: Repo) -> None:
    failing_policy(repo)
    done = repo.forge("verify", "--change", "c", env={"FORCE_COLOR": "1", "TERM": "xterm"})
    assert "\x1b" not in done.out
    assert "Verdict: FAIL" in done.lines


def test_escape_codes_from_the_command_are_stripped(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        "[verify]\ncommand = \"printf '\\\\033[31mFAILED t\\\\033[0m\\\\n'; exit 1\"\n",
    )
    report = json.loads(repo.forge("verify", "--json").out)
    assert report["checks"][0]["failure_lines"] == ["FAILED t"]


def test_a_deleted_state_file_is_rebuilt_from_the_timeline(repo: Repo) -> None:
    failing_policy(repo)
    for _ in range(3):
        repo.forge("verify", "--change", "c")
    (repo.change_dir("c") / "verify-attempts.yaml").unlink()
    done = repo.forge("verify", "--change", "c")
    assert done.code == 1
    assert breaker_line(done.out) == (
        'Breaker: CIRCUIT OPEN — 4 consecutive verify failures for change "c".'
    )
    kinds = [
        json.loads(line)["event"]
        for line in (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    ]
    assert kinds[-2:] == ["state.rebuilt", "verify"]


def test_untracked_file_names_that_are_not_utf8(repo: Repo) -> None:
    failing_policy(repo)
    (repo.root / os.fsdecode(b"bad\xffname")).write_text("x")
    done = repo.forge("verify", "--change", "c")
    assert done.code == 0
    assert "Traceback" not in done.err
    state = yaml.safe_load((repo.change_dir("c") / "verify-attempts.yaml").read_text())
    assert state["last_tree"].startswith("sha256:")


def test_spec_paths_outside_the_project_are_refused(repo: Repo) -> None:
    for specs in ('["/etc/*"]', '["../other"]', '["docs/../../x"]', '[""]'):
        repo.write("forge.toml", f"[verify]\nspecs = {specs}\n")
        done = repo.forge("verify")
        assert done.code == 2, specs
        assert "verify.specs[0]: expected a path or glob relative to the project" in done.err
        assert "Traceback" not in done.err
