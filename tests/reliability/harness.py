"""What the fault-injection tests share: crashing forge, and checking what a crash left behind.

:func:`inspect_state` reads everything under ``.forge/`` the way a strict
reader would — every YAML and JSON file must parse, every timeline line but a
torn last one must be an event with a rising ``seq``, every sqlite database
must pass its integrity check, and nothing may have been moved aside as
corrupt — and returns the counters that must move together.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from ..support import FORGE, Completed, Repo, forge_env

HERE = Path(__file__).resolve().parent
CRASHPOINT = HERE / "crashpoint.py"
FAKE_AGENT = HERE.parent / "fake_agent.py"
KILLED = -signal.SIGKILL


def agent_cmd(folder: Path, name: str, *steps: dict[str, Any]) -> str:
    """The shell command of a fake agent playing ``steps`` (one per iteration)."""
    script = folder / f"{name}.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


# forge run takes a permit from the shared limiter for every executor start:
# hundreds of trials in one repository must never wait for the default window.
RUN_POLICY = """
[rate_limit]
calls = 100000
window = "1s"
"""

# Fast loops: quick cooldowns, a limiter that never makes them wait but is
# written on every start (sqlite), one loop whose verify passes and one that trips.
SUPERVISE_POLICY = """
[verify]
command = "exit 1"
max_failures = 2
specs = []
[breaker]
cooldown = "0.05s"
cooldown_max = "0.1s"
max_opens = 1000
[rate_limit]
calls = 1000
window = "1s"
"""

BATCH = """
[[loop]]
change = "passes-{n}"
cmd = {cmd}
max_iterations = {iterations}
[loop.verify]
command = "true"

[[loop]]
change = "trips-{n}"
cmd = {cmd}
max_iterations = {iterations}
worktree = true
"""


def supervise_batch(repo: Repo, n: int, *, iterations: int = 3) -> tuple[str, ...]:
    """``forge supervise`` over two fresh loops: one whose verify passes, one that trips."""
    cmd = agent_cmd(
        repo.root.parent,
        "worker",
        {"print": "working\n", "report": {"tokens": 10, "cost_usd": 0.01}, "sleep": 0.01},
    )
    batch = repo.root.parent / f"batch-{n}.toml"
    batch.write_text(BATCH.format(n=n, cmd=json.dumps(cmd), iterations=iterations))
    return ("supervise", "--batch", str(batch))


def crash_forge(repo: Repo, at: int, *args: str, log: Path | None = None) -> Completed:
    """Run forge with a SIGKILL at crash point ``at`` (0: none); ``code`` is -9 when it died."""
    env = {"CRASHPOINT_AT": str(at)}
    if log is not None:
        env["CRASHPOINT_LOG"] = str(log)
    done = subprocess.run(
        [sys.executable, str(CRASHPOINT), *args],
        cwd=repo.root,
        env=forge_env(env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return Completed(code=done.returncode, out=done.stdout, err=done.stderr)


def crash_points(repo: Repo, *args: str) -> list[tuple[int, str, str]]:
    """Run forge once without crashing and list its crash points: (number, kind, path)."""
    log = repo.root.parent / "crashpoints.log"
    log.unlink(missing_ok=True)
    done = crash_forge(repo, 0, *args, log=log)
    assert "Traceback" not in done.err, done.err
    points = []
    for line in log.read_text().splitlines():
        number, kind, path = line.split(" ", 2)
        points.append((int(number), kind, path))
    return points


def kill_after(repo: Repo, delay: float, *args: str) -> int:
    """Start forge, SIGKILL it ``delay`` seconds later (unless it ended), return its exit code."""
    process = subprocess.Popen(
        [str(FORGE), *args],
        cwd=repo.root,
        env=forge_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
    return process.wait(timeout=60)


def timed(repo: Repo, *args: str) -> tuple[Completed, float]:
    """Run forge to its end; how it ended and how long it took."""
    started = time.monotonic()
    done = repo.forge(*args)
    return done, time.monotonic() - started


def assert_clean_exit(done: Completed, *codes: int) -> None:
    """forge ended by itself with one of ``codes``: no traceback, no corruption found."""
    assert done.code in codes, (done.code, done.out, done.err)
    assert "Traceback" not in done.err, done.err
    assert "corrupt" not in done.err, done.err
    assert "gate-error" not in done.out, done.out


@attrs.frozen
class Counters:
    """One change's counters that a crash must keep in step (up to the one in flight)."""

    total_attempts: int = 0  # verify-attempts.yaml
    verify_events: int = 0
    spend_iterations: int = 0  # spend.yaml
    finished_events: int = 0  # iteration.finished
    started_events: int = 0  # iteration.started
    iterations_used: int | None = None  # breaker.yaml (supervised loops only)
    bad_lines: frozenset[int] = frozenset()  # timeline lines that do not parse
    torn_line: int | None = None  # the number of a torn last line


