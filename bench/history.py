"""Flat in history: one loop's iteration ~1,000 against its iteration ~10.

One supervised loop (``forge supervise``) of a no-op executor (``true``) with
every gate on: a verify (``true``) after every iteration and its breaker, a
budget with a ceiling, the secret scan, the integrity check, the sqlite rate
limiter, stagnation probing in git, the status log. Its cost per iteration is
measured over a window of iterations twice, in the same run: once right after
a real history of ``--seed`` iterations (~10), once after ``--history``
iterations (~1,000).

The history is a night of rounds: a run of ``--seed`` iterations, then a
person resets the loop circuit (``forge circuit --reset``), so the next run
counts its iterations afresh (a supervised loop's iterations are capped at
``[run] max_iterations``, at most 50). The seed round is real; the long
history is synthesized from it (a thousand real iterations take minutes of
fsyncs): the seed's round is repeated as Forge wrote it, with its run id,
sequence numbers and cumulative counters moved on each time, so the change's
folder holds what ``--history`` real iterations leave: the timeline (every
event of every round), one ``runs/<run>/`` folder per run with each
iteration's log, one batch folder under ``.forge/runs/`` per run, the
forge-writes journal, the status log (its last ``[alerts] status_log``
sections) and the state files' counters. The rate limiter's window is the
seed's (its cost against live permits is ``bench/limiter.py``'s). Both arms
then run the same real ``forge supervise``, from copies of the same seed.

Per iteration, measured inside the forge process (its entry point called by a
small driver that notes the clock each time an iteration is rendered to the
status log): CPU of forge's own process (every thread), CPU of what it spawned
(executor, verify, git) and wall time. The first iterations of each run are
warm-up, not counted. The goal: forge's own CPU per iteration at ~1,000 within
1.2x of ~10.

    .venv/bin/python bench/history.py [--seed 10] [--history 1000] [--window 20]
        [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _quick import parse_args, verdict
from _spread import spread

CHANGE = "h"
WARM_UP = 3  # iterations of each measured run not counted (imports, caches, first scan)

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

# Runs `forge supervise --json` in this process and notes, at each iteration's
# status-log render, the CPU of this process, of its reaped children, and the wall clock.
DRIVER = """
import atexit, json, os, resource, sys, time
from orchestra._engine import _watch
marks = []
real = _watch.IterationWatch.render
def render(self, *args, **kwargs):
    real(self, *args, **kwargs)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    marks.append((time.process_time(), kids.ru_utime + kids.ru_stime, time.perf_counter()))
_watch.IterationWatch.render = render
def save():
    with open(os.environ["HISTORY_BENCH_MARKS"], "w") as out:
        json.dump(marks, out)
atexit.register(save)
from orchestra._cli._entry import entry
sys.argv = ["forge", "supervise", "--json"]
entry()
"""


def policy(max_iterations: int) -> str:
    return (
        '[verify]\ncommand = "true"\nspecs = []\n'
        f"[run]\nmax_iterations = {max_iterations}\n"
        "[budget]\nmax_tokens = 100000000\n"
        '[rate_limit]\ncalls = 1000000\nbackend = "sqlite"\n'
        "[stagnation]\nwindow = 1000000\nno_progress = 1000000\noutput_decline = 1.0\n"
        "[report]\nwrite = false\n"
        '[breaker]\non_open = "escalate"\n'
        f'[[loop]]\nchange = "{CHANGE}"\ncmd = "true"\n'
    )


def small_repository(root: Path) -> None:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)


def supervise(root: Path, max_iterations: int) -> list[tuple[float, float, float]]:
    """Run the loop up to ``max_iterations`` in all; the marks noted at each iteration."""
    (root / "forge.toml").write_text(policy(max_iterations))
    marks = root.parent / f"{root.name}-marks.json"
    env = dict(os.environ, HISTORY_BENCH_MARKS=str(marks))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], cwd=root, env=env, capture_output=True, text=True
    )
    try:
        summary = json.loads(done.stdout)
        loop = summary["loops"][0]
    except (ValueError, KeyError, IndexError):
        raise SystemExit(f"forge supervise failed:\n{done.stdout}\n{done.stderr}") from None
    if loop["reason"] != "iterations-exhausted":
        raise SystemExit(f"the loop did not run its iterations: {loop}")
    found: list[tuple[float, float, float]] = [tuple(m) for m in json.loads(marks.read_text())]
    return found


# -- the synthesized history -------------------------------------------------------


def grow(root: Path, runs: int) -> None:
    """Repeat the change's one real round (a run, then a reset) until it holds ``runs`` rounds."""
    folder = root / ".forge" / "changes" / CHANGE
    lines = [json.loads(line) for line in (folder / "timeline.jsonl").read_text().splitlines()]
    run_id = lines[0]["run_id"]
    seed = sum(1 for event in lines if event["event"] == "iteration.started")
    batch = root / ".forge" / "runs" / run_id
    journal = (folder / ".forge-writes").read_bytes()
    out: list[str] = []
    seq = 0
    for k in range(runs):
        new_id = f"{run_id}-{k:04d}"
        for event in lines:
            seq += 1
            event = dict(event, seq=seq)
            if "run_id" in event:
                event["run_id"] = new_id
            if event["event"] == "verify" and isinstance(event.get("total_attempts"), int):
                event["total_attempts"] += k * seed
            out.append(json.dumps(event, separators=(",", ":")))
        shutil.copytree(folder / "runs" / run_id, folder / "runs" / new_id)
        if batch.is_dir():
            shutil.copytree(batch, batch.with_name(new_id))
    shutil.rmtree(folder / "runs" / run_id)
    (folder / "timeline.jsonl").write_text("".join(line + "\n" for line in out))
    (folder / ".forge-writes").write_bytes(journal * runs)
    total = runs * seed
    _set_counter(folder / "verify-attempts.yaml", "total_attempts", total)
    _set_counter(folder / "spend.yaml", "iterations", total)
    _renumber_status(folder / "status.md", total)


