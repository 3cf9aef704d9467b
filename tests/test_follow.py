"""Following files as they grow (whole lines only), and finding the logs ``forge attach`` shows."""

from __future__ import annotations

from pathlib import Path

from orchestra._cli._attach_logs import LogAt, next_log, running
from orchestra._cli._follow import _HELD_MAX, Tail
from orchestra._state import IterationStarted, RunStarted, RunStopped


def _read(tail: Tail) -> bytes:
    return b"".join(tail.lines())


def test_a_line_is_handed_on_once_its_newline_came(tmp_path: Path) -> None:
    log = tmp_path / "iteration-1.log"
    tail = Tail(log)
    assert _read(tail) == b""  # not there yet
    log.write_bytes(b"one\ntw")
    assert _read(tail) == b"one\n"
    assert _read(tail) == b""
    with log.open("ab") as handle:
        handle.write(b"o\nthree")
    assert _read(tail) == b"two\n"
    assert tail.rest() == b"three\n"
    assert tail.rest() == b""


def test_a_file_cut_short_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "timeline.jsonl"
    log.write_bytes(b"a long first line\n")
    tail = Tail(log)
    assert _read(tail) == b"a long first line\n"
    log.write_bytes(b"new\n")
    assert _read(tail) == b"new\n"


def test_an_endless_line_is_handed_on_in_pieces(tmp_path: Path) -> None:
    log = tmp_path / "iteration-1.log"
    log.write_bytes(b"x" * (_HELD_MAX + 10))
    tail = Tail(log)
    assert _read(tail) == b"x" * (_HELD_MAX + 10)
    assert tail.rest() == b""


def _log(runs: Path, run_id: str, number: int) -> None:
    (runs / run_id).mkdir(parents=True, exist_ok=True)
    (runs / run_id / f"iteration-{number}.log").write_bytes(b"")


def test_the_next_log_is_the_runs_next_iteration_then_a_new_runs_first(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _log(runs, "20261207T010000Z-ffff", 1)
    _log(runs, "20261207T010000Z-ffff", 3)
    (runs / "20261207T010000Z-ffff" / "iteration-3.report.json").write_text("{}")
    known = {"20261207T010000Z-ffff"}
    at = LogAt("20261207T010000Z-ffff", 1)
    assert next_log(runs, at, known) == LogAt("20261207T010000Z-ffff", 3)
    assert next_log(runs, LogAt("20261207T010000Z-ffff", 3), known) is None
    # Started in the same second, its id sorts first: it is new all the same.
    _log(runs, "20261207T010000Z-0000", 2)
    assert next_log(runs, LogAt("20261207T010000Z-ffff", 3), known) == LogAt(
        "20261207T010000Z-0000", 2
    )
    assert next_log(tmp_path / "none", None, set()) is None


def test_running_is_what_started_and_neither_finished_nor_stopped() -> None:
    events = [
        RunStarted(run_id="a"),
        IterationStarted(run_id="a", iteration=1),
        RunStopped(run_id="a", reason="interrupted", iterations=1),
        RunStarted(run_id="b"),
        IterationStarted(run_id="b", iteration=1),
        IterationStarted(run_id="b", iteration=2),
    ]
    now = running(events)
    assert now.runs == ("b",)
    assert now.iterations == (LogAt("b", 1), LogAt("b", 2))
