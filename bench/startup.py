"""Start-up time of the read-only commands, against the interpreter's own start.

``forge status``, ``forge timeline``, ``forge spend``, ``forge circuit`` and
``forge policy show | check | dump`` only read a few files: nearly all their
time is Python starting and importing. Each is timed with its output going to a
pipe (as in a script; no terminal styling) in a scratch project that has a
forge.toml and recorded state (a failed ``forge verify --change``, a
two-iteration ``forge run`` and a supervised loop), against ``python -c pass``
measured in the same rounds: every round runs the baseline and then each
command once, so that load on this shared machine hits them alike. Medians of
the wall-clock time (the goal's measure) and of the CPU time (steadier when
the machine is busy) are printed with their ratios. Goal: each command within
8x of ``python -c pass``, wall-clock.

    .venv/bin/python bench/startup.py [--runs 20] [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
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
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NO_COLOR")}
GOAL = 8.0

FORGE_TOML = """\
[verify]
command = "false"
specs = []
max_failures = 5

[[loop]]
change = "billing"
cmd = "echo hi"
max_iterations = 2
"""

COMMANDS = (
    ("status",),
    ("timeline", "demo"),
    ("spend", "demo"),
    ("circuit", "billing"),
    ("policy", "show"),
    ("policy", "check"),
    ("policy", "dump"),
)


def project(root: Path) -> None:
    """A git repository with a policy and some recorded state for every command to read."""
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    (root / "forge.toml").write_text(FORGE_TOML)
    subprocess.run([*git, "add", "forge.toml"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "policy"], cwd=root, check=True)
    for argv in (
        ["verify", "--change", "demo"],
        ["run", "--change", "demo", "--cmd", "echo hi", "--yes", "--max-iterations", "2"],
        ["supervise"],
    ):
        subprocess.run([str(FORGE), *argv], cwd=root, capture_output=True, env=ENV, check=False)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, env=ENV, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed, _children_cpu() - cpu


Samples = list[tuple[float, float]]


def measure(runs: int, root: Path) -> tuple[Samples, dict[str, Samples]]:
    """Times of ``python -c pass`` and of each command, interleaved round by round."""
    base = [sys.executable, "-c", "pass"]
    subjects = {" ".join(command): [str(FORGE), *command] for command in COMMANDS}
    for _ in range(2):  # warm-up: bytecode written, page cache filled
        once(base, root)
        for argv in subjects.values():
            once(argv, root)
    base_times: Samples = []
    times: dict[str, Samples] = {name: [] for name in subjects}
    for _ in range(runs):
        base_times.append(once(base, root))
        for name, argv in subjects.items():
            times[name].append(once(argv, root))
    return base_times, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parse_args(parser, runs=1)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        project(root)
        base_times, times = measure(args.runs, root)
    base = statistics.median(wall for wall, _ in base_times)
    base_cpu = statistics.median(cpu for _, cpu in base_times)
    print(f"{'command':24} {'wall':>9} {'ratio':>7} {'cpu':>9} {'ratio':>7}")
    print(
        f"{'python -c pass':24} {base * 1000:7.1f}ms {1:6.2f}x {base_cpu * 1000:7.1f}ms {1:6.2f}x"
    )
    worst = 0.0
    for name, samples in times.items():
        wall = statistics.median(wall for wall, _ in samples)
        cpu = statistics.median(cpu for _, cpu in samples)
        worst = max(worst, wall / base)
        print(
            f"{'forge ' + name:24} {wall * 1000:7.1f}ms {wall / base:6.2f}x "
            f"{cpu * 1000:7.1f}ms {cpu / base_cpu:6.2f}x"
        )
    judged = verdict(args, worst <= GOAL)
    print(f"goal: every command within {GOAL:g}x of python -c pass: {judged} (worst {worst:.2f}x)")


if __name__ == "__main__":
    main()