def _set_counter(path: Path, key: str, value: int) -> None:
    text = re.sub(rf"^{key}: \d+$", f"{key}: {value}", path.read_text(), flags=re.MULTILINE)
    path.write_text(text)


def _renumber_status(path: Path, total: int) -> None:
    """The status log of ``total`` iterations: its last sections, numbered up to ``total``."""
    text = path.read_text()
    head, *sections = re.split(r"(?m)^(?=## Iteration )", text)
    keep = int(re.search(r"the last (\d+) are kept", head)[1]) if "are kept" in head else 50
    body = []
    for n in range(max(1, total - keep + 1), total + 1):
        section = sections[(n - 1) % len(sections)]
        body.append(re.sub(r"^## Iteration \d+", f"## Iteration {n}", section, count=1))
    path.write_text(head + "".join(body))


# -- the bench ---------------------------------------------------------------------


def per_iteration(marks: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Forge's own CPU, its children's and wall time per iteration, past the warm-up."""
    window = marks[WARM_UP - 1 :]
    count = len(window) - 1
    if count < 1:
        raise SystemExit(f"too few iterations measured: {len(marks)}")
    first, last = window[0], window[-1]
    return tuple((last[i] - first[i]) / count for i in range(3))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=10, help="real iterations of history")
    parser.add_argument("--history", type=int, default=1000, help="synthesized iterations")
    parser.add_argument("--window", type=int, default=20, help="iterations measured")
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_args(parser, seed=3, history=30, window=2, repeats=1)
    measured = args.window + WARM_UP - 1
    history = args.history // args.seed * args.seed
    with tempfile.TemporaryDirectory() as folder:
        seed = Path(folder) / "seed"
        seed.mkdir()
        small_repository(seed)
        supervise(seed, args.seed)
        # Rounds of a long night: a run, then a person resets the circuit (counting afresh).
        forge = Path(sys.executable).with_name("forge")
        reset = [str(forge), "circuit", CHANGE, "--reset", "--reason", "next round"]
        subprocess.run(reset, cwd=seed, check=True, capture_output=True)
        short: list[tuple[float, float, float]] = []
        long: list[tuple[float, float, float]] = []
        for n in range(args.repeats):
            near = Path(folder) / f"near-{n}"
            far = Path(folder) / f"far-{n}"
            shutil.copytree(seed, near, symlinks=True)
            shutil.copytree(seed, far, symlinks=True)
            grow(far, args.history // args.seed)
            short.append(per_iteration(supervise(near, measured)))
            long.append(per_iteration(supervise(far, measured)))
            shutil.rmtree(near)
            shutil.rmtree(far)
    ms = "{:.1f}"
    for label, runs, first in (
        (f"iteration ~{args.seed}", short, args.seed + WARM_UP + 1),
        (f"iteration ~{history}", long, history + WARM_UP + 1),
    ):
        print(
            f"{label} ({args.window} iterations from {first}): forge CPU "
            f"{spread([r[0] * 1e3 for r in runs], ms)} ms, children CPU "
            f"{spread([r[1] * 1e3 for r in runs], ms)} ms, wall "
            f"{spread([r[2] * 1e3 for r in runs], ms)} ms per iteration (min/median/max)"
        )
    ratios = [b[0] / a[0] for a, b in zip(short, long, strict=True)]
    total = [(b[0] + b[1]) / (a[0] + a[1]) for a, b in zip(short, long, strict=True)]
    print(f"forge and children CPU, ~{history} / ~{args.seed}: {spread(total)}x")
    met = statistics.median(ratios) <= 1.2
    print(f"goal 1.2x: {verdict(args, met)}")
    print(f"ratio forge CPU per iteration, ~{history} / ~{args.seed}: {spread(ratios)}x")


if __name__ == "__main__":
    main()
