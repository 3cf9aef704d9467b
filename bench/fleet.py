"""The fleet on Redis: the limiter's acquires per second, and a batch's throughput.

1. Limiter: ``RateLimiter.acquire`` on the Redis backend (one Lua script per
   acquire: trim, count, the waiter queue, a unique member, expiry, a bounded
   summary of the window) with 0, 1,000 and 10,000 permits live in the log
   (``--live``; the limit is never reached: nothing waits), against the floor
   of the same server in the same run: a bare ``EVALSHA`` of a no-op script,
   called in a loop, and the same through ``trio.to_thread`` as the limiter
   calls its backend. The sizes are interleaved within each round, so that the
   machine's load weighs on each alike. The goal: the rate at 10,000 live
   permits within 2x of the empty window's.
2. Throughput: 60 loops of a no-op agent (one iteration, ``echo FORGE_DONE``,
   verify ``true``), each in its own small git repository: three
   ``forge fleet work`` processes (20 loops each on average, 8 at once each)
   against one ``forge supervise`` of the same 60 loops, 24 at once.

A ``redis-server`` on a free loopback port, without persistence, is started
and stopped by the script.

    .venv/bin/python bench/fleet.py [--acquires 500] [--live 0,1000,10000] [--rounds 3]
        [--loops 60] [--quick]
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

import redis
import trio
from _fleet_memory import fleet_memory
from _quick import parse_args, verdict
from _redis_server import start_server
from redis.backoff import NoBackoff
from redis.retry import Retry

from orchestra._fleet import Connection, FleetConfig, RedisBackend
from orchestra._policy import FleetPolicy
from orchestra._ratelimit import RateLimiter

FORGE = Path(sys.executable).with_name("forge")
CALLS = 10**9  # never reached: nothing waits
WINDOW = 86400.0  # a day: nothing leaves the log while it is timed
GOAL = 2.0  # the rate with the most live permits within this many times the empty window's


async def limiter_acquires(url: str, name: str, live: int, count: int) -> float:
    connection = Connection(FleetConfig.from_policy(FleetPolicy(redis=url, name=name), environ={}))
    backend = RedisBackend(connection, connection.config.keys, "bench")
    limiter = RateLimiter(backend, CALLS, WINDOW, clock=trio.current_time)
    if live:
        await limiter.acquire("prefill", permits=live)
    started = time.perf_counter()
    for _ in range(count):
        await limiter.acquire("bench")
    elapsed = time.perf_counter() - started
    used = (await limiter.refresh()).used
    connection.close()
    if used != live + count:
        raise SystemExit(f"{used} permits in the log, expected {live + count}")
    return elapsed


def bare_evalsha(port: int, count: int) -> float:
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    sha = client.script_load("return 1")
    started = time.perf_counter()
    for _ in range(count):
        client.evalsha(sha, 0)
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


async def threaded_evalsha(port: int, count: int) -> float:
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    sha = client.script_load("return 1")
    started = time.perf_counter()
    for _ in range(count):
        await trio.to_thread.run_sync(client.evalsha, sha, 0)
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


def make_loops(folder: Path, count: int) -> list[Path]:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    identity |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    env = {**os.environ, **identity}
    dirs = []
    for number in range(count):
        loop = folder / f"l{number:03d}"
        loop.mkdir(parents=True)
        (loop / "README.md").write_text("bench\n")
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "i"]):
            subprocess.run(["git", *args], cwd=loop, env=env, check=True)
        dirs.append(loop)
    return dirs


def batch_text(dirs: list[Path]) -> str:
    lines = ["[verify]", 'command = "true"', "specs = []", "[secscan]", "enabled = false"]
    lines += ["[rate_limit]", "calls = 100000", 'window = "1h"']
    for number, loop in enumerate(dirs):
        lines += ["[[loop]]", f'change = "b{number:03d}"', f"dir = {json.dumps(str(loop))}"]
        lines.append('cmd = "echo FORGE_DONE"')
    return "\n".join(lines) + "\n"


def run_fleet(folder: Path, url: str, dirs: list[Path], workers: int) -> float:
    host = folder / "host"
    host.mkdir()
    (host / "forge.toml").write_text(
        # The lease must outlast two heartbeats and the executor's grace.
        '[fleet]\nname = "bench"\nlease = "10s"\nheartbeat = "1s"\n[run]\ngrace = "2s"\n'
    )
    (host / "nightly.toml").write_text(batch_text(dirs))
    env = {**os.environ, "FORGE_REDIS_URL": url}
    subprocess.run(
        [str(FORGE), "fleet", "submit", "--batch", "nightly.toml", "--replace"],
        cwd=host, env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    started = time.perf_counter()
    running = [
        subprocess.Popen(
            [str(FORGE), "fleet", "work", "--host", f"h{n}", "--max-parallel", "8"],
            cwd=host,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in range(workers)
    ]
    codes = [worker.wait() for worker in running]
    elapsed = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"fleet workers exited {codes}")
    return elapsed


def run_supervise(folder: Path, dirs: list[Path]) -> float:
    host = folder / "solo"
    host.mkdir()
    text = batch_text(dirs).replace("[rate_limit]", "[supervise]\nmax_parallel = 24\n[rate_limit]")
    (host / "forge.toml").write_text(text)
    started = time.perf_counter()
    done = subprocess.run(
        [str(FORGE), "supervise", "--plain"], cwd=host, stdout=subprocess.DEVNULL, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"forge supervise exited {done.returncode}")
    return elapsed


def limiter_rates(args: argparse.Namespace, url: str, port: int) -> None:
    """Acquires per second at each ``--live`` size and the server's floor, and the goal."""
    sizes = args.live
    times: dict[str, list[float]] = {str(live): [] for live in sizes}
    times |= {"bare": [], "threaded": []}
    for round_number in range(args.rounds):
        for live in sizes:
            # A batch of its own per figure: every log starts with exactly `live` permits.
            name = f"r{round_number}-{live}"
            times[str(live)].append(trio.run(limiter_acquires, url, name, live, args.acquires))
        times["bare"].append(bare_evalsha(port, args.acquires))
        times["threaded"].append(trio.run(threaded_evalsha, port, args.acquires))
    rate = {name: args.acquires / min(spent) for name, spent in times.items()}
    empty, fullest = rate[str(sizes[0])], rate[str(sizes[-1])]
    print(f"limiter on Redis, {args.acquires} acquires per figure, best of {args.rounds} rounds:")
    print("  live permits   acquires/s   vs the first   vs bare EVALSHA")
    for live in sizes:
        figure = rate[str(live)]
        share = figure / rate["bare"]
        print(f"  {live:12,d}   {figure:10.0f}   {figure / empty:11.2f}x   {share:14.0%}")
    # "forge =": the empty window's rate against each floor.
    for floor, what in (
        ("bare", "bare EVALSHA of a no-op script "),
        ("threaded", "the same through trio.to_thread"),
    ):
        print(f"  {what}   {rate[floor]:8.0f} /s   forge = {empty / rate[floor]:.0%}")
    met = fullest * GOAL >= empty
    print(f"  {sizes[-1]:,d} live permits: {fullest / empty:.2f}x the rate of {sizes[0]:,d} "
          f"(goal: at least {1 / GOAL:.2f}x): {verdict(args, met)}")  # fmt: skip


