"""A host frozen past its lease (SIGSTOP) never runs an agent beside the host that took over.

The frozen worker cannot stop anything itself; its watchdog process holds a
deadline the worker renews with its leases, and kills the worker's executors
when it lapses, before another host may claim their loops.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import attrs

from .fleet_support import fleet_of, git_repo, wait_for
from .redis_server import RedisServer

# An agent that writes a line every 0.05 s while it runs (the machine's clock, shared
# by every host of the test), then one "end" line. On the frozen host it holds far
# longer than the freeze; on the host that takes over it ends its loop at once.
AGENT = """
import os, sys, time
host, change = os.environ["FLEET_TEST_HOST"], os.environ["FORGE_CHANGE"]
hold = float(sys.argv[2]) if host == "w1" else 0.3
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
until = time.monotonic() + hold
while True:
    os.write(log, f"{time.time():.6f} {host} {change} beat\\n".encode())
    if time.monotonic() >= until:
        break
    time.sleep(0.05)
os.write(log, f"{time.time():.6f} {host} {change} end\\n".encode())
print("working" if host == "w1" else "FORGE_DONE")
"""

FROZEN_HOLD = 30.0
CHANGES = ("f1", "f2")


@attrs.frozen
class Beat:
    at: float
    host: str
    change: str
    what: str


def read_beats(path: Path) -> list[Beat]:
    if not path.exists():
        return []
    beats = []
    for line in path.read_text().splitlines():
        at, host, change, what = line.split()
        beats.append(Beat(float(at), host, change, what))
    return beats


def overlap(beats: list[Beat], change: str) -> float:
    """How long the frozen host's agent ran after the other host's had started (≤ 0: never)."""
    frozen = [b.at for b in beats if b.change == change and b.host == "w1"]
    taker = [b.at for b in beats if b.change == change and b.host == "w2"]
    return max(frozen) - min(taker)


def test_a_frozen_host_s_agents_are_killed_before_its_loops_are_taken_over(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="3s", heartbeat="1s") as fleet:
        beats = tmp_path / "beats.log"
        script = tmp_path / "agent.py"
        script.write_text(AGENT)
        agent = json.dumps(f"{sys.executable} {script} {beats} {FROZEN_HOLD:g}")
        lines = ["[verify]", 'command = "true"', "specs = []", "[stagnation]", "no_progress = 10"]
        for change in CHANGES:
            folder = git_repo(tmp_path / "loops" / change)
            lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
            lines.append(f"cmd = {agent}")
        assert fleet.submit("\n".join(lines) + "\n").code == 0
        frozen = fleet.spawn("w1", max_parallel=2, extra={"FLEET_TEST_HOST": "w1"})
        wait_for(
            lambda: {b.change for b in read_beats(beats)} == set(CHANGES),
            what="w1's agents under way",
        )
        frozen.send_signal(signal.SIGSTOP)  # frozen far past its lease
        try:
            taker = fleet.spawn("w2", max_parallel=2, extra={"FLEET_TEST_HOST": "w2"})
            assert taker.wait(timeout=120) == 0, fleet.output("w2")
        finally:
            frozen.send_signal(signal.SIGCONT)
        assert frozen.wait(timeout=60) == 0, fleet.output("w1")

        recorded = read_beats(beats)
        measured = {change: overlap(recorded, change) for change in CHANGES}
        print(f"overlap per change (s): {measured}")
        for change in CHANGES:
            # The taker ran the change to its end; the frozen host's agent never ended
            # by itself (it was killed), and it had stopped before the taker's started.
            assert [b.what for b in recorded if b.host == "w2" and b.change == change][-1] == "end"
            assert "end" not in [b.what for b in recorded if b.host == "w1" and b.change == change]
            assert measured[change] < 0, measured
        output = fleet.output("w1")
        assert output.count("lease lost") >= len(CHANGES), output
        # The frozen host wrote nothing late: only the taker's iterations are recorded.
        for change in CHANGES:
            events = fleet.timeline(change)
            finished = [e["iteration"] for e in events if e["event"] == "iteration.finished"]
            assert 1 not in finished, events
            assert [e["event"] for e in events].count("run.stopped") == 1
