"""``forge run`` end to end: every ending, through the real command and a real fake agent."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from .support import FORGE, Completed, Repo, forge_env, spawn_forge
from .test_process import alive

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
ESCALATE = "escalate: a human should review before continuing"
# A loop's first line: the gates are on.
ANNOUNCE = (
    "Circuit breaker is active — monitoring for stagnation, rate limits, and file protection."
)


def agent(repo: Repo, *steps: dict[str, Any]) -> str:
    """The --cmd of a fake agent that plays ``steps`` (one per iteration)."""
    script = repo.root.parent / f"script-{len(list(repo.root.parent.glob('script-*')))}.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    return (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))} {shlex.quote(str(script))}"
    )


def calls(repo: Repo) -> list[str]:
    log = repo.root.parent / "calls.txt"
    return log.read_text().splitlines() if log.exists() else []


def run(repo: Repo, *args: str) -> Completed:
    return repo.forge("run", *args, env={"FAKE_AGENT_CALLS": str(repo.root.parent / "calls.txt")})


def events(repo: Repo, change: str) -> list[dict[str, Any]]:
    path = repo.change_dir(change) / "timeline.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def open_breaker(repo: Repo, change: str) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "exit 1"\n')
    for _ in range(3):
        repo.forge("verify", "--change", change)


def test_dry_run_prints_the_plan_and_executes_nothing(repo: Repo) -> None:
    done = run(repo, "--change", "add-billing", "--cmd", "my-agent --once", "--max-iterations", "3")
    assert done.code == 0
    assert done.lines[:4] == [
        'Plan: up to 3 iteration(s) on change "add-billing"',
        '  executor: sh -c "my-agent --once"',
        "  gates:    verify circuit-breaker, spend budget, secscan",
        "  stop:     any gate opening halts the loop and escalates to a human",
    ]
    assert (
        '  secscan:  rules "secscan", before and after every iteration; unwaived findings at '
        "or above high open the gate"
    ) in done.lines
    assert done.lines[-2:] == ["", "dry run: nothing executed (pass --yes to run)"]
    assert not (repo.root / ".forge").exists()


def test_dry_run_executes_no_executor(repo: Repo) -> None:
    cmd = agent(repo, {"print": "FORGE_DONE\n"})
    assert run(repo, "--change", "c", "--cmd", cmd).code == 0
    assert calls(repo) == []


def test_max_iterations_default_and_ceiling(repo: Repo) -> None:
    default = run(repo, "--change", "c", "--cmd", "x")
    assert default.lines[0] == 'Plan: up to 5 iteration(s) on change "c"'
    assert run(repo, "--change", "c", "--cmd", "x", "--max-iterations", "50").code == 0
    refused = run(repo, "--change", "c", "--cmd", "x", "--max-iterations", "51")
    assert refused.code == 2
    assert "run.max_iterations: expected an integer from 1 to 50" in refused.err
    repo.write("forge.toml", "[run]\nmax_iterations = 80\n")
    assert run(repo, "--change", "c", "--cmd", "x").code == 2


def test_done_after_n_iterations_is_the_clean_exit(repo: Repo) -> None:
    cmd = agent(
        repo, {"print": "working\n"}, {"print": "still working\n"}, {"print": "FORGE_DONE\n"}
    )
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 3 iteration(s)"
    assert ESCALATE not in done.out
    assert calls(repo) == ["c 1", "c 2", "c 3"]


def test_done_by_report(repo: Repo) -> None:
    cmd = agent(repo, {"report": {"done": True, "tokens": 10, "summary": "all tasks checked"}})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 0
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"


def test_done_needs_exit_zero(repo: Repo) -> None:
    cmd = agent(repo, {"print": "FORGE_DONE\n", "report": {"done": True}, "exit": 1})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1
    assert done.lines[0] == ANNOUNCE
    assert done.lines[1] == "iteration 1/5: exit 1 in " + done.lines[1].split(" in ")[1]
    assert "run: STOPPED after 1 iteration(s) — executor-failed" in done.lines


def test_a_marker_that_is_not_the_whole_line_is_not_done(repo: Repo) -> None:
    cmd = agent(repo, {"print": "FORGE_DONE soon\n# FORGE_DONE\n"})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "2")
    assert done.code == 1
    assert "run: STOPPED after 2 iteration(s) — iterations-exhausted" in done.lines


def test_iterations_exhausted_escalates(repo: Repo) -> None:
    cmd = agent(repo, {"print": "working\n"})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "3")
    assert done.code == 1
    assert done.lines[-3:] == [
        "run: STOPPED after 3 iteration(s) — iterations-exhausted",
        "  detail: 3 of 3 iteration(s) used without the executor signalling done",
        ESCALATE,
    ]
    assert calls(repo) == ["c 1", "c 2", "c 3"]


def test_already_open_gate_refuses_to_start(repo: Repo) -> None:
    open_breaker(repo, "add-billing")
    cmd = agent(repo, {"print": "FORGE_DONE\n"})
    done = run(repo, "--change", "add-billing", "--cmd", cmd, "--yes")
    assert done.code == 1
    assert done.lines == [
        ANNOUNCE,
        "run: STOPPED after 0 iteration(s) — gate-open",
        "  gate:   verify circuit-breaker",
        "  detail: circuit breaker open after 3 consecutive verify failures",
        ESCALATE,
    ]
    assert calls(repo) == []  # zero executor invocations


def test_gate_opening_mid_run_stops_at_once(repo: Repo) -> None:
    cmd = agent(repo, {"report": {"tokens": 600}})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-tokens", "1000")
    assert done.code == 1
    assert done.lines[-4:] == [
        "run: STOPPED after 2 iteration(s) — gate-open",
        "  gate:   spend budget",
        "  detail: spend budget exhausted: 1200 tokens spent, ceiling 1000",
        ESCALATE,
    ]
    assert calls(repo) == ["c 1", "c 2"]


def test_spend_accumulates_across_runs(repo: Repo) -> None:
    cmd = agent(repo, {"report": {"tokens": 100, "tool_calls": 2, "cost_usd": 0.5}})
    run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "2")
    run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "1")
    spend = yaml.safe_load((repo.change_dir("c") / "spend.yaml").read_text())
    assert (spend["tokens"], spend["tool_calls"], spend["cost_usd"]) == (300, 6, 1.5)
    # The budget is per change and survives runs: a ceiling already reached refuses to start.
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-cost-usd", "1.5")
    assert done.lines[:2] == [ANNOUNCE, "run: STOPPED after 0 iteration(s) — gate-open"]
    assert "  gate:   spend budget" in done.lines


def test_no_ceiling_means_the_budget_gate_never_opens(repo: Repo) -> None:
    cmd = agent(repo, {"report": {"tokens": 10**12, "cost_usd": 10**6}}, {"print": "FORGE_DONE\n"})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.lines[-1] == "run: DONE after 2 iteration(s)"


def test_corrupt_gate_state_is_a_gate_error(repo: Repo) -> None:
    folder = repo.change_dir("c")
    folder.mkdir(parents=True)
    (folder / "verify-attempts.yaml").write_text("{{{ not yaml")
    cmd = agent(repo, {"print": "FORGE_DONE\n"})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1
    assert done.lines[-4] == "run: STOPPED after 0 iteration(s) — gate-error"
    assert done.lines[-3] == "  gate:   verify circuit-breaker"
    assert done.lines[-1] == ESCALATE
    assert calls(repo) == []
    # It stays an error (never assumed closed) until a human resets the breaker.
    again = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert "run: STOPPED after 0 iteration(s) — gate-error" in again.lines
    repo.forge("verify", "--reset-breaker", "--change", "c")
    assert run(repo, "--change", "c", "--cmd", cmd, "--yes").code == 0


def test_an_agent_rewriting_forges_own_state_is_stopped_and_undone(repo: Repo) -> None:
    spend = repo.change_dir("c") / "spend.yaml"
    # The check after the iteration is under test: in the sandbox the kernel
    # refuses this harm before it happens (tests/test_sandbox_e2e.py).
    repo.write("forge.toml", '[sandbox]\nmode = "off"\n')
    cmd = agent(repo, {"print": "one\n"}, {"write": {str(spend): "tokens: [broken"}})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-tokens", "1000000000")
    assert done.code == 1
    assert "run: STOPPED after 2 iteration(s) — gate-open" in done.lines
    assert "  gate:   integrity" in done.lines
    detail = next(line for line in done.lines if line.startswith("  detail: "))
    assert ".forge/changes/c/spend.yaml modified (protected: frozen) — restored" in detail
    assert "tokens: [broken" not in spend.read_text()


def test_executor_failure_shows_exit_code_and_last_lines(repo: Repo) -> None:
    cmd = agent(repo, {"print": "compiling\nerror: cart.py:3 missing colon\n", "exit": 3})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1
    index = done.lines.index("run: STOPPED after 1 iteration(s) — executor-failed")
    assert done.lines[index + 1] == "  executor: exit 3"
    assert "    error: cart.py:3 missing colon" in done.lines
    assert done.lines[-1] == ESCALATE


def test_executor_that_cannot_start(repo: Repo) -> None:
    repo.write("executors/ghost.toml", 'argv = ["/nonexistent/agent", "{prompt}"]\n')
    done = run(repo, "--change", "c", "--executor", "ghost", "--prompt", "go", "--yes")
    assert done.code == 1
    assert "run: STOPPED after 1 iteration(s) — executor-failed" in done.lines
    assert (
        "  executor: could not start: /nonexistent/agent: No such file or directory" in done.lines
    )


def test_timeout_stops_the_whole_tree_within_timeout_plus_grace(repo: Repo) -> None:
    pids = repo.root.parent / "pids"
    cmd = agent(repo, {"spawn_stubborn": str(pids), "ignore_term": True, "sleep": 600})
    repo.write("forge.toml", '[run]\ngrace = "1s"\n')
    started = time.monotonic()
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--timeout", "2s")
    elapsed = time.monotonic() - started
    assert done.code == 1
    assert "run: STOPPED after 1 iteration(s) — executor-failed" in done.lines
    assert "  executor: timed out (the equivalent of exit 124)" in done.lines
    # Bounded by timeout (2 s) + grace (1 s) + start-up, never by the 600 s the
    # agent wanted; the margin is wide because these machines are shared.
    assert elapsed < 20
    recorded = [int(pid) for pid in pids.read_text().split()]
    assert not any(alive(pid) for pid in recorded)
    finished = [e for e in events(repo, "c") if e["event"] == "iteration.finished"]
    assert finished[0]["timed_out"] is True
    assert finished[0]["exit"] is None


def test_executor_learns_its_context_from_the_environment(repo: Repo) -> None:
    env_file = repo.root.parent / "env.json"
    cmd = agent(repo, {"record_env": str(env_file), "print": "FORGE_DONE\n"})
    run(repo, "--change", "ctx", "--cmd", cmd, "--yes", "--max-iterations", "4")
    seen = json.loads(env_file.read_text())
    assert seen["FORGE_CHANGE"] == "ctx"
    assert seen["FORGE_ITERATION"] == "1"
    assert seen["FORGE_MAX_ITERATIONS"] == "4"
    assert Path(seen["FORGE_STATE_DIR"]) == repo.change_dir("ctx")
    # In the sandbox the report goes to the run's folder of the change's inbox,
    # the one place of Forge's state an agent may write (tests/test_sandbox_e2e.py).
    report = Path(seen["FORGE_REPORT"])
    assert report.parent.parent == repo.change_dir("ctx") / "inbox"
    assert report.name == "report.json"
    assert seen["FORGE_INBOX"] == str(report.parent)
    assert seen["FORGE_SANDBOX"] == "bubblewrap"


def test_named_executor_fills_its_template(repo: Repo) -> None:
    out_file = repo.root.parent / "argv.txt"
    repo.write(
        "executors/echoer.toml",
        'argv = ["sh", "-c", "printf \'%s|%s|%s\\\\n\' \\"$0\\" \\"$1\\" \\"$2\\" > '
        + str(out_file)
        + '; echo FORGE_DONE", "{prompt}", "{change}", "{iteration}"]\n',
    )
    done = run(repo, "--change", "tpl", "--executor", "echoer", "--prompt", "fix {it}", "--yes")
    assert done.code == 0, done
    assert out_file.read_text() == "fix {it}|tpl|1\n"


def test_invalid_executor_definition_is_a_config_error(repo: Repo) -> None:
    repo.write("executors/bad.toml", 'argv = ["x", "{prompt}"]\noutput = "yaml"\nargs = 1\n')
    done = run(repo, "--change", "c", "--executor", "bad")
    assert done.code == 2
    unknown = "executors/bad.toml: args: unknown key in the top level; did you mean 'argv'?"
    assert unknown in done.err
    assert "executors/bad.toml: output: expected one of text, claude-json" in done.err
    assert "Traceback" not in done.err
    repo.write("executors/bad.toml", 'argv = ["x", "{promt}"]\n')
    done = run(repo, "--change", "c", "--executor", "bad")
    assert done.code == 2
    assert "executors/bad.toml: argv[1]: expected only the placeholders" in done.err


def test_a_project_executor_overrides_the_shipped_one(repo: Repo) -> None:
    repo.write("executors/claude.toml", 'argv = ["sh", "-c", "echo FORGE_DONE"]\n')
    done = run(repo, "--change", "c", "--executor", "claude", "--yes")
    assert done.code == 0
    shipped = run(repo, "--change", "c", "--executor", "codex")
    # The shipped codex passes Forge's guard hook (shown as <forge hooks>) before its sandbox.
    assert (
        "  executor: codex: codex exec --json '' '<forge hooks>' --sandbox workspace-write"
        in shipped.lines
    )


def test_no_executor_is_a_usage_error(repo: Repo) -> None:
    done = run(repo, "--change", "c", "--yes")
    assert done.code == 2
    assert "no executor to run" in done.err


def test_the_timeline_audits_a_finished_run(repo: Repo) -> None:
    cmd = agent(repo, {"report": {"tokens": 7, "tool_calls": 1}}, {"print": "FORGE_DONE\n"})
    run(repo, "--change", "c", "--cmd", cmd, "--yes")
    seen = events(repo, "c")
    assert [e["event"] for e in seen] == [
        "run.started",
        "iteration.started",
        "iteration.finished",
        "iteration.started",
        "iteration.finished",
        "run.stopped",
    ]
    started = seen[0]
    assert started["plan"]["max_iterations"] == 5
    assert set(started["gates"]) == {"verify circuit-breaker", "spend budget", "secscan"}
    first = seen[2]
    assert (first["iteration"], first["exit"], first["tokens"], first["tool_calls"]) == (1, 0, 7, 1)
    assert first["done"] is False
    assert first["gates"]["secscan"] == {
        "state": "closed",
        "detail": "no unwaived findings at or above high (1 file(s) scanned, 0 read)",
    }
    assert "duration" in first
    assert "output_bytes" in first
    stopped = seen[-1]
    assert (stopped["reason"], stopped["iterations"]) == ("done", 2)
    assert len({e["run_id"] for e in seen}) == 1


def test_json_summary(repo: Repo) -> None:
    cmd = agent(repo, {"print": "hi\n", "exit": 2})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--json")
    summary = json.loads(done.out)
    assert summary["status"] == "STOPPED"
    assert summary["reason"] == "executor-failed"
    assert summary["iterations"] == 1
    assert summary["last_iteration"]["exit"] == 2
    assert summary["exit_code"] == 1
    assert done.code == 1


def test_change_defaults_to_the_branch(repo: Repo) -> None:
    repo.git("checkout", "-q", "-b", "feature/Add-Billing")
    done = run(repo, "--cmd", "x")
    assert done.lines[0] == 'Plan: up to 5 iteration(s) on change "feature-add-billing"'


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_the_tree_and_records_it(repo: Repo, sig: signal.Signals) -> None:
    pids = repo.root.parent / "pids"
    cmd = agent(repo, {"spawn_stubborn": str(pids), "sleep": 600})
    repo.write("forge.toml", '[run]\ngrace = "1s"\n')
    forge = spawn_forge(["run", "--change", "c", "--cmd", cmd, "--yes"], cwd=repo.root)
    try:
        for _ in range(3000):
            if pids.exists() and len(pids.read_text().split()) == 2:
                break
            time.sleep(0.01)  # waiting on a real process; there is no clock to mock
        recorded = [int(pid) for pid in pids.read_text().split()]
        os.kill(forge.pid, sig)
        out, _err = forge.communicate(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.communicate()
    assert forge.returncode == 130
    assert "run: INTERRUPTED after 0 iteration(s)" in out
    assert ESCALATE in out
    assert not any(alive(pid) for pid in recorded)
    stopped = [e for e in events(repo, "c") if e["event"] == "run.stopped"]
    assert stopped[-1]["reason"] == "interrupted"


def test_output_is_captured_bounded_and_logged_whole(repo: Repo) -> None:
    """256 MiB of output: forge's peak memory stays where a silent run leaves it."""

    def peak_rss_kib(cmd: str) -> int:
        forge = subprocess.Popen(
            [str(FORGE), "run", "--change", "mem", "--cmd", cmd, "--yes", "--max-iterations", "1"],
            cwd=repo.root,
            env=forge_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, _, usage = os.wait4(forge.pid, 0)
        forge.returncode = 0  # reaped by wait4 above
        return usage.ru_maxrss

    size = 256 * 1024 * 1024
    quiet = peak_rss_kib("true")
    loud = peak_rss_kib(f"head -c {size} /dev/zero | tr '\\0' 'x' | fold -w 1023")
    assert loud - quiet < 8 * 1024, (quiet, loud)  # a few MB at most, whatever the volume
    finished = [e for e in events(repo, "mem") if e["event"] == "iteration.finished"]
    assert finished[-1]["output_bytes"] == size + size // 1023  # fold adds a newline per line
    log = repo.change_dir("mem") / finished[-1]["log"]
    assert log.stat().st_size == finished[-1]["output_bytes"]
    log.unlink()


def test_spend_shows_and_resets_the_totals(repo: Repo) -> None:
    cmd = agent(repo, {"report": {"tokens": 500, "tool_calls": 3, "cost_usd": 0.25}})
    run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "2")
    shown = json.loads(repo.forge("spend", "c", "--json").out)
    assert shown["spend"]["tokens"] == 1000
    assert shown["spend"]["iterations"] == 2
    human = repo.forge("spend", "c", "--set", "budget.max_tokens=1000")
    assert "  tokens:     1000 (ceiling 1000)" in human.lines
    blocked = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-tokens", "1000")
    assert "  gate:   spend budget" in blocked.lines
    reset = repo.forge("spend", "c", "--reset")
    assert reset.code == 0
    assert reset.out.startswith('Spend: reset for change "c" — cleared 1000 tokens')
    again = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-tokens", "1000")
    assert "run: STOPPED after 2 iteration(s) — gate-open" in again.lines


