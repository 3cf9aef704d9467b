"""The fleet's memory on the Redis server: per loop, per iteration, and under the timeline cap.

Called from ``bench/fleet.py`` (its server, its ``--quick``), or alone:

    .venv/bin/python bench/_fleet_memory.py [--loops 10] [--iterations 10]
        [--replayed 4000] [--cap 2000] [--quick]

1. Real batches: ``forge fleet work`` runs ``--loops`` loops of a no-op agent
   for one iteration, then for ``--iterations`` iterations (the agent says
   done at the last one). Measured when each batch has ended: the sum of
   ``MEMORY USAGE`` (exact: ``SAMPLES 0``) over the batch's keys, the limiter's
   apart. Per loop is the one-iteration batch over its loops; per iteration,
   what the longer batch adds, over its extra iterations.
2. The cap: one change's real iteration events (from the longer batch's
   timeline) written again through the fleet's store for ``--replayed``
   iterations, with ``[fleet] timeline_max = --cap``: the change's memory is
   printed as it grows, and stops growing once the cap is reached.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import redis
from _redis_server import start_server

from orchestra._fleet import Connection, FleetConfig, Keys, RedisChangeStore
from orchestra._policy import FleetPolicy
from orchestra._state import Event, IterationStarted, decode_event

FORGE = Path(sys.executable).with_name("forge")


@attrs.frozen
class Measured:
    """What one real batch holds on the server once it has ended."""

    loops: int
    iterations: int
    total: int  # bytes, every key of the batch but the limiter's
    keys: int


def batch_memory(client: redis.Redis, name: str) -> tuple[int, int]:
    """Bytes and number of the batch's keys (``MEMORY USAGE … SAMPLES 0``), limiter apart."""
    total = count = 0
    for key in client.scan_iter(match=f"{Keys(name).prefix}*", count=500):
        text = key.decode() if isinstance(key, bytes) else str(key)
        if ":limiter:" in text:
            continue
        total += int(client.memory_usage(key, samples=0) or 0)
        count += 1
    return total, count


