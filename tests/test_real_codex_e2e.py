"""The shipped ``codex`` executor, end to end: the real Codex CLI against a scripted server.

The release proven is the one ``executors/codex.toml`` pins (``[cli]
proven``, 0.171.0): ``tests/agent_clis.py`` runs that binary, pointed by
``orchestra/_scripted/_openai.py`` at a scripted OpenAI Responses server on
127.0.0.1 (a scratch ``CODEX_HOME``, a fake key). Each test drives the real
``forge run`` or ``forge supervise`` with ``--executor codex`` /
``executor = "codex"``, so the definition's argv, permission levels, hooks
and resume arguments, the parser and the engine all meet the real CLI, and
asserts what a user sees: the exit code, the contract lines, the timeline,
``spend.yaml`` — and that the server met no request its script did not expect.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestra._scripted import (
    Conversation,
    Failure,
    Reply,
    RunShell,
    Script,
    ScriptedServer,
    Usage,
    WriteFile,
)

from .agent_clis import cli_environment, events, finished
from .support import Completed, Repo

PROMPT = "add hello.txt; print FORGE_DONE when none is left"
DONE = Reply(text="Finished.\nFORGE_DONE")
# The model pinned Codex 0.171.0 sends when its config names none.
DEFAULT_MODEL = "gpt-6.2-sol"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "codex-home"


def policy(repo: Repo, extra: str = "", *, run: str = "", verify: str = "true") -> None:
    """A quick forge.toml: tiny verify, short timeouts, a generous rate limit."""
    repo.write(
        "forge.toml",
        f'[verify]\ncommand = "{verify}"\nspecs = []\n\n'
        '[run]\nmax_iterations = 2\ntimeout = "60s"\ngrace = "2s"\nmax_limit_wait = "1s"\n'
        f"{run}\n"
        '[rate_limit]\ncalls = 1000\nwindow = "1h"\nbackend = "memory"\n' + extra,
    )
    repo.commit("policy")


def forge_run(repo: Repo, env: dict[str, str], *args: str) -> Completed:
    return repo.forge(
        "run", "--change", "c", "--executor", "codex", "--prompt", PROMPT, "--yes", *args, env=env
    )


def stopped(repo: Repo, change: str = "c") -> dict[str, Any]:
    [event] = [e for e in events(repo, change) if e["event"] == "run.stopped"]
    return event


def served(server: ScriptedServer) -> list[tuple[str, int]]:
    return [(r.served, r.status) for r in server.main_exchanges()]


def test_codex_edits_and_is_done(repo: Repo, home: Path) -> None:
    policy(repo)
    script = Script.of(Reply(calls=(WriteFile("hello.txt", "hello\n"),)), DONE)
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    assert (repo.root / "hello.txt").read_text() == "hello\n"
    [event] = finished(repo)
    assert event["done"] is True
    assert event["tool_calls"] == 1  # Codex's file_change item
    assert event["session"]  # the thread id
    assert served(server) == [("reply", 200), ("reply", 200)]
    assert server.problems == []


def test_a_shell_command_at_the_default_level_runs_the_tests(repo: Repo, home: Path) -> None:
    policy(repo)
    repo.write("run_tests.sh", 'test -f src.txt && echo "1 passed" > .tested && echo "1 passed"\n')
    repo.write("src.txt", "code\n")
    repo.commit("tests")
    script = Script.of(Reply(calls=(RunShell("sh run_tests.sh"),)), DONE)
    with cli_environment("codex", script, home) as (server, env):
        plan = repo.forge("run", "--change", "c", "--executor", "codex", env=env)
        done = forge_run(repo, env)
    assert "  permission: edit (--sandbox workspace-write)" in plan.lines
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    # The command ran in Codex's workspace-write sandbox and could write the tree.
    assert (repo.root / ".tested").read_text() == "1 passed\n"
    answered = server.main_exchanges()[1].exchange
    assert answered is not None
    [result] = answered.tool_results
    assert "1 passed" in result
    assert "exit code: 0" in result
    metadata = json.loads(server.main_exchanges()[0].headers["x-codex-turn-metadata"])
    assert metadata["sandbox_mode"] == "workspace-write"
    assert finished(repo)[0]["tool_calls"] == 1  # the command_execution item
    assert server.problems == []


@pytest.mark.parametrize("inside_claude", [False, True], ids=["plain", "from-claude-code"])
def test_the_guard_refuses_protected_paths_through_codex_pre_tool_use_hook(
    repo: Repo, home: Path, inside_claude: bool
) -> None:
    policy(repo)
    repo.write("AGENTS.md", "# rules\n")
    repo.commit("agents")
    policy_text = (repo.root / "forge.toml").read_text()
    script = Script.of(
        Reply(calls=(WriteFile("forge.toml", "[run]\nmax_iterations = 50\n"),)),
        Reply(calls=(RunShell("rm -f AGENTS.md"),)),
        Reply(calls=(WriteFile("notes.txt", "allowed\n"),)),
        DONE,
    )
    with cli_environment("codex", script, home) as (server, env):
        if inside_claude:
            # Forge started from a Claude Code session: its project dir must not
            # point the codex agent's guard at another project.
            env["CLAUDE_PROJECT_DIR"] = str(home / "elsewhere")
        plan = repo.forge(
            "run", "--change", "c", "--executor", "codex", "--prompt", PROMPT, env=env
        )
        done = forge_run(repo, env)
    assert (
        f"  executor: codex: codex exec --json {shlex.quote(PROMPT)} '<forge hooks>' "
        "--sandbox workspace-write" in plan.lines
    )
    assert done.code == 0, done
    assert (repo.root / "forge.toml").read_text() == policy_text
    assert (repo.root / "AGENTS.md").exists()
    assert (repo.root / "notes.txt").read_text() == "allowed\n"
    results = [r.exchange.tool_results for r in server.main_exchanges()[1:3] if r.exchange]
    [[patch_refused], [rm_refused]] = results
    assert "Command blocked by PreToolUse hook" in patch_refused
    assert "forge hook pre-tool-use: refused apply_patch" in patch_refused
    assert "forge.toml" in patch_refused
    assert "forge guard: refused" in rm_refused
    assert "AGENTS.md" in rm_refused
    assert server.problems == []


def test_a_429_with_rate_limit_headers_is_retried_by_codex_and_recovered(
    repo: Repo, home: Path
) -> None:
    policy(repo)
    refused = Failure(
        429,
        "Rate limit reached for requests",
        headers={
            "retry-after": "1",
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1s",
        },
    )
    script = Script.of(Reply(text="Finished.\nFORGE_DONE", failures=(refused,)))
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    [event] = finished(repo)
    # Codex said "Reconnecting... 1/2 (… 429 Too Many Requests)", then the turn completed.
    assert event["error"] is None
    assert event["rate_limit"] is None
    assert event["judged"] is True
    assert served(server) == [("failure", 429), ("reply", 200)]
    assert server.problems == []


def test_a_persistent_429_stops_forge_run_with_provider_limit(repo: Repo, home: Path) -> None:
    policy(repo)
    refused = Failure(429, "Rate limit reached for requests", headers={"retry-after": "1"}, times=3)
    script = Script.of(Reply(text="never served", failures=(refused,)))
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 1, done
    assert stopped(repo)["reason"] == "provider-limit"
    [event] = finished(repo)
    assert event["judged"] is False  # no iteration used, no breaker counted
    assert event["rate_limit"]["status"] == "rejected"
    assert "429 Too Many Requests" in event["error"]
    # Three streams (stream_max_retries = 2) of one request each, no more.
    assert served(server) == [("failure", 429)] * 3
    assert server.problems == []


def usage_limit(resets_at: float) -> Failure:
    """The body of ChatGPT's usage-limit 429, which Codex formats into "try again at …"."""
    error = {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "plan_type": "plus",
        "resets_at": int(resets_at),
        "resets_in_seconds": max(0, int(resets_at - time.time())),
    }
    return Failure(429, body={"error": error})


