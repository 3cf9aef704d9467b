"""Supervisor overhead: forge supervise against raw trio spawning of the same processes.

Runs L loops x I iterations of a no-op executor (`true`) under `forge supervise`
(every gate on: verify breaker, budget with a ceiling, secscan slot, the
sqlite rate limiter, stagnation probing in git), then spawns the same L x I
processes with bare trio at the same concurrency, and prints iterations per
second of both and their ratio. The goal (issue 8): forge at least 50% of raw.

    .venv/bin/python bench/supervisor_overhead.py [--loops 50] [--iterations 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

FORGE = Path(sys.executable).with_name("forge")


def forge_run(loops: int, iterations: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        tables = "".join(f'[[loop]]\nchange = "loop-{n}"\ncmd = "true"\n' for n in range(loops))
        (root / "forge.toml").write_text(
            '[verify]\ncommand = ""\nspecs = []\n'
            f"[run]\nmax_iterations = {iterations}\n"
            "[budget]\nmax_tokens = 1000000\n"
            f'[rate_limit]\ncalls = {loops * iterations * 10}\nbackend = "sqlite"\n'
            f"[stagnation]\nwindow = {iterations + 1}\nno_progress = {iterations + 1}\n"
            f"output_decline = 1.0\n"
            '[breaker]\non_open = "escalate"\n' + tables
        )
        started = time.perf_counter()
        done = subprocess.run(
            [str(FORGE), "supervise", "--json"], cwd=root, capture_output=True, text=True
        )
        elapsed = time.perf_counter() - started
        summary = json.loads(done.stdout)
        ran = sum(loop["iterations"] for loop in summary["loops"])
        if ran != loops * iterations:
            raise SystemExit(f"forge ran {ran} iterations, expected {loops * iterations}")
        return elapsed


async def raw_spawn(loops: int, iterations: int) -> None:
    async def loop() -> None:
        for _ in range(iterations):
            await trio.run_process(["true"], stdout=subprocess.DEVNULL)

    async with trio.open_nursery() as nursery:
        for _ in range(loops):
            nursery.start_soon(loop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    total = args.loops * args.iterations
    started = time.perf_counter()
    trio.run(raw_spawn, args.loops, args.iterations)
    raw = time.perf_counter() - started
    supervised = forge_run(args.loops, args.iterations)
    print(f"machine: {os.cpu_count()} cores; {args.loops} loops x {args.iterations} iterations")
    print(f"raw trio spawning:  {total / raw:8.1f} iterations/s  ({raw:.2f} s)")
    print(f"forge supervise:    {total / supervised:8.1f} iterations/s  ({supervised:.2f} s)")
    print(f"ratio forge/raw:    {raw / supervised:8.1%}   (goal: at least 50%)")


if __name__ == "__main__":
    main()
