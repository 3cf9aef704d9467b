"""Every bench still runs: ``python bench/<name>.py --quick`` exits 0 and prints its ratios.

``make bench`` is not part of ``make test``, so a bench that no longer fits
today's Forge would only be found by whoever next publishes figures. Each one
runs here at its ``--quick`` sizes, which judge no goal: what is checked is that
it ran to its end and printed the ratio lines its figures are read from, never
how fast anything was.

Each bench runs in a process group of its own with a marker in its
environment; after it, no process carrying the marker may be left (a
``redis-server``, an agent, a worker), and any that is gets killed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .redis_server import redis_server_binary
from .support import forge_env

ROOT = Path(__file__).resolve().parent.parent
# bench/_*.py are the benches' shared helpers, not benches.
BENCHES = sorted(path.stem for path in ROOT.glob("bench/[!_]*.py"))

# Each bench's ratio lines: a pattern and how many lines must match it.
RATIO_LINES: dict[str, list[tuple[str, int]]] = {
    "fleet": [(r"forge = \d+%$", 2), (r"fleet = \d+\.\d\dx$", 1)],
    "hook_latency": [
        (r"^forge .* (\d+\.\d\d/){2}\d+\.\d\dx$", 4),
        (r"^stop hook's own cost .* (\d+\.\d\d/){2}\d+\.\d\dx python -c pass$", 1),
    ],
    "history": [(r"^ratio forge CPU per iteration, ~\d+ / ~\d+: [\d.]+/[\d.]+/[\d.]+x$", 1)],
    "integrity_check": [
        (r"ratio \d+\.\d\dx wall, \d+\.\d\dx CPU$", 1),
        (r"^history \d+ / \d+: [\d.]+/[\d.]+/[\d.]+x$", 1),
    ],
    "limiter": [
        (r"^  ratio K = [\d,]+ to K = 0: wall [\d./]+x, CPU [\d./]+x$", 4),
        (r"^  goal: K = [\d,]+ within 2\.0x of K = 0 \(medians\): ", 2),
    ],
    "memory": [(r" \d+\.\d\dx baseline", 6)],
    "redaction": [
        (r"^(plain|stream-json|base64) +ms/MB: .* decoded/as-is \d+\.\d\dx$", 3),
        (r"^(stream-json|base64) decoded / plain (decoded|as is) \d+\.\d\dx$", 4),
    ],
    "secscan_compare": [
        (r"^(full|rescan|command start-up).* \d+\.\d{3}$", 6),
        (r"recall ours [\d.]+%, detect-secrets [\d.]+%$", 1),
    ],
    "secscan_engine": [(r"re2/re \d+\.\dx$", 2)],
    "startup": [(r"^forge .* wall +(\d+\.\d\d/){2}\d+\.\d\dx +cpu +(\d+\.\d\d/){2}\d+\.\d\dx$", 7)],
    "supervisor_overhead": [
        # forge and worktrees against raw and raw+git (supervise), forge against raw (run)
        (r"^ratio (forge|worktrees)/raw(\+git)?: +(\d+\.\d%/){2}\d+\.\d%( |$)", 5),
        (r"^worktrees/repos wall: +(\d+\.\d\dx/){2}\d+\.\d\dx ", 1),
        (r"; ratio (-?\d+\.\d%/){2}-?\d+\.\d%$", 1),
    ],
}

TIMEOUT = 300  # seconds: a hung bench, not a slow one


def _marked(marker: str) -> list[int]:
    """The processes whose environment carries ``marker`` (``NAME=value``)."""
    found: list[int] = []
    if not Path("/proc/self/environ").exists():  # not Linux: the process group only
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker.encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _left_behind(group: int, marker: str) -> list[int]:
    """Kill what is left of a bench: its process group and every process it marked."""
    left = _marked(marker)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return left
    return [*left, -group]


def test_every_bench_declares_its_ratio_lines() -> None:
    assert sorted(RATIO_LINES) == BENCHES


@pytest.mark.parametrize("name", BENCHES)
def test_bench_runs_quick(name: str) -> None:
    token = uuid.uuid4().hex
    marker = f"BENCH_TEST_RUN={token}"  # not FORGE_*: forge may drop those for its children
    env = forge_env({"PYTHONUNBUFFERED": "1", "BENCH_TEST_RUN": token})
    if name == "fleet":
        binary = redis_server_binary()  # installed when missing, as the fleet tests do
        env["PATH"] = f"{Path(binary).parent}{os.pathsep}{env['PATH']}"
    bench = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / f"{name}.py"), "--quick"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = bench.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(bench.pid, signal.SIGKILL)
        output, _ = bench.communicate()
        pytest.fail(f"bench/{name}.py --quick still running after {TIMEOUT} s:\n{output[-3000:]}")
    finally:
        left = _left_behind(bench.pid, marker)
    assert bench.returncode == 0, f"bench/{name}.py --quick exited {bench.returncode}:\n{output}"
    assert not left, f"bench/{name}.py left processes behind: {left}"
    lines = output.splitlines()
    for pattern, count in RATIO_LINES[name]:
        matched = [line for line in lines if re.search(pattern, line.rstrip())]
        assert len(matched) >= count, (
            f"bench/{name}.py printed {len(matched)} lines like {pattern!r}, "
            f"expected {count}:\n{output}"
        )
