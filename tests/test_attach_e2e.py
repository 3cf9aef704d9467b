"""``forge attach``: a loop's agent output while it is printed, through the real ``forge``.

A real ``forge supervise`` of one fake-agent loop; each iteration prints its
lines, then holds on a FIFO until the test lets it go, so what attach shows
is seen while the agent still runs. Attach's output is read by a thread and
waited for line by line, with a timeout that only ends a test gone wrong.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .support import FAKE_AGENT, FORGE, Repo, forge_env, let_go, spawn_forge, wait_started
from .test_secscan_e2e import github_token

TOKEN = github_token()
# What attach is given up on after: a test that fails, never one that passes, waits this long.
_GIVE_UP = 120


class _Lines:
    """A process's stdout, read a line at a time by a thread of its own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._process = process
        stream = process.stdout
        assert stream is not None

        def read() -> None:
            for line in stream:
                self._lines.put(line.rstrip("\n"))
            self._lines.put(None)

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()

    def close(self) -> None:
        """Once the process ended: the reader has met the end of its output."""
        _stop(self._process)
        self._reader.join(timeout=_GIVE_UP)
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()

    def until(self, wanted: str) -> list[str]:
        """The lines read up to the first that holds ``wanted``, that one included."""
        got: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=_GIVE_UP)
            except queue.Empty:
                raise AssertionError(f"no line with {wanted!r} came; read: {self.seen}") from None
            if line is None:
                raise AssertionError(f"the output ended before {wanted!r}; read: {self.seen}")
            got.append(line)
            self.seen.append(line)
            if wanted in line:
                return got


