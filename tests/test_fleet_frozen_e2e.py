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

from .fleet_support import fleet_of, git_repo, group_members, wait_for
from .redis_server import RedisServer

# An agent that writes a line every 0.05 s while it runs (the machine's clock, shared
# by every host of the test, and its process group), then one "end" line. Its first
# iteration holds far longer than any freeze; the next one ends the loop at once.
AGENT = """
import os, sys, time
host, change = os.environ["FLEET_TEST_HOST"], os.environ["FORGE_CHANGE"]
first = os.environ["FORGE_ITERATION"] == "1"
hold = float(sys.argv[2]) if first else 0.3
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
until = time.monotonic() + hold
while True:
    line = f"{time.time():.6f} {host} {change} beat {os.getpgid(0)}\\n"
    os.write(log, line.encode())
    if time.monotonic() >= until:
        break
    time.sleep(0.05)
os.write(log, f"{time.time():.6f} {host} {change} end {os.getpgid(0)}\\n".encode())
print("working" if first else "FORGE_DONE")
"""

FROZEN_HOLD = 30.0
CHANGES = ("f1", "f2")


@attrs.frozen
class Beat:
    at: float
    host: str
    change: str
    what: str
    group: int


def read_beats(path: Path) -> list[Beat]:
    if not path.exists():
        return []
    beats = []
    for line in path.read_text().splitlines():
        at, host, change, what, group = line.split()
        beats.append(Beat(float(at), host, change, what, int(group)))
    return beats


def overlap(beats: list[Beat], change: str) -> float:
    """How long the frozen host's agent ran after the other host's had started (≤ 0: never)."""
    frozen = [b.at for b in beats if b.change == change and b.host == "w1"]
    taker = [b.at for b in beats if b.change == change and b.host == "w2"]
    return max(frozen) - min(taker)


def batch(tmp: Path, beats: Path, changes: tuple[str, ...]) -> str:
    script = tmp / "agent.py"
    script.write_text(AGENT)
    agent = json.dumps(f"{sys.executable} {script} {beats} {FROZEN_HOLD:g}")
    lines = ["[verify]", 'command = "true"', "specs = []", "[stagnation]", "no_progress = 10"]
    for change in changes:
        folder = git_repo(tmp / "loops" / change)
        lines += ["[[loop]]", f'change = "{change}"', f"dir = {json.dumps(str(folder))}"]
        lines.append(f"cmd = {agent}")
    return "\n".join(lines) + "\n"


def test_a_frozen_host_s_agents_are_killed_before_its_loops_are_taken_over(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="3s", heartbeat="1s") as fleet:
        beats = tmp_path / "beats.log"
        assert fleet.submit(batch(tmp_path, beats, CHANGES)).code == 0
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


def test_a_host_frozen_past_its_deadline_gives_up_its_loops_even_if_nobody_took_them(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with fleet_of(tmp_path, redis_server, lease="3s", heartbeat="1s") as fleet:
        beats = tmp_path / "beats.log"
        assert fleet.submit(batch(tmp_path, beats, ("g1",))).code == 0
        frozen = fleet.spawn("w1", max_parallel=1, extra={"FLEET_TEST_HOST": "w1"})
        wait_for(lambda: bool(read_beats(beats)), what="w1's agent under way")
        group = read_beats(beats)[0].group
        frozen.send_signal(signal.SIGSTOP)
        try:
            # Nobody else is there: only the watchdog can stop the agent.
            wait_for(lambda: group_members(group) == [], what="the agent killed")
        finally:
            frozen.send_signal(signal.SIGCONT)
        assert frozen.wait(timeout=60) == 0, fleet.output("w1")

        recorded = read_beats(beats)
        first = [b.what for b in recorded if b.group == group]
        assert "end" not in first  # killed, not ended
        later = [b for b in recorded if b.group != group]
        assert later, recorded  # claimed again
        assert later[-1].what == "end"  # and run to its end
        output = fleet.output("w1")
        assert "lease lost" in output, output
        events = fleet.timeline("g1")
        finished = [e["iteration"] for e in events if e["event"] == "iteration.finished"]
        # The iteration the watchdog cut short is not recorded as the agent's failure.
        assert finished == [2], events
        assert fleet.status()["loops"]["g1"]["state"] == "done"
