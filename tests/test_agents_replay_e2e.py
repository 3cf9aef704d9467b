"""Recorded output of the real agent CLIs, replayed through the shipped executors.

Each recording under ``tests/data/agents/recorded/`` (sources in its README)
is played by ``replay_cli.py`` installed as ``claude``, ``codex`` or
``gemini`` on PATH, with the recorded exit code, so the shipped definitions,
the real ``forge run`` and ``forge supervise``, the parsers and the engine
all take part.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import pytest
import yaml

from .support import Completed, Repo

RECORDED = Path(__file__).parent / "data" / "agents" / "recorded"
REPLAY = Path(__file__).with_name("replay_cli.py")


@attrs.frozen
class Case:
    cli: str
    name: str
    exit: int = 0
    stdout: str = ""  # file name under the CLI's folder (default: name)
    stderr: str | None = None
    tokens: int = 0
    cached: int = 0
    cost: float = 0.0
    estimated: bool = False
    tool_calls: int = 0
    denials: int = 0
    done: bool = False
    limit: str | None = None  # "rejected" / "overloaded"
    resets_at: float | None = None
    session: str | None = None
    cost_note: str | None = None


CASES = [
    # Claude Code: stream-json and json, with and without a subagent on another model.
    Case(
        "claude",
        "multi-model.stream.jsonl",
        # the sum over modelUsage (haiku + opus), not usage's opus-only figure
        tokens=(2823 + 270) + (5 + 59073 + 30316 + 1587),
        cached=59073,
        cost=0.2628845,
        tool_calls=1,
        session="707c48df-3786-4b9f-ac05-a93054f0a542",
    ),
    Case(
        "claude",
        "edit-and-done.stream.jsonl",
        tokens=(2823 + 270) + (5 + 59073 + 30316 + 1587),
        cached=59073,
        cost=0.2628845,
        tool_calls=1,
        done=True,
        session="707c48df-3786-4b9f-ac05-a93054f0a542",
    ),
    Case(
        "claude",
        "array.json",
        tokens=(2 + 14934 + 125) + (4 + 22959 + 224) + (6 + 8982 + 42853 + 583),
        cached=14934 + 22959 + 42853,
        cost=0.0745213,
        tool_calls=2,
        session="d49d1efb-0239-4aa2-a2b0-f6c86b2320a6",
    ),
    Case(
        "claude",
        "permission-denied.json",
        tokens=9 + 5120 + 12000 + 210,
        cached=12000,
        cost=0.0412,
        denials=1,
    ),
    Case("claude", "max-budget.json", exit=1, cost=0.42),
    Case("claude", "usage-limit.json", exit=1, limit="rejected", resets_at=1753441200.0),
    Case("claude", "session-limit.json", exit=1, limit="rejected"),
    # Codex: cached input apart, cost estimated from the definition's prices
    # (its price_model, gpt-6.2-sol: the output names no model).
    Case(
        "codex",
        "simple.jsonl",
        tokens=2946 + 7,
        cost=round((2946 * 2.0 + 7 * 10.0) / 1e6, 6),
        estimated=True,
        session="019a2d7a-41c4-78b1-b7cc-a45d62a89cd5",
    ),
    Case(
        "codex",
        "reconnect-then-done.jsonl",
        tokens=232452 + 5988,
        cached=211968,
        cost=round(((232452 - 211968) * 2.0 + 211968 * 0.10 + 5988 * 10.0) / 1e6, 6),
        estimated=True,
        tool_calls=2,
        done=True,
        session="0199a213-81c0-7800-8aa1-bbab2a035a53",
    ),
    Case("codex", "usage-limit.jsonl", exit=1, limit="rejected"),
    Case(
        "codex",
        "usage-limit-structured.jsonl",
        exit=1,
        limit="rejected",
        resets_at=1777936568.0,
    ),
    Case("codex", "try-again-at.jsonl", exit=1, limit="rejected"),
    Case("codex", "unauthenticated.jsonl", exit=1),
    # Gemini: full per-model totals; errors as JSON on stderr.
    Case(
        "gemini",
        "consensus.json",
        stderr="consensus.stderr",
        tokens=20372,
        # gemini-3.1-pro-preview, the router's model for a complex task, is priced on
        # its own line (a model without one gets a cost_note: tests/test_unpriced_e2e.py).
        cost=round((18983 * 2.0 + (20372 - 18983) * 12.0) / 1e6, 6),
        estimated=True,
        session="fdbb7d96-b919-45c9-8586-b9ef75035dc3",
    ),
    Case(
        "gemini",
        "tools-done.json",
        tokens=64110 + 3196,
        cached=41000,
        cost=round(
            ((60412 - 41000) * 1.25 + 41000 * 0.31 + (64110 - 60412) * 10.0) / 1e6
            + (3100 * 0.30 + 96 * 2.50) / 1e6,
            6,
        ),
        estimated=True,
        tool_calls=7,
        done=True,
        session="2b1f0c52-7e1c-4c55-9b7a-0f3b7d1f6a21",
    ),
    Case("gemini", "daily-quota.json", exit=1, stderr="daily-quota.stderr", limit="rejected"),
    Case("gemini", "capacity.json", exit=1, stderr="capacity.stderr", limit="rejected"),
    Case("gemini", "auth.json", exit=41, stderr="auth.stderr"),
    Case("gemini", "no-auth-method.json", exit=41, stderr="no-auth-method.stderr"),
]


def install(repo: Repo, calls: list[dict[str, Any]]) -> dict[str, str]:
    """The replaying CLIs on PATH, playing ``calls``; the environment for forge."""
    bin_dir = repo.root.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    for cli in ("claude", "codex", "gemini"):
        shim = bin_dir / cli
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPLAY}" "$@"\n')
        shim.chmod(0o755)
    script = repo.root.parent / "replay.json"
    script.write_text(json.dumps(calls))
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "REPLAY_SCRIPT": str(script)}


def call(case: Case) -> dict[str, Any]:
    folder = RECORDED / case.cli
    return {
        "stdout": str(folder / (case.stdout or case.name)),
        "stderr": str(folder / case.stderr) if case.stderr else None,
        "exit": case.exit,
        "apply_writes": True,
    }


def invocations(repo: Repo) -> list[dict[str, Any]]:
    log = repo.root.parent / "replay.calls"
    return [json.loads(line) for line in log.read_text().splitlines()]


def finished(repo: Repo, change: str) -> list[dict[str, Any]]:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    events = [json.loads(line) for line in timeline.read_text().splitlines()]
    return [e for e in events if e["event"] == "iteration.finished"]


def check(case: Case, event: dict[str, Any]) -> None:
    assert event["tokens"] == case.tokens
    assert event["tokens_cached"] == case.cached
    assert event["cost_usd"] == pytest.approx(case.cost, abs=1e-6)
    assert event["cost_estimated"] is case.estimated
    assert event["tool_calls"] == case.tool_calls
    assert event["permission_denials"] == case.denials
    assert event["cost_note"] == case.cost_note
    assert event["done"] is case.done
    if case.session is not None:
        assert event["session"] == case.session
    limit = event["rate_limit"]
    assert (limit or {}).get("status") == case.limit
    if case.resets_at is not None:
        assert limit["resets_at"] == case.resets_at
    assert event["judged"] is (case.limit is None)


def run(repo: Repo, env: dict[str, str], *args: str) -> Completed:
    return repo.forge("run", "--change", "c", "--yes", *args, env=env)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.cli}-{c.name}")
def test_forge_run_replays_a_recording(repo: Repo, case: Case) -> None:
    # A limit whose reset is more than a second away ends the run at once.
    repo.write("forge.toml", '[run]\nmax_limit_wait = "1s"\nmax_iterations = 1\n')
    repo.commit()
    env = install(repo, [call(case)])
    done = run(repo, env, "--executor", case.cli)
    [event] = finished(repo, "c")[:1]
    check(case, event)
    if case.cost_note:
        assert f"  note: {case.cost_note}" in done.lines
    if case.done:
        assert done.code == 0, done
        assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    else:
        assert done.code == 1, done


@pytest.mark.parametrize(
    "case",
    # (a limit whose reset is still to come would be waited out in real time)
    [
        c
        for c in CASES
        if c.limit is None or (c.resets_at is not None and c.resets_at < time.time())
    ],
    ids=lambda c: f"{c.cli}-{c.name}",
)
def test_forge_supervise_replays_a_recording(repo: Repo, case: Case) -> None:
    # The recording, then (for a loop it leaves running) a done transcript of the same CLI.
    finish = {
        "claude": Case("claude", "edit-and-done.stream.jsonl"),
        "codex": Case("codex", "reconnect-then-done.jsonl"),
        "gemini": Case("gemini", "tools-done.json"),
    }[case.cli]
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\n\n[run]\nmax_iterations = 3\n\n'
        f'[[loop]]\nchange = "c"\nexecutor = "{case.cli}"\n',
    )
    repo.commit()
    env = install(repo, [call(case), call(finish)])
    done = repo.forge("supervise", env=env)
    events = finished(repo, "c")
    check(case, events[0])
    if case.done:
        assert done.code == 0, done
        assert len(events) == 1
    elif case.limit is not None:
        # Refused: not judged, no breaker, and the loop goes on to finish.
        assert done.code == 0, done
        assert [e["judged"] for e in events] == [False, True]
        assert "breaker.opened" not in (repo.change_dir("c") / "timeline.jsonl").read_text()


def test_resets_read_from_clock_times_and_durations(repo: Repo) -> None:
    repo.write("forge.toml", '[run]\nmax_limit_wait = "1s"\nmax_iterations = 1\n')
    repo.commit()
    checks: tuple[tuple[Case, Callable[[float], bool]], ...] = (
        (CASES[6], lambda at: _wall(at, "Europe/Moscow") == (3, 30)),  # "resets 3:30am (…)"
        (CASES[9], lambda at: round(at - time.time()) in _around(5 * 86400 + 22 * 3600 + 11 * 60)),
        (CASES[11], lambda at: _wall(at, None) == (12, 16)),  # "try again at 12:16 PM"
        (CASES[16], lambda at: round(at - time.time()) in _around(18 * 3600 + 64)),
    )
    for case, check_reset in checks:
        env = install(repo, [call(case)])
        (repo.root.parent / "replay.calls").unlink(missing_ok=True)
        change = case.name.split(".")[0]
        repo.forge("run", "--change", change, "--yes", "--executor", case.cli, env=env)
        limit = finished(repo, change)[0]["rate_limit"]
        assert limit["status"] == "rejected", case.name
        assert 0 < limit["resets_at"] - time.time() <= 7 * 86400, case.name
        assert check_reset(limit["resets_at"]), case.name


def _wall(epoch: float, zone: str | None) -> tuple[int, int]:
    when = datetime.fromtimestamp(epoch, ZoneInfo(zone)) if zone else datetime.fromtimestamp(epoch)
    return when.hour, when.minute


def _around(seconds: int) -> range:
    return range(seconds - 120, seconds + 1)


def test_the_claude_executor_edits_and_ends_done_with_forge_hooks_passed(repo: Repo) -> None:
    env = install(repo, [call(CASES[1])])
    done = run(repo, env, "--executor", "claude")
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    assert (repo.root / "claude_loop.py").read_text() == "#!/usr/bin/env python\nprint('loop')\n"
    [invocation] = invocations(repo)
    argv = invocation["argv"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--allowedTools") + 1] == "Bash"  # the agent may run its tests
    settings = json.loads(argv[argv.index("--settings") + 1])
    pre = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert pre.endswith("-m orchestra hook pre-tool-use --from-executor")
    stop = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert stop.endswith("-m orchestra hook stop --from-executor")


def test_the_plan_prints_the_permission_and_a_policy_chooses_another(repo: Repo) -> None:
    env = install(repo, [call(CASES[1])])
    plan = repo.forge("run", "--change", "c", "--executor", "claude", env=env)
    assert (
        "  permission: edit-and-run (--permission-mode acceptEdits --allowedTools Bash); "
        "Forge's guard and Stop hooks "
        "passed with --settings; 3 protected paths denied" in plan.lines
    )
    repo.write("forge.toml", '[run]\npermission = "read-only"\n')
    plan = repo.forge("run", "--change", "c", "--executor", "codex", env=env)
    assert "  permission: read-only (--sandbox read-only)" in plan.lines
    repo.write("forge.toml", '[run]\npermission = "root"\n')
    bad = repo.forge("run", "--change", "c", "--executor", "gemini", env=env)
    assert bad.code == 2
    assert "no permission level 'root'" in bad.err


def test_the_plan_warns_when_a_cost_ceiling_cannot_trip(repo: Repo, tmp_path: Path) -> None:
    repo.write("forge.toml", "[budget]\nmax_cost_usd = 5.0\n")
    repo.write(
        "executors/bare.toml",
        'argv = ["codex", "exec", "--json", "{prompt}"]\noutput = "codex-json"\n',
    )
    plan = repo.forge("run", "--change", "c", "--executor", "bare")
    assert any("max_cost_usd is set but executor 'bare' reports no cost" in ln for ln in plan.lines)
    priced = repo.forge("run", "--change", "c", "--executor", "codex")
    assert not any("warning:" in line for line in priced.lines)


def test_an_estimated_cost_is_marked_in_spend(repo: Repo) -> None:
    env = install(repo, [call(CASES[8])])
    done = run(repo, env, "--executor", "codex")
    assert done.code == 0, done
    spend = yaml.safe_load((repo.change_dir("c") / "spend.yaml").read_text())
    assert spend["cost_estimated"] is True
    shown = repo.forge("spend", "c")
    assert any("estimated from tokens and the executor's prices" in ln for ln in shown.lines)


def test_unreadable_output_with_a_done_marker_is_not_done(repo: Repo) -> None:
    garbage = repo.root.parent / "garbage.txt"
    garbage.write_text("Sorry, I crashed\nFORGE_DONE\n")
    env = install(repo, [{"stdout": str(garbage), "exit": 0}])
    done = run(repo, env, "--executor", "claude")
    assert done.code == 1, done
    assert "run: STOPPED after 1 iteration(s) — output-unreadable" in done.lines
    detail = next(line for line in done.lines if line.startswith("  detail:"))
    assert "could not be read" in detail
    assert "iteration-1.log" in detail


def test_sessions_continue_when_the_policy_says_so(repo: Repo) -> None:
    repo.write("forge.toml", '[run]\nsession = "continue"\nmax_iterations = 2\n')
    env = install(repo, [call(CASES[0]), call(CASES[1])])
    done = run(repo, env, "--executor", "claude")
    assert done.code == 0, done
    first, second = (i["argv"] for i in invocations(repo))
    assert "--resume" not in first
    assert second[second.index("--resume") + 1] == "707c48df-3786-4b9f-ac05-a93054f0a542"
    assert [e["session"] for e in finished(repo, "c")] == [
        "707c48df-3786-4b9f-ac05-a93054f0a542"
    ] * 2


def test_supervise_dry_run_prints_each_loops_permission(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[supervise]\nworktrees = "auto"\n\n'
        '[[loop]]\nchange = "a"\nexecutor = "codex"\n\n'
        '[[loop]]\nchange = "b"\nexecutor = "gemini"\n[loop.run]\npermission = "full"\n',
    )
    plan = repo.forge("supervise", "--dry-run")
    assert plan.code == 0, plan
    assert "  permission: edit (--sandbox workspace-write)" in plan.lines
    assert (
        "  permission: full (--approval-mode yolo); every bash -c checked by Forge's guard"
        in plan.lines
    )


def test_a_codex_session_resumes_without_the_flags_exec_resume_refuses(repo: Repo) -> None:
    # `codex exec resume` rejects --sandbox: the resumed thread gets its sandbox
    # as a -c config override instead.
    repo.write("forge.toml", '[run]\nsession = "continue"\nmax_iterations = 2\n')
    first_call = Case("codex", "simple.jsonl")
    env = install(repo, [call(first_call), call(Case("codex", "reconnect-then-done.jsonl"))])
    done = run(repo, env, "--executor", "codex")
    assert done.code == 0, done
    first, second = (i["argv"] for i in invocations(repo))
    assert first[:2] == ["exec", "--json"]
    assert first[-2:] == ["--sandbox", "workspace-write"]
    thread = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
    assert second[:4] == ["exec", "--json", "resume", thread]
    assert "--sandbox" not in second
    assert "-s" not in second
    assert second[-2:] == ["-c", 'sandbox_mode="workspace-write"']
    repo.write("forge.toml", '[run]\nsession = "continue"\npermission = "full"\n')
    plan = repo.forge("run", "--change", "c", "--executor", "codex", env=env)
    assert (
        "  session: continue (each iteration resumes the previous one's session; one older "
        "than 12h starts afresh)"
    ) in plan.lines


def test_a_completed_codex_turn_stands_over_a_limit_warning_on_stderr(repo: Repo) -> None:
    warning = repo.root.parent / "warning.stderr"
    warning.write_text("WARN: exceeded retry limit, last status: 429 Too Many Requests\n")
    done_call = call(Case("codex", "reconnect-then-done.jsonl"))
    env = install(repo, [{**done_call, "stderr": str(warning)}])
    done = run(repo, env, "--executor", "codex")
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    [event] = finished(repo, "c")
    assert event["rate_limit"] is None
    assert event["judged"] is True