@attrs.frozen
class StateFacts:
    changes: dict[str, Counters]
    files: int


def inspect_state(
    root: Path, *, tolerated_bad: dict[str, frozenset[int]] | None = None
) -> StateFacts:
    """Check everything under ``root/.forge`` parses; the counters of each change.

    ``tolerated_bad`` maps a change to timeline line numbers already known to be
    torn by an earlier crash (a torn last line stays behind as a bad middle line
    once the next event starts a fresh line); any other unparsable line fails,
    except a torn last line.
    """
    forge = root / ".forge"
    moved = sorted(str(p) for p in forge.rglob("*.corrupt-*"))
    assert not moved, f"a crash produced corrupt state: {moved}"
    checked = 0
    for path in sorted(forge.rglob("*")):
        if not path.is_file() or path.name.endswith(".tmp"):
            continue
        if path.name.endswith((".yaml", ".yml")):
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            expected = list if path.name == "secscan-waivers.yaml" else dict
            assert (data is None and expected is list) or isinstance(data, expected), (path, data)
            checked += 1
        elif path.name.endswith(".json") and not path.name.endswith(".report.json"):
            # An executor's report is the agent's own file, not forge state.
            json.loads(path.read_text(encoding="utf-8"))
            checked += 1
        elif path.name.endswith(".sqlite3"):
            _check_sqlite(path)
            checked += 1
    changes = {}
    tolerated = tolerated_bad or {}
    folder = forge / "changes"
    for change in sorted(folder.iterdir()) if folder.is_dir() else []:
        if change.is_dir():
            changes[change.name] = _counters(change, tolerated.get(change.name, frozenset()))
    return StateFacts(changes=changes, files=checked)


def _check_sqlite(path: Path) -> None:
    # Opened for writing, as forge's next run opens it: a kill can leave a hot
    # journal, which the first connection that may write rolls back.
    connection = sqlite3.connect(path, timeout=30)
    try:
        [(verdict,)] = connection.execute("PRAGMA integrity_check").fetchall()
    finally:
        connection.close()
    assert verdict == "ok", (path, verdict)


def _counters(folder: Path, tolerated: frozenset[int]) -> Counters:
    events, bad, torn_line = _timeline(folder / "timeline.jsonl")
    unexplained = bad - tolerated
    assert not unexplained, f"{folder.name}: timeline lines {sorted(unexplained)} do not parse"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), f"{folder.name}: seq not strictly rising: {seqs}"
    attempts = _yaml(folder / "verify-attempts.yaml")
    spend = _yaml(folder / "spend.yaml")
    breaker = _yaml(folder / "breaker.yaml")
    kinds = [e["event"] for e in events]
    return Counters(
        total_attempts=int(attempts.get("total_attempts", 0)),
        verify_events=kinds.count("verify"),
        spend_iterations=int(spend.get("iterations", 0)),
        finished_events=kinds.count("iteration.finished"),
        started_events=kinds.count("iteration.started"),
        iterations_used=int(breaker["iterations_used"]) if breaker else None,
        bad_lines=frozenset(bad),
        torn_line=torn_line,
    )


