"""Unit tests for the on-disk format of orchestra._state._timeline."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestra._errors import StateError
from orchestra._state import OtherEvent, encode_event
from orchestra._state import append_event as append_typed
from orchestra._state._timeline import (
    _TAIL_BYTES,
    TimelineRead,
    _last_seq,
    parse_timeline,
    read_timeline,
)

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


@pytest.fixture
def timeline(tmp_path: Path) -> Path:
    return tmp_path / "changes" / "c1" / "timeline.jsonl"


def append_event(path: Path, change: str, name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Append an event of any name and return it as written."""
    written = append_typed(path, change, OtherEvent(name=name, fields=fields))
    return {"ts": written.ts, "seq": written.seq, "event": name, "change": change} | encode_event(
        written
    )


def line(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode() + b"\n"


# --- append_event --------------------------------------------------------------------


def test_append_event_assigns_seq_1_2_3(timeline: Path) -> None:
    written = [append_event(timeline, "c1", f"step-{n}", {}) for n in range(3)]
    assert [e["seq"] for e in written] == [1, 2, 3]
    events = read_timeline(timeline).events
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert [e["event"] for e in events] == ["step-0", "step-1", "step-2"]


def test_append_event_ts_is_iso8601_utc_ending_in_z(timeline: Path) -> None:
    record = append_event(timeline, "c1", "started", {})
    ts = record["ts"]
    assert isinstance(ts, str)
    assert ts.endswith("Z")
    assert ISO_UTC.match(ts), ts
    parsed = datetime.fromisoformat(ts)
    assert parsed.utcoffset() == UTC.utcoffset(None)


def test_append_event_writes_one_compact_json_line(timeline: Path) -> None:
    record = append_event(timeline, "c1", "gate", {"passed": True, "note": "héllo", "n": 2})
    data = timeline.read_bytes()
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert "héllo".encode() in data  # ensure_ascii=False
    assert b", " not in data
    assert b": " not in data
    written = json.loads(data)
    assert written == record
    assert list(written)[:4] == ["ts", "seq", "event", "change"]
    assert written["change"] == "c1"
    assert written["event"] == "gate"
    assert written["passed"] is True


def test_append_event_stringifies_values_json_cannot_hold(timeline: Path) -> None:
    append_event(timeline, "c1", "file", {"path": Path("a/b.txt")})
    assert read_timeline(timeline).events[0]["path"] == "a/b.txt"


def test_append_event_creates_missing_folders(timeline: Path) -> None:
    assert not timeline.parent.exists()
    append_event(timeline, "c1", "started", {})
    assert timeline.is_file()


def test_append_event_where_the_folder_cannot_exist_raises_state_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StateError):
        append_event(blocker / "timeline.jsonl", "c1", "started", {})


# --- parse_timeline ------------------------------------------------------------------


def test_parse_empty() -> None:
    assert parse_timeline(b"") == TimelineRead(events=())
    assert parse_timeline(b"\n\n  \n") == TimelineRead(events=())


def test_parse_clean_timeline() -> None:
    data = line({"seq": 1}) + line({"seq": 2})
    read = parse_timeline(data)
    assert read == TimelineRead(events=({"seq": 1}, {"seq": 2}))
    assert read.problems(Path("t.jsonl")) == []


def test_parse_tolerates_and_reports_a_torn_last_line() -> None:
    data = line({"seq": 1}) + b'{"seq": 2, "ev'
    read = parse_timeline(data)
    assert read.events == ({"seq": 1},)
    assert read.torn_last_line == '{"seq": 2, "ev'
    assert read.bad_lines == ()
    problems = read.problems(Path("t.jsonl"))
    assert len(problems) == 1
    assert "torn" in problems[0]
    assert problems[0].startswith("t.jsonl")


def test_parse_torn_last_line_with_invalid_utf8_is_decoded_with_replacement() -> None:
    read = parse_timeline(line({"seq": 1}) + b'{"note": "\xc3')
    assert read.torn_last_line == '{"note": "\ufffd'


