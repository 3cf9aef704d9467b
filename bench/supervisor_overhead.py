"""Supervisor overhead: forge against raw trio spawning of the same processes.

Two modes, each timed against a baseline that spawns exactly the processes
Forge spawns for its executor and its verify, the way Forge spawns them
(through ``sh -c``), with bare trio at the same concurrency:

- ``supervise``: L loops x I iterations of a no-op executor (``true``) under
  ``forge supervise`` with every gate on: a verify (``true``) after every
  iteration and its breaker, a budget with a ceiling, the secret scan, the
  protected paths' integrity check, the sqlite rate limiter, stagnation probing
  in git. Each loop works in its own small repository (forge refuses two loops
  in one working tree). Baseline: per iteration, ``sh -c true`` (the executor) then
  ``sh -c true`` (the verify), L loops at once.
- ``run``: ``forge run --max-iterations N`` of the same no-op agent (forge run
  runs no verify of its own). Baseline: N sequential ``sh -c true``. A forge
  run also pays for starting Python and importing Forge once; its cost per
  iteration is also given from the difference with a one-iteration run.

The working tree is a small committed repository (AGENTS.md, specs/, a few
source files) so the integrity check and the scan have files to look at.
Printed: iterations per second, forge's share of raw, the git commands forge
ran per iteration (counted in a separate run by a logging ``git`` first on
PATH), and the CPU time (user + system, Forge and all it spawned) per
iteration of both.

    .venv/bin/python bench/supervisor_overhead.py [--mode both] [--loops 50]
        [--iterations 20] [--run-iterations 20] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import trio
from _quick import parse_args

FORGE = Path(sys.executable).with_name("forge")
EXECUTOR = ["sh", "-c", "true"]  # how Forge starts a --cmd or [[loop]] cmd, and a verify


@attrs.frozen
class Timing:
    wall: float
    cpu: float  # user + system seconds of the process tree


def _cpu_self_and_children() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(action: Callable[[], object]) -> Timing:
    cpu, wall = _cpu_self_and_children(), time.perf_counter()
    action()
    return Timing(time.perf_counter() - wall, _cpu_self_and_children() - cpu)


FILES = {
    "AGENTS.md": "# Agents\n",
    "IMPLEMENTATION_PLAN.md": "- [ ] nothing\n",
    "specs/one.md": "# One\n",
    "specs/two.md": "# Two\n",
    "src/app.py": "print('hello')\n" * 20,
    "src/util.py": "X = 1\n" * 20,
    "README.md": "readme\n",
    ".gitignore": ".forge/\n",
}


def small_repository(root: Path, extra: dict[str, str] | None = None) -> None:
    """A small committed repository: AGENTS.md, specs/, a few source files."""
    for name, text in {**FILES, **(extra or {})}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)


@contextmanager
def project(tables: str) -> Iterator[Path]:
    """A small committed repository with a forge.toml (one loop: ``forge run``)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        small_repository(root, {"forge.toml": tables})
        yield root


@contextmanager
def loops_project(tables: str, loops: int) -> Iterator[Path]:
    """A folder with a forge.toml and ``loops/loop-N``, one small repository per loop.

    Each loop has a working tree of its own, as parallel changes are laid out (a
    clone each): forge refuses two loops in one tree.
    """
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        template = root / "template"
        template.mkdir()
        small_repository(template)
        for n in range(loops):
            shutil.copytree(template, root / "loops" / f"loop-{n}", symlinks=True)
        shutil.rmtree(template)
        (root / "forge.toml").write_text(tables)
        yield root


