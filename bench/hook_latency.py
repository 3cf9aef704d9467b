"""Hook latency: the commands an agent runs on every step, against the bare minimum.

``forge hook pre-tool-use`` (Claude Code's PreToolUse JSON on stdin) and
``forge guard -- <command>`` against ``python -c pass`` (the interpreter's own
start, the floor for any Python hook); ``forge verify --change c`` and
Claude Code's Stop hook, ``forge hook stop`` (which runs that verify), with
``true`` as the test command, against ``sh -c true``: the verify alone. For
the Stop hook, its own cost (its time less the verify's) is printed too, in
milliseconds and as a multiple of ``python -c pass``. A 1 MB command sent to
the PreToolUse hook is timed too (refused unread: the guard's cost is bounded
in a command's length), reported but not part of the goal. Each pair is timed
interleaved (A, B, A, B ...) so that load on this shared machine hits both
alike; one measurement takes the medians, and it is repeated (three times by
default): each figure is printed as min/median/max of the repeats. Goal
(issue 25): the two hooks' median ratio within 2.0x of ``python -c pass``.

    .venv/bin/python bench/hook_latency.py [--runs 60] [--repeats 3] [--quick]
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
from collections.abc import Mapping, Sequence
from pathlib import Path

from _quick import parse_args, verdict
from _spread import spread

FORGE = Path(sys.executable).with_name("forge")
# Timed as an installed forge runs: with its bytecode cached on disk.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
GOAL = 2.0


def project(root: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "forge.toml").write_text('[verify]\ncommand = "true"\nspecs = []\n')
    (root / "specs").mkdir()
    (root / "specs" / "cart.md").write_text("# cart\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")


def once(
    argv: Sequence[str], cwd: Path, stdin: bytes | None, env: Mapping[str, str] = ENV
) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, env=env, check=False)
    return time.perf_counter() - started


def pair(
    runs: int,
    cwd: Path,
    base: Sequence[str],
    subject: Sequence[str],
    stdin: bytes | None = None,
    env: Mapping[str, str] = ENV,
) -> tuple[float, float]:
    """Medians (seconds) of ``base`` and ``subject``, run alternately after a warm-up."""
    for _ in range(3):
        once(base, cwd, None)
        once(subject, cwd, stdin, env)
    base_times, subject_times = [], []
    for _ in range(runs):
        base_times.append(once(base, cwd, None))
        subject_times.append(once(subject, cwd, stdin, env))
    return statistics.median(base_times), statistics.median(subject_times)


Row = tuple[str, str, list[tuple[float, float]]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="pairs in one measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements, for the spread")
    args = parse_args(parser, runs=2, repeats=1)
    slow_runs = args.runs if args.quick else max(10, args.runs // 4)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        project(root)
        python = [sys.executable, "-c", "pass"]
        shell = ["sh", "-c", "true"]
        pre_tool_use = {
            "session_id": "bench",
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build && pytest -q tests/"},
        }
        stop = {"session_id": "bench", "cwd": str(root), "hook_event_name": "Stop"}
        # A command past what the guard reads: refused unread, its cost bounded.
        huge = {**pre_tool_use, "tool_input": {"command": "echo " + "{a,b}" * 200_000}}
        rows: list[Row] = [
            ("forge hook pre-tool-use", "python -c pass", []),
            ("forge guard -- 'rm -rf build'", "python -c pass", []),
            ("forge verify --change c (true)", "sh -c true", []),
            ("forge hook stop (verify: true)", "sh -c true", []),
            ("pre-tool-use, a 1 MB command", "python -c pass", []),
        ]
        stop_own: list[float] = []
        for _ in range(args.repeats):
            hook = [str(FORGE), "hook", "pre-tool-use"]
            rows[0][2].append(
                pair(args.runs, root, python, hook, json.dumps(pre_tool_use).encode())
            )
            guard = [str(FORGE), "guard", "--", "rm -rf build"]
            rows[1][2].append(pair(args.runs, root, python, guard))
            verify = [str(FORGE), "verify", "--change", "c"]
            rows[2][2].append(pair(slow_runs, root, shell, verify))
            stop_hook = [str(FORGE), "hook", "stop"]
            timed = pair(
                slow_runs,
                root,
                shell,
                stop_hook,
                json.dumps(stop).encode(),
                {**ENV, "FORGE_CHANGE": "c"},
            )
            rows[3][2].append(timed)
            huge_payload = json.dumps(huge).encode()
            rows[4][2].append(pair(slow_runs, root, python, hook, huge_payload))
            base, _ = pair(args.runs if args.quick else 10, root, python, shell)
            stop_own.append((timed[1] - timed[0]) / base)
    print(f"{'command':32} {'median ms':>20} {'baseline':>15} {'median ms':>17} {'ratio':>18}")
    for name, base_name, figures in rows:
        subject_ms = spread([subject * 1000 for _, subject in figures], "{:.1f}")
        base_ms = spread([base * 1000 for base, _ in figures], "{:.1f}")
        ratio = spread([subject / base for base, subject in figures])
        print(f"{name:32} {subject_ms:>20} {base_name:>15} {base_ms:>17} {ratio:>17}x")
    own_ms = spread([(s - b) * 1000 for b, s in rows[3][2]], "{:.1f}")
    print(
        f"stop hook's own cost (less the verify's true): {own_ms} ms, "
        f"{spread(stop_own)}x python -c pass"
    )
    hooks = max(statistics.median(s / b for b, s in figures) for _, _, figures in rows[:2])
    print(
        f"goal: the two hooks within {GOAL:g}x of python -c pass: " + verdict(args, hooks <= GOAL)
    )


if __name__ == "__main__":
    main()