def test_parse_reports_bad_middle_lines_by_number() -> None:
    data = (
        line({"seq": 1})
        + b"not json\n"
        + b"\n"
        + line({"seq": 2})
        + b'["a list", "not an object"]\n'
        + b'{"seq": 3, "torn\n'
        + b"\xff\xfe\n"
        + line({"seq": 4})
    )
    read = parse_timeline(data)
    assert [e["seq"] for e in read.events] == [1, 2, 4]
    assert read.bad_lines == (2, 5, 6, 7)
    assert read.torn_last_line is None
    problems = read.problems(Path("t.jsonl"))
    assert problems == ["t.jsonl: line(s) 2, 5, 6, 7 are not valid JSON; skipped"]


def test_problems_lists_at_most_ten_bad_lines() -> None:
    read = TimelineRead(events=(), bad_lines=tuple(range(1, 16)), torn_last_line="{")
    problems = read.problems(Path("t"))
    assert len(problems) == 2
    assert "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 are" in problems[1]
    assert "11" not in problems[1]


def test_parse_keeps_a_whole_json_last_line_without_newline() -> None:
    data = line({"seq": 1}) + b'{"seq": 2}'
    read = parse_timeline(data)
    assert read.events == ({"seq": 1}, {"seq": 2})
    assert read.torn_last_line is None
    assert read.bad_lines == ()


def test_parse_non_object_last_line_is_torn() -> None:
    read = parse_timeline(line({"seq": 1}) + b"42")
    assert read.events == ({"seq": 1},)
    assert read.torn_last_line == "42"


def test_parse_tolerates_crlf_line_ends() -> None:
    read = parse_timeline(b'{"seq": 1}\r\n{"seq": 2}\r\n')
    assert read.events == ({"seq": 1}, {"seq": 2})
    assert read.bad_lines == ()


# --- torn line followed by a new append ---------------------------------------------


def test_append_after_a_torn_last_line_starts_a_fresh_line(timeline: Path) -> None:
    append_event(timeline, "c1", "one", {})
    append_event(timeline, "c1", "two", {})
    with timeline.open("ab") as handle:
        handle.write(b'{"ts":"2024-01-01T00:00:00.000Z","seq":3,"ev')

    torn = read_timeline(timeline)
    assert torn.torn_last_line is not None
    assert torn.bad_lines == ()

    record = append_event(timeline, "c1", "three", {})
    assert record["seq"] == 3  # the torn line's seq never counted

    read = read_timeline(timeline)
    assert [e["event"] for e in read.events] == ["one", "two", "three"]
    assert [e["seq"] for e in read.events] == [1, 2, 3]
    assert read.torn_last_line is None
    assert read.bad_lines == (3,)
    assert timeline.read_bytes().endswith(b"\n")


def test_append_after_a_whole_last_line_without_newline_keeps_both(timeline: Path) -> None:
    append_event(timeline, "c1", "one", {})
    with timeline.open("ab") as handle:
        handle.write(b'{"seq":2,"event":"two","change":"c1"}')

    record = append_event(timeline, "c1", "three", {})
    assert record["seq"] == 3

    read = read_timeline(timeline)
    assert [e["seq"] for e in read.events] == [1, 2, 3]
    assert read.bad_lines == ()
    assert read.torn_last_line is None


def test_append_to_an_empty_existing_file_adds_no_blank_line(timeline: Path) -> None:
    timeline.parent.mkdir(parents=True)
    timeline.write_bytes(b"")
    append_event(timeline, "c1", "one", {})
    assert not timeline.read_bytes().startswith(b"\n")


# --- _last_seq -----------------------------------------------------------------------


def test_last_seq_of_a_missing_file_is_zero(tmp_path: Path) -> None:
    assert _last_seq(tmp_path / "absent.jsonl") == 0


def test_last_seq_ignores_bools_and_non_int_seqs(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line({"seq": 4}) + line({"seq": True}) + line({"seq": "9"}))
    assert _last_seq(path) == 4


def test_last_seq_in_a_file_larger_than_the_tail_window(timeline: Path) -> None:
    padding = "x" * 1000
    for _ in range(100):
        append_event(timeline, "c1", "padded", {"padding": padding})
    assert timeline.stat().st_size > _TAIL_BYTES
    assert _last_seq(timeline) == 100
    assert append_event(timeline, "c1", "next", {})["seq"] == 101
    assert [e["seq"] for e in read_timeline(timeline).events] == list(range(1, 102))


