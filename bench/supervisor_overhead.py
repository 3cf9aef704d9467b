"""Supervisor overhead: forge against raw trio spawning of the same processes.

Three modes, each timed against baselines that spawn exactly the processes
Forge spawns for its executor and its verify, the way Forge spawns them
(through ``sh -c``), with bare trio at the same concurrency:

- ``supervise``: L loops x I iterations of a no-op executor (``true``) under
  ``forge supervise`` with every gate on: a verify (``true``) after every
  iteration and its breaker, a budget with a ceiling, the secret scan, the
  protected paths' integrity check, the sqlite rate limiter, stagnation probing
  in git. Each loop works in its own small repository (``dir = "loops/loop-N"``;
  forge refuses two loops in one working tree).
- ``worktrees``: the same loops declared without a ``dir`` in one repository
  under ``[supervise] worktrees = "auto"``, so that the supervisor gives each a
  git worktree of its own (``.forge/worktrees/<change>`` on ``forge/<change>``),
  made as the loop starts and counted in its time; timed in the same rounds as
  the separate repositories, whose wall time it is compared with.
- ``run``: ``forge run --max-iterations N`` of the same no-op agent (forge run
  runs no verify of its own). Baseline: N sequential ``sh -c true``. A forge
  run also pays for starting Python and importing Forge once; its cost per
  iteration is also given from the difference with a one-iteration run.

The supervise baselines: ``raw``, per iteration ``sh -c true`` (the executor)
then ``sh -c true`` (the verify), L loops at once; ``raw+git``, the minimum a
supervisor must do, the same with one ``git status`` (Forge's own arguments) of
the loop's tree between them, in separate repositories and in the worktrees of
one repository laid out as Forge lays them.

Every figure is min/median/max over ``--runs`` rounds (3 by default); a round
measures every baseline and every forge run of its mode one after the other,
and each ratio is taken within its round. Printed: iterations per second,
forge's share of each baseline, the git commands forge ran per iteration
(counted in a separate run by a logging ``git`` first on PATH), and the CPU time
(user + system, Forge and all it spawned) per iteration.

    .venv/bin/python bench/supervisor_overhead.py [--mode all] [--loops 50]
        [--iterations 20] [--run-iterations 20] [--runs 3] [--timeout S] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs
import trio
from _quick import FORGE_ENV, parse_args, verdict
from _spread import spread

FORGE = Path(sys.executable).with_name("forge")
EXECUTOR = ["sh", "-c", "true"]  # how Forge starts a --cmd or [[loop]] cmd, and a verify
# The one git status a loop needs per iteration, with the arguments Forge gives it.
GIT_STATUS = [
    "git",
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-ahead-behind",
    "--untracked-files=all",
    "--no-renames",
    "--",
    ".",
    ":(exclude).forge",
]
GIT_ENV = dict(FORGE_ENV, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
REPOS = "repos"
WORKTREES = "worktrees"
LAYOUTS = {REPOS: "separate repositories", WORKTREES: 'worktrees = "auto", one repository'}


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
GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]


def small_repository(root: Path, extra: dict[str, str] | None = None) -> None:
    """A small committed repository: AGENTS.md, specs/, a few source files."""
    for name, text in {**FILES, **(extra or {})}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "start"], cwd=root, check=True)


@contextmanager
def project(tables: str) -> Iterator[Path]:
    """A small committed repository with a forge.toml (one loop: ``forge run``)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        small_repository(root, {"forge.toml": tables})
        yield root


@contextmanager
def loops_project(tables: str, loops: int, layout: str) -> Iterator[tuple[Path, list[Path]]]:
    """A forge.toml and the loops' trees: the project root and each loop's folder.

    ``repos``: ``loops/loop-N``, one small repository per loop, as parallel
    changes are laid out with a clone each. ``worktrees``: one small repository
    holding the forge.toml; the loops' folders are where Forge puts their
    worktrees, made here only for the raw baseline (forge makes its own).
    """
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        if layout == WORKTREES:
            small_repository(root, {"forge.toml": tables})
            yield root, [root / ".forge" / "worktrees" / f"loop-{n}" for n in range(loops)]
            return
        template = root / "template"
        template.mkdir()
        small_repository(template)
        for n in range(loops):
            shutil.copytree(template, root / "loops" / f"loop-{n}", symlinks=True)
        shutil.rmtree(template)
        (root / "forge.toml").write_text(tables)
        yield root, [root / "loops" / f"loop-{n}" for n in range(loops)]


