"""Other changes' state under one loop's check: guarded by name, their folders never listed.

The loop of change ``a`` works in a worktree of its own; change ``b`` keeps its
state (and its history) in the main checkout's ``.forge/changes/b/``, as
under ``[supervise] worktrees = "auto"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from orchestra._policy import Policy
from orchestra._protect._check import IntegrityCheck, integrity_check
from orchestra._state import atomic_write
from orchestra._state._files import note_forge_lines, note_forge_write
from orchestra._state._timeline import append_lines

BREAKER = b"state: open\nfailures: 3\n"
EVENTS = b'{"seq":1,"event":"run.started"}\n{"seq":2,"event":"breaker.opened"}\n'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("agents\n")
    other = tmp_path / ".forge" / "changes" / "b"
    (other / "runs" / "r1").mkdir(parents=True)
    (other / "runs" / "r1" / "iteration-1.log").write_text("output\n")
    (other / "breaker.yaml").write_bytes(BREAKER)
    (other / "verify-attempts.yaml").write_text("consecutive_failures: 3\n")
    (other / "timeline.jsonl").write_bytes(EVENTS)
    (tmp_path / ".forge" / "worktrees" / "a").mkdir(parents=True)
    (tmp_path / ".forge" / "worktrees" / "a" / "AGENTS.md").write_text("agents\n")
    return tmp_path


def _check(root: Path) -> IntegrityCheck:
    return integrity_check(
        Policy(),
        workdir=root / ".forge" / "worktrees" / "a",
        root=root,
        state_folder=root / ".forge" / "changes" / "a",
    )


def test_another_changes_state_harmed_from_a_worktree_is_restored(root: Path) -> None:
    other = root / ".forge" / "changes" / "b"
    check = _check(root)
    check.arm()
    (other / "verify-attempts.yaml").unlink()
    (other / "breaker.yaml").write_text("state: closed\n")  # in place: same inode
    (other / "timeline.jsonl").write_bytes(EVENTS[:10])
    report = check.inspect("a-1")
    harms = {r.violation.name: (r.violation.harm, r.restored) for r in report.repairs}
    assert harms == {
        ".forge/changes/b/breaker.yaml": ("modified", True),
        ".forge/changes/b/timeline.jsonl": ("modified", True),
        ".forge/changes/b/verify-attempts.yaml": ("deleted", True),
    }
    assert (other / "breaker.yaml").read_bytes() == BREAKER
    assert (other / "verify-attempts.yaml").read_text() == "consecutive_failures: 3\n"
    assert (other / "timeline.jsonl").read_bytes() == EVENTS


def test_another_change_deleted_whole_is_restored(root: Path) -> None:
    other = root / ".forge" / "changes" / "b"
    check = _check(root)
    check.arm()
    for path in sorted(other.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    other.rmdir()
    report = check.inspect("a-1")
    assert report.harmed
    assert (other / "breaker.yaml").read_bytes() == BREAKER
    assert (other / "timeline.jsonl").read_bytes() == EVENTS


def test_another_loops_own_writes_and_appends_are_not_harm(root: Path) -> None:
    other = root / ".forge" / "changes" / "b"
    check = _check(root)
    check.arm()
    # Loop b, running meanwhile: a journalled state write and timeline events.
    atomic_write(other / "breaker.yaml", b"state: closed\n", journal=True)
    append_lines(other / "timeline.jsonl", b'{"seq":3,"event":"breaker.closed"}\n')
    # A change that did not exist when the check was armed starts.
    atomic_write(root / ".forge" / "changes" / "c" / "spend.yaml", b"tokens: 0\n", journal=True)
    report = check.inspect("a-1")
    assert not report.harmed, report.detail()
    # And the next iteration starts from what b wrote, not from what it replaced.
    check.arm()
    (other / "breaker.yaml").write_bytes(BREAKER)
    report = check.inspect("a-2")
    assert [r.violation.name for r in report.repairs] == [".forge/changes/b/breaker.yaml"]
    assert (other / "breaker.yaml").read_bytes() == b"state: closed\n"


def test_an_event_the_agent_appends_to_another_timeline_is_harm_and_left_out(
    root: Path,
) -> None:
    other = root / ".forge" / "changes" / "b"
    check = _check(root)
    check.arm()
    ours = b'{"seq":3,"event":"iteration.started"}\n'
    fake = b'{"seq":4,"event":"breaker.closed","by":"agent"}\n'
    later = b'{"seq":5,"event":"iteration.finished"}\n'
    append_lines(other / "timeline.jsonl", ours)  # loop b, running meanwhile
    with open(other / "timeline.jsonl", "ab") as timeline:  # a's agent, beside it
        timeline.write(fake)
    append_lines(other / "timeline.jsonl", later)
    report = check.inspect("a-1")
    assert [(r.violation.name, r.violation.harm) for r in report.repairs] == [
        (".forge/changes/b/timeline.jsonl", "modified")
    ]
    # Put back, with loop b's own events kept and the agent's left out.
    assert (other / "timeline.jsonl").read_bytes() == EVENTS + ours + later


def test_a_whole_event_without_its_newline_is_harm_a_torn_write_is_not(root: Path) -> None:
    other = root / ".forge" / "changes" / "b"
    check = _check(root)
    check.arm()
    with open(other / "timeline.jsonl", "ab") as timeline:
        timeline.write(b'{"seq":3,"event":"break')  # another loop's write, still in flight
    assert not check.inspect("a-1").harmed
    (other / "timeline.jsonl").write_bytes(EVENTS)
    check.arm()
    with open(other / "timeline.jsonl", "ab") as timeline:
        # Whole, but for its newline: forge's next append would make it an event.
        timeline.write(b'{"seq":3,"event":"breaker.closed"}')
    assert check.inspect("a-2").harmed
    assert (other / "timeline.jsonl").read_bytes() == EVENTS


def test_a_line_in_flight_when_the_check_was_armed_is_judged_whole(root: Path) -> None:
    other = root / ".forge" / "changes" / "b"
    line = b'{"seq":3,"event":"iteration.started"}\n'
    # Another loop's append, half written when this loop's check is armed.
    note_forge_lines(other / "timeline.jsonl", line)
    with open(other / "timeline.jsonl", "ab") as timeline:
        timeline.write(line[:10])
    check = _check(root)
    check.arm()
    with open(other / "timeline.jsonl", "ab") as timeline:
        timeline.write(line[10:])
    assert not check.inspect("a-1").harmed
    # A torn line forge appended after is left as it was: no harm either.
    with open(other / "timeline.jsonl", "ab") as timeline:
        timeline.write(b'{"seq":4,"ev')
    check.arm()
    append_lines(other / "timeline.jsonl", b'{"seq":4,"event":"iteration.finished"}\n')
    assert not check.inspect("a-2").harmed


def test_another_loops_state_write_in_flight_stays_its_own_among_many_timeline_lines(
    root: Path,
) -> None:
    other = root / ".forge" / "changes" / "b"
    # Loop b notes its breaker write, appends a commit's worth of events, and
    # renames the breaker into place only after this loop's check is armed.
    note_forge_write(other / "breaker.yaml", b"state: closed\n")
    for seq in range(3, 13):
        append_lines(other / "timeline.jsonl", f'{{"seq":{seq},"event":"e"}}\n'.encode())
    check = _check(root)
    check.arm()
    (other / "breaker.yaml").write_bytes(b"state: closed\n")
    assert not check.inspect("a-1").harmed


def test_a_symlinked_folder_in_another_change_is_not_followed(root: Path) -> None:
    other = root / ".forge" / "changes" / "b"
    (other / "shell-guard").mkdir()
    (other / "shell-guard" / "bash").write_text("#!/bin/sh\nexec forge guard\n")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "bash").write_text("#!/bin/sh\nexec forge guard\n")
    check = _check(root)
    check.arm()
    (other / "shell-guard" / "bash").unlink()
    (other / "shell-guard").rmdir()
    (other / "shell-guard").symlink_to(elsewhere)
    report = check.inspect("a-1")
    assert [r.violation.name for r in report.repairs] == [".forge/changes/b/shell-guard/bash"]
    assert not (other / "shell-guard").is_symlink()
    assert (other / "shell-guard" / "bash").read_text() == "#!/bin/sh\nexec forge guard\n"


def test_the_check_lists_no_folder_of_another_change(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed: list[Path] = []
    scandir = os.scandir

    def noting(path: Any = ".") -> Any:
        listed.append(Path(os.fsdecode(path)))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", noting)
    check = _check(root)
    armed = check.arm()
    check.inspect("a-1")
    other = root / ".forge" / "changes" / "b"
    assert [path for path in listed if path.is_relative_to(other)] == []
    # b's state is recorded all the same, and nothing of its history.
    assert sorted(n for n in armed.names.values() if n.startswith(".forge/changes/b/")) == [
        ".forge/changes/b/breaker.yaml",
        ".forge/changes/b/timeline.jsonl",
        ".forge/changes/b/verify-attempts.yaml",
    ]


def test_a_state_file_one_loop_read_is_not_read_again_by_another(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orchestra._protect._manifest as manifest_module

    other = root / ".forge" / "changes" / "b"
    old = 1_000_000_000  # long settled: no racing edit to fear
    for name in ("breaker.yaml", "verify-attempts.yaml"):
        os.utime(other / name, ns=(old, old))
    first = _check(root)
    first.arm()
    reads: list[str] = []
    real = manifest_module.read_digest

    def counted(path: str, size: int = manifest_module.SMALL_FILE) -> tuple[str, bytes | None]:
        reads.append(path)
        return real(path, size)

    monkeypatch.setattr(manifest_module, "read_digest", counted)
    second = integrity_check(
        Policy(), workdir=root, root=root, state_folder=root / ".forge" / "changes" / "c"
    )
    second.arm()
    assert [p for p in reads if p.startswith(str(other))] == []
    # What the second loop's agent does to it is still seen, and put back.
    (other / "breaker.yaml").write_text("state: closed\n")
    report = second.inspect("c-1")
    assert [r.violation.name for r in report.repairs] == [".forge/changes/b/breaker.yaml"]
    assert (other / "breaker.yaml").read_bytes() == BREAKER


def test_the_loops_own_controls_are_guarded_and_a_persons_pause_is_no_harm(root: Path) -> None:
    """An agent's clean would lift its loop's pause; a person's pause meanwhile is no harm."""
    own = root / ".forge" / "changes" / "a"
    own.mkdir(parents=True)
    paused = b"paused:\n  by: alice@laptop\n  at: '2026-12-07T02:00:00.000Z'\n  reason: ''\n"
    (own / "controls.yaml").write_bytes(paused)
    check = _check(root)
    check.arm()
    (own / "controls.yaml").unlink()
    report = check.inspect("a-1")
    harms = {r.violation.name: (r.violation.harm, r.restored) for r in report.repairs}
    assert harms == {".forge/changes/a/controls.yaml": ("deleted", True)}
    assert (own / "controls.yaml").read_bytes() == paused
    # A person's resume during the iteration (journalled, as forge resume writes it).
    check.arm()
    atomic_write(own / "controls.yaml", b"paused: null\nstop: null\n", journal=True)
    assert not check.inspect("a-2").harmed
