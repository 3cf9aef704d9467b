"""The shipped ``claude`` executor with the real Claude Code against a scripted Anthropic API.

The release proven here is the one ``executors/claude.toml`` pins (``[cli]
proven``, Claude Code 2.1.197): the real binary runs under the real ``forge
run`` and ``forge supervise``, with a scratch home and a fake key, and every
model call goes to a :class:`ScriptedServer` on 127.0.0.1 speaking the
Messages API (``orchestra._scripted._anthropic``). So the CLI's own tools
write the files and run the commands, its own hook runner calls Forge's
guard and Stop hook, its own retries meet the scripted 429s and 5xx, and its
own ``stream-json`` is what Forge's parser reads.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from orchestra._scripted import (
    Conversation,
    Failure,
    Reply,
    RunShell,
    Script,
    ScriptedServer,
    ToolCall,
    Usage,
    WriteFile,
)

from .agent_clis import cli_environment, events, finished, proven_version, tool_results
from .support import Completed, Repo

FAST = '[rate_limit]\nbackend = "memory"\ncalls = 1000\nwindow = "1m"\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run(repo: Repo, env: dict[str, str], *args: str) -> Completed:
    return repo.forge(
        "run",
        "--change",
        "c",
        "--executor",
        "claude",
        "--prompt",
        "do the task",
        "--yes",
        *args,
        env=env,
    )


def policy(repo: Repo, text: str) -> None:
    repo.write("forge.toml", FAST + text)
    repo.commit("policy")


def test_the_proven_release_is_the_one_installed() -> None:
    assert proven_version("claude") == "2.1.197"


def test_edit_and_done_at_the_default_level(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "test -f hello.txt"\n')
    script = Script.of(
        Reply("Writing it.", calls=(WriteFile("hello.txt", "hello\n"),)),
        Reply("Written.\nFORGE_DONE"),
    )
    with cli_environment("claude", script, home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    assert (repo.root / "hello.txt").read_text() == "hello\n"
    [event] = finished(repo)
    assert event["done"] is True
    assert event["tool_calls"] == 1
    assert server.problems == []


def test_the_guard_denies_a_protected_path_in_words_for_the_model(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\nmax_iterations = 1\n')
    toml = str(repo.root / "forge.toml")
    script = Script.of(
        Reply("Reading.", calls=(ToolCall("Read", {"file_path": toml}),)),
        Reply("Tidying.", calls=(RunShell("rm forge.toml"), WriteFile("forge.toml", "x = 1\n"))),
        Reply("Left it alone.\nFORGE_DONE"),
    )
    with cli_environment("claude", script, home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert (repo.root / "forge.toml").read_text().startswith("[rate_limit]")
    *_, shell, write = tool_results(server)
    assert shell.startswith("Refused by Forge's guard: this call would harm a protected path")
    assert 'rm would delete "forge.toml"' in shell
    for words in ("hook error", "orchestra", "python"):
        assert words not in shell
    # The Write never reaches the guard: Claude Code's own deny rule refuses it
    # first (tests/test_real_claude_deny_e2e.py).
    assert "denied by your permission settings" in write
    [event] = finished(repo)
    assert event["guard_refusals"] == 1  # a protection signal ...
    assert event["permission_denials"] == 0  # ... not the agent short of a permission
    assert server.problems == []


def counting_verify(repo: Repo) -> tuple[Path, str]:
    """A verify command that appends a line to a file outside the tree at each run."""
    counter = repo.root.parent / "verify-runs"
    return counter, f'[verify]\ncommand = "echo run >> {counter}"\n'


def runs_of(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def two_iterations() -> Script:
    return Script(
        (
            Conversation((Reply("First.", calls=(WriteFile("one.txt", "1\n"),)), Reply("Next."))),
            Conversation(
                (Reply("Second.", calls=(WriteFile("two.txt", "2\n"),)), Reply("FORGE_DONE"))
            ),
        )
    )


# The Stop hook's verdict is the iteration's only outside the sandbox: inside
# it the change's state is read-only, the hook records nothing and the loop
# verifies once more (tests/test_sandbox_e2e.py).
HOOK_RECORDS = '\n[sandbox]\nmode = "off"\n'


def test_forge_run_verifies_once_per_iteration(repo: Repo, home: Path) -> None:
    counter, verify = counting_verify(repo)
    policy(repo, verify + HOOK_RECORDS + "\n[run]\nmax_iterations = 2\n")
    with cli_environment("claude", two_iterations(), home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 2 iteration(s)"
    assert runs_of(counter) == 2  # the Stop hook's, at each iteration's end
    assert server.problems == []


def test_forge_supervise_verifies_once_per_iteration(repo: Repo, home: Path) -> None:
    counter, verify = counting_verify(repo)
    policy(
        repo,
        verify + HOOK_RECORDS + '\n[run]\nmax_iterations = 2\nprompt = "do the task"\n\n'
        '[[loop]]\nchange = "c"\nexecutor = "claude"\n',
    )
    with cli_environment("claude", two_iterations(), home) as (server, env):
        done = repo.forge("supervise", env=env)
    assert done.code == 0, done
    assert runs_of(counter) == 2  # the hook's verdict is the iteration's: no second verify
    verdicts = [(e["verify"], e["verify_by_hook"]) for e in finished(repo)]
    assert verdicts == [("PASS", True), ("PASS", True)]
    recorded = [e for e in events(repo) if e["event"] == "verify"]
    assert len(recorded) == 2
    assert server.problems == []


def test_the_stop_hook_verifies_with_the_loops_own_verify(repo: Repo, home: Path) -> None:
    # The file's [verify] is not the loop's: its [loop.verify] override is the
    # one the Stop hook must run, since the hook's verdict is the iteration's.
    file_counter, file_verify = counting_verify(repo)
    loop_counter = repo.root.parent / "loop-verify-runs"
    policy(
        repo,
        file_verify + HOOK_RECORDS + '\n[run]\nmax_iterations = 2\nprompt = "do the task"\n\n'
        '[[loop]]\nchange = "c"\nexecutor = "claude"\n'
        f'[loop.verify]\ncommand = "echo loop >> {loop_counter}"\n',
    )
    with cli_environment("claude", two_iterations(), home) as (server, env):
        done = repo.forge("supervise", env=env)
    assert done.code == 0, done
    assert runs_of(loop_counter) == 2
    assert runs_of(file_counter) == 0
    assert [e["verify_by_hook"] for e in finished(repo)] == [True, True]
    assert server.problems == []


@pytest.mark.parametrize(
    "command", [("run", "--change", "c", "--executor", "claude"), ("supervise", "--dry-run")]
)
def test_full_permission_is_refused_at_plan_time_for_root(
    repo: Repo, home: Path, command: tuple[str, ...]
) -> None:
    loop = '[[loop]]\nchange = "c"\nexecutor = "claude"\n' if command[0] == "supervise" else ""
    policy(repo, f'[run]\npermission = "full"\n\n{loop}')
    with cli_environment("claude", Script(()), home) as (server, env):
        env.pop("IS_SANDBOX", None)
        done = repo.forge(*command, env=env)
        # What the CLI itself does as root: exits 1 before any model call.
        direct = subprocess.run(
            ["claude", "-p", "hi", "--permission-mode", "bypassPermissions"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=repo.root,
        )
    assert server.exchanges == []  # neither Forge's plan nor the CLI called the model
    if os.geteuid() != 0:  # the level is for a user other than root: planned as usual
        assert done.code == 0, done
        assert "permission: full (--permission-mode bypassPermissions)" in done.out
        return
    assert done.code == 2, done
    assert "cannot run at level 'full' as root" in done.err
    assert "run Forge as a user other than root" in done.err
    assert "IS_SANDBOX=1" in done.err
    assert "Traceback" not in done.err
    assert direct.returncode == 1
    assert "cannot be used with root/sudo privileges" in direct.stderr


def refused_then(failure: Failure) -> Script:
    return Script.of(Reply("Done.\nFORGE_DONE", failures=(failure,)))


def ending(done: Completed) -> str:
    """The contract line of how ``forge run`` ended."""
    [line] = [line for line in done.lines if line.startswith("run: ")]
    return line


def served(server: ScriptedServer) -> list[tuple[str, int]]:
    return [(r.served, r.status) for r in server.main_exchanges()]


@pytest.mark.parametrize(
    "failure",
    [
        Failure(429, "Rate limited", headers={"retry-after": "0"}),
        Failure(529, "Overloaded"),
    ],
    ids=["429-retry-after", "529-overloaded"],
)
def test_a_refusal_the_cli_retried_past_is_no_limit(
    repo: Repo, home: Path, failure: Failure
) -> None:
    policy(repo, '[verify]\ncommand = "true"\n')
    with cli_environment("claude", refused_then(failure), home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    assert served(server) == [("failure", failure.status), ("reply", 200)]
    [event] = finished(repo)
    assert event["rate_limit"] is None
    assert event["judged"] is True
    assert server.problems == []


def test_a_persistent_429_stops_with_the_reset_the_cli_waited_for(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\nmax_limit_wait = "1s"\n')
    refusal = Failure(429, "Rate limited", headers={"retry-after": "3"}, times=2)
    with cli_environment("claude", refused_then(refusal), home) as (server, env):
        env["CLAUDE_CODE_MAX_RETRIES"] = "1"  # one retry, after the server's 3 s
        started = time.time()
        done = run(repo, env)
        ended = time.time()
    assert done.code == 1, done
    assert ending(done) == "run: STOPPED after 0 iteration(s) — provider-limit", done
    assert "  detail: the provider refused the call until " in done.out
    assert served(server) == [("failure", 429), ("failure", 429)]
    [event] = finished(repo)
    assert event["judged"] is False
    limit = event["rate_limit"]
    assert limit["status"] == "rejected"
    # The CLI's retry delay (the server's retry-after), counted from its last refusal.
    assert started + 3 <= limit["resets_at"] <= ended + 3
    assert server.problems == []


def test_a_usage_limit_message_names_its_reset(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\nmax_limit_wait = "1s"\n')
    resets = int(time.time()) + 3600
    # A retry-after past a minute: the CLI does not retry at all.
    refusal = Failure(
        429, f"Claude AI usage limit reached|{resets}", headers={"retry-after": "3600"}
    )
    with cli_environment("claude", refused_then(refusal), home) as (server, env):
        done = run(repo, env)
    assert done.code == 1, done
    assert ending(done) == "run: STOPPED after 0 iteration(s) — provider-limit", done
    [event] = finished(repo)
    assert event["rate_limit"]["resets_at"] == resets
    assert event["judged"] is False
    assert served(server) == [("failure", 429)]
    assert server.problems == []


def test_persistent_529_and_500(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\nmax_limit_wait = "1s"\nmax_iterations = 1\n')
    script = Script(
        (
            Conversation(
                (Reply("x", failures=(Failure(529, "Overloaded", times=3),)),), match="busy"
            ),
            Conversation(
                (Reply("x", failures=(Failure(500, "Internal", times=3),)),), match="broken"
            ),
        )
    )
    with cli_environment("claude", script, home) as (server, env):
        busy = repo.forge(
            "run", "--change", "busy", "--executor", "claude", "--prompt", "busy", "--yes", env=env
        )
        broken = repo.forge(
            "run",
            "--change",
            "broken",
            "--executor",
            "claude",
            "--prompt",
            "broken",
            "--yes",
            env=env,
        )
    # Overloaded past the CLI's retries: a provider limit, waited out, not a failure.
    assert busy.code == 1, busy
    assert ending(busy) == "run: STOPPED after 0 iteration(s) — provider-limit"
    [refused] = finished(repo, "busy")
    assert refused["rate_limit"]["status"] == "overloaded"
    assert refused["judged"] is False
    # A 500 past the CLI's retries: the iteration failed, and says why.
    assert broken.code == 1, broken
    assert ending(broken) == "run: STOPPED after 1 iteration(s) — executor-failed"
    [failed] = finished(repo, "broken")
    assert failed["error"].startswith("API Error: 500 Internal")
    assert failed["rate_limit"] is None
    assert failed["judged"] is True
    # Each: the first call and the CLI's two retries (CLAUDE_CODE_MAX_RETRIES=2).
    assert [r.status for r in server.main_exchanges()] == [529] * 3 + [500] * 3
    assert server.problems == []


def test_bash_runs_the_tests_at_the_default_level(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n')
    tests = "python3 -c 'print(\"3 passed\")' && sh -c 'make --version >/dev/null; echo ran'"
    script = Script.of(Reply("Testing.", calls=(RunShell(tests),)), Reply("Green.\nFORGE_DONE"))
    with cli_environment("claude", script, home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert tool_results(server) == ["3 passed\nran"]  # refused under "edit" (see edit below)
    [event] = finished(repo)
    assert event["permission_denials"] == 0
    assert event["tool_calls"] == 1
    assert server.problems == []


def test_the_edit_level_refuses_programs_but_not_file_commands(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\npermission = "edit"\n')
    commands = ("echo x > made.txt", "mkdir d && touch d/f", "python3 -c 'print(1)'", "make")
    script = Script.of(
        Reply("Trying.", calls=tuple(RunShell(c) for c in commands)), Reply("FORGE_DONE")
    )
    with cli_environment("claude", script, home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert (repo.root / "made.txt").exists()
    assert (repo.root / "d" / "f").exists()
    answers = tool_results(server)
    assert answers.count("This command requires approval") == 2
    [event] = finished(repo)
    assert event["permission_denials"] == 2
    assert server.problems == []


def test_the_stop_hooks_refusal_reaches_the_model(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "test -f fixed.txt"\nmax_failures = 3\n')
    script = Script.of(
        Reply("All done.\nFORGE_DONE"),
        Reply("Fixing.", calls=(WriteFile("fixed.txt", "ok\n"),)),
        Reply("Fixed.\nFORGE_DONE"),
    )
    with cli_environment("claude", script, home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert ending(done) == "run: DONE after 1 iteration(s)"
    [feedback, *_] = tool_results(server)
    assert feedback.startswith("Stop hook feedback:\nforge verify: Verdict: FAIL.")
    assert "test -f fixed.txt" in feedback
    # In the sandbox the hook records neither verdict: the loop verified the
    # iteration's final tree itself.
    assert [e for e in events(repo) if e["event"] == "verify"] == []
    [event] = finished(repo)
    assert (event["verify"], event["verify_by_hook"]) == ("PASS", False)
    assert server.problems == []


def test_tokens_and_the_clis_own_cost_reach_the_timeline_and_spend(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n')
    usage = Usage(input=1000, output=200, cached=500)
    script = Script.of(
        Reply("Writing.", calls=(WriteFile("a.txt", "a\n"),), usage=usage),
        Reply("FORGE_DONE", usage=usage),
    )
    with cli_environment("claude", script, home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    [event] = finished(repo)
    assert event["tokens"] == 2 * (1000 + 500 + 200)  # modelUsage: input, cache reads, output
    assert event["tokens_cached"] == 2 * 500
    # claude-opus-4-8 at $5 input, $0.50 cache reads, $25 output per million tokens.
    cost = 2 * (1000 * 5 + 500 * 0.5 + 200 * 25) / 1e6
    assert event["cost_usd"] == pytest.approx(cost, abs=1e-9)
    assert event["cost_estimated"] is False
    spend = yaml.safe_load((repo.change_dir("c") / "spend.yaml").read_text())
    assert spend["cost_usd"] == pytest.approx(cost, abs=1e-9)
    assert spend["tokens"] == event["tokens"]
    assert server.problems == []


def test_a_continued_session_carries_the_first_iterations_history(repo: Repo, home: Path) -> None:
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\nsession = "continue"\nmax_iterations = 2\n')
    with cli_environment("claude", two_iterations(), home) as (server, env):
        done = run(repo, env)
    assert done.code == 0, done
    assert ending(done) == "run: DONE after 2 iteration(s)"
    first, second = finished(repo)
    assert first["session"] == second["session"]
    resumed = next(r.exchange for r in server.main_exchanges() if r.conversation == 1)
    assert resumed is not None
    assert resumed.answers == 2  # the first iteration's two answers, then the new prompt
    assert resumed.new_prompt
    assert "First." in resumed.messages[1].texts
    assert server.problems == []


def test_two_supervised_loops_in_worktrees(repo: Repo, home: Path) -> None:
    loops = "".join(
        f'\n[[loop]]\nchange = "{name}"\nexecutor = "claude"\nworktree = true\n'
        f'prompt = "task {name}"\n'
        for name in ("left", "right")
    )
    policy(repo, '[verify]\ncommand = "true"\n\n[run]\nmax_iterations = 2\n' + loops)
    script = Script(
        tuple(
            Conversation(
                (
                    Reply("On it.", calls=(WriteFile(f"{name}.txt", f"{name}\n"),)),
                    Reply("FORGE_DONE"),
                ),
                match=f"task {name}",
            )
            for name in ("left", "right")
        )
    )
    with cli_environment("claude", script, home) as (server, env):
        done = repo.forge("supervise", env=env)
    assert done.code == 0, done
    for name in ("left", "right"):
        worktree = repo.root / ".forge" / "worktrees" / name
        assert (worktree / f"{name}.txt").read_text() == f"{name}\n"
        assert not (repo.root / f"{name}.txt").exists()
        [event] = finished(repo, name)
        assert event["done"] is True
        # Sandboxed: the Stop hook's verdict is not recorded, the loop verifies itself.
        assert event["verify_by_hook"] is False
        assert event["verify"] == "PASS"
    assert server.problems == []
