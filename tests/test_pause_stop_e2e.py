"""``forge pause``, ``forge resume CHANGE`` and ``forge stop`` on a running ``forge supervise``.

Real supervisors of fake-agent loops, each in its own worktree. A loop's
first iteration holds on a FIFO until the test lets it go, so a control is
given while that iteration runs; the supervisor's own plain lines (read as
they are printed) say when a loop holds, goes on or ends.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support import FAKE_AGENT, FORGE, Repo, let_go, spawn_forge, wait_started

# A safety net for a broken build, never a wait: every read below returns as
# soon as its line is printed.
_LINE_TIMEOUT = 60


class _Lines:
    """A running command's stdout, line by line, as it is printed."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        stdout = process.stdout
        if stdout is None:
            raise ValueError("the process's stdout is not a pipe")
        self._reader = threading.Thread(target=self._read, args=(stdout,), daemon=True)
        self._reader.start()

    def _read(self, stdout: Any) -> None:
        with stdout:
            for line in stdout:
                self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def close(self) -> None:
        """After the process ended: every line read, the pipe closed."""
        self._reader.join(timeout=_LINE_TIMEOUT)
        while (got := self._queue.get_nowait() if not self._queue.empty() else None) is not None:
            self.seen.append(got)

    def until(self, *words: str) -> str:
        """The first line printed (so far, or from now on) that holds every one of ``words``."""
        for line in self.seen:
            if all(word in line for word in words):
                return line
        while True:
            got = self._queue.get(timeout=_LINE_TIMEOUT)
            if got is None:
                raise AssertionError(f"the output ended before {words}: {self.seen}")
            self.seen.append(got)
            if all(word in got for word in words):
                return got


def _finish(forge: subprocess.Popen[str], lines: _Lines) -> tuple[int, str]:
    """Wait for the supervisor to end (killed if it does not); its exit code and all it said."""
    try:
        code = forge.wait(timeout=120)
    except subprocess.TimeoutExpired:
        forge.kill()
        forge.wait()
        raise
    lines.close()
    err = ""
    if forge.stderr is not None:
        with forge.stderr:
            err = forge.stderr.read()
    return code, "\n".join(lines.seen) + "\n" + err