def test_a_corrupt_spend_file_blocks_until_reset(repo: Repo) -> None:
    folder = repo.change_dir("c")
    folder.mkdir(parents=True)
    (folder / "spend.yaml").write_text("tokens: -5\n")
    cmd = agent(repo, {"print": "FORGE_DONE\n"})
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-tokens", "100")
    assert "run: STOPPED after 0 iteration(s) — gate-error" in done.lines
    assert "blocked" in repo.forge("spend", "c").out
    repo.forge("spend", "c", "--reset")
    assert run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-tokens", "100").code == 0


def test_nothing_escapes_by_setsid_or_its_own_group(repo: Repo) -> None:
    pids = repo.root.parent / "escaped"
    cmd = (
        f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & "
        f"sh -c 'set -m; (echo $$ >> {pids}; exec sleep 301) &' ; sleep 0.3; exit 0"
    )
    repo.write("forge.toml", '[run]\ngrace = "1s"\n')
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "1")
    assert "run: STOPPED after 1 iteration(s) — iterations-exhausted" in done.lines
    recorded = [int(pid) for pid in pids.read_text().split()]
    assert len(recorded) == 2
    assert not any(alive(pid) for pid in recorded)


def test_hostile_numbers_in_output_and_report_do_not_crash(repo: Repo) -> None:
    huge = "1" + "0" * 400
    result = (
        '{"type":"result","subtype":"success","is_error":false,"result":"FORGE_DONE",'
        f'"total_cost_usd":{huge},"usage":{{"input_tokens":{huge}}}}}'
    )
    repo.write(
        "executors/hostile.toml", 'argv = ["sh", "-c", "{prompt}"]\noutput = "claude-json"\n'
    )
    prompt = f"echo '{result}'; echo '{{\"cost_usd\": {huge}, \"tokens\": {huge}}}' > $FORGE_REPORT"
    done = run(
        repo, "--change", "c", "--executor", "hostile", "--prompt", prompt, "--yes", "--json"
    )
    assert done.code == 0, done.err
    summary = json.loads(done.out)
    assert summary["status"] == "DONE"
    assert summary["spend"]["cost_usd"] == 0.0
    assert "Traceback" not in done.err


