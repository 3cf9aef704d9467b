"""The shipped ``gemini`` executor, end to end: the real Gemini CLI against a scripted server.

Proven with Gemini CLI 0.61.0 (``@google/gemini-cli``, the release
``executors/gemini.toml`` pins in ``[cli] proven``): each test runs the real
``forge run`` or ``forge supervise`` with ``--executor gemini`` /
``executor = "gemini"`` in a fresh git repository, the real ``gemini`` binary
on ``PATH``, pointed at a :class:`ScriptedServer` speaking the Gemini API on
127.0.0.1 (a fake key, a scratch home; see ``orchestra/_scripted/_gemini.py``).
Every test checks what a user sees (the exit code, the contract lines, the
timeline, ``spend.yaml``) and that the server met no request it had no
scripted answer for.

The CLI waits 5 s before each retry of a 429 or a 5xx (the settings allow one
retry): those tests take that long, the others about as long as the CLI
starts (2-4 s).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
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
from orchestra._scripted._gemini import quota_error

from .agent_clis import cli_environment, events, finished, proven_version
from .support import Completed, Repo

FLASH = "gemini-3.8-flash"  # where the release's router sends a simple task
DONE = "FORGE_DONE"
POLICY = """\
[verify]
command = "true"
specs = []
tests = []

[run]
max_iterations = {iterations}
timeout = "2m"
grace = "2s"
max_limit_wait = "1s"
{run}
[rate_limit]
calls = 1000
window = "1m"
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def policy(repo: Repo, *, iterations: int = 1, run: str = "", extra: str = "") -> None:
    repo.write("forge.toml", POLICY.format(iterations=iterations, run=run) + extra)
    repo.commit("policy")


def run(repo: Repo, env: dict[str, str], *args: str) -> Completed:
    return repo.forge(
        "run", "--change", "c", "--executor", "gemini", "--prompt", "work", "--yes", *args, env=env
    )


def tool_results(server: ScriptedServer, request: int) -> tuple[str, ...]:
    """What the CLI's tools answered, as the ``request``-th request of its loop carried it."""
    exchange = server.main_exchanges()[request].exchange
    assert exchange is not None
    return exchange.tool_results


def spend(repo: Repo, change: str = "c") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((repo.change_dir(change) / "spend.yaml").read_text())
    return data


Start = Callable[[Script], tuple[ScriptedServer, dict[str, str]]]


@pytest.fixture
def gemini(home: Path) -> Iterator[Start]:
    """``gemini(script)``: a server playing ``script``, and the environment for forge."""
    with contextlib.ExitStack() as stack:

        def start(script: Script) -> tuple[ScriptedServer, dict[str, str]]:
            return stack.enter_context(cli_environment("gemini", script, home))

        yield start


def test_the_proven_release_is_the_one_installed(gemini: Start) -> None:
    assert proven_version("gemini") == "0.61.0"


def test_edit_and_done_in_a_fresh_repository(repo: Repo, gemini: Start) -> None:
    policy(repo)
    server, env = gemini(
        Script.of(
            Reply("I add the total.", calls=(WriteFile("total.txt", "42\n"),), model=FLASH),
            Reply(f"The total is in.\n{DONE}", model=FLASH),
        )
    )
    done = run(repo, env)
    assert done.code == 0, done
    assert "run: DONE after 1 iteration(s)" in done.lines, done
    assert (repo.root / "total.txt").read_text() == "42\n"
    [event] = finished(repo)
    assert event["done"] is True
    assert event["tool_calls"] == 1
    assert server.problems == []
    # The CLI's write_file tool answered the model.
    assert "Successfully created" in tool_results(server, 1)[0]


def test_a_shell_command_runs_at_the_default_level(repo: Repo, gemini: Start) -> None:
    policy(repo)
    repo.write("check.sh", "echo checked > checked.txt\necho the-tests-ran\n")
    repo.commit("a test script")
    server, env = gemini(
        Script.of(
            Reply("Running the tests.", calls=(RunShell("sh check.sh"),), model=FLASH),
            Reply(f"Tests pass.\n{DONE}", model=FLASH),
        )
    )
    done = run(repo, env)
    assert done.code == 0, done
    assert "run: DONE after 1 iteration(s)" in done.lines, done
    assert (repo.root / "checked.txt").read_text() == "checked\n"
    [result] = tool_results(server, 1)
    assert "the-tests-ran" in result
    assert server.problems == []


