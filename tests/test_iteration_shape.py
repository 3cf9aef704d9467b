"""The shape of one iteration: its ``iteration.finished`` line is a contract.

The record's facts and the decision are declared once (``orchestra._state._iteration``);
the engine's record and the timeline's event are both built on them. These tests pin
what a line holds, byte for byte, and that lines written before still decode.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestra._engine import IterationRecord, record_from_event
from orchestra._engine._record import finished_event
from orchestra._executor import RateLimitEvent
from orchestra._monitor import CallsLeft
from orchestra._stagnation import Signals
from orchestra._state import (
    IterationDecision,
    IterationFinished,
    Misfit,
    OtherEvent,
    append_event,
    decision_of,
    decode_event,
    event_record,
    strict_structure,
)
from orchestra._state._events import KINDS

# Every field set away from its default, as the loop writes it.
RECORD = IterationRecord(
    run_id="20261201T000000Z-ab12",
    iteration=4,
    duration=12.5,
    exit=1,
    timed_out=True,
    signal=15,
    start_error="not found",
    output_bytes=2048,
    output_lines=40,
    tokens=1200,
    tool_calls=9,
    cost_usd=0.42,
    permission_denials=2,
    guard_refusals=1,
    done=False,
    failure="exit 1",
    cannot_start=True,
    cost_estimated=True,
    tokens_cached=300,
    session="sess-1",
    error="boom",
    rate_limit=RateLimitEvent("rejected", 1780000000.0, "five_hour"),
    parse_note="unreadable",
    cost_note="priced by table",
    report_problems=("no report",),
    log="runs/x/iteration-4.log",
    integrity=({"path": "forge.toml", "harm": "deleted"},),
    integrity_detail="forge.toml deleted",
    verify="FAIL",
    verify_by_hook=True,
    verify_read_only=True,
    denied=("Bash: git push --force",),
    question="Should I use SQLite?",
    signals=Signals(
        files_modified=2,
        meaningful_files=1,
        lint_errors=3,
        error_fingerprint="e1",
        files=("a.py", "b.py"),
    ),
    calls=CallsLeft(remaining=7, calls=100),
)
GATES = {"verify circuit-breaker": {"state": "open", "detail": "3 consecutive failures"}}
DECIDED: dict[str, Any] = {
    "judged": True,
    "trip": "stagnation",
    "score": 3,
    "window_score": 5,
    "risk": "high",
    "circuit": "open",
    "pause": 30.0,
}
SIGNALS = (
    '{"files_modified":2,"meaningful_files":1,"tasks_completed":0,"tests_newly_passing":0,'
    '"tests_newly_failing":0,"lint_errors":3,"lint_resolved":0,"error_fingerprint":"e1",'
    '"output_bytes":0,"output_lines":0,"permission_denials":0,"test_files_modified":0,'
    '"reverts":0,"diff_fingerprint":null,"done":false,"tests_passed":0,"tests_failed":0,'
    '"tests_skipped":0,"files":["a.py","b.py"],"tasks_measured":true,"guard_refusals":0}'
)
# The signals as written now (two later signals appended).
SIGNALS_NOW = SIGNALS[:-1] + ',"meaningful_tests":0,"failing_tests":null}'
# The line as forge wrote it before the shape was declared once (its keys in another order).
BEFORE = (
    '{"ts":"2026-12-01T00:00:00.000Z","seq":1,"event":"iteration.finished","change":"billing",'
    '"run_id":"20261201T000000Z-ab12","iteration":4,"duration":12.5,"exit":1,"timed_out":true,'
    '"signal":15,"start_error":"not found","output_bytes":2048,"output_lines":40,"tokens":1200,'
    '"tool_calls":9,"cost_usd":0.42,"permission_denials":2,"done":false,"failure":"exit 1",'
    '"error":"boom","rate_limit":{"status":"rejected","resets_at":1780000000.0,"kind":"five_hour"},'
    '"parse_note":"unreadable","cost_note":"priced by table","report_problems":["no report"],'
    '"log":"runs/x/iteration-4.log","gates":{"verify circuit-breaker":{"state":"open",'
    '"detail":"3 consecutive failures"}},"integrity":[{"path":"forge.toml","harm":"deleted"}],'
    '"judged":true,"verify":"FAIL","trip":"stagnation","signals":' + SIGNALS + ',"score":3,'
    '"window_score":5,"risk":"high","circuit":"open","cannot_start":true,'
    '"integrity_detail":"forge.toml deleted","cost_estimated":true,"tokens_cached":300,'
    '"session":"sess-1","pause":30.0,"guard_refusals":1,"verify_by_hook":true,'
    '"calls_remaining":7,"calls_allowed":100}'
)
# The line as forge writes it now: the record's facts, the decision, then the signals.
WRITTEN = (
    '{"ts":"2026-12-01T00:00:00.000Z","seq":1,"event":"iteration.finished",'
    '"change":"billing","run_id":"20261201T000000Z-ab12","iteration":4,"duration":12.5,'
    '"exit":1,"timed_out":true,"signal":15,"start_error":"not found","output_bytes":2048,'
    '"output_lines":40,"tokens":1200,"tool_calls":9,"cost_usd":0.42,"permission_denials":2,'
    '"done":false,"failure":"exit 1","error":"boom","rate_limit":{"status":"rejected",'
    '"resets_at":1780000000.0,"kind":"five_hour"},"parse_note":"unreadable",'
    '"cost_note":"priced by table","report_problems":["no report"],'
    '"log":"runs/x/iteration-4.log","integrity":[{"path":"forge.toml","harm":"deleted"}],'
    '"verify":"FAIL","cannot_start":true,"integrity_detail":"forge.toml deleted",'
    '"cost_estimated":true,"tokens_cached":300,"session":"sess-1","guard_refusals":1,'
    '"verify_by_hook":true,"verify_read_only":true,"denied":["Bash: git push --force"],'
    '"question":"Should I use SQLite?",'
    '"gates":{"verify circuit-breaker":{"state":"open","detail":"3 consecutive failures"}},'
    '"judged":true,"trip":"stagnation","score":3,"window_score":5,"risk":"high",'
    '"circuit":"open","pause":30.0,"signals":' + SIGNALS_NOW + ","
    '"calls_remaining":7,"calls_allowed":100}'
)


def written_line(tmp_path: Path, event: IterationFinished) -> str:
    """The event as the timeline writer appends it, its time pinned."""
    path = tmp_path / "timeline.jsonl"
    append_event(path, "billing", event)
    line = path.read_text(encoding="utf-8").splitlines()[-1]
    return re.sub(r'^\{"ts":"[^"]*"', '{"ts":"2026-12-01T00:00:00.000Z"', line)


def test_the_finished_line_is_pinned_and_round_trips(tmp_path: Path) -> None:
    line = written_line(tmp_path, finished_event(RECORD, gates=GATES, **DECIDED))
    assert line == WRITTEN
    # The same keys and values as forge wrote before (the signals hold two more since).
    before = json.loads(BEFORE)
    before["signals"] = json.loads(SIGNALS_NOW)
    before["verify_read_only"] = True  # facts recorded since
    before["denied"] = ["Bash: git push --force"]
    before["question"] = "Should I use SQLite?"
    assert json.loads(line) == before
    decoded = decode_event(json.loads(line))
    assert isinstance(decoded, IterationFinished)
    assert record_from_event(decoded) == RECORD
    assert decision_of(decoded) == IterationDecision(gates=GATES, **DECIDED)
    assert json.dumps(event_record(decoded), ensure_ascii=False, separators=(",", ":")) == line


def test_a_line_written_before_decodes_to_the_same_event(tmp_path: Path) -> None:
    before = decode_event(json.loads(BEFORE))
    now = decode_event(json.loads(WRITTEN))
    assert isinstance(before, IterationFinished)
    assert isinstance(now, IterationFinished)
    # The same event, but for the signals written since the older line (read as their defaults).
    newer = attrs.evolve(
        before,
        signals=now.signals,
        verify_read_only=True,
        denied=("Bash: git push --force",),
        question="Should I use SQLite?",
    )
    assert newer == now
    older = attrs.evolve(RECORD, verify_read_only=False, denied=(), question=None)
    assert record_from_event(before) == older
    rewritten = written_line(tmp_path, attrs.evolve(before, ts=None, seq=None))
    expected = WRITTEN.replace(SIGNALS_NOW, SIGNALS)
    expected = expected.replace('"verify_read_only":true', '"verify_read_only":false')
    expected = expected.replace('"denied":["Bash: git push --force"]', '"denied":[]')
    assert rewritten == expected.replace('"question":"Should I use SQLite?"', '"question":null')


def test_an_older_line_without_the_newer_fields_still_decodes() -> None:
    old = {"event": "iteration.finished", "run_id": "r", "iteration": 1, "exit": 0, "gates": {}}
    event = decode_event(old)
    assert isinstance(event, IterationFinished)
    record = record_from_event(event)
    assert (record.calls, record.signals, record.guard_refusals) == (None, None, 0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("report_problems", ["fine", 3]),  # a list's items are checked too
        ("integrity", ["forge.toml"]),
        ("gates", []),
        ("score", 2.5),
        ("judged", 1),
        ("exit", True),
        ("run_id", None),
    ],
)
def test_a_field_that_does_not_fit_makes_the_line_another_event(key: str, value: object) -> None:
    raw = {"event": "iteration.finished", "run_id": "r", "iteration": 1, key: value}
    event = decode_event(raw)
    assert isinstance(event, OtherEvent)
    assert event.fields == {k: v for k, v in raw.items() if k != "event"}


def test_ints_stand_for_floats_and_bools_for_nothing_else() -> None:
    event = decode_event({"event": "iteration.finished", "run_id": "r", "iteration": 1, "pause": 3})
    assert isinstance(event, IterationFinished)
    assert type(event.pause) is float
    assert strict_structure(RateLimitEvent, {"status": "rejected", "resets_at": 5}).resets_at == 5.0
    with pytest.raises(Misfit, match=r"rate_limit\.resets_at: expected a number, got a boolean"):
        strict_structure(RateLimitEvent, {"status": "x", "resets_at": True}, "rate_limit")
    with pytest.raises(Misfit, match="missing status"):
        strict_structure(RateLimitEvent, {"kind": "five_hour"}, "rate_limit")


def test_a_provider_limit_is_typed_as_strictly_as_the_line() -> None:
    raw = {"event": "iteration.finished", "run_id": "r", "iteration": 1}
    limit = {"status": "rejected", "resets_at": 1780000000, "kind": None}
    event = decode_event({**raw, "rate_limit": limit})
    assert isinstance(event, IterationFinished)
    assert event.rate_limit == RateLimitEvent("rejected", 1780000000.0)
    for bad in ({"status": 7}, {"kind": "five_hour"}, {"status": "x", "resets_at": "soon"}, "x"):
        assert isinstance(decode_event({**raw, "rate_limit": bad}), OtherEvent), bad
    # A key a newer forge may add to it is not read.
    newer = decode_event({**raw, "rate_limit": {"status": "rejected", "retry": 3}})
    assert isinstance(newer, IterationFinished)
    assert newer.rate_limit == RateLimitEvent("rejected")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    kind=st.sampled_from(sorted(KINDS)),
    values=st.dictionaries(
        st.sampled_from(
            ["run_id", "iteration", "reason", "gates", "signals", "verdict", "ts", "seq"]
        ),
        JSON,
    ),
)
def test_decoding_is_total(kind: str, values: dict[str, Any]) -> None:
    event = decode_event({"event": kind, **values})
    assert event_record(event)["event"] == kind


def test_the_converter_resolves_the_types_as_typing_does() -> None:
    from orchestra._engine import IterationRecord
    from orchestra._state._strict import _resolved_hints

    for cls in (*KINDS.values(), IterationRecord, RateLimitEvent):
        assert _resolved_hints(cls) == typing.get_type_hints(cls), cls