def test_last_seq_when_the_last_line_alone_exceeds_the_tail_window(timeline: Path) -> None:
    append_event(timeline, "c1", "one", {})
    append_event(timeline, "c1", "huge", {"blob": "y" * (2 * _TAIL_BYTES)})
    assert timeline.stat().st_size > 2 * _TAIL_BYTES
    assert _last_seq(timeline) == 2
    assert append_event(timeline, "c1", "three", {})["seq"] == 3


def test_last_seq_when_a_large_file_ends_in_a_torn_line(timeline: Path) -> None:
    for _ in range(80):
        append_event(timeline, "c1", "padded", {"padding": "z" * 1000})
    with timeline.open("ab") as handle:
        handle.write(b'{"seq": 81, "padding": "' + b"z" * (_TAIL_BYTES + 10))
    assert _last_seq(timeline) == 80
    assert append_event(timeline, "c1", "after", {})["seq"] == 81


def test_last_seq_window_starting_exactly_on_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    last = line({"seq": 7, "pad": "p" * (_TAIL_BYTES - 30)})
    last = last[:-2] + b" " * (_TAIL_BYTES - len(last)) + last[-2:]
    assert len(last) == _TAIL_BYTES
    path.write_bytes(line({"seq": 6}) + last)
    assert _last_seq(path) == 7


# --- read_timeline -------------------------------------------------------------------


def test_read_timeline_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    read = read_timeline(tmp_path / "nope" / "timeline.jsonl")
    assert read == TimelineRead(events=())
    assert read.problems(tmp_path) == []


def test_read_timeline_of_a_folder_raises_state_error(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="cannot read"):
        read_timeline(tmp_path)


# --- typed events --------------------------------------------------------------------


def test_every_written_kind_decodes_to_its_class_and_back() -> None:
    from orchestra._state import (
        BreakerClosed,
        IterationFinished,
        OtherEvent,
        decode_event,
        event_record,
    )

    closed = BreakerClosed(run_id="r", reason="the probe made progress", cooldown=None)
    raw = event_record(attrs.evolve(closed, ts="2026-12-01T00:00:00.000Z", seq=3, change="c"))
    assert decode_event(raw) == attrs.evolve(closed, ts=raw["ts"], seq=3, change="c")
    # JSON's one number: an int stands for a float; a bool or a string does not.
    finished = decode_event(
        {"event": "iteration.finished", "run_id": "r", "iteration": 1, "duration": 2}
    )
    assert isinstance(finished, IterationFinished)
    assert finished.duration == 2.0
    for bad in ({"duration": True}, {"duration": "2"}, {"iteration": None}):
        damaged = {"event": "iteration.finished", "run_id": "r", "iteration": 1, **bad}
        assert isinstance(decode_event(damaged), OtherEvent), bad
    # A key this release does not know is kept, and written back as it was.
    newer = decode_event({"event": "iteration.finished", "run_id": "r", "iteration": 1, "x": [1]})
    assert event_record(newer)["x"] == [1]


def test_an_iteration_record_survives_its_event() -> None:
    from orchestra._engine import IterationRecord
    from orchestra._engine._record import finished_event, record_from_event
    from orchestra._executor import RateLimitEvent
    from orchestra._stagnation import Signals
    from orchestra._state import IterationFacts, IterationFinished

    converted = {"signals", "secscan"}
    shared = {f.name for f in attrs.fields(IterationRecord)} & {
        f.name for f in attrs.fields(IterationFinished)
    }
    plain = {f.name for f in attrs.fields(IterationFacts)}
    assert shared - converted == plain  # a new shared field is copied too
    record = IterationRecord(
        run_id="r",
        iteration=3,
        duration=1.5,
        exit=1,
        tokens=7,
        cost_usd=0.25,
        failure="exit 1",
        error="boom",
        rate_limit=RateLimitEvent("rejected", 1.0e9, "five_hour"),
        report_problems=("bad report",),
        integrity=({"path": "forge.toml"},),
        integrity_detail="forge.toml deleted",
        verify="FAIL",
        signals=Signals(files_modified=2, meaningful_files=1),
    )
    assert record_from_event(finished_event(record, gates={})) == record
