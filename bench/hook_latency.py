"""Hook latency: the commands an agent runs on every step, against the bare minimum.

``forge hook pre-tool-use`` (Claude Code's PreToolUse JSON on stdin) and
``forge guard -- <command>`` against ``python -c pass`` (the interpreter's own
start, the floor for any Python hook); ``forge verify --change c`` with
``true`` as its test command against ``sh -c true``. Each pair is timed
interleaved (A, B, A, B ...) so that load on this shared machine hits both
alike; medians are printed with their ratio. Goal (issue 6): the hooks within
2.5x of ``python -c pass``.

    .venv/bin/python bench/hook_latency.py [--runs 60] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _quick import parse_args, verdict

FORGE = Path(sys.executable).with_name("forge")
# Timed as an installed forge runs: with its bytecode cached on disk.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def project(root: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "forge.toml").write_text('[verify]\ncommand = "true"\nspecs = []\n')
    (root / "specs").mkdir()
    (root / "specs" / "cart.md").write_text("# cart\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")


def once(argv: Sequence[str], cwd: Path, stdin: bytes | None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, env=ENV, check=False)
    return time.perf_counter() - started


def pair(
    runs: int,
    cwd: Path,
    base: Sequence[str],
    subject: Sequence[str],
    stdin: bytes | None = None,
) -> tuple[float, float]:
    """Medians (seconds) of ``base`` and ``subject``, run alternately after a warm-up."""
    for _ in range(3):
        once(base, cwd, None)
        once(subject, cwd, stdin)
    base_times, subject_times = [], []
    for _ in range(runs):
        base_times.append(once(base, cwd, None))
        subject_times.append(once(subject, cwd, stdin))
    return statistics.median(base_times), statistics.median(subject_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60)
    args = parse_args(parser, runs=2)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        project(root)
        python = [sys.executable, "-c", "pass"]
        event = {
            "session_id": "bench",
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build && pytest -q tests/"},
        }
        rows = [
            (
                "forge hook pre-tool-use",
                "python -c pass",
                pair(
                    args.runs,
                    root,
                    python,
                    [str(FORGE), "hook", "pre-tool-use"],
                    json.dumps(event).encode(),
                ),
            ),
            (
                "forge guard -- 'rm -rf build'",
                "python -c pass",
                pair(args.runs, root, python, [str(FORGE), "guard", "--", "rm -rf build"]),
            ),
            (
                "forge verify --change c (true)",
                "sh -c true",
                pair(
                    args.runs if args.quick else max(10, args.runs // 4),
                    root,
                    ["sh", "-c", "true"],
                    [str(FORGE), "verify", "--change", "c"],
                ),
            ),
        ]
    print(f"{'command':34} {'median':>9} {'baseline':>16} {'median':>9} {'ratio':>7}")
    for name, base_name, (base, subject) in rows:
        print(
            f"{name:34} {subject * 1000:7.1f}ms {base_name:>16} {base * 1000:7.1f}ms "
            f"{subject / base:6.2f}x"
        )
    hooks = [subject / base for _, _, (base, subject) in rows[:2]]
    print("goal: the two hooks within 2.5x of python -c pass: " + verdict(args, max(hooks) <= 2.5))


if __name__ == "__main__":
    main()