def test_a_usage_limit_resetting_within_the_current_minute_is_not_read_as_tomorrow(
    repo: Repo, home: Path
) -> None:
    # Codex words a reset later today as a clock time without seconds
    # ("… or try again at 1:22 AM."): one inside the current minute is due by
    # the minute's end, not at that time tomorrow.
    policy(repo)
    now = time.time()
    last_second_of_this_minute = now - now % 60 + 59
    limit = usage_limit(max(now, last_second_of_this_minute))
    script = Script.of(Reply(text="never served", failures=(limit,)))
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env, "--set", "run.max_limit_wait=0s")
    assert done.code == 1, done
    assert stopped(repo)["reason"] == "provider-limit"
    [event] = finished(repo)
    assert "try again at" in event["error"]
    assert event["rate_limit"]["status"] == "rejected"
    assert event["judged"] is False
    assert 0 <= event["rate_limit"]["resets_at"] - now <= 61  # not about 24 hours away
    assert served(server) == [("failure", 429)]  # Codex does not retry a usage limit
    assert server.problems == []


def test_a_usage_limit_resetting_tomorrow_stops_forge_run_naming_the_reset(
    repo: Repo, home: Path
) -> None:
    policy(repo)
    resets_at = time.time() + 26 * 3600
    script = Script.of(Reply(text="never served", failures=(usage_limit(resets_at),)))
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 1, done
    assert stopped(repo)["reason"] == "provider-limit"
    [event] = finished(repo)
    # "Try again at Dec 3rd, 2026 3:10 AM.": to the minute.
    assert 0 <= resets_at - event["rate_limit"]["resets_at"] < 60
    assert server.problems == []