def _yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def _timeline(path: Path) -> tuple[list[dict[str, Any]], set[int], int | None]:
    """The events, the numbers of lines before the last that do not parse, a torn last line's."""
    if not path.exists():
        return [], set(), None
    lines = path.read_bytes().split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    events, bad = [], set()
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        event = _event(raw)
        if event is None:
            bad.add(number)
        else:
            events.append(event)
    torn = None
    if tail.strip():
        event = _event(tail)
        if event is None:
            torn = len(complete) + 1
        else:
            events.append(event)
    return events, bad, torn


def _event(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("seq"), int):
        return None
    return value


def assert_in_step(
    before: StateFacts,
    after: StateFacts,
    *,
    in_flight: int = 1,
    ahead: dict[tuple[str, str], int] | None = None,
) -> None:
    """Between two inspections no counter was lost or double-counted beyond ``in_flight``.

    A state file is written before the event that records it, so a crash in
    between leaves the file at most one step ahead of the timeline: never
    behind it, and never more than the step in flight. ``ahead`` carries how
    far each counter's state was left ahead by earlier steps: the store's
    commit journal appends the events a crash cut off when the change is next
    loaded, so a later step's timeline may catch up by that much (never more),
    and it is updated in place.
    """
    ahead = {} if ahead is None else ahead
    for name, now in after.changes.items():
        then = before.changes.get(name, Counters())
        pairs = {
            "verify-attempts.yaml total_attempts vs verify events": (
                now.total_attempts - then.total_attempts,
                now.verify_events - then.verify_events,
            ),
            "spend.yaml iterations vs iteration.finished events": (
                now.spend_iterations - then.spend_iterations,
                now.finished_events - then.finished_events,
            ),
        }
        if now.iterations_used is not None:  # a supervised loop's change
            used_before = then.iterations_used or 0
            if now.iterations_used >= used_before:  # not across a circuit reset
                pairs["breaker.yaml iterations_used vs iteration.started events"] = (
                    now.iterations_used - used_before,
                    now.started_events - then.started_events,
                )
        for what, (state_delta, event_delta) in pairs.items():
            drift = state_delta - event_delta
            owed = ahead.get((name, what), 0)
            assert -owed <= drift <= in_flight, (
                f"{name}: {what}: the state moved {state_delta}, the timeline {event_delta}"
                f" ({owed} ahead before)"
            )
            ahead[(name, what)] = owed + drift


class Tracker:
    """Inspect a repository's state after each fault and hold each step to the last one."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.known_bad: dict[str, frozenset[int]] = {}
        self.facts = inspect_state(repo.root)
        self.ahead: dict[tuple[str, str], int] = {}

    def step(self, *, in_flight: int = 1) -> StateFacts:
        facts = inspect_state(self.repo.root, tolerated_bad=self.known_bad)
        assert_in_step(self.facts, facts, in_flight=in_flight, ahead=self.ahead)
        for name, counters in facts.changes.items():
            torn = {counters.torn_line} if counters.torn_line is not None else set()
            self.known_bad[name] = counters.bad_lines | torn
        self.facts = facts
        return facts

    def torn(self) -> list[str]:
        """The changes whose timeline ends in a torn line right now."""
        return [n for n, c in self.facts.changes.items() if c.torn_line is not None]


def torn_is_tolerated(repo: Repo, change: str) -> None:
    """``forge timeline`` reports a torn last line and shows the rest."""
    shown = repo.forge("timeline", change, "--json")
    assert shown.code == 0, shown.err
    assert "Traceback" not in shown.err
    document = json.loads(shown.out)
    assert document["torn_last_line"] is True
    assert "torn" in shown.err


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def wait_until(predicate: Any, *, timeout: float = 30, what: str = "a condition") -> None:
    """Poll a real process's progress (there is no clock to mock across processes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def pids_in(path: Path) -> list[int]:
    return [int(word) for word in path.read_text().split()] if path.exists() else []


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def kill_all(pids: Sequence[int]) -> None:
    """Leave nothing behind even when a test fails."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