def test_the_edit_level_offers_no_shell(repo: Repo, gemini: Start) -> None:
    policy(repo, run='permission = "edit"\n')
    server, env = gemini(
        Script.of(
            Reply("Running the tests.", calls=(RunShell("touch ran.txt"),), model=FLASH),
            Reply(f"I could not.\n{DONE}", model=FLASH),
        )
    )
    done = run(repo, env)
    assert done.code == 0, done
    first = server.main_exchanges()[0].exchange
    assert first is not None
    assert "write_file" in first.tools
    assert "run_shell_command" not in first.tools
    [result] = tool_results(server, 1)
    assert 'Tool "run_shell_command" not found' in result
    assert not (repo.root / "ran.txt").exists()
    assert server.problems == []


def test_the_guard_refuses_deleting_a_protected_file(repo: Repo, gemini: Start) -> None:
    policy(repo)
    server, env = gemini(
        Script.of(
            Reply("Cleaning up.", calls=(RunShell("rm forge.toml"),), model=FLASH),
            Reply(f"Left it alone.\n{DONE}", model=FLASH),
        )
    )
    done = run(repo, env)
    assert (repo.root / "forge.toml").is_file()
    [result] = tool_results(server, 1)
    assert "forge guard: refused" in result
    assert "forge.toml" in result
    assert done.code == 0, done
    assert server.problems == []


def test_a_write_to_a_frozen_file_is_restored_after_the_iteration(
    repo: Repo, gemini: Start
) -> None:
    # The guard sees shell commands only, and the CLI's policy denies write_file
    # a protected path only as spelt (tests/test_real_gemini_deny_e2e.py): a
    # write by another spelling is judged after the iteration, by Forge's
    # integrity check, which restores the file. (In the sandbox the kernel
    # refuses the write itself: off, to test the check.)
    policy(repo, extra='[sandbox]\nmode = "off"\n')
    original = (repo.root / "forge.toml").read_text()
    server, env = gemini(
        Script.of(
            Reply(
                "Tuning the policy.",
                calls=(WriteFile("docs/../forge.toml", "broken\n"),),
                model=FLASH,
            ),
            Reply(f"Done.\n{DONE}", model=FLASH),
        )
    )
    done = run(repo, env)
    assert done.code == 1, done
    assert "run: STOPPED after 1 iteration(s) — gate-open" in done.lines, done
    assert "  gate:   integrity" in done.lines, done
    assert (repo.root / "forge.toml").read_text() == original
    assert len(events(repo, kind="protect.violation")) == 1
    assert server.problems == []


def test_a_503_the_cli_recovered_from_is_no_failure(repo: Repo, gemini: Start) -> None:
    policy(repo)
    overloaded = Failure(503, "The model is overloaded. Please try again later.")
    server, env = gemini(Script.of(Reply(f"Done.\n{DONE}", failures=(overloaded,), model=FLASH)))
    done = run(repo, env)
    assert done.code == 0, done
    assert "run: DONE after 1 iteration(s)" in done.lines, done
    [event] = finished(repo)
    assert event["error"] is None
    assert event["rate_limit"] is None
    assert [r.served for r in server.main_exchanges()] == ["failure", "reply"]
    assert server.problems == []


def test_a_persistent_503_is_an_overload_waited_out(repo: Repo, gemini: Start) -> None:
    policy(repo)
    overloaded = Failure(503, "The model is overloaded. Please try again later.", times=2)
    server, env = gemini(Script.of(Reply(f"Done.\n{DONE}", failures=(overloaded,), model=FLASH)))
    done = run(repo, env)
    assert done.code == 1, done
    assert "run: STOPPED after 0 iteration(s) — provider-limit" in done.lines, done
    assert "refused: 1 call(s) refused by a provider limit, not counted" in done.lines
    [event] = finished(repo)
    # Once its retry is spent the CLI exits with the API's 503: an overload,
    # not the agent's failure (no iteration used, no breaker counts it).
    assert event["error"] == "The model is overloaded. Please try again later."
    assert event["rate_limit"]["status"] == "overloaded"
    assert event["judged"] is False
    assert [r.served for r in server.main_exchanges()] == ["failure", "failure"]
    assert server.problems == []