def throughput(args: argparse.Namespace, folder: Path, url: str) -> None:
    """A batch of no-op loops on three fleet hosts against one ``forge supervise``."""
    dirs = make_loops(folder / "loops", args.loops)
    fleet = run_fleet(folder, url, dirs, 3)
    solo = run_supervise(folder, dirs)
    print(f"{args.loops} loops of a no-op agent (one iteration, verify `true`):")
    print(f"  3 x forge fleet work (8 at once each)  {fleet:6.2f} s   "
          f"{args.loops / fleet:5.1f} loops/s")  # fmt: skip
    print(f"  forge supervise (24 at once)           {solo:6.2f} s   "
          f"{args.loops / solo:5.1f} loops/s   fleet = {solo / fleet:.2f}x")  # fmt: skip


def live_sizes(text: str) -> list[int]:
    """``0,1000,10000``: the live permits of each figure, in order."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, got {text!r}"
        ) from None
    if not sizes or any(size < 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"expected numbers >= 0, got {text!r}")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acquires", type=int, default=500)
    parser.add_argument("--live", type=live_sizes, default=[0, 1000, 10_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loops", type=int, default=60)
    args = parse_args(parser, acquires=20, live=[0, 10, 100], rounds=1, loops=3)
    with tempfile.TemporaryDirectory(prefix="forge-bench-fleet-") as scratch:
        folder = Path(scratch)
        process, port = start_server(folder, "bench/fleet.py")
        url = f"redis://127.0.0.1:{port}/0"
        try:
            limiter_rates(args, url, port)
            throughput(args, folder, url)
            fleet_memory(url, folder, args)
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
