"""A ``claude`` executor loop is hooked once, even with Forge's hooks in .claude/settings.json.

The fake ``claude`` here does what Claude Code does at a stop: it runs every
Stop hook it was given — those passed with ``--settings`` and those of the
project's ``.claude/settings.json`` — and records what each printed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .support import FORGE, Repo

FAKE_CLAUDE = r"""
import json, os, subprocess, sys

argv = sys.argv[1:]
sources = []
if "--settings" in argv:
    sources.append(json.loads(argv[argv.index("--settings") + 1]))
project = os.path.join(os.getcwd(), ".claude", "settings.json")
if os.path.exists(project):
    with open(project) as handle:
        sources.append(json.load(handle))
event = json.dumps({"hook_event_name": "Stop", "stop_hook_active": False,
                    "cwd": os.getcwd(), "session_id": "s-1"})
with open(os.environ["HOOK_LOG"], "a") as log:
    for settings in sources:
        for entry in settings.get("hooks", {}).get("Stop", []):
            for hook in entry["hooks"]:
                done = subprocess.run(["sh", "-c", hook["command"]], input=event,
                                      capture_output=True, text=True)
                log.write(json.dumps({"command": hook["command"], "code": done.returncode,
                                      "stdout": done.stdout}) + "\n")
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "I tried.", "session_id": "s-1", "num_turns": 1,
                  "total_cost_usd": 0.01,
                  "usage": {"input_tokens": 10, "output_tokens": 5}}))
"""


def _install(repo: Repo) -> dict[str, str]:
    bin_dir = repo.root.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "fake_claude.py"
    script.write_text(FAKE_CLAUDE)
    shim = bin_dir / "claude"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    shim.chmod(0o755)
    path = os.pathsep.join((str(bin_dir), str(Path(FORGE).parent), os.environ["PATH"]))
    return {"PATH": path, "HOOK_LOG": str(repo.root.parent / "hooks.log")}


def _hook_runs(repo: Repo) -> list[dict[str, object]]:
    log = repo.root.parent / "hooks.log"
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_loop_is_never_double_hooked(repo: Repo) -> None:
    env = _install(repo)
    init = repo.forge("init", "--claude-hooks", env=env)
    assert init.code == 0, init
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "false"\nmax_failures = 3\n\n[run]\nmax_iterations = 5\n'
        # The hook counts each stop in the breaker: only outside the sandbox.
        '\n[sandbox]\nmode = "off"\n',
    )
    repo.commit()
    done = repo.forge("run", "--change", "c", "--executor", "claude", "--yes", env=env)
    runs = _hook_runs(repo)
    # Both Stop hooks ran at each stop; only the one Forge passed verified.
    passed = [r for r in runs if "-m orchestra hook stop" in str(r["command"])]
    project = [r for r in runs if r["command"] == "forge hook stop"]
    assert len(passed) == len(project) >= 1
    assert all(r["code"] == 0 and r["stdout"] == "" for r in project)
    # Each stop counted once: the breaker (max_failures = 3) opens at the third.
    assert len(passed) == 3, done
    assert "run: STOPPED after 3 iteration(s) — gate-open" in done.lines, done
    assert "  detail: circuit breaker open after 3 consecutive verify failures" in done.lines
