"""The store's commit journal: one fsync a write, and what a power loss took written again.

A power loss is simulated by putting back what the disk may hold when the
kernel had not flushed the writes made without fsync: a state file's old
bytes (its rename lost), an empty file (its data lost), a timeline without
its last lines. What the journal flushed is then written again by
:func:`recover`, and nothing a person wrote since is undone.
"""

from __future__ import annotations

import os
import subprocess
import traceback
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from orchestra._engine import ChangeStore
from orchestra._spend import SpendTotals
from orchestra._state import (
    JOURNAL,
    ChangePaths,
    IterationStarted,
    _journal,
    read_timeline,
    recover,
    render_state,
    save_state,
    write_journaled,
)

from .test_supervised_loop import agent, policy, supervise_one


def _paths(tmp_path: Path) -> ChangePaths:
    return ChangePaths(tmp_path, "c")


def _spend(tokens: int) -> bytes:
    return render_state(SpendTotals(tokens=tokens, iterations=tokens))


def _started(iteration: int) -> IterationStarted:
    return IterationStarted(run_id="r", iteration=iteration)


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: Any) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}") if Path("/proc/self/fd").is_dir() else "?")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_a_journaled_write_of_files_and_events_is_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _paths(tmp_path)
    write_journaled(paths, [(paths.spend, _spend(1))], [_started(1)])  # creates the journal
    fsyncs = _count_fsyncs(monkeypatch)
    write_journaled(
        paths,
        [(paths.spend, _spend(2)), (paths.breaker, _spend(2))],
        [_started(2), _started(3)],
    )
    assert len(fsyncs) == 1, fsyncs
    assert fsyncs[0].endswith(JOURNAL)
    assert paths.spend.read_bytes() == _spend(2)
    assert [e["seq"] for e in read_timeline(paths.timeline).events] == [1, 2, 3]


