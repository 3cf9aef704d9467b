"""Memory: peak RSS of forge supervising many loops, and of a run whose agent prints 1 GB.

(a) ``forge supervise`` over L ``[[loop]]`` tables (default 200) whose executor is
``sleep 0.2``, a few iterations each, each loop in a folder of its own, every
gate that cannot trip on a no-op left on (the sqlite rate limiter, stagnation
probing in git, the secscan slot), with ``--dry-run`` of the same file and L/10
loops alongside, so that the cost of one running loop is the slope between the
two runs. (b) ``forge run --yes`` of one iteration whose executor prints 1 GB in
1 KiB lines, with ``[secscan]`` off and then on (the output is then redacted
line by line), each after the same run printing 1 MB. The log on disk must hold
every byte (checked against the timeline's count) and the process must not: its
peak may not grow over the 1 MB run's by 1% of the output.

Peak RSS is ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` read by a fresh ``python -c``
wrapper around each command: the largest single process of the tree (forge
itself; its executors are ``sleep``, ``sh``, ``git``), never accumulated across
measurements. Baseline, in the same run and through the same wrapper: the
interpreter with forge's dependencies imported (``import trio, rich, attrs,
cattrs, yaml``).

    .venv/bin/python bench/memory.py [--loops 200] [--iterations 3] [--gigabytes 1]
        [--no-secscan-run] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _quick import parse_args

FORGE = Path(sys.executable).with_name("forge")
MB = 1024 * 1024
LINE = 1024  # bytes per line the loud executor prints, newline included

# Runs argv[2:] with stdout to the file argv[1] (stderr discarded) and reports the
# peak RSS of its process tree, which is all this fresh interpreter ever waited for.
WRAPPER = r"""
import json, resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    started = time.perf_counter()
    code = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL).returncode
    elapsed = time.perf_counter() - started
kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": code, "maxrss_kb": kb, "elapsed": elapsed}))
"""

# The loud executor: `lines` lines of LINE bytes, written 64 lines at a time.
EMIT = r"""
import sys
lines = int(sys.argv[1])
write = sys.stdout.buffer.write
line = b"x" * (LINE - 1) + b"\n"
block = line * 64
for _ in range(lines // 64):
    write(block)
write(line * (lines % 64))
""".replace("LINE", str(LINE))


def peak(argv: Sequence[str], cwd: Path) -> tuple[float, float, bytes]:
    """Peak RSS in MB of ``argv``'s process tree, its wall time, and its stdout."""
    with tempfile.NamedTemporaryFile() as out:
        done = subprocess.run(
            [sys.executable, "-c", WRAPPER, out.name, *argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
        report = json.loads(done.stdout)
        output = Path(out.name).read_bytes()
    if report["code"] not in (0, 1):  # 1: forge's "escalate" ending, expected here
        raise SystemExit(f"{argv[0]} exited {report['code']}:\n{output.decode()[-2000:]}")
    return report["maxrss_kb"] / 1024, report["elapsed"], output


def git_project(root: Path, policy: str, loops: int = 0) -> None:
    """A repository with a forge.toml and ``loops/loop-N``, a folder per loop.

    Each loop works in a folder of its own, as a monorepo's packages are changed
    in parallel: forge refuses two loops in one working tree.
    """
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "forge.toml").write_text(policy)
    for n in range(loops):
        (root / "loops" / f"loop-{n}").mkdir(parents=True)


def supervise_policy(loops: int, iterations: int) -> str:
    tables = "".join(
        f'[[loop]]\nchange = "loop-{n}"\ndir = "loops/loop-{n}"\ncmd = "sleep 0.2"\n'
        for n in range(loops)
    )
    return (
        '[verify]\ncommand = ""\nspecs = []\n'
        f"[run]\nmax_iterations = {iterations}\n"
        f'[rate_limit]\ncalls = {loops * iterations * 10}\nbackend = "sqlite"\n'
        f"[stagnation]\nwindow = {iterations + 1}\nno_progress = {iterations + 1}\n"
        f"identical_errors = {iterations + 1}\npermission_denials = {iterations + 1}\n"
        "output_decline = 1.0\ntest_fix_ratio = 1.0\n"
        '[breaker]\non_open = "escalate"\n' + tables
    )


def supervise(loops: int, iterations: int, dry_run: bool = False) -> tuple[float, float]:
    """Peak MB and seconds of ``forge supervise`` over ``loops`` loops; checks they all ran."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        git_project(root, supervise_policy(loops, iterations), loops)
        argv = [str(FORGE), "supervise", "--json"]
        if dry_run:
            return peak([*argv, "--dry-run"], root)[:2]
        mb, seconds, output = peak(argv, root)
        summary = json.loads(output)
        ran = sum(loop["iterations"] for loop in summary["loops"])
        if ran != loops * iterations:
            raise SystemExit(f"forge ran {ran} iterations, expected {loops * iterations}")
        return mb, seconds


def loud_run(total: int, secscan: bool) -> tuple[float, float, int, int]:
    """Peak MB and seconds of one ``forge run`` iteration printing ``total`` bytes.

    Also returns the size of the iteration's log and the bytes the timeline counted.
    """
    lines = total // LINE
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        git_project(
            root,
            f'[verify]\ncommand = ""\nspecs = []\n[secscan]\nenabled = {str(secscan).lower()}\n',
        )
        (root / "emit.py").write_text(EMIT)
        cmd = f"{sys.executable} emit.py {lines}"
        argv = [str(FORGE), "run", "--change", "loud", "--yes", "--json"]
        mb, seconds, output = peak([*argv, "--max-iterations", "1", "--cmd", cmd], root)
        log = Path(json.loads(output)["last_iteration"]["log"])
        timeline = (root / ".forge" / "changes" / "loud" / "timeline.jsonl").read_text()
        events = [json.loads(line) for line in timeline.splitlines()]
        (finished,) = [e for e in events if e["event"] == "iteration.finished"]
        if finished["output_lines"] != lines:
            raise SystemExit(f"forge counted {finished['output_lines']} lines, printed {lines}")
        return mb, seconds, log.stat().st_size, finished["output_bytes"]


def row(label: str, mb: float, base: float, note: str = "") -> None:
    print(f"  {label:34s} {mb:7.1f} MB  {mb / base:5.2f}x baseline  {note}".rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--no-secscan-run", action="store_true", help="skip (b) with the scan on")
    args = parse_args(parser, loops=4, iterations=1, gigabytes=0.004, no_secscan_run=True)
    few = max(1, args.loops // 10)
    expected = int(args.gigabytes * 1e9) // LINE * LINE
    reference = 1_000_000 // LINE * LINE

    with tempfile.TemporaryDirectory() as folder:
        imports = [sys.executable, "-c", "import trio, rich, attrs, cattrs, yaml"]
        base, _, _ = peak(imports, Path(folder))
    print(f"machine: {os.cpu_count()} cores; peak RSS of the largest process of each tree")
    row("baseline: python + forge's deps", base, base)

    print(f"(a) forge supervise, `sleep 0.2` x {args.iterations} iterations per loop")
    dry, _ = supervise(args.loops, args.iterations, dry_run=True)
    row(f"--dry-run, {args.loops} loops", dry, base)
    small, small_s = supervise(few, args.iterations)
    row(f"{few} loops", small, base, f"({small_s:.1f} s)")
    large, large_s = supervise(args.loops, args.iterations)
    row(f"{args.loops} loops", large, base, f"({large_s:.1f} s)")
    per_loop = (large - small) / (args.loops - few) * 1024 if args.loops > few else float("nan")
    print(
        f"  per running loop: {per_loop:.0f} KB (slope {few} -> {args.loops} loops); "
        f"{(large - base) / args.loops * 1024:.0f} KB counting everything above baseline"
    )

    print(f"(b) forge run --yes, 1 iteration printing {LINE}-byte lines")
    modes = [False] if args.no_secscan_run else [False, True]
    for secscan in modes:
        label = "secscan on (redacted)" if secscan else "secscan off"
        rest, _, _, _ = loud_run(reference, secscan)
        row(f"{label}, {reference / 1e6:.0f} MB out", rest, base)
        mb, seconds, size, counted = loud_run(expected, secscan)
        rate = f"({seconds:.1f} s, {expected / seconds / MB:.0f} MiB/s)"
        size_label = f"{expected / 1e9:.2f} GB" if expected >= 1e8 else f"{expected / 1e6:.0f} MB"
        row(f"{label}, {size_label} out", mb, base, rate)
        ok = "ok" if size == expected == counted else "MISMATCH"
        print(f"    log on disk {size:,} bytes, counted {counted:,}, printed {expected:,}: {ok}")
        grown = mb - rest
        held = "no" if grown * MB < expected / 100 else "YES"
        if args.quick:
            held = "not judged (--quick)"
        print(
            f"    held the output in memory: {held} ({grown:+.1f} MB over the {reference / 1e6:.0f}"
            f" MB run; the output is {expected / (mb * MB):.1f}x forge's peak)"
        )


if __name__ == "__main__":
    main()
