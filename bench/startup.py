"""Start-up time of the read-only commands, against the interpreter's own start.

``forge status``, ``forge timeline``, ``forge spend``, ``forge circuit`` and
``forge policy show | check | dump`` only read a few files: nearly all their
time is Python starting and importing. Each is timed with its output going to a
pipe (as in a script; no terminal styling) in a scratch project that has a
forge.toml and recorded state (a failed ``forge verify --change``, a
two-iteration ``forge run`` and a supervised loop), against ``python -c pass``
measured in the same rounds: every round runs the baseline and then each
command once, so that load on this shared machine hits them alike. One
measurement takes the medians of its rounds, of the wall-clock time (the
goal's measure) and of the CPU time (steadier when the machine is busy), as
ratios to the baseline's; it is repeated (three times by default) and each
ratio printed as min/median/max of the repeats. Goal: each command's median
wall-clock ratio within 6x of ``python -c pass``.

    .venv/bin/python bench/startup.py [--runs 15] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _quick import FORGE_ENV, parse_args, verdict
from _spread import spread

FORGE = Path(sys.executable).with_name("forge")
GOAL = 6.0

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
        command = [str(FORGE), *argv]
        subprocess.run(command, cwd=root, capture_output=True, env=FORGE_ENV, check=False)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, env=FORGE_ENV, check=False)
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


def ratios(base_times: Samples, times: dict[str, Samples]) -> dict[str, tuple[float, float]]:
    """Each command's median wall-clock and CPU time, as ratios to the baseline's."""
    base = statistics.median(wall for wall, _ in base_times)
    base_cpu = statistics.median(cpu for _, cpu in base_times)
    return {
        name: (
            statistics.median(wall for wall, _ in samples) / base,
            statistics.median(cpu for _, cpu in samples) / base_cpu,
        )
        for name, samples in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds in one measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements, for the spread")
    args = parse_args(parser, runs=1, repeats=1)
    measured: list[dict[str, tuple[float, float]]] = []
    base_walls: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        project(root)
        for _ in range(args.repeats):
            base_times, times = measure(args.runs, root)
            base_walls.append(statistics.median(wall for wall, _ in base_times))
            measured.append(ratios(base_times, times))
    print(f"python -c pass: {spread([wall * 1000 for wall in base_walls], '{:.1f}')} ms wall")
    print(
        f"{'command':24} {'wall ratio':>23} {'cpu ratio':>22}  (min/median/max of {args.repeats})"
    )
    worst = 0.0
    for name in measured[0]:
        walls = [figures[name][0] for figures in measured]
        cpus = [figures[name][1] for figures in measured]
        worst = max(worst, statistics.median(walls))
        print(f"{'forge ' + name:24} wall {spread(walls):>17}x  cpu {spread(cpus):>17}x")
    judged = verdict(args, worst <= GOAL)
    print(
        f"goal: every command's median within {GOAL:g}x of python -c pass: {judged} "
        f"(worst {worst:.2f}x)"
    )


if __name__ == "__main__":
    main()
