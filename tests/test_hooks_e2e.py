"""The agent hooks end to end: ``forge guard``, ``forge hook pre-tool-use``, ``forge hook stop``.

Each is fed what Claude Code sends (the JSON on stdin, from the project's
folder) through the installed ``forge`` command, and answers as Claude Code
reads it: exit 0 allows, exit 2 refuses with the reason on stderr; a Stop
hook's decision is JSON on stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .support import FORGE, Completed, Repo, failing_policy, forge_env


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    repo.write("specs/cart.md", "# cart\n")
    repo.write("AGENTS.md", "be careful\n")
    repo.write("src/app.py", "print('hi')\n")
    repo.commit("protected content")
    return repo


def hook(repo: Repo, event: str, payload: dict[str, Any] | str, **env: str) -> Completed:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    done = subprocess.run(
        [str(FORGE), "hook", event],
        cwd=repo.root,
        input=text,
        env=forge_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Completed(done.returncode, done.stdout, done.stderr)


def pre_tool_use(repo: Repo, tool: str, tool_input: dict[str, Any]) -> Completed:
    payload = {
        "session_id": "abc123",
        "transcript_path": str(repo.root.parent / "transcript.jsonl"),
        "cwd": str(repo.root),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01",
    }
    return hook(repo, "pre-tool-use", payload)


def stop_event(repo: Repo, *, active: bool = False) -> dict[str, Any]:
    return {
        "session_id": "abc123",
        "transcript_path": str(repo.root.parent / "transcript.jsonl"),
        "cwd": str(repo.root),
        "hook_event_name": "Stop",
        "stop_hook_active": active,
    }


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        ("rm -rf specs", True),
        ("git clean -fdx", True),
        ("cd src && rm -f ../AGENTS.md", True),
        ("sh -c 'echo x > forge.toml'", True),
        ("rm -rf src/__pycache__ && pytest -q", False),
        ("echo notes >> AGENTS.md", False),
        ("ls -la specs", False),
    ],
)
def test_pre_tool_use_bash(project: Repo, command: str, refused: bool) -> None:
    done = pre_tool_use(project, "Bash", {"command": command, "description": "do it"})
    assert done.code == (2 if refused else 0), done.err
    assert done.out == ""
    if refused:
        assert done.err.startswith("forge guard: refused — ")
    else:
        assert done.err == ""


@pytest.mark.parametrize(
    ("tool", "tool_input", "refused"),
    [
        ("Write", {"file_path": "forge.toml", "content": "[verify]\n"}, True),
        ("Edit", {"file_path": "forge.toml", "old_string": "a", "new_string": "b"}, True),
        ("MultiEdit", {"file_path": "{root}/forge.toml", "edits": []}, True),
        ("Write", {"file_path": "{root}/.forge/changes/c/breaker.yaml", "content": ""}, True),
        ("Edit", {"file_path": "AGENTS.md", "old_string": "a", "new_string": "b"}, False),
        ("Write", {"file_path": "{root}/src/new.py", "content": "x = 1\n"}, False),
        ("Read", {"file_path": "{root}/forge.toml"}, False),
        ("Glob", {"pattern": "**/*.py"}, False),
    ],
)
def test_pre_tool_use_file_tools(
    project: Repo, tool: str, tool_input: dict[str, Any], refused: bool
) -> None:
    filled = {
        k: v.format(root=project.root) if isinstance(v, str) else v for k, v in tool_input.items()
    }
    done = pre_tool_use(project, tool, filled)
    assert done.code == (2 if refused else 0), done.err
    if refused:
        assert f"refused {tool}" in done.err


def patch(*headers: str) -> str:
    body = "\n".join(f"{header}\n+line" if "Add" in header else header for header in headers)
    return f"*** Begin Patch\n{body}\n*** End Patch"


@pytest.mark.parametrize(
    ("tool_input", "refused"),
    [
        # Codex's apply_patch: the patch is tool_input.command.
        ({"command": patch("*** Add File: forge.toml")}, "forge.toml"),
        (
            {"command": patch("*** Add File: src/new.py", "*** Update File: forge.toml")},
            "forge.toml",
        ),
        ({"command": patch("*** Delete File: AGENTS.md")}, "AGENTS.md"),
        ({"command": patch("*** Update File: specs/cart.md", "*** Move to: src/cart.md")}, "specs"),
        ({"command": patch("*** Update File: AGENTS.md", "@@\n-be careful\n+be careful!")}, None),
        ({"command": patch("*** Add File: src/new.py", "*** Delete File: src/app.py")}, None),
        ({}, "without a patch"),
    ],
)
def test_pre_tool_use_codex_apply_patch(
    project: Repo, tool_input: dict[str, Any], refused: str | None
) -> None:
    done = pre_tool_use(project, "apply_patch", tool_input)
    assert done.code == (0 if refused is None else 2), done.err
    if refused is not None:
        assert refused in done.err
    else:
        assert done.err == ""


@pytest.mark.parametrize("payload", ["", "not json", "[]", '{"tool_input": {}}'])
def test_pre_tool_use_fails_closed_on_input_it_cannot_read(project: Repo, payload: str) -> None:
    done = hook(project, "pre-tool-use", payload)
    assert done.code == 2
    assert "refusing" in done.err
    assert "Traceback" not in done.err


def test_a_broken_policy_refuses_rather_than_allowing(project: Repo) -> None:
    project.write("forge.toml", "[protect]\nfrozen = 3\n")
    done = pre_tool_use(project, "Bash", {"command": "ls"})
    assert done.code == 2
    assert "forge.toml" in done.err
    assert "protect.frozen" in done.err or "frozen" in done.err
    assert "Traceback" not in done.err


def test_the_cached_lists_follow_an_edited_policy(project: Repo) -> None:
    assert pre_tool_use(project, "Bash", {"command": "rm src/app.py"}).code == 0
    project.write("forge.toml", '[protect]\nfrozen = ["src/"]\n')
    done = pre_tool_use(project, "Bash", {"command": "rm src/app.py"})
    assert done.code == 2, done.err
    assert "src/app.py" in done.err


def test_guard_command_forms(project: Repo) -> None:
    refused = project.forge("guard", "--", "rm", "-rf", "specs")
    assert refused.code == 2
    assert "specs" in refused.err
    assert project.forge("guard", "--", "rm -rf build && make").code == 0
    stdin = subprocess.run(
        [str(FORGE), "guard", "--stdin"],
        cwd=project.root,
        input="git rm AGENTS.md",
        env=forge_env(),
        capture_output=True,
        text=True,
    )
    assert stdin.returncode == 2
    assert "AGENTS.md" in stdin.stderr
    as_json = project.forge("guard", "--json", "--", "rm AGENTS.md")
    assert as_json.code == 2
    document = json.loads(as_json.out)
    assert document["allowed"] is False
    assert document["refusals"][0]["protection"] == "exist"
    assert project.forge("guard").code == 2  # nothing to check: a usage error


# Runs the installed forge script and writes the names in sys.modules at exit,
# by either way a hook ends (os._exit once its output is flushed, or sys.exit):
# -X importtime would miss what the lazy facades import through importlib.
_MODULES_AT_EXIT = """
import atexit, json, os, runpy, sys
out, sys.argv = sys.argv[1], sys.argv[2:]
real_exit = os._exit