def test_tokens_cached_apart_and_the_default_models_estimated_cost(repo: Repo, home: Path) -> None:
    policy(repo)
    script = Script.of(
        Reply(calls=(RunShell("true"),), usage=Usage(input=1000, output=200, cached=3000)),
        Reply(text="Finished.\nFORGE_DONE", usage=Usage(input=500, output=100, cached=4000)),
    )
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 0, done
    # With no model in its config Codex asks for its default, which the definition prices.
    assert {r.exchange.model for r in server.main_exchanges() if r.exchange} == {DEFAULT_MODEL}
    [event] = finished(repo)
    assert event["tokens"] == (1000 + 3000 + 200) + (500 + 4000 + 100)
    assert event["tokens_cached"] == 3000 + 4000
    # gpt-6.2-sol: $2 input, $0.10 cached input, $10 output per million tokens.
    cost = ((1000 + 500) * 2.0 + (3000 + 4000) * 0.10 + (200 + 100) * 10.0) / 1e6
    assert event["cost_usd"] == pytest.approx(cost, abs=1e-6)
    assert event["cost_estimated"] is True
    assert event["cost_note"] is None
    spend = yaml.safe_load((repo.change_dir("c") / "spend.yaml").read_text())
    assert spend["tokens"] == event["tokens"]
    assert spend["cost_usd"] == pytest.approx(cost, abs=1e-6)
    assert spend["cost_estimated"] is True
    assert server.problems == []


def test_5xx_that_codex_recovers_from_is_no_error(repo: Repo, home: Path) -> None:
    policy(repo)
    broken = Failure(500, "The server had an error while processing your request", times=2)
    script = Script.of(Reply(text="Finished.\nFORGE_DONE", failures=(broken,)))
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    [event] = finished(repo)
    assert event["error"] is None
    assert served(server) == [("failure", 500), ("failure", 500), ("reply", 200)]
    assert server.problems == []