def _attach(repo: Repo, *args: str) -> subprocess.Popen[str]:
    """``forge attach`` in a session of its own: whatever it leaves behind is findable."""
    return subprocess.Popen(
        [str(FORGE), "attach", *args],
        cwd=repo.root,
        env=forge_env({"COLUMNS": "200"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        start_new_session=True,
    )


def _interrupt(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C (SIGINT) to ``process``; its exit code and its stderr."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=_GIVE_UP)
    finally:
        _stop(process)
    assert process.stderr is not None
    return process.returncode, process.stderr.read()


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def _group_is_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


@pytest.fixture
def held(repo: Repo, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A loop ``c`` of two iterations, each holding on a FIFO once it printed its lines.

    Iteration 1 prints a line with a secret, and after it is let go a last
    line without a newline; iteration 2 prints the done marker once let go.
    """
    started, go1, go2 = (_fifo(tmp_path, name) for name in ("started", "go1", "go2"))
    first = (
        "echo 'one: hello from iteration 1'; "
        f"echo 'one: the token {TOKEN} is printed'; "
        f"echo 'one: holding'; echo up > {shlex.quote(str(started))}; "
        f"read word < {shlex.quote(str(go1))}"
    )
    second = f"echo 'two: hello from iteration 2'; read word < {shlex.quote(str(go2))}"
    steps = [
        {"shell": first, "print": "one: last words, no newline"},
        {"shell": second, "print": "FORGE_DONE\n"},
    ]
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"steps": steps}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\ntests = []\n'
        f'[[loop]]\nchange = "c"\ncmd = {json.dumps(cmd)}\nmax_iterations = 2\n',
    )
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    return started, go1, go2


def test_attach_shows_the_agents_output_while_it_runs_across_iterations(
    repo: Repo, held: tuple[Path, Path, Path]
) -> None:
    started, go1, go2 = held
    supervise = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    lines = None
    try:
        wait_started(started)
        attach = _attach(repo, "c", "--events", "--plain")
        lines = _Lines(attach)

        first = lines.until("one: holding")
        # The agent still holds on go1: what attach printed is what it printed so far.
        assert supervise.poll() is None
        assert first[0].startswith("── iteration 1 · run ")
        assert first[0].endswith(" ──")
        assert "one: hello from iteration 1" in first
        assert "one: the token [redacted:github-pat] is printed" in first
        assert not any(TOKEN in line for line in first)

        let_go(go1)
        second = lines.until("two: hello from iteration 2")
        assert supervise.poll() is None  # held on go2

        # The last line, without its newline, whole once its executor ended; then
        # the events in words (iteration 1's end among them); then iteration 2.
        assert second[0] == "one: last words, no newline"
        [finished] = [at for at, line in enumerate(second) if "iteration 1, exit 0" in line]
        [header] = [at for at, line in enumerate(second) if line.startswith("── iteration 2 ")]
        assert 0 < finished < header < len(second) - 1
        assert "#1" in second[finished].split()
        assert second[header] == first[0].replace("iteration 1", "iteration 2")

        let_go(go2)
        out, err = supervise.communicate(timeout=_GIVE_UP)
        assert supervise.returncode == 0, out + err
        ended = lines.until('waiting for "c"\'s next iteration')
        assert ended[-1].startswith("attach: run ")
        assert "ended (done)" in ended[-1]
        assert ended[-1].endswith("(Ctrl-C to leave)")

        code, said = _interrupt(attach)
        assert code == 130, said
        assert "interrupted" in said
        assert "Traceback" not in said
        assert _group_is_gone(attach.pid)
    finally:
        if lines is not None:
            lines.close()
        if supervise.returncode is None:
            _stop(supervise)
            supervise.communicate()
    assert not any(TOKEN in line for line in lines.seen)
    assert not any("\x1b" in line for line in lines.seen)  # --plain: no control codes


def test_attach_waits_for_the_next_run_and_ctrl_c_ends_it_as_timeline_follow(
    repo: Repo,
) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\ntests = []\n')
    repo.commit("project")
    once = ["run", "--change", "c", "--max-iterations", "1", "--yes", "--cmd"]
    assert repo.forge(*once, "echo first run; echo FORGE_DONE").code == 0
    attach = _attach(repo, "c")
    lines = _Lines(attach)
    followed_lines = None
    try:
        # Nothing runs: no old output, one line saying it waits.
        assert lines.until("attach:") == [
            'attach: waiting for "c"\'s next iteration (Ctrl-C to leave)'
        ]

        assert repo.forge(*once, "echo second run; echo FORGE_DONE").code == 0

        shown = lines.until("second run")
        assert shown[0].startswith("── iteration 1 · run ")
        assert shown[1:] == ["second run"]
        code, said = _interrupt(attach)
        assert "Traceback" not in said
        assert _group_is_gone(attach.pid)

        follow = subprocess.Popen(
            [str(FORGE), "timeline", "c", "--follow"],
            cwd=repo.root,
            env=forge_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        followed_lines = _Lines(follow)
        followed_lines.until("run stopped")
        followed, _ = _interrupt(follow)
        assert code == followed == 130
    finally:
        for opened in (lines, followed_lines):
            if opened is not None:
                opened.close()
    assert "first run" not in lines.seen


def test_an_unknown_change_is_refused(repo: Repo) -> None:
    done = repo.forge("attach", "nosuch")
    assert done.code == 2
    assert 'forge attach: no change "nosuch"' in done.err
    assert "Traceback" not in done.err
    assert done.out == ""


def test_json_is_refused_for_the_events_as_json(repo: Repo) -> None:
    repo.forge("verify", "--change", "c")
    done = repo.forge("attach", "c", "--json")
    assert done.code == 2
    assert "no --json" in done.err
    assert "forge timeline c --follow --json" in done.err


def test_inside_its_own_loops_iteration_it_is_refused(repo: Repo) -> None:
    """There, what it printed would be the loop's output, read and printed again without end."""
    repo.forge("verify", "--change", "c")
    done = repo.forge("attach", "c", env={"FORGE_ITERATION": "3", "FORGE_CHANGE": "c"})
    assert done.code == 2
    assert 'forge attach cannot run inside the executor of change "c"' in done.err
    assert done.out == ""
    # Reading, not a control: nothing is recorded.
    assert "control.refused" not in (repo.change_dir("c") / "timeline.jsonl").read_text()