def counting_env(folder: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` logs each call before it runs the real one."""
    real = shutil.which("git")
    if real is None:
        raise SystemExit("git is not on PATH")
    log = folder / "git-calls.log"
    wrapper = folder / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH=f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return env, log


def _forge(root: Path, args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run([str(FORGE), *args], cwd=root, capture_output=True, text=True, env=env)
    try:
        result: dict[str, object] = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"forge {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}") from None
    return result


# -- forge supervise -----------------------------------------------------------


def supervise_toml(loops: int, iterations: int) -> str:
    tables = "".join(
        f'[[loop]]\nchange = "loop-{n}"\ndir = "loops/loop-{n}"\ncmd = "true"\n'
        for n in range(loops)
    )
    return (
        '[verify]\ncommand = "true"\nspecs = []\n'
        f"[run]\nmax_iterations = {iterations}\n"
        "[budget]\nmax_tokens = 1000000\n"
        f'[rate_limit]\ncalls = {loops * iterations * 10}\nbackend = "sqlite"\n'
        f"[stagnation]\nwindow = {iterations + 1}\nno_progress = {iterations + 1}\n"
        "output_decline = 1.0\n"
        '[breaker]\non_open = "escalate"\n' + tables
    )


def forge_supervise(loops: int, iterations: int, env: dict[str, str] | None = None) -> Timing:
    with loops_project(supervise_toml(loops, iterations), loops) as root:

        def go() -> None:
            summary = _forge(root, ["supervise", "--json"], env)
            loops_run = summary["loops"]
            assert isinstance(loops_run, list)
            ran = sum(loop["iterations"] for loop in loops_run)
            verified = all(
                loop["reason"] == "iterations-exhausted" and str(loop["verify"]).startswith("PASS")
                for loop in loops_run
            )
            if ran != loops * iterations or not verified:
                raise SystemExit(f"forge supervise did not run every iteration: {summary}")

        return timed(go)


async def raw_supervise(loops: int, iterations: int) -> None:
    async def loop() -> None:
        for _ in range(iterations):
            await trio.run_process(EXECUTOR, stdout=subprocess.DEVNULL)  # the executor
            await trio.run_process(EXECUTOR, stdout=subprocess.DEVNULL)  # the verify

    async with trio.open_nursery() as nursery:
        for _ in range(loops):
            nursery.start_soon(loop)


# -- forge run -----------------------------------------------------------------

RUN_TOML = '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "sqlite"\n'


def forge_run(iterations: int, env: dict[str, str] | None = None) -> Timing:
    with project(RUN_TOML) as root:
        args = ["run", "--yes", "--json", "--cmd", "true", "--max-iterations", str(iterations)]

        def go() -> None:
            summary = _forge(root, args, env)
            if summary.get("iterations") != iterations:
                raise SystemExit(f"forge run did not run every iteration: {summary}")

        return timed(go)


async def raw_run(iterations: int) -> None:
    for _ in range(iterations):
        await trio.run_process(EXECUTOR, stdout=subprocess.DEVNULL)


# -- reporting -----------------------------------------------------------------


def git_calls(measure: Callable[[dict[str, str]], object]) -> int:
    with tempfile.TemporaryDirectory() as folder:
        env, log = counting_env(Path(folder))
        measure(env)
        return len(log.read_text().splitlines()) if log.exists() else 0


def report(name: str, total: int, forge: Timing, raw: Timing, git: int) -> None:
    print(
        f"raw trio spawning:  {total / raw.wall:8.1f} iterations/s  ({raw.wall:.2f} s, "
        f"CPU {raw.cpu / total * 1000:.2f} ms/iteration)"
    )
    print(
        f"{name + ':':19} {total / forge.wall:8.1f} iterations/s  ({forge.wall:.2f} s, "
        f"CPU {forge.cpu / total * 1000:.2f} ms/iteration)"
    )
    print(f"ratio forge/raw:    {raw.wall / forge.wall:8.1%}")
    print(f"git per iteration:  {git / total:8.2f}   ({git} git commands in all)")


def bench_supervise(loops: int, iterations: int) -> None:
    total = loops * iterations
    raw = timed(lambda: trio.run(raw_supervise, loops, iterations))
    forge = forge_supervise(loops, iterations)
    git = git_calls(lambda env: forge_supervise(loops, iterations, env))
    print(
        f"== forge supervise: {loops} loops x {iterations} iterations, "
        f"executor + verify each ({os.cpu_count()} cores)"
    )
    report("forge supervise", total, forge, raw, git)


def bench_run(iterations: int) -> None:
    raw = timed(lambda: trio.run(raw_run, iterations))
    forge = forge_run(iterations)
    once = forge_run(1)
    git = git_calls(lambda env: forge_run(iterations, env))
    print(f"== forge run --max-iterations {iterations}, no-op agent ({os.cpu_count()} cores)")
    report("forge run", iterations, forge, raw, git)
    marginal = (forge.wall - once.wall) / (iterations - 1)
    marginal_cpu = (forge.cpu - once.cpu) / (iterations - 1)
    per_raw = raw.wall / iterations
    print(f"one forge run of 1 iteration: {once.wall:.2f} s (start-up, imports, plan)")
    print(
        f"per further iteration: {marginal * 1000:.1f} ms (CPU {marginal_cpu * 1000:.2f} ms); "
        f"raw {per_raw * 1000:.1f} ms; ratio {per_raw / marginal:.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("supervise", "run", "both"), default="both")
    parser.add_argument("--loops", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--run-iterations", type=int, default=20)
    args = parse_args(parser, loops=3, iterations=2, run_iterations=2)
    if args.mode in ("supervise", "both"):
        bench_supervise(args.loops, args.iterations)
    if args.mode in ("run", "both"):
        bench_run(args.run_iterations)


if __name__ == "__main__":
    main()
