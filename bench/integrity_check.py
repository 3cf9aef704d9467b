"""The integrity check's cost per iteration: ``arm()`` then ``inspect()``.

A small repository protected by the default ``[protect]`` lists (AGENTS.md,
specs/, forge.toml, ...) plus one change's Forge state (spend.yaml,
breaker.yaml, verify-attempts.yaml), which Forge rewrites between iterations
as a loop does. Each iteration: rewrite the state files (Forge's own writes,
before the manifest; not timed), then ``arm()`` and ``inspect()``. Printed: microseconds of wall
and CPU time per iteration, and the files left in the snapshot folder.

Baseline, interleaved with it in the same loop: the least a check that trusts
``stat`` for unchanged files does, twice per iteration (once for ``arm()``, once
for ``inspect()``): ``os.stat`` of every file of the tree, then read and SHA-256
the three state files that were rewritten.

Then the cost against the loop's history: the same tree, one change's folder
holding the history of H iterations as a loop leaves it (a ``runs/<run>/``
folder per ten iterations with each iteration's log, a timeline of about
2.2 KB of events per iteration); each measured iteration Forge appends three
events to the timeline and rewrites its state files (not timed), then
``arm()`` and ``inspect()``. Printed: CPU per iteration at each H, and the
largest H's against the smallest's, min/median/max of three runs.

    .venv/bin/python bench/integrity_check.py [--iterations 2000] [--specs 20]
        [--history 10,1000] [--history-iterations 200] [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

from _quick import parse_args
from _spread import spread

from orchestra._policy import Policy
from orchestra._protect import integrity_check


def _tree(root: Path, specs: int) -> None:
    files = {
        "AGENTS.md": "# Agents\n",
        "IMPLEMENTATION_PLAN.md": "- [ ] nothing\n",
        "forge.toml": '[verify]\ncommand = "true"\n',
        "src/app.py": "print('hello')\n" * 20,
    }
    files.update({f"specs/spec-{n}.md": f"# Spec {n}\n" * 40 for n in range(specs)})
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    # A checkout's files are older than a second: their hashes are reused.
    old = time.time_ns() - 3600 * 10**9
    for path in root.rglob("*"):
        os.utime(path, ns=(old, old))


STATE_FILES = ("spend.yaml", "breaker.yaml", "verify-attempts.yaml")


def _bare_pass(files: list[str], rewritten: list[str]) -> None:
    for name in files:
        os.stat(name)
    for name in rewritten:
        with open(name, "rb") as handle:
            hashlib.sha256(handle.read()).digest()


def _forge_writes(state: Path, n: int) -> None:
    (state / "spend.yaml").write_text(f"tokens: {n * 100}\ncost: {n}\n")
    (state / "breaker.yaml").write_text(f"state: closed\nfailures: 0\nseen: {n}\n")
    (state / "verify-attempts.yaml").write_text(f"consecutive_failures: 0\nlast: {n}\n")


# One iteration's events, about as long as a supervised loop's (started, verify, finished).
EVENT = b'{"ts":"2026-12-02T06:57:38.052Z","seq":1,"event":"iteration.started","pad":"' + (
    b"x" * 640 + b'"}\n'
)


def _history(state: Path, iterations: int) -> None:
    """A change's folder as ``iterations`` iterations of a loop leave it."""
    for run in range(0, iterations, 10):
        folder = state / "runs" / f"20261202T0000{run:06d}Z-abcd"
        folder.mkdir(parents=True)
        for n in range(1, 11):
            (folder / f"iteration-{n}.log").write_bytes(b"")
    (state / "timeline.jsonl").write_bytes(EVENT * 3 * iterations)


def history_cost(specs: int, history: int, iterations: int) -> float:
    """CPU seconds per arm()+inspect() with ``history`` iterations behind the loop."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _tree(root, specs)
        state = root / ".forge" / "changes" / "c"
        state.mkdir(parents=True)
        _history(state, history)
        check = integrity_check(Policy(), workdir=root, root=root, state_folder=state)
        _forge_writes(state, 0)
        check.arm()
        check.inspect("warm")
        cpu = 0.0
        for n in range(iterations):
            _forge_writes(state, n + 1)
            with (state / "timeline.jsonl").open("ab") as timeline:
                timeline.write(EVENT * 3)
            started = time.process_time()
            check.arm()
            report = check.inspect(f"i{n}")
            cpu += time.process_time() - started
            if report.harmed:
                raise SystemExit(f"unexpected harm: {report.detail()}")
        check.finish()
        return cpu / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--specs", type=int, default=20)
    parser.add_argument("--history", default="10,1000", help="history sizes, in iterations")
    parser.add_argument("--history-iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_args(
        parser, iterations=20, specs=3, history="2,20", history_iterations=5, repeats=1
    )
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _tree(root, args.specs)
        state = root / ".forge" / "changes" / "c"
        state.mkdir(parents=True)
        check = integrity_check(Policy(), workdir=root, root=root, state_folder=state)
        _forge_writes(state, 0)
        check.arm()
        check.inspect("warm")
        # The tree's files, not the check's own (its snapshots and kept copies come and go).
        files = sorted(
            str(path) for path in root.rglob("*") if path.is_file() and "protect" not in path.parts
        )
        rewritten = [str(state / name) for name in STATE_FILES]
        wall = cpu = bare_wall = bare_cpu = 0.0
        for n in range(args.iterations):
            _forge_writes(state, n + 1)
            started, started_cpu = time.perf_counter(), time.process_time()
            check.arm()
            report = check.inspect(f"i{n}")
            wall += time.perf_counter() - started
            cpu += time.process_time() - started_cpu
            started, started_cpu = time.perf_counter(), time.process_time()
            _bare_pass(files, rewritten)
            _bare_pass(files, rewritten)
            bare_wall += time.perf_counter() - started
            bare_cpu += time.process_time() - started_cpu
            if report.harmed:
                raise SystemExit(f"unexpected harm: {report.detail()}")
        snapshots = state / "protect" / "snapshots"
        kept = len(os.listdir(snapshots)) if snapshots.is_dir() else 0
        check.finish()
        per = 1e6 / args.iterations
        print(
            f"{args.iterations} iterations, {report.checked} protected paths: "
            f"{wall * per:.0f} us wall, {cpu * per:.0f} us CPU per arm()+inspect(); "
            f"{kept} files in the snapshot folder before finish()"
        )
        print(
            f"baseline (stat {len(files)} files, hash {len(rewritten)}, twice): "
            f"{bare_wall * per:.0f} us wall, {bare_cpu * per:.0f} us CPU; "
            f"ratio {wall / bare_wall:.2f}x wall, {cpu / bare_cpu:.2f}x CPU"
        )
    sizes = sorted({int(size) for size in args.history.split(",")})
    costs: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(args.repeats):
        for size in sizes:  # interleaved: a slow moment falls on every size alike
            costs[size].append(history_cost(args.specs, size, args.history_iterations))
    for size in sizes:
        print(
            f"history of {size} iterations: "
            f"{spread([c * 1e6 for c in costs[size]], '{:.0f}')} us CPU per arm()+inspect()"
        )
    low, high = sizes[0], sizes[-1]
    ratios = [b / a for a, b in zip(costs[low], costs[high], strict=True)]
    print(f"history {high} / {low}: {spread(ratios)}x")


if __name__ == "__main__":
    main()