def test_a_persistent_5xx_is_the_providers_outage_waited_out(repo: Repo, home: Path) -> None:
    policy(repo)
    broken = Failure(503, "upstream unavailable", times=9)
    script = Script.of(Reply(text="never served", failures=(broken,)))
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 1, done
    # Codex retried (Reconnecting... 1/2, 2/2), then gave up with the turn: the
    # provider's outage, waited out like an overload (no iteration used, no
    # breaker counts it); forge run stops once the wait passes max_limit_wait.
    assert stopped(repo)["reason"] == "provider-limit"
    assert "refused: 1 call(s) refused by a provider limit, not counted" in done.lines
    [event] = finished(repo)
    assert event["exit"] == 1
    assert event["error"].startswith(
        "unexpected status 503 Service Unavailable: upstream unavailable"
    )
    assert event["rate_limit"]["status"] == "overloaded"
    assert event["judged"] is False
    # Three streams of three requests each (stream_max_retries, request_max_retries = 2).
    assert served(server) == [("failure", 503)] * 9
    assert server.problems == []


def test_a_continued_session_resumes_the_codex_thread_with_its_history(
    repo: Repo, home: Path
) -> None:
    policy(repo, run='session = "continue"\n')
    script = Script(
        (
            Conversation((Reply(text="Halfway there."),)),
            # The resumed thread: the same conversation, a new prompt after it.
            Conversation((Reply(calls=(WriteFile("second.txt", "resumed\n"),)), DONE)),
        )
    )
    with cli_environment("codex", script, home) as (server, env):
        done = forge_run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 2 iteration(s)"
    first, second = finished(repo)
    assert first["session"] == second["session"]
    resumed = server.main_exchanges()[1]
    assert resumed.exchange is not None
    texts = [(m.role, m.texts) for m in resumed.exchange.messages]
    assert texts == [("user", (PROMPT,)), ("assistant", ("Halfway there.",)), ("user", (PROMPT,))]
    metadata = json.loads(resumed.headers["x-codex-turn-metadata"])
    assert metadata["thread_id"] == first["session"]
    # The resumed thread keeps the sandbox level (-c sandbox_mode=…): it may write.
    assert metadata["sandbox_mode"] == "workspace-write"
    assert (repo.root / "second.txt").read_text() == "resumed\n"
    assert server.problems == []


def test_two_supervised_codex_loops_in_worktrees_verify_once_per_iteration(
    repo: Repo, home: Path
) -> None:
    loops = "".join(
        f'\n[[loop]]\nchange = "{name}"\nexecutor = "codex"\nworktree = true\n'
        f'prompt = "task {name}: add work.txt; print FORGE_DONE"\n'
        for name in ("a", "b")
    )
    policy(
        repo,
        loops + '\n[breaker]\ncooldown = "1s"\ncooldown_max = "2s"\n',
        verify="test -f work.txt",
    )
    # Each loop: an iteration that writes work.txt, then one that is done.
    script = Script(
        tuple(
            conversation
            for name in ("a", "b")
            for conversation in (
                Conversation(
                    (Reply(calls=(WriteFile("work.txt", f"{name}\n"),)), Reply(text="Written.")),
                    match=f"task {name}:",
                ),
                Conversation((DONE,), match=f"task {name}:"),
            )
        )
    )
    with cli_environment("codex", script, home) as (server, env):
        done = repo.forge("supervise", env=env)
    assert done.code == 0, done
    assert not (repo.root / "work.txt").exists()
    for name in ("a", "b"):
        tree = repo.root / ".forge" / "worktrees" / name
        assert (tree / "work.txt").read_text() == f"{name}\n"
        first, second = finished(repo, name)
        assert (first["done"], second["done"]) == (False, True)
        assert (first["verify"], second["verify"]) == ("PASS", "PASS")
        verdicts = [e for e in events(repo, name) if e["event"].startswith("verify")]
        assert [e["iteration"] for e in verdicts] == [1, 2]
        assert stopped(repo, name)["reason"] == "done"
    assert server.problems == []