def _agent(folder: Path, change: str, steps: list[dict[str, Any]]) -> str:
    script = folder / f"{change}.json"
    script.write_text(json.dumps({"steps": steps}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def _held_first(folder: Path, change: str, iterations: int) -> tuple[str, Path, Path]:
    """An agent whose first iteration says it started and waits; done at ``iterations``."""
    started, go = folder / f"{change}.started", folder / f"{change}.go"
    os.mkfifo(started)
    os.mkfifo(go)
    hold = f'echo up > "{started}"; read word < "{go}"'
    steps: list[dict[str, Any]] = [{"shell": hold, "write": {f"{change}-1.txt": "1\n"}}]
    for number in range(2, iterations + 1):
        step: dict[str, Any] = {"write": {f"{change}-{number}.txt": f"{number}\n"}}
        step["append"] = {str(folder / f"{change}.ran"): f"{number}\n"}
        steps.append(step)
    steps[-1]["print"] = "FORGE_DONE\n"
    return _agent(folder, change, steps), started, go


def _quick(folder: Path, change: str, iterations: int, first: str = "") -> str:
    """An agent that is done at ``iterations``; ``first`` runs as its first step's shell."""
    steps: list[dict[str, Any]] = [
        {"write": {f"{change}-{n}.txt": f"{n}\n"}} for n in range(1, iterations + 1)
    ]
    if first:
        steps[0]["shell"] = first
    steps[-1]["print"] = "FORGE_DONE\n"
    return _agent(folder, change, steps)


def _project(repo: Repo, loops: dict[str, str], extra: str = "") -> None:
    tables = "".join(
        f'[[loop]]\nchange = "{change}"\ncmd = {json.dumps(cmd)}\nworktree = true\n'
        for change, cmd in loops.items()
    )
    policy = '[verify]\ncommand = "true"\nspecs = []\ntests = []\n'
    repo.write("forge.toml", policy + extra + tables)
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")


def _events(repo: Repo, change: str) -> list[dict[str, Any]]:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    return [json.loads(line) for line in timeline.read_text().splitlines()]


def _kinds(repo: Repo, change: str) -> list[str]:
    return [str(event["event"]) for event in _events(repo, change)]


def _ran(folder: Path, change: str) -> list[str]:
    """The iterations after the first that the agent of ``change`` ran, in order."""
    ran = folder / f"{change}.ran"
    return ran.read_text().split() if ran.exists() else []


def test_pause_holds_one_loop_while_the_others_finish_and_resume_lets_it_go_on(
    repo: Repo, tmp_path: Path
) -> None:
    billing, started, go = _held_first(tmp_path, "billing", 3)
    loops = {
        "billing": billing,
        "search": _quick(tmp_path, "search", 2),
        "docs": _quick(tmp_path, "docs", 2),
    }
    _project(repo, loops)
    forge = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    lines = _Lines(forge)
    try:
        wait_started(started)
        paused = repo.forge("pause", "billing", "--reason", "reviewing its migration")
        assert paused.code == 0, paused.err
        assert paused.lines == [
            'pause: "billing" holds after its current iteration; forge resume billing goes on'
        ]
        again = repo.forge("pause", "billing")
        assert again.code == 0
        assert 'pause: "billing" is already paused by ' in again.out
        status = repo.forge("status", "--plain")
        [line] = [line for line in status.lines if line.startswith("  paused:")]
        assert line.endswith(": reviewing its migration — forge resume billing lets it go on")
        let_go(go)
        held = lines.until("billing:", "paused before iteration 2")
        assert "reviewing its migration" in held
        # The others go on, and end, while billing holds.
        lines.until("search:", "done")
        lines.until("docs:", "done")
        assert _ran(tmp_path, "billing") == []
        assert "iteration.started" not in _kinds(repo, "billing")[-3:]

        resumed = repo.forge("resume", "billing", "--reason", "looks right")
        assert resumed.code == 0, resumed.err
        assert resumed.lines[0].startswith('resume: "billing" goes on (paused by ')
        lines.until("billing:", "resumed after")
        lines.until("billing:", "done")
    finally:
        _let_go_if_waiting(go, started)
        code, said = _finish(forge, lines)
    assert code == 0, said
    assert _ran(tmp_path, "billing") == ["2", "3"]
    kinds = _kinds(repo, "billing")
    assert kinds.count("control.paused") == 1  # the second pause changed nothing
    order = [kinds.index(name) for name in ("control.paused", "loop.paused", "control.resumed")]
    assert order == sorted(order)
    [held_event] = [e for e in _events(repo, "billing") if e["event"] == "loop.paused"]
    assert held_event["iteration"] == 2
    [went_on] = [e for e in _events(repo, "billing") if e["event"] == "loop.resumed"]
    assert went_on["waited"] > 0
    [resume] = [e for e in _events(repo, "billing") if e["event"] == "control.resumed"]
    assert resume["reason"] == "looks right"
    assert resume["held"].endswith(": reviewing its migration")
    for other in ("search", "docs"):
        assert "loop.paused" not in _kinds(repo, other)
    assert repo.forge("status", "--plain").out.count("paused:") == 0
    nothing = repo.forge("resume", "billing")
    assert nothing.lines == ['resume: "billing" is not paused: nothing to resume']
    # The report tells the night's story in words.
    report = _report(repo)
    assert "paused by " in report
    assert "held before iteration 2" in report
    assert "resumed by " in report


def test_stop_ends_one_loop_after_its_iteration_and_the_others_go_on(
    repo: Repo, tmp_path: Path
) -> None:
    billing, started, go = _held_first(tmp_path, "billing", 3)
    _project(repo, {"billing": billing, "search": _quick(tmp_path, "search", 3)})
    forge = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    lines = _Lines(forge)
    try:
        wait_started(started)
        stopped = repo.forge("stop", "billing", "--reason", "superseded by refunds", "--json")
        assert stopped.code == 0, stopped.err
        document = json.loads(stopped.out)
        assert document["control"] == "stopped"
        assert document["changed"] is True
        assert document["request"]["reason"] == "superseded by refunds"
        let_go(go)
        lines.until("billing:", "stopped — stopped by ", "superseded by refunds")
        lines.until("search:", "done")
    finally:
        _let_go_if_waiting(go, started)
        code, said = _finish(forge, lines)
    # Not every loop ended done: the batch exits 1, as for any ending but done.
    assert code == 1, said
    assert _ran(tmp_path, "billing") == []  # its one iteration, then nothing
    [ending] = [e for e in _events(repo, "billing") if e["event"] == "run.stopped"]
    assert ending["reason"] == "stopped"
    assert ending["iterations"] == 1
    assert ending["detail"].endswith(": superseded by refunds")
    assert "stop asked by " in _report(repo)
    # Nothing runs it now: a second stop has nothing to do.
    again = repo.forge("stop", "billing")
    assert again.code == 0
    assert again.lines == ['stop: no loop runs "billing" now: nothing to stop']
    status = repo.forge("status", "--plain")
    assert "  standing: interrupted" in status.lines
    # A stopped loop goes on where it stopped when the batch runs again.
    rerun = repo.forge("supervise", "--plain", "--only", "billing")
    assert rerun.code == 0, rerun.out + rerun.err
    assert _ran(tmp_path, "billing") == ["2", "3"]


def test_a_stop_ends_a_paused_or_cooling_loop_at_once(repo: Repo, tmp_path: Path) -> None:
    """A loop waiting (paused; its circuit cooling down for an hour) stops within a look."""
    billing, started, go = _held_first(tmp_path, "billing", 3)
    # search's verify fails once: its circuit opens and cools down for an hour.
    search = _quick(tmp_path, "search", 3)
    extra = '[loop.verify]\ncommand = "false"\nmax_failures = 1\n[loop.breaker]\ncooldown = "1h"\n'
    policy = '[verify]\ncommand = "true"\nspecs = []\ntests = []\n'
    repo.write(
        "forge.toml",
        policy
        + f'[[loop]]\nchange = "billing"\ncmd = {json.dumps(billing)}\nworktree = true\n'
        + f'[[loop]]\nchange = "search"\ncmd = {json.dumps(search)}\nworktree = true\n'
        + extra,
    )
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    forge = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    lines = _Lines(forge)
    try:
        wait_started(started)
        assert repo.forge("pause", "billing").code == 0
        let_go(go)
        lines.until("billing:", "paused before iteration 2")
        lines.until("search:", "cooling down")
        assert repo.forge("stop", "billing").code == 0
        lines.until("billing:", "stopped — stopped by ")
        assert repo.forge("stop", "search").code == 0
        lines.until("search:", "stopped — stopped by ")
    finally:
        _let_go_if_waiting(go, started)
        code, said = _finish(forge, lines)
    assert code == 1, said
    for change in ("billing", "search"):
        [ending] = [e for e in _events(repo, change) if e["event"] == "run.stopped"]
        assert ending["reason"] == "stopped"
    # The pause stands for the next run: stopping a loop does not lift it.
    assert "  paused:" in repo.forge("status", "--plain").out


def test_a_control_from_inside_an_agent_is_refused_and_recorded(repo: Repo, tmp_path: Path) -> None:
    """An agent that tries to pause or stop a loop (its neighbour, or its own) is refused."""
    answers = tmp_path / "answers.txt"
    tries = " ; ".join(
        f'"{FORGE}" {words} >> "{answers}" 2>&1; echo "exit $?" >> "{answers}"'
        for words in ("stop billing", "pause docs", "resume docs")
    )
    billing, started, go = _held_first(tmp_path, "billing", 2)
    _project(repo, {"billing": billing, "docs": _quick(tmp_path, "docs", 2, first=tries)})
    forge = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    lines = _Lines(forge)
    try:
        wait_started(started)
        lines.until("docs:", "done")
        let_go(go)
    finally:
        _let_go_if_waiting(go, started)
        code, said = _finish(forge, lines)
    assert code == 0, said
    text = answers.read_text()
    assert text.count("exit 2") == 3, text
    assert "forge stop is a person's control" in text
    assert "forge pause is a person's control" in text
    refused = [e for e in _events(repo, "docs") if e["event"] == "control.refused"]
    assert [e["command"] for e in refused] == ["forge stop", "forge pause", "forge resume"]
    assert not (repo.change_dir("billing") / "controls.yaml").exists()
    assert _ran(tmp_path, "billing") == ["2"]


def _let_go_if_waiting(go: Path, started: Path) -> None:
    """Let a held agent go if the test failed before it did (never blocks)."""
    for fifo in (go, started):
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue  # no reader: nothing waits on it
        try:
            os.write(fd, b"go\n")
        except BrokenPipeError:
            pass  # its reader went away meanwhile: nothing waits on it either
        finally:
            os.close(fd)


def _latest_run(repo: Repo) -> Path:
    return sorted((repo.root / ".forge" / "runs").iterdir())[-1]


def _report(repo: Repo) -> str:
    return (_latest_run(repo) / "report.md").read_text()