def _git_loop(folder: Path) -> Path:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    identity |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("bench\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "i"]):
        subprocess.run(["git", *args], cwd=folder, env={**os.environ, **identity}, check=True)
    return folder


def run_batch(folder: Path, url: str, loops: int, iterations: int) -> Measured:
    """Run a real batch to its end with two ``forge fleet work`` hosts; its memory then."""
    name = f"mem-{loops}x{iterations}"
    host = folder / name
    host.mkdir(parents=True)
    (host / "forge.toml").write_text(
        f'[fleet]\nname = "{name}"\nlease = "10s"\nheartbeat = "1s"\n[run]\ngrace = "2s"\n'
    )
    # Each iteration changes a file (progress, for the stagnation detectors).
    done_at = (
        f'echo "$FORGE_ITERATION" >> notes.txt; '
        f'test "$FORGE_ITERATION" -ge {iterations} && echo FORGE_DONE || echo working'
    )
    lines = ["[verify]", 'command = "true"', "specs = []", "[secscan]", "enabled = false"]
    lines += ["[rate_limit]", "calls = 100000", 'window = "1h"']
    lines += ["[run]", f"max_iterations = {max(iterations, 1)}", 'grace = "2s"']
    lines += ["[stagnation]", f"no_progress = {iterations + 1}"]
    for number in range(loops):
        loop = _git_loop(host / "loops" / f"m{number:03d}")
        lines += ["[[loop]]", f'change = "m{number:03d}"', f"dir = {json.dumps(str(loop))}"]
        lines.append(f"cmd = {json.dumps(done_at)}")
    (host / "batch.toml").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "FORGE_REDIS_URL": url}
    subprocess.run(
        [str(FORGE), "fleet", "submit", "--batch", "batch.toml", "--replace"],
        cwd=host, env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    logs = [host / f"h{n}.out" for n in range(2)]
    command = [str(FORGE), "fleet", "work", "--max-parallel", "8", "--plain", "--host"]
    workers = [
        subprocess.Popen(
            [*command, f"{name}-h{n}"],
            cwd=host,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        for n, log in enumerate(logs)
    ]
    codes = [worker.wait() for worker in workers]
    if any(codes):
        said = "".join(log.read_text()[-2000:] for log in logs)
        raise SystemExit(f"bench/_fleet_memory.py: the workers of {name} exited {codes}\n{said}")
    client = redis.Redis.from_url(url)
    try:
        total, keys = batch_memory(client, name)
    finally:
        client.close()
    return Measured(loops, iterations, total, keys)


def one_iteration_events(url: str, name: str, change: str) -> list[Event]:
    """The events of one recorded iteration of ``change`` (its second, or its first)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        entries = client.xrange(Keys(name).timeline(change))
        lines = [fields["event"] for _id, fields in entries]
    finally:
        client.close()
    events = [decode_event(json.loads(line)) for line in lines]
    starts = [i for i, event in enumerate(events) if isinstance(event, IterationStarted)]
    first = starts[1] if len(starts) > 2 else starts[0]
    after = [i for i in starts if i > first]
    return events[first : after[0] if after else len(events)]


def replay_under_cap(
    url: str, events: list[Event], replayed: int, cap: int
) -> list[tuple[int, int]]:
    """Write ``events`` again for ``replayed`` iterations; (iterations, bytes) as it grows."""
    config = FleetConfig.from_policy(FleetPolicy(redis=url, name="mem-capped"), environ={})
    if "timeline_max" in attrs.fields_dict(FleetConfig):  # absent before the cap existed
        config = attrs.evolve(config, timeline_max=cap)
    connection = Connection(config)
    keys = config.keys
    try:
        token = int(connection.client.incr(keys.fence("r")))
        store = RedisChangeStore(connection, keys, "r", token, lambda: "2026-12-04T00:00:00.000Z")
        store.load()
        points = sorted({1, 10, *(replayed * n // 10 for n in range(1, 11))} - {0})
        readings = []
        for iteration in range(1, replayed + 1):
            store.append(*events)
            if iteration in points:
                readings.append((iteration, batch_memory(connection.client, "mem-capped")[0]))
        return readings
    finally:
        connection.close()


def report(url: str, folder: Path, *, loops: int, iterations: int, replayed: int, cap: int) -> None:
    """Measure and print (the figures bench/fleet.py prints after its own)."""
    one = run_batch(folder, url, loops, 1)
    many = run_batch(folder, url, loops, iterations)
    per_loop = one.total / loops
    per_iteration = (many.total - one.total) / (loops * max(1, iterations - 1))
    print(f"fleet memory on the server (MEMORY USAGE of the batch's keys, limiter apart), "
          f"{loops} loops, once each batch has ended:")  # fmt: skip
    print(f"  {'1 iteration':<14} per loop   {one.total:9d} B in {one.keys} keys  "
          f"{per_loop / 1024:6.1f} KB per loop")  # fmt: skip
    print(f"  {f'{iterations} iterations':<14} per loop   {many.total:9d} B in {many.keys} keys  "
          f"{per_iteration / 1024:6.1f} KB per further iteration")  # fmt: skip
    events = one_iteration_events(url, f"mem-{loops}x{iterations}", "m000")
    readings = replay_under_cap(url, events, replayed, cap)
    print(f"one change, {len(events)} real events per iteration written again, "
          f"timeline_max = {cap}:")  # fmt: skip
    for count, size in readings:
        print(f"  after {count:6d} iterations  {size / 1024:9.1f} KB")
    grown = readings[-1][1] / max(1, readings[len(readings) // 2][1])
    # Once capped it stays within a tenth of the cap: a trim drops a tenth at once.
    print(f"  last / middle reading = {grown:.2f}x (about 1x once capped)")


def fleet_memory(url: str, folder: Path, args: Any) -> None:
    """bench/fleet.py's one call: its server and its ``--quick``."""
    quick = bool(getattr(args, "quick", False))
    sizes = {"loops": 2, "iterations": 3, "replayed": 300, "cap": 100} if quick else {}
    report(
        url,
        folder / "memory",
        loops=sizes.get("loops", 10),
        iterations=sizes.get("iterations", 10),
        replayed=sizes.get("replayed", 4000),
        cap=sizes.get("cap", 2000),
    )


def main() -> None:
    from _quick import parse_args

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--replayed", type=int, default=4000)
    parser.add_argument("--cap", type=int, default=2000)
    args = parse_args(parser, loops=2, iterations=3, replayed=300, cap=100)
    with tempfile.TemporaryDirectory(prefix="forge-bench-fleet-memory-") as scratch:
        folder = Path(scratch)
        process, port = start_server(folder, "bench/_fleet_memory.py")
        try:
            report(
                f"redis://127.0.0.1:{port}/0",
                folder / "memory",
                loops=args.loops,
                iterations=args.iterations,
                replayed=args.replayed,
                cap=args.cap,
            )
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