def record():
    with open(out, "w") as handle:
        handle.write(json.dumps(sorted(sys.modules)))

def exit_now(code):
    record()
    real_exit(code)

os._exit = exit_now
atexit.register(record)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def modules_after(
    project: Repo, args: list[str], payload: str = "", **env: str
) -> tuple[int, set[str]]:
    """Run ``forge args`` and return its exit code and the modules it had loaded at exit."""
    out = project.root.parent / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AT_EXIT, str(out), str(FORGE), *args],
        cwd=project.root,
        input=payload,
        env=forge_env(env),
        capture_output=True,
        text=True,
    )
    return done.returncode, set(json.loads(out.read_text()))


def modules_after_pre_tool_use(project: Repo, tool: str, tool_input: dict[str, Any]) -> set[str]:
    payload = json.dumps({"tool_name": tool, "tool_input": tool_input, "cwd": str(project.root)})
    code, modules = modules_after(project, ["hook", "pre-tool-use"], payload)
    assert code == 0
    return modules


# What the agent hooks must never load: each costs more than the hook's whole check.
HEAVY = {"trio", "rich", "attrs", "cattrs", "argparse", "tomllib", "yaml", "pathlib"}
# Nor the loop's side of protection, nor the policy and state packages.
HEAVY |= {"orchestra._protect._check", "orchestra._policy", "orchestra._state"}


