"""``forge init``: a commented forge.toml and its JSON Schema, ``.forge/``'s ignore rules; hooks.

Run it again and it changes nothing: an existing forge.toml,
forge.schema.json or ``.forge/.gitignore`` is left as it is, and hooks
already in ``.claude/settings.json`` are not added twice.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .._errors import EXIT_OK, ConfigError
from .._init import detect, forge_toml, merge_claude_hooks
from .._policy import SCHEMA_FILE, policy_json_schema_text
from .._state import GITIGNORE, STATE_DIR, atomic_write, keep_out_of_git
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
        "lint_command": found.lint_command or None,
        "venv": found.venv or None,
        "specs": list(found.specs),
        "unfound": list(found.unfound),
    }
    toml_path = root / "forge.toml"
    text = forge_toml(found, schema=f"./{SCHEMA_FILE}")
    if toml_path.exists():
        report["forge_toml"] = "unchanged"
        message = "forge.toml: exists; left as it is"
    elif args.dry_run:
        report["forge_toml"] = "would create"
        message = "forge.toml: would be written:"
    else:
        atomic_write(toml_path, text.encode(), ordinary=True)
        report["forge_toml"] = "created"
        message = "forge.toml: written"
    lines = [message]
    if report["forge_toml"] == "would create":
        lines += ["  " + line if line else "" for line in text.splitlines()]
    if report["forge_toml"] != "unchanged":
        lines.append(_schema(root / SCHEMA_FILE, args.dry_run, report))
    lines.append(_state_ignore(root / STATE_DIR, args.dry_run, report))
    if args.claude_hooks:
        lines.append(_claude_hooks(root / ".claude" / "settings.json", args.dry_run, report))
    if out.json_mode:
        out.document(report)
        return EXIT_OK
    test = found.test_command or "none found"
    out.line(f"test command: {test}" + (f" ({found.test_source})" if found.test_source else ""))
    lint = found.lint_command or "none found"
    out.line(f"lint command: {lint}" + (f" ({found.lint_source})" if found.lint_source else ""))
    if found.venv:
        out.line(f"virtualenv: {found.venv} (its tools named by path: no activation needed)")
    if found.unfound:
        out.line(f"not found in the virtualenv or on PATH: {', '.join(found.unfound)}")
    specs = ", ".join(found.specs) or "none (scenario coverage off)"
    out.line(f"spec folders: {specs}")
    out.line(f"agent CLIs on PATH: {', '.join(found.agents) or 'none'}")
    for line in lines:
        out.line(line)
    return EXIT_OK


def _schema(path: Path, dry_run: bool, report: dict[str, Any]) -> str:
    """The JSON Schema that forge.toml's ``#:schema`` line points editors at."""
    if path.exists():
        report["forge_schema"] = "unchanged"
        return f"{SCHEMA_FILE}: exists; left as it is"
    if dry_run:
        report["forge_schema"] = "would create"
        return f"{SCHEMA_FILE}: would be written (the schema editors check forge.toml against)"
    atomic_write(path, policy_json_schema_text().encode(), ordinary=True)
    report["forge_schema"] = "created"
    return (
        f"{SCHEMA_FILE}: written — editors check forge.toml against it; after upgrading"
        f" Forge: forge policy schema -o {SCHEMA_FILE}"
    )


def _state_ignore(state_dir: Path, dry_run: bool, report: dict[str, Any]) -> str:
    """The rules that keep Forge's runtime files under ``.forge/`` out of commits."""
    shown = f"{STATE_DIR}/{GITIGNORE}"
    path = state_dir / GITIGNORE
    if path.exists():
        report["forge_gitignore"] = "unchanged"
        return f"{shown}: exists; left as it is"
    if dry_run:
        report["forge_gitignore"] = "would create"
        return f"{shown}: would be written (worktrees, caches, logs, databases and locks ignored)"
    state_dir.mkdir(exist_ok=True)
    keep_out_of_git(state_dir)  # the rules every state write keeps, written the same way
    if not path.exists():
        raise ConfigError(
            f"{shown} could not be written",
            problems=[str(path)],
            hint=f"make {STATE_DIR}/ writable, then run forge init again",
        )
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
