"""Test support for the fleet: a batch of loops, worker processes, the executors' stamps."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import attrs

from .redis_server import RedisServer
from .support import FORGE, Completed, forge_env, run_forge

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Forge tests",
    "GIT_AUTHOR_EMAIL": "tests@forge.invalid",
    "GIT_COMMITTER_NAME": "Forge tests",
    "GIT_COMMITTER_EMAIL": "tests@forge.invalid",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env=forge_env(GIT_IDENTITY),
    )
    return done.stdout


def git_repo(folder: Path) -> Path:
    """A folder that is a git repository with one commit."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    (folder / "README.md").write_text("scratch\n")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "initial")
    return folder


def stamping_agent(folder: Path, name: str, stamps: Path, *steps: dict[str, Any]) -> str:
    """A fake agent whose every iteration stamps its start and end (epoch, change, iteration).

    Each step may have ``hold`` (seconds between the stamps) besides the fake
    agent's own keys.
    """
    played = []
    for step in steps:
        hold = float(step.pop("hold", 0.05))
        stamp = (
            f'printf "%s %s %s {{}}\\n" "$(date +%s.%N)" "$FORGE_CHANGE" "$FORGE_ITERATION" '
            f">> {shlex.quote(str(stamps))}"
        )
        command = f"{stamp.format('start')}; sleep {hold}; {stamp.format('end')}"
        if "shell" in step:
            command = f"{command}; {step['shell']}"
        played.append({**step, "shell": command})
    script = folder / f"{name}.json"
    script.write_text(json.dumps({"steps": played}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


GRACE = "0.5s"


@attrs.frozen
class Stamp:
    at: float
    change: str
    iteration: int
    what: str


def read_stamps(path: Path) -> list[Stamp]:
    if not path.exists():
        return []
    stamps = []
    for line in path.read_text().splitlines():
        at, change, iteration, what = line.split()
        stamps.append(Stamp(float(at), change, int(iteration), what))
    return sorted(stamps, key=lambda s: s.at)


def most_starts_in_a_window(starts: list[float], window: float) -> int:
    """The largest number of starts inside any window of ``window`` seconds."""
    starts = sorted(starts)
    most = 0
    first = 0
    for last, at in enumerate(starts):
        while at - starts[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


@attrs.define
class Fleet:
    """A host folder with a forge.toml naming the fleet, a batch file, a server."""

    tmp: Path
    server: RedisServer
    lease: str = "2s"
    heartbeat: str = "0.3s"
    workers: list[subprocess.Popen[str]] = attrs.field(factory=list)

    @property
    def host_dir(self) -> Path:
        return self.tmp / "host"

    @property
    def stamps(self) -> Path:
        return self.tmp / "stamps.log"

    def setup(self) -> None:
        self.host_dir.mkdir(parents=True, exist_ok=True)
        (self.host_dir / "forge.toml").write_text(
            f'[fleet]\nname = "nightly"\nlease = "{self.lease}"\nheartbeat = "{self.heartbeat}"\n'
        )

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"FORGE_REDIS_URL": self.server.url, **GIT_IDENTITY, **(extra or {})}

    def forge(self, *args: str, extra: dict[str, str] | None = None) -> Completed:
        return run_forge(args, cwd=self.host_dir, env=self.env(extra), timeout=180)

    def submit(self, batch: str) -> Completed:
        path = self.tmp / "nightly.toml"
        if "[run]" not in batch:
            # The tests' leases are short: the executors' grace must fit in them
            # (2 × heartbeat + grace < lease).
            batch = f'[run]\ngrace = "{GRACE}"\n{batch}'
        path.write_text(batch)
        return self.forge("fleet", "submit", "--batch", str(path))

    def spawn(
        self, host: str, *, max_parallel: int = 3, extra: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        log = (self.tmp / f"{host}.out").open("w")
        worker = subprocess.Popen(
            [
                str(FORGE),
                "fleet",
                "work",
                "--host",
                host,
                "--max-parallel",
                str(max_parallel),
                "--cache",
                str(self.tmp / f"cache-{host}"),
            ],
            cwd=self.host_dir,
            env=forge_env(self.env(extra)),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        log.close()
        self.workers.append(worker)
        return worker

    def output(self, host: str) -> str:
        return (self.tmp / f"{host}.out").read_text()

    def wait_all(self, timeout: float = 120) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for worker in self.workers:
            codes.append(worker.wait(timeout=max(1.0, deadline - time.monotonic())))
        return codes

    def status(self) -> dict[str, Any]:
        done = self.forge("fleet", "status", "--json")
        assert done.code == 0, done
        data: dict[str, Any] = json.loads(done.out)
        return data

    def timeline(self, change: str) -> list[dict[str, Any]]:
        done = self.forge("timeline", change, "--json")
        assert done.code == 0, done
        events: list[dict[str, Any]] = json.loads(done.out)["events"]
        return events

    def stop_all(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                _kill_tree(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    _kill_tree(worker.pid, signal.SIGKILL)
                    worker.wait()


def _process_stats() -> Iterator[tuple[int, list[str]]]:
    """Every live process's pid and the fields of its /proc stat after the name."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry.name), fields


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    return [child for child, fields in _process_stats() if int(fields[1]) == pid]


def kill_worker(worker: subprocess.Popen[str]) -> list[int]:
    """SIGKILL the worker process alone (as the OOM killer or ``kill -9`` would).

    Returns the process groups of the executors (and verify commands) it had
    started: none of them may outlive it.
    """
    groups = []
    for child in children_of(worker.pid):
        with suppress(ProcessLookupError):
            group = os.getpgid(child)
            if group != worker.pid:  # the executors lead groups of their own
                groups.append(group)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    return groups


def group_members(group: int) -> list[int]:
    """The live processes of process group ``group`` (read from /proc)."""
    return [
        pid
        for pid, fields in _process_stats()
        if int(fields[2]) == group and fields[0] not in ("Z", "X")
    ]


def _kill_tree(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pid, sig)


@contextmanager
def fleet_of(
    tmp: Path, server: RedisServer, *, lease: str = "2s", heartbeat: str = "0.3s"
) -> Iterator[Fleet]:
    fleet = Fleet(tmp, server, lease=lease, heartbeat=heartbeat)
    fleet.setup()
    try:
        yield fleet
    finally:
        fleet.stop_all()


def wait_for(predicate: Any, timeout: float = 60, what: str = "a condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