def test_what_a_power_loss_took_is_written_again(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    write_journaled(paths, [(paths.spend, _spend(1))], [_started(1)])
    timeline_then = paths.timeline.read_bytes()
    write_journaled(paths, [(paths.spend, _spend(2)), (paths.breaker, _spend(7))], [_started(2)])
    whole = {p: p.read_bytes() for p in (paths.spend, paths.breaker, paths.timeline)}
    # The disk kept the old spend.yaml (the rename lost), an empty breaker.yaml
    # (its data lost) and the timeline without its last line.
    paths.spend.write_bytes(_spend(1))
    paths.breaker.write_bytes(b"")
    paths.timeline.write_bytes(timeline_then)
    assert recover(paths) == 1  # the second record: the first had reached the disk
    assert {p: p.read_bytes() for p in whole} == whole
    # Emptied once everything it covered is flushed: a second recovery has nothing to do.
    assert (paths.folder / JOURNAL).read_bytes() == b""
    assert recover(paths) == 0


def test_a_recovery_never_undoes_a_later_write_nor_repeats_an_event(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    write_journaled(paths, [(paths.spend, _spend(1))], [_started(1)])
    write_journaled(paths, [(paths.spend, _spend(2))], [_started(2)])
    # A person's reset, written (and flushed) by its own path after the commits.
    save_state(paths.spend, SpendTotals())
    reset = paths.spend.read_bytes()
    timeline = paths.timeline.read_bytes()
    assert recover(paths) == 0
    assert paths.spend.read_bytes() == reset
    assert paths.timeline.read_bytes() == timeline


def test_a_replay_renumbers_lost_events_after_those_appended_since(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    write_journaled(paths, [], [_started(1)])
    # The line was lost, and another process appended an event since.
    paths.timeline.write_bytes(b"")
    write_journaled(paths, [], [_started(9)])
    (paths.folder / JOURNAL).write_bytes(
        (paths.folder / JOURNAL).read_bytes().splitlines(keepends=True)[0]
    )
    recover(paths)
    events = read_timeline(paths.timeline).events
    assert [(e["iteration"], e["seq"]) for e in events] == [(9, 1), (1, 2)]


def test_a_torn_last_record_is_ignored(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    write_journaled(paths, [(paths.spend, _spend(1))], [_started(1)])
    with (paths.folder / JOURNAL).open("ab") as journal:
        journal.write(b'{"files":[{"name":"spend.yaml","before":null,"after":"tok')
    assert recover(paths) == 0
    assert paths.spend.read_bytes() == _spend(1)
    # The next record starts on a fresh line.
    write_journaled(paths, [(paths.spend, _spend(2))], [_started(2)])
    paths.spend.write_bytes(_spend(1))
    assert recover(paths) == 1
    assert paths.spend.read_bytes() == _spend(2)


def test_an_outgrown_journal_is_flushed_and_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_journal, "CHECKPOINT_BYTES", 1000)
    paths = _paths(tmp_path)
    sizes = []
    for n in range(1, 12):
        write_journaled(paths, [(paths.spend, _spend(n))], [_started(n)])
        sizes.append((paths.folder / JOURNAL).stat().st_size)
    assert 0 in sizes
    assert max(sizes) < 1000 + 400


def test_a_stopped_store_leaves_its_journal_empty(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    store = ChangeStore(paths, owns_circuit=True)
    store.load()
    store.begin(_started(1))
    assert (paths.folder / JOURNAL).stat().st_size > 0
    from orchestra._state import RunStopped

    store.stop(RunStopped(run_id="r", reason="done", iterations=1))
    assert (paths.folder / JOURNAL).stat().st_size == 0


def test_a_store_loading_after_a_power_loss_writes_the_circuit_again(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    store = ChangeStore(paths, owns_circuit=True)
    store.load()
    store.begin(_started(1))
    store.begin(_started(2))
    paths.breaker.write_bytes(b"")  # its data never reached the disk
    again = ChangeStore(paths, owns_circuit=True).load()
    assert again.circuit.iterations_used == 2
    assert "corrupt" not in " ".join(p.name for p in paths.folder.iterdir())


def _repository(folder: Path) -> Path:
    folder.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    (folder / ".gitignore").write_text(".forge/\nscript.json\n")
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=folder, check=True)
    return folder


async def test_an_iteration_of_a_supervised_loop_costs_one_fsync_and_three_thread_hops(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its start and its commit, each one journal record, the commit's flushing both.

    No hop without I/O in it.

    The hops: before the executor, after it, and the commit after the verify
    (the limiter's permit, absent here, takes one more).
    """
    real_fsync = os.fsync
    real_run_sync = trio.to_thread.run_sync
    fsyncs: list[str] = []
    hops: list[str] = []

    def fsync(fd: Any) -> None:
        # The store's: its state files, timeline and journal (status.md, the
        # secret scan's markers and the executor's report have fsyncs of their own).
        if any(frame.filename.endswith("_engine/_store.py") for frame in traceback.extract_stack()):
            fsyncs.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    async def run_sync(function: Any, *args: Any, **kwargs: Any) -> Any:
        inner = getattr(function, "func", function)
        if inner is not subprocess.Popen:  # trio starts every process in a thread: not Forge's
            hops.append(getattr(inner, "__qualname__", repr(inner)))
        return await real_run_sync(function, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(trio.to_thread, "run_sync", run_sync)
    costs = {}
    for iterations in (2, 5):
        folder = _repository(tmp_path / f"loop-{iterations}")
        # Progress every iteration: the circuit never opens.
        cmd = agent(folder, {"print": "working\n", "append": {"notes.txt": "x"}})
        base = policy("true")
        loop_policy = attrs.evolve(base, run=attrs.evolve(base.run, max_iterations=iterations))
        fsyncs.clear()
        hops.clear()
        summary, waited, _ = await supervise_one(folder, mock_clock, loop_policy, cmd)
        assert summary.iterations == iterations
        assert waited == []
        costs[iterations] = (len(fsyncs), len(hops))
    fsyncs_per_iteration = (costs[5][0] - costs[2][0]) / 3
    hops_per_iteration = (costs[5][1] - costs[2][1]) / 3
    # Before: a temporary file, the folder and the timeline at the start and
    # at the commit (six fsyncs here), then one at each; five hops (the Stop
    # hook's verdict and the coverage of no spec had one each).
    assert fsyncs_per_iteration == 1, costs
    assert hops_per_iteration == 3, costs