def test_a_429_with_retry_info_then_recovered(repo: Repo, gemini: Start) -> None:
    policy(repo)
    slow_down = quota_error("Resource has been exhausted (e.g. check quota).", retry_delay="1s")
    server, env = gemini(Script.of(Reply(f"Done.\n{DONE}", failures=(slow_down,), model=FLASH)))
    done = run(repo, env)
    assert done.code == 0, done
    assert "run: DONE after 1 iteration(s)" in done.lines, done
    [event] = finished(repo)
    assert event["rate_limit"] is None
    assert [(r.served, r.status) for r in server.main_exchanges()] == [
        ("failure", 429),
        ("reply", 200),
    ]
    assert server.problems == []


def test_a_daily_quota_exhausted_stops_with_provider_limit(repo: Repo, gemini: Start) -> None:
    policy(repo)
    exhausted = quota_error(
        "Quota exceeded for metric: generate_content_requests_per_day",
        quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier",
    )
    server, env = gemini(Script.of(Reply(f"Done.\n{DONE}", failures=(exhausted,), model=FLASH)))
    done = run(repo, env)
    assert done.code == 1, done
    assert "run: STOPPED after 0 iteration(s) — provider-limit" in done.lines, done
    assert "refused: 1 call(s) refused by a provider limit, not counted" in done.lines
    [event] = finished(repo)
    # A per-day quota is terminal for the CLI: no retry, its own message.
    assert event["error"] == "You have exhausted your daily quota on this model."
    assert event["rate_limit"]["status"] == "rejected"
    assert event["rate_limit"]["kind"] == "daily"
    assert event["judged"] is False
    assert [r.served for r in server.main_exchanges()] == ["failure"]
    assert server.problems == []


def test_a_quota_to_retry_after_400s_names_the_reset(repo: Repo, gemini: Start) -> None:
    policy(repo)
    # A RetryInfo delay past the CLI's 300 s is terminal: "Suggested retry after 400s."
    later = quota_error("You exceeded your current quota.", retry_delay="400s")
    server, env = gemini(Script.of(Reply(f"Done.\n{DONE}", failures=(later,), model=FLASH)))
    before = time.time()
    done = run(repo, env)
    assert done.code == 1, done
    assert "run: STOPPED after 0 iteration(s) — provider-limit" in done.lines, done
    assert "refused: 1 call(s) refused by a provider limit, not counted" in done.lines
    [event] = finished(repo)
    assert event["error"] == "You exceeded your current quota.\nSuggested retry after 400s."
    limit = event["rate_limit"]
    assert limit["status"] == "rejected"
    assert before + 400 <= limit["resets_at"] <= time.time() + 400
    assert [r.served for r in server.main_exchanges()] == ["failure"]
    assert server.problems == []


def test_tokens_cached_apart_and_an_estimated_cost(repo: Repo, gemini: Start) -> None:
    policy(repo, extra="\n[budget]\nmax_cost_usd = 5.0\n")
    usage = Usage(input=1000, output=200, cached=400)
    server, env = gemini(Script.of(Reply(f"Done.\n{DONE}", usage=usage, model=FLASH)))
    done = run(repo, env)
    assert done.code == 0, done
    [event] = finished(repo)
    # Each model's total: the flash model's answer (1000 + 400 cached in, 200
    # out) and the router's classification on the flash-lite one (10 in, 1 out).
    assert event["tokens"] == 1400 + 200 + 11
    assert event["tokens_cached"] == 400
    flash = 1000 * 1.50 + 400 * 0.15 + 200 * 9.0
    router = 10 * 0.10 + 1 * 0.40
    assert event["cost_usd"] == pytest.approx(round((flash + router) / 1e6, 6))
    assert event["cost_estimated"] is True
    assert event["cost_note"] is None
    recorded = spend(repo)
    assert recorded["cost_usd"] > 0
    assert recorded["cost_estimated"] is True
    assert recorded["tokens"] == event["tokens"]
    assert server.problems == []


