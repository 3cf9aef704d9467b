"""Append-only timelines are hashed by what they gained, and every edit of them is still caught.

The integrity check holds what it hashed of each timeline and reads only
what was appended since: before an iteration (no agent runs) it reads the
new bytes alone; after one it compares the whole beginning byte for byte.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestra._policy import Policy
from orchestra._protect import _appendonly, _manifest
from orchestra._protect._check import IntegrityCheck, integrity_check
from orchestra._protect._manifest import SMALL_FILE, file_digest
from orchestra._state._timeline import append_lines

EVENT = b'{"seq":1,"event":"iteration.started","change":"c","iteration":1}\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("agents\n")
    change = tmp_path / ".forge" / "changes" / "c"
    (change / "runs" / "r").mkdir(parents=True)
    (change / "timeline.jsonl").write_bytes(EVENT * 3)
    return tmp_path


def _check(root: Path) -> IntegrityCheck:
    return integrity_check(
        Policy(), workdir=root, root=root, state_folder=root / ".forge" / "changes" / "c"
    )


def _timeline(root: Path) -> Path:
    return root / ".forge" / "changes" / "c" / "timeline.jsonl"


def _forge_appends(timeline: Path, times: int = 1) -> None:
    append_lines(timeline, EVENT * times)  # forge's own appends: each line journalled


def _iterations(check: IntegrityCheck, timeline: Path, count: int) -> None:
    """Iterations that harm nothing, forge appending between them."""
    for n in range(count):
        check.arm()
        assert not check.inspect(f"quiet-{n}").harmed
        _forge_appends(timeline)


def test_an_edit_of_an_earlier_line_is_caught_after_appends(project: Path) -> None:
    timeline = _timeline(project)
    check = _check(project)
    _iterations(check, timeline, 3)
    check.arm()
    kept = timeline.read_bytes()
    # The agent rewrites a byte of the first event in place: the size stays.
    with timeline.open("r+b") as handle:
        handle.seek(10)
        handle.write(b"9")
    report = check.inspect("edit")
    assert report.harmed, report
    assert report.repairs[0].violation.harm == "modified"
    assert timeline.read_bytes() == kept


def test_an_edit_with_its_old_times_put_back_is_caught(project: Path) -> None:
    timeline = _timeline(project)
    old = 1_000_000_000 * 1_000_000_000  # long before the manifest: not "racy"
    os.utime(timeline, ns=(old, old))
    check = _check(project)
    check.arm()
    assert not check.inspect("quiet").harmed
    check.arm()
    kept = timeline.read_bytes()
    with timeline.open("r+b") as handle:
        handle.seek(3)
        handle.write(b"X")
    os.utime(timeline, ns=(old, old))  # size and times as they were; the ctime moved
    report = check.inspect("edit")
    assert report.harmed
    assert timeline.read_bytes() == kept


def test_an_edit_hidden_behind_an_append_is_caught(project: Path) -> None:
    timeline = _timeline(project)
    check = _check(project)
    _iterations(check, timeline, 2)
    check.arm()
    kept = timeline.read_bytes()
    edited = kept.replace(b'"seq":1', b'"seq":7', 1) + EVENT
    timeline.write_bytes(edited)
    report = check.inspect("edit")
    assert report.harmed
    assert timeline.read_bytes().startswith(kept)


def test_an_append_during_the_iteration_is_no_harm(project: Path) -> None:
    timeline = _timeline(project)
    check = _check(project)
    _iterations(check, timeline, 2)
    check.arm()
    _forge_appends(timeline, 2)  # a Stop hook's verify records its verdict
    assert not check.inspect("hook").harmed
    # What the check holds of it is the file as it is now: the next round starts there.
    manifest = check.arm()
    assert manifest.nodes[str(timeline)].digest == file_digest(str(timeline))


def test_a_long_timeline_is_read_once_then_only_its_new_bytes(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeline = _timeline(project)
    timeline.write_bytes(EVENT * (2 * SMALL_FILE // len(EVENT)))  # past the small-file size
    check = _check(project)
    check.arm()
    assert not check.inspect("first").harmed
    whole: list[str] = []
    real = _appendonly.read_held

    def read_held(path: str, inode: int) -> _appendonly.Held | None:
        whole.append(path)
        return real(path, inode)

    monkeypatch.setattr(_manifest, "read_held", read_held)
    read: list[int] = []
    real_open = open

    def counting_open(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        handle = real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]
        if str(path) == str(timeline) and "b" in mode:
            real_read = handle.read

            def counted(size: int = -1) -> bytes:
                data: bytes = real_read(size)
                read.append(len(data))
                return data

            handle.read = counted
        return handle

    monkeypatch.setattr(_appendonly, "open", counting_open, raising=False)
    for n in range(3):
        _forge_appends(timeline)
        read.clear()
        manifest = check.arm()
        assert sum(read) == len(EVENT)  # before an iteration: the new bytes only
        assert manifest.nodes[str(timeline)].digest == file_digest(str(timeline))
        assert not check.inspect(f"i{n}").harmed
    assert whole == []  # never hashed whole again
    snapshots = project / ".forge" / "changes" / "c" / "protect" / "snapshots"
    assert not snapshots.exists() or not any(snapshots.iterdir())  # held in memory, not copied