def test_hot_path_imports_neither_trio_nor_rich(project: Repo) -> None:
    # Warm the protect cache first: the cold path may load the full policy.
    assert pre_tool_use(project, "Bash", {"command": "ls"}).code == 0
    imported = modules_after_pre_tool_use(project, "Bash", {"command": "ls"})
    assert "orchestra._guard._shell._evaluate" in imported  # the command was analysed
    assert not HEAVY & imported
    # The rules of commands it does not hold are not even loaded.
    assert not {"orchestra._guard._shell._git", "orchestra._guard._shell._find", "glob"} & imported
    # A tool that writes nothing does not even load the shell analyser.
    reading = modules_after_pre_tool_use(project, "Read", {"file_path": "src/app.py"})
    assert "orchestra._protect._config" in reading
    assert not {"orchestra._guard._shell", *HEAVY} & reading


def test_the_guard_imports_what_the_hook_does(project: Repo) -> None:
    assert project.forge("guard", "--", "ls").code == 0  # warms the protect cache
    code, imported = modules_after(project, ["guard", "--", "git log -1 && cat src/*.py"])
    assert code == 0
    assert {"orchestra._guard._shell._git", "glob"} <= imported  # its rules, when it needs them
    assert not HEAVY & imported


# What only the Stop hook's verify needs: the full guard and a stop at an open
# gate must not pay for it.
VERIFY_MACHINERY = {"trio", "orchestra._secscan", "orchestra._verify._report", "yaml"}


def _under(modules: set[str], packages: set[str]) -> set[str]:
    return {m for m in modules for p in packages if m == p or m.startswith(p + ".")}


def test_the_full_guard_leaves_the_stop_hooks_machinery_unimported(project: Repo) -> None:
    assert project.forge("guard", "--", "ls").code == 0  # warms the protect cache
    code, imported = modules_after(project, ["guard", "--json", "--", "rm AGENTS.md"])
    assert code == 2
    assert "orchestra._cli._hook_cmd" in imported  # the full command line took it
    assert not _under(imported, VERIFY_MACHINERY | {"orchestra._policy._load"})


def test_a_stop_at_an_open_gate_only_reads_the_breaker(project: Repo) -> None:
    failing_policy(project, max_failures=1)
    assert "human should review" in hook(project, "stop", stop_event(project), FORGE_CHANGE="c").out
    payload = json.dumps(stop_event(project, active=True))
    code, imported = modules_after(project, ["hook", "stop"], payload, FORGE_CHANGE="c")
    assert code == 0
    assert "orchestra._verify._store" in imported  # it read the breaker
    assert not _under(imported, VERIFY_MACHINERY | {"orchestra._policy._load", "cattrs"})
    # A stop that verifies loads all of it.
    project.write("forge.toml", '[verify]\ncommand = "true"\n')
    project.forge("verify", "--change", "c", "--reset-breaker")
    code, imported = modules_after(project, ["hook", "stop"], payload, FORGE_CHANGE="c")
    assert code == 0
    assert {"trio", "orchestra._verify._report", "orchestra._policy._load"} <= imported


def test_a_hook_skips_the_interpreters_teardown_once_its_answer_is_out(project: Repo) -> None:
    # The refusal is written and flushed before os._exit: nothing is lost.
    harm = {
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf specs"},
        "cwd": str(project.root),
    }
    done = hook(project, "pre-tool-use", harm)
    assert done.code == 2
    assert done.err == 'forge guard: refused — rm would delete "specs" (protected: exist)\n'
    exits = project.root.parent / "exits.txt"
    driver = (
        "import os, runpy, sys\n"
        "real = os._exit\n"
        f"os._exit = lambda code: (open({str(exits)!r}, 'w').write(str(code)), real(code))\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", driver, str(FORGE), "hook", "pre-tool-use"],
        cwd=project.root,
        input=json.dumps(harm),
        env=forge_env(),
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 2
    assert exits.read_text() == "2"


def test_stop_lets_a_passing_change_stop(project: Repo) -> None:
    done = hook(project, "stop", stop_event(project), FORGE_CHANGE="c")
    assert done.code == 0, done.err
    assert done.out == ""
    assert "Verdict: PASS" in done.err