def test_a_fifo_at_the_report_path_does_not_hang(repo: Repo) -> None:
    done = run(repo, "--change", "c", "--cmd", "mkfifo $FORGE_REPORT; echo FORGE_DONE", "--yes")
    assert done.code == 0
    problems = next(e for e in events(repo, "c") if e["event"] == "iteration.finished")
    assert problems["report_problems"] == ["report is not a regular file; ignored"]


def test_the_marker_after_a_long_unfinished_line(repo: Repo) -> None:
    cmd = "printf '%05000d' 0; sleep 0.2; printf '\\nFORGE_DONE\\n'"
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes", "--max-iterations", "1")
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"


def test_a_marker_on_stderr_is_not_done(repo: Repo) -> None:
    done = run(
        repo, "--change", "c", "--cmd", "echo FORGE_DONE >&2", "--yes", "--max-iterations", "1"
    )
    assert "run: STOPPED after 1 iteration(s) — iterations-exhausted" in done.lines


def test_unwritable_spend_state_mid_run_is_a_gate_error(repo: Repo) -> None:
    folder = repo.change_dir("c")
    # An agent that breaks Forge's state: only possible outside the sandbox.
    repo.write("forge.toml", '[sandbox]\nmode = "off"\n')
    cmd = f"mkdir -p {folder}/spend.yaml; echo FORGE_DONE"  # a folder where a file must go
    done = run(repo, "--change", "c", "--cmd", cmd, "--yes")
    assert done.code == 1
    assert "run: STOPPED after 1 iteration(s) — gate-error" in done.lines
    assert "  gate:   forge state" in done.lines
    assert done.lines[-1] == "escalate: a human should review before continuing"


def test_the_timeout_flag_beats_an_executor_definition(repo: Repo) -> None:
    repo.write("executors/slow.toml", 'argv = ["sh", "-c", "sleep 30"]\ntimeout = "1h"\n')
    repo.write("forge.toml", '[run]\ngrace = "1s"\n')
    done = run(repo, "--change", "c", "--executor", "slow", "--yes", "--timeout", "1s")
    assert "  executor: timed out (the equivalent of exit 124)" in done.lines
