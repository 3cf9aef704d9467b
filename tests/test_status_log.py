"""The status log on disk: sections appended, the file rewritten only when it reaches its bound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestra._monitor._statusfile import StatusLog
from orchestra._state import atomic_write, last_alert_details, read_sections


def section(n: int, alerts: str = "") -> str:
    lines = [f"## Iteration {n} — 2026-12-02T00:00:{n:02d}.000Z", "- Circuit state: CLOSED"]
    if alerts:
        lines.append(f"- Alerts: {alerts}")
    return "\n".join(lines) + "\n"


def numbers(path: Path) -> list[int]:
    return [int(n) for n in re.findall(r"^## Iteration (\d+)", path.read_text(), re.M)]


@pytest.fixture
def rewrites(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Each whole rewrite of the file (atomic_write), by path."""
    done: list[Path] = []

    def counting(path: Path, data: bytes, **kwargs: bool) -> None:
        done.append(path)
        atomic_write(path, data, **kwargs)

    monkeypatch.setattr("orchestra._monitor._statusfile.atomic_write", counting)
    return done


def test_sections_are_appended_until_the_file_holds_twice_the_kept(
    tmp_path: Path, rewrites: list[Path]
) -> None:
    path = tmp_path / "status.md"
    log = StatusLog(path, "c", keep=3)
    for n in range(1, 6):
        log.add(section(n))
    assert numbers(path) == [1, 2, 3, 4, 5]
    assert rewrites == [path]  # the first section: there was no file to append to
    assert path.read_text().startswith("# Status of c\n\n")
    assert path.read_text().count("# Status of c") == 1
    log.add(section(6))  # twice the kept: down to the newest three
    assert numbers(path) == [4, 5, 6]
    assert len(rewrites) == 2


def test_the_newest_kept_are_always_there_and_never_twice_as_many(tmp_path: Path) -> None:
    path = tmp_path / "status.md"
    keep = 4
    log = StatusLog(path, "c", keep=keep)
    for n in range(1, 40):
        log.add(section(n))
        held = numbers(path)
        assert held == list(range(held[0], n + 1))  # in order, the newest last
        assert keep <= len(held) < 2 * keep or len(held) == n < keep


def test_an_earlier_runs_sections_are_read_once_and_kept(
    tmp_path: Path, rewrites: list[Path]
) -> None:
    path = tmp_path / "status.md"
    first = StatusLog(path, "c", keep=3)
    for n in range(1, 3):
        first.add(section(n))
    again = StatusLog(path, "c", keep=3)  # the next run of the loop
    again.add(section(3))
    again.add(section(4))
    assert numbers(path) == [1, 2, 3, 4]
    again.add(section(5))
    again.add(section(6))
    assert numbers(path) == [4, 5, 6]


def test_a_removed_file_is_written_again_whole(tmp_path: Path) -> None:
    path = tmp_path / "status.md"
    log = StatusLog(path, "c", keep=3)
    log.add(section(1))
    log.add(section(2))
    path.unlink()  # a person cleared it
    log.add(section(3))
    assert path.read_text().startswith("# Status of c\n\n")
    assert numbers(path) == [1, 2, 3]  # what the loop holds, the heading first


def test_forge_status_reads_the_last_appended_section(tmp_path: Path) -> None:
    path = tmp_path / "status.md"
    log = StatusLog(path, "c", keep=2)
    log.add(section(1, "no-files (no file modified for 3 iterations)"))
    log.add(section(2, "loop-count (12 iterations on the change)"))
    log.add(section(3, "no-files (no file modified for 5 iterations)"))
    assert last_alert_details(path) == {"no-files": "no file modified for 5 iterations"}
    assert [s.splitlines()[0] for s in read_sections(path)][-1].startswith("## Iteration 3 ")


def test_keeping_none_writes_no_file(tmp_path: Path) -> None:
    path = tmp_path / "status.md"
    StatusLog(path, "c", keep=0).add(section(1))
    assert not path.exists()