def test_session_continue_resumes_the_cli_session(repo: Repo, gemini: Start) -> None:
    policy(repo, iterations=2, run='session = "continue"\n')
    server, env = gemini(
        Script(
            (
                Conversation((Reply("Half of it is done.", model=FLASH),)),
                Conversation((Reply(f"The rest is done.\n{DONE}", model=FLASH),)),
            )
        )
    )
    done = run(repo, env)
    assert done.code == 0, done
    assert "run: DONE after 2 iteration(s)" in done.lines, done
    first, second = finished(repo)
    assert first["session"]
    assert second["session"] == first["session"]
    # The resumed call sent the first iteration's conversation, then the new prompt.
    resumed = server.main_exchanges()[-1].exchange
    assert resumed is not None
    assert "Half of it is done." in resumed.messages[1].texts
    assert resumed.answers == 1
    assert resumed.new_prompt
    assert server.problems == []


SUPERVISED = """\
[verify]
command = "echo verified >> {log}"
specs = []
tests = []

[run]
timeout = "2m"
grace = "2s"

[breaker]
cooldown = "1s"
cooldown_max = "2s"

[rate_limit]
calls = 1000
window = "1m"
"""


def loop(change: str, *, worktree: bool = False, iterations: int = 2) -> str:
    lines = ["[[loop]]", f'change = "{change}"', 'executor = "gemini"']
    lines += [f"max_iterations = {iterations}", f"worktree = {str(worktree).lower()}"]
    lines += ["[loop.run]", f'prompt = "work on {change}"']
    return "\n".join(lines) + "\n"


def test_supervise_verifies_once_per_iteration(repo: Repo, gemini: Start) -> None:
    log = repo.root.parent / "verify.log"
    repo.write("forge.toml", SUPERVISED.format(log=log) + loop("steps"))
    repo.commit("policy")
    first = (Reply("First step.", calls=(WriteFile("a.txt", "a\n"),)), Reply("Next."))
    second = (Reply("Second step.", calls=(WriteFile("b.txt", "b\n"),)), Reply(f"Done.\n{DONE}"))
    server, env = gemini(Script((Conversation(first), Conversation(second))))
    done = repo.forge("supervise", env=env)
    assert done.code == 0, done
    assert "steps: 1/2: exit 0, verify PASS" in done.lines, done
    assert "steps: 2/2: done, verify PASS" in done.lines, done
    assert [event["verify"] for event in finished(repo, "steps")] == ["PASS", "PASS"]
    # Forge's verify ran once after each iteration; the CLI ran none of its own.
    assert log.read_text().splitlines() == ["verified", "verified"]
    assert server.problems == []


def test_two_supervised_loops_in_worktrees(repo: Repo, gemini: Start) -> None:
    log = repo.root.parent / "verify.log"
    loops = loop("alpha", worktree=True, iterations=1) + loop("beta", worktree=True, iterations=1)
    repo.write("forge.toml", SUPERVISED.format(log=log) + loops)
    repo.commit("policy")
    script = Script(
        tuple(
            Conversation(
                (
                    Reply(f"Writing {name}.", calls=(WriteFile(f"{name}.txt", f"{name}\n"),)),
                    Reply(f"Done.\n{DONE}"),
                ),
                match=f"work on {name}",
            )
            for name in ("alpha", "beta")
        )
    )
    server, env = gemini(script)
    done = repo.forge("supervise", env=env)
    assert done.code == 0, done
    for name in ("alpha", "beta"):
        worktree = repo.root / ".forge" / "worktrees" / name
        assert (worktree / f"{name}.txt").read_text() == f"{name}\n"
        assert not (repo.root / f"{name}.txt").exists()
        assert any(line.startswith(name) and " done " in line for line in done.lines), done
        [event] = finished(repo, name)
        assert event["done"] is True
    assert server.problems == []