def make_worktrees(root: Path, trees: Sequence[Path]) -> None:
    """The worktrees Forge would make, one per loop on its ``forge/<change>`` branch."""
    for tree in trees:
        subprocess.run(
            [*GIT, "worktree", "add", "-q", "-b", f"forge/{tree.name}", str(tree)],
            cwd=root,
            check=True,
            capture_output=True,
        )


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
    env = dict(FORGE_ENV, PATH=f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return env, log


def _forge(
    root: Path,
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> dict[str, object]:
    try:
        done = subprocess.run(
            [str(FORGE), *args],
            cwd=root,
            capture_output=True,
            text=True,
            env=FORGE_ENV if env is None else env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(f"forge {' '.join(args)} did not finish in {timeout:g} s") from None
    try:
        result: dict[str, object] = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"forge {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}") from None
    return result


# -- forge supervise -----------------------------------------------------------


def supervise_toml(loops: int, iterations: int, layout: str = REPOS) -> str:
    if layout == WORKTREES:
        tables = "".join(f'[[loop]]\nchange = "loop-{n}"\ncmd = "true"\n' for n in range(loops))
        tables = '[supervise]\nworktrees = "auto"\n' + tables
    else:
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


def forge_supervise(
    loops: int,
    iterations: int,
    layout: str = REPOS,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> Timing:
    toml = supervise_toml(loops, iterations, layout)
    with loops_project(toml, loops, layout) as (root, _):

        def go() -> None:
            summary = _forge(root, ["supervise", "--json"], env, timeout)
            loops_run = summary["loops"]
            assert isinstance(loops_run, list)
            ran = sum(loop["iterations"] for loop in loops_run)
            verified = all(
                loop["reason"] == "iterations-exhausted" and str(loop["verify"]).startswith("PASS")
                for loop in loops_run
            )
            if ran != loops * iterations or not verified:
                raise SystemExit(
                    f"forge supervise ({layout}) did not run every iteration: {summary}"
                )

        return timed(go)


async def raw_supervise(trees: Sequence[Path], iterations: int, git: bool) -> None:
    async def loop(tree: Path) -> None:
        for _ in range(iterations):
            await trio.run_process(EXECUTOR, cwd=tree, stdout=subprocess.DEVNULL)  # the executor
            if git:
                await trio.run_process(GIT_STATUS, cwd=tree, env=GIT_ENV, stdout=subprocess.DEVNULL)
            await trio.run_process(EXECUTOR, cwd=tree, stdout=subprocess.DEVNULL)  # the verify

    async with trio.open_nursery() as nursery:
        for tree in trees:
            nursery.start_soon(loop, tree)


def raw_on(loops: int, iterations: int, layout: str, git: bool) -> Timing:
    """The raw baseline over ``loops`` trees laid out as ``layout`` (set up untimed)."""
    with loops_project("", loops, layout) as (root, trees):
        if layout == WORKTREES:
            make_worktrees(root, trees)
        return timed(lambda: trio.run(raw_supervise, trees, iterations, git))


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


def _rate(total: int, timings: Sequence[Timing]) -> str:
    speed = spread([total / t.wall for t in timings], "{:.1f}")
    cpu = spread([t.cpu / total * 1000 for t in timings], "{:.2f}")
    return f"{speed} iterations/s, CPU {cpu} ms/iteration"


def _share(forge: Sequence[Timing], baseline: Sequence[Timing]) -> list[float]:
    """Forge's throughput as a share of the baseline's, round by round."""
    return [base.wall / run.wall for run, base in zip(forge, baseline, strict=True)]


def _ratio_line(
    name: str, shares: list[float], goal: float | None, args: argparse.Namespace
) -> str:
    line = f"{name + ':':31} {spread(shares, '{:.1%}')}"
    if goal is not None:
        line += f"   (goal >= {goal:.0%}: {verdict(args, statistics.median(shares) >= goal)})"
    return line


def _supervise_git_calls(args: argparse.Namespace, layout: str) -> int:
    def measure(env: dict[str, str]) -> None:
        forge_supervise(args.loops, args.iterations, layout, env, args.timeout)

    return git_calls(measure)


def bench_supervise(args: argparse.Namespace, layouts: Sequence[str]) -> None:
    loops, iterations = args.loops, args.iterations
    total = loops * iterations
    raw: list[Timing] = []
    raw_git: dict[str, list[Timing]] = {layout: [] for layout in layouts}
    forge: dict[str, list[Timing]] = {layout: [] for layout in layouts}
    for _ in range(args.runs):
        raw.append(raw_on(loops, iterations, REPOS, git=False))
        for layout in layouts:
            raw_git[layout].append(raw_on(loops, iterations, layout, git=True))
        for layout in layouts:
            forge[layout].append(forge_supervise(loops, iterations, layout, timeout=args.timeout))
    git = {layout: _supervise_git_calls(args, layout) for layout in layouts}
    print(
        f"== forge supervise: {loops} loops x {iterations} iterations, executor + verify each "
        f"({os.cpu_count()} cores); min/median/max of {args.runs} run(s)"
    )
    print(f"{'raw trio spawning:':31} {_rate(total, raw)}")
    for layout in layouts:
        print(f"{f'raw + git status ({layout}):':31} {_rate(total, raw_git[layout])}")
    for layout in layouts:
        print(f"{f'forge supervise ({layout}):':31} {_rate(total, forge[layout])}")
    goals = {REPOS: (0.25, 0.5), WORKTREES: (0.2, None)}
    for layout in layouts:
        name = "forge" if layout == REPOS else "worktrees"
        raw_goal, git_goal = goals[layout]
        print(_ratio_line(f"ratio {name}/raw", _share(forge[layout], raw), raw_goal, args))
        shares = _share(forge[layout], raw_git[layout])
        print(_ratio_line(f"ratio {name}/raw+git", shares, git_goal, args))
    if WORKTREES in layouts and REPOS in layouts:
        slower = [
            tree.wall / repo.wall for tree, repo in zip(forge[WORKTREES], forge[REPOS], strict=True)
        ]
        met = verdict(args, statistics.median(slower) <= 1.5)
        print(f"{'worktrees/repos wall:':31} {spread(slower, '{:.2f}x')}   (goal <= 1.5x: {met})")
    for layout in layouts:
        print(
            f"{f'git per iteration ({layout}):':31} {git[layout] / total:.2f}   "
            f"({git[layout]} git commands in all, {LAYOUTS[layout]})"
        )


def bench_run(args: argparse.Namespace) -> None:
    iterations = args.run_iterations
    raw: list[Timing] = []
    forge: list[Timing] = []
    once: list[Timing] = []
    for _ in range(args.runs):
        raw.append(timed(lambda: trio.run(raw_run, iterations)))
        forge.append(forge_run(iterations))
        once.append(forge_run(1))
    git = git_calls(lambda env: forge_run(iterations, env))
    print(
        f"== forge run --max-iterations {iterations}, no-op agent ({os.cpu_count()} cores); "
        f"min/median/max of {args.runs} run(s)"
    )
    print(f"{'raw trio spawning:':31} {_rate(iterations, raw)}")
    print(f"{'forge run:':31} {_rate(iterations, forge)}")
    print(_ratio_line("ratio forge/raw", _share(forge, raw), None, args))
    print(f"{'git per iteration:':31} {git / iterations:.2f}   ({git} git commands in all)")
    steps = max(1, iterations - 1)
    marginal = [(run.wall - one.wall) / steps for run, one in zip(forge, once, strict=True)]
    marginal_cpu = [(run.cpu - one.cpu) / steps for run, one in zip(forge, once, strict=True)]
    per_raw = [base.wall / iterations for base in raw]
    shares = [base / more for base, more in zip(per_raw, marginal, strict=True)]
    print(f"one forge run of 1 iteration: {spread([t.wall for t in once])} s (start-up, plan)")
    print(
        f"per further iteration: {spread([m * 1000 for m in marginal], '{:.1f}')} ms "
        f"(CPU {spread([m * 1000 for m in marginal_cpu])} ms); "
        f"raw {spread([p * 1000 for p in per_raw], '{:.1f}')} ms; "
        f"ratio {spread(shares, '{:.1%}')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("supervise", "worktrees", "run", "all"), default="all")
    parser.add_argument("--loops", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--run-iterations", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3, help="rounds of every measurement")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds one forge supervise may take"
    )
    args = parse_args(parser, loops=3, iterations=2, run_iterations=2, runs=1)
    if args.mode in ("supervise", "all"):
        bench_supervise(args, [REPOS, WORKTREES] if args.mode == "all" else [REPOS])
    elif args.mode == "worktrees":
        bench_supervise(args, [REPOS, WORKTREES])
    if args.mode in ("run", "all"):
        bench_run(args)


if __name__ == "__main__":
    main()
