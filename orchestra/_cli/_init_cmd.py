"""``forge init``: a commented forge.toml, ``.forge/``'s ignore rules; Claude Code's hooks.

Run it again and it changes nothing: an existing forge.toml or
``.forge/.gitignore`` is left as it is, and hooks already in
``.claude/settings.json`` are not added twice.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .._errors import EXIT_OK, ConfigError
from .._init import detect, forge_toml, merge_claude_hooks
from .._state import GITIGNORE, IGNORE_RULES, STATE_DIR, atomic_write
from .._workspace import find_project
from ._console import Output


def run(args: argparse.Namespace, out: Output) -> int:
    project = find_project(Path.cwd())
    root = project.root
    found = detect(root)
    report: dict[str, Any] = {
        "root": str(root),
        "test_command": found.test_command or None,
        "agents": list(found.agents),
    }
    toml_path = root / "forge.toml"
    text = forge_toml(found)
    if toml_path.exists():
        report["forge_toml"] = "unchanged"
        message = "forge.toml: exists; left as it is"
    elif args.dry_run:
        report["forge_toml"] = "would create"
        message = "forge.toml: would be written:"
    else:
        atomic_write(toml_path, text.encode())
        report["forge_toml"] = "created"
        message = "forge.toml: written"
    lines = [message]
    if report["forge_toml"] == "would create":
        lines += ["  " + line if line else "" for line in text.splitlines()]
    lines.append(_state_ignore(root / STATE_DIR / GITIGNORE, args.dry_run, report))
    if args.claude_hooks:
        lines.append(_claude_hooks(root / ".claude" / "settings.json", args.dry_run, report))
    if out.json_mode:
        out.document(report)
        return EXIT_OK
    test = found.test_command or "none found"
    out.line(f"test command: {test}" + (f" ({found.test_source})" if found.test_source else ""))
    out.line(f"agent CLIs on PATH: {', '.join(found.agents) or 'none'}")
    for line in lines:
        out.line(line)
    return EXIT_OK


def _state_ignore(path: Path, dry_run: bool, report: dict[str, Any]) -> str:
    """The rules that keep Forge's runtime files under ``.forge/`` out of commits."""
    shown = f"{STATE_DIR}/{GITIGNORE}"
    if path.exists():
        report["forge_gitignore"] = "unchanged"
        return f"{shown}: exists; left as it is"
    if dry_run:
        report["forge_gitignore"] = "would create"
        return f"{shown}: would be written (worktrees, caches, logs, databases and locks ignored)"
    atomic_write(path, IGNORE_RULES.encode(), ordinary=True)
    report["forge_gitignore"] = "created"
    return (
        f"{shown}: written — worktrees, caches, logs, databases and locks stay out of git; "
        "the state files stay committable"
    )


def _claude_hooks(path: Path, dry_run: bool, report: dict[str, Any]) -> str:
    """Merge Forge's hooks into Claude Code's project settings; what was done, in words."""
    settings: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(
                ".claude/settings.json cannot be read, so Forge's hooks were not added",
                problems=[f"{path}: {exc}"],
                hint="fix the file (it must be a JSON object), then run forge init again",
            ) from exc
        if not isinstance(loaded, dict):
            raise ConfigError(
                ".claude/settings.json is not a JSON object, so Forge's hooks were not added",
                problems=[f"{path}: expected an object, got {type(loaded).__name__}"],
            )
        settings = loaded
    merged, changed = merge_claude_hooks(settings)
    if not changed:
        report["claude_settings"] = "unchanged"
        return ".claude/settings.json: Forge's hooks are already there; left as it is"
    if dry_run:
        report["claude_settings"] = "would update" if path.exists() else "would create"
        shown = json.dumps(merged, indent=2)
        return ".claude/settings.json: would be:\n" + "\n".join(
            "  " + line for line in shown.splitlines()
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    atomic_write(path, (json.dumps(merged, indent=2) + "\n").encode())
    report["claude_settings"] = "updated" if existed else "created"
    created = "" if existed else " (file created)"
    return (
        f".claude/settings.json: Forge's PreToolUse guard and Stop hook added{created}"
        " (for Claude Code sessions of your own; in a loop of the claude executor, which"
        " passes the same hooks itself, these stand aside so each stop verifies once)"
    )
