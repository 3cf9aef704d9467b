"""Safe-policy rails through the real ``forge`` command: loose settings are warned about."""

from __future__ import annotations

import json

from .support import Repo

ACK = "(set [policy] allow_relaxed = true to acknowledge)"


def test_policy_check_warns_about_a_short_cooldown(repo: Repo) -> None:
    done = repo.forge("policy", "check", "--set", "breaker.cooldown=0.001")
    assert done.code == 0, done.err
    assert done.lines[0] == (
        'warning: breaker.cooldown = "0.001s" is under the 30-minute minimum: a stalled loop '
        f"would retry the same failing state in quick succession {ACK}"
    )
    assert done.lines[-1].startswith("policy: OK")


def test_policy_check_warns_about_a_looser_threshold(repo: Repo) -> None:
    done = repo.forge("policy", "check", "--set", "stagnation.no_progress=1000")
    assert done.code == 0, done.err
    assert f"warning: stagnation.no_progress = 1000 is looser than the shipped default 3 {ACK}" in (
        done.lines
    )
    json_done = repo.forge("policy", "check", "--json", "--set", "stagnation.no_progress=1000")
    assert json.loads(json_done.out)["warnings"] == [
        f"warning: stagnation.no_progress = 1000 is looser than the shipped default 3 {ACK}"
    ]


def test_the_shipped_defaults_and_an_acknowledged_policy_are_quiet(repo: Repo) -> None:
    assert not [line for line in repo.forge("policy", "check").lines if "warning" in line]
    repo.write(
        "forge.toml", '[policy]\nallow_relaxed = true\n[breaker]\ncooldown = "5s"\nmax_opens = 9\n'
    )
    done = repo.forge("policy", "check")
    assert done.code == 0, done.err
    assert not [line for line in done.lines if "warning" in line], done.out


def test_a_loop_override_is_warned_about_by_name(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[[loop]]\nchange = "a"\ncmd = "true"\n[loop.breaker]\ncooldown = "10s"\n',
    )
    done = repo.forge("policy", "check")
    assert any(
        line.startswith('warning: loop a: breaker.cooldown = "10s" is under the 30-minute')
        for line in done.lines
    ), done.out


def test_the_run_plan_and_supervise_dry_run_warn(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[breaker]\ncooldown = "1m"\n'
        '[[loop]]\nchange = "a"\ncmd = "true"\n',
    )
    dry = repo.forge("supervise", "--dry-run")
    assert dry.code == 0, dry.err
    assert any(
        'warning: breaker.cooldown = "1m" is under the 30-minute' in line for line in dry.lines
    ), dry.out
    run = repo.forge("run", "--change", "r", "--cmd", "echo FORGE_DONE", "--max-iterations", "1")
    assert any(
        'warning: breaker.cooldown = "1m" is under the 30-minute' in line for line in run.lines
    ), run.out


def test_a_circuit_reset_needs_a_reason_and_records_it(repo: Repo) -> None:
    repo.write(
        ".forge/changes/c/breaker.yaml", "state: open\nreason: x\nopens: 1\nescalated: true\n"
    )
    refused = repo.forge("circuit", "c", "--reset")
    assert refused.code == 2
    assert "needs --reason" in refused.err
    assert "Traceback" not in refused.err
    done = repo.forge("circuit", "c", "--reset", "--reason", "fixed the flaky fixture")
    assert done.code == 0, done.err
    assert done.lines[-1].endswith("Reason: fixed the flaky fixture")
    events = [
        json.loads(line)
        for line in (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    ]
    reset = [e for e in events if e["event"] == "breaker.reset"]
    assert reset[-1]["reason"] == "fixed the flaky fixture"
    assert reset[-1]["was"] == "open"


def test_policy_check_without_forge_toml_names_the_set_values(repo: Repo) -> None:
    (repo.root / "forge.toml").unlink(missing_ok=True)
    plain = repo.forge("policy", "check")
    assert plain.lines[-1] == "policy: OK — no forge.toml found; the built-in defaults apply"
    done = repo.forge("policy", "check", "--set", "alerts.loop_count=1000")
    assert done.code == 0, done.err
    assert done.lines == [
        f"warning: alerts.loop_count = 1000 is looser than the shipped default 20 {ACK}",
        "policy: OK — no forge.toml found; the built-in defaults apply, "
        "with 1 --set value(s) over them",
    ]