def test_stop_blocks_while_verify_fails_then_lets_go_when_the_breaker_opens(
    project: Repo,
) -> None:
    failing_policy(project, max_failures=2)
    first = hook(project, "stop", stop_event(project), FORGE_CHANGE="c")
    assert first.code == 0, first.err
    decision = json.loads(first.out)
    assert decision["decision"] == "block"
    assert 'Breaker: 1/2 consecutive failures for change "c"' in decision["reason"]
    assert "tests failed" in decision["reason"]
    assert "FAILED tests/test_cart.py::test_total" in decision["reason"]
    second = hook(project, "stop", stop_event(project, active=True), FORGE_CHANGE="c")
    assert second.code == 0
    message = json.loads(second.out)
    assert "decision" not in message
    assert "escalate: a human should review before continuing" in message["systemMessage"]
    # Open: the next stop does not even run the checks again.
    third = hook(project, "stop", stop_event(project, active=True), FORGE_CHANGE="c")
    assert "human should review" in json.loads(third.out)["systemMessage"]
    status = project.forge("verify", "--change", "c", "--json")
    assert status.code == 1


def test_stop_with_bad_input_does_not_trap_the_agent(project: Repo) -> None:
    done = hook(project, "stop", "{not json")
    assert done.code == 1  # shown to the user; Claude Code does not block on it
    assert "Stop JSON" in done.err
    assert done.out == ""


def test_settings_snippet_in_the_hooks_doc_is_valid_json() -> None:
    doc = Path(__file__).parent.parent.joinpath("docs", "hooks.md").read_text()
    start = doc.index('```json\n{\n  "hooks"')
    block = doc[start + len("```json\n") : doc.index("```", start + 7)]
    settings = json.loads(block)
    commands = [
        h["command"] for entries in settings["hooks"].values() for e in entries for h in e["hooks"]
    ]
    assert "forge hook pre-tool-use" in commands
    assert "forge hook stop" in commands


def test_inside_a_claude_executor_loop_only_the_executors_hooks_act(project: Repo) -> None:
    # The claude executor passes its hooks marked --from-executor and sets
    # FORGE_HOOKS_PASSED=1: the copies in .claude/settings.json stand aside.
    harm = {
        "cwd": str(project.root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf specs"},
    }
    for args, code in (
        (["hook", "pre-tool-use"], 0),
        (["hook", "pre-tool-use", "--from-executor"], 2),
    ):
        done = subprocess.run(
            [str(FORGE), *args],
            cwd=project.root,
            input=json.dumps(harm),
            env=forge_env({"FORGE_HOOKS_PASSED": "1"}),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, (args, done.stderr)
        assert (done.stderr == "") is (code == 0)
    # Outside such a loop (no FORGE_HOOKS_PASSED) the project's own hook guards.
    assert pre_tool_use(project, "Bash", {"command": "rm -rf specs"}).code == 2
    stop = hook(project, "stop", stop_event(project), FORGE_HOOKS_PASSED="1", FORGE_CHANGE="c")
    assert (stop.code, stop.out, stop.err) == (0, "", "")
    assert not (project.root / ".forge" / "changes" / "c" / "verify-attempts.yaml").exists()
    counted = hook(project, "stop", stop_event(project), FORGE_CHANGE="c")
    assert counted.code == 0, counted.err
    assert (project.root / ".forge" / "changes" / "c" / "verify-attempts.yaml").exists()


@pytest.mark.parametrize(
    ("tool", "tool_input", "names"),
    [
        ("Bash", {"command": "rm -rf specs"}, 'rm would delete "specs"'),
        ("Write", {"file_path": "forge.toml", "content": ""}, "- Write — "),
        ("Bash", {"command": "ls specs"}, None),
    ],
)
def test_under_claude_code_a_refusal_is_its_deny_decision(
    project: Repo, tool: str, tool_input: dict[str, Any], names: str | None
) -> None:
    # Claude Code sets CLAUDE_PROJECT_DIR for its hooks: the refusal is its own
    # "deny" (JSON on stdout, exit 0), in words for the model, not a hook error.
    payload = {"cwd": str(project.root), "hook_event_name": "PreToolUse", "tool_name": tool}
    done = hook(
        project,
        "pre-tool-use",
        {**payload, "tool_input": tool_input},
        CLAUDE_PROJECT_DIR=str(project.root),
    )
    assert (done.code, done.err) == (0, "")
    if names is None:
        assert done.out == ""
        return
    decision = json.loads(done.out)["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    reason = decision["permissionDecisionReason"]
    assert reason.startswith("Refused by Forge's guard: this call would harm a protected path")
    assert names in reason
    assert "python" not in reason
    assert "orchestra" not in reason
