"""What ``forge init`` writes: a commented forge.toml; Forge's hooks merged into Claude's settings.

Both are pure: they take what is there and return what should be, so a
re-run that finds its own work changes nothing.
"""

from __future__ import annotations

import copy
import json
import textwrap
from typing import Any

from ._detect import Detected

HOOK_MATCHER = "Bash|Write|Edit|MultiEdit|NotebookEdit"
PRE_TOOL_USE = "forge hook pre-tool-use"
STOP = "forge hook stop"
_PROMPT = (
    "Work the next task in tasks.md. When no task is left, end your final message "
    "with a line FORGE_DONE."
)


def forge_toml(found: Detected, schema: str | None = None) -> str:
    """A commented forge.toml for what was found; with ``schema``, a ``#:schema`` line first.

    ``schema`` is the path, relative to forge.toml, of the JSON Schema editors
    validate it against.
    """
    lines = [f"#:schema {schema}"] if schema else []
    lines += [
        "# forge.toml, written by `forge init`. Every key with its default and meaning:",
        "# `forge policy dump --defaults`; the values in force and where each comes from:",
        "# `forge policy show`; an edit checked: `forge policy check`.",
        "",
        "[verify]",
    ]
    if found.venv:
        lines += [
            f"# Tools of the project's virtualenv ({found.venv}) by path, so verify needs no",
            "# activated venv; through git, so the same path reaches the main checkout's venv",
            "# from a loop's worktree (.forge/worktrees/<change>, which has none).",
        ]
    if found.test_command:
        lines += [
            *_comment(f"Found: {found.test_source}."),
            f"command = {toml_string(found.test_command)}",
        ]
    else:
        lines += [
            "# No test command found: set the one that proves the work.",
            '# command = "make test"',
        ]
    if found.lint_command:
        lines += [
            *_comment(f"Linter found: {found.lint_source}."),
            f"lint = {toml_string(found.lint_command)}",
        ]
    else:
        lines += [
            "# No linter found: a lint command runs after the tests.",
            '# lint = "ruff check ."',
        ]
    if found.unfound:
        lines += _comment(
            f"Not found in the virtualenv or on PATH here: {', '.join(found.unfound)}."
        )
    if found.specs:
        shown = ", ".join(toml_string(folder) for folder in found.specs)
        lines += [
            '# Spec scenarios found: each must be named by a test ("scenario: <id>").',
            f"specs = [{shown}]",
        ]
    else:
        lines += [
            "# No spec folder (specs/, features/): scenario coverage is off. Name one to",
            '# have each scenario in it named by a test: specs = ["specs/"]',
            "specs = []",
        ]
    lines += ["max_failures = 3", "", "[run]"]
    if found.agents:
        lines += [
            f"# Agent CLIs on PATH: {', '.join(found.agents)}. Checked: `forge executors check`.",
            f'executor = "{found.agents[0]}"',
        ]
    else:
        lines += [
            "# No agent CLI (claude, codex, gemini) on PATH: name one, or a command.",
            '# executor = "claude"',
            '# cmd = "my-agent --once"',
        ]
    lines += [
        f'prompt = "{_PROMPT}"',
        "max_iterations = 5",
        "# Permission level: read-only | edit | full, and edit-and-run for claude",
        "# (the default: edit-and-run for claude, edit for codex and gemini).",
        '# permission = "edit"',
        '# session = "fresh"       # or "continue": each iteration resumes the last session',
        "",
        "[budget]",
        "# Ceilings; with none set, the spend gate cannot open.",
        "# max_tokens = 2_000_000",
        "# max_cost_usd = 20.0",
        "",
    ]
    return "\n".join(lines)


def _comment(text: str) -> list[str]:
    """``text`` as TOML comment lines that fit the file's width."""
    return ["# " + line for line in textwrap.wrap(text, width=86)]


def toml_string(value: str) -> str:
    """``value`` as a TOML string; literal (``'...'``) so a shell's double quotes read as typed."""
    if '"' in value and "'" not in value and value.isprintable():
        return f"'{value}'"
    return json.dumps(value, ensure_ascii=False)  # JSON's escapes are all valid in TOML


def merge_claude_hooks(settings: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``settings`` with Forge's PreToolUse and Stop hooks added; whether anything changed.

    What is there stays: other keys, other hooks, and a Forge hook already
    present (under any matcher) is not added twice.
    """
    merged = copy.deepcopy(settings)
    hooks = merged.setdefault("hooks", {})
    changed = False
    wanted: tuple[tuple[str, str, dict[str, str], int | None], ...] = (
        ("PreToolUse", PRE_TOOL_USE, {"matcher": HOOK_MATCHER}, None),
        ("Stop", STOP, {}, 900),
    )
    for event, command, extra, timeout in wanted:
        entries = hooks.setdefault(event, [])
        if _has_command(entries, command):
            continue
        hook: dict[str, Any] = {"type": "command", "command": command}
        if timeout is not None:
            hook["timeout"] = timeout
        entries.append({**extra, "hooks": [hook]})
        changed = True
    return merged, changed


def _has_command(entries: object, command: str) -> bool:
    if not isinstance(entries, list):
        return False
    for entry in entries:
        inner = entry.get("hooks") if isinstance(entry, dict) else None
        for hook in inner if isinstance(inner, list) else []:
            if isinstance(hook, dict) and str(hook.get("command", "")).endswith(command):
                return True
    return False
