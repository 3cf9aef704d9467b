"""The fleet's views as pure parts: the batch's id and summary, the live view's frame."""

from __future__ import annotations

import json
from typing import Any

from orchestra._cli._fleet_watch import frame_lines, newly_lost
from orchestra._fleet._queue import BatchInfo
from orchestra._fleet._status import FleetStatus
from orchestra._report._fleet import (
    build_fleet_report,
    fleet_resume,
    fleet_run_id,
    fleet_summary,
    is_fleet_batch,
)
from orchestra._report._gather import RUN_ID

BATCH = BatchInfo(
    loops=2, calls=5, window=60.0, warn_at=0.8, submitted_at=1_796_000_000.0, source="b"
)


def a_status(loops: dict[str, dict[str, Any]], hosts: dict[str, dict[str, Any]]) -> FleetStatus:
    limiter = {"calls": 5, "window": 60.0, "used": 5, "next_free_in": 3.0, "paused_for": 40.0}
    return FleetStatus("nightly", 1_796_000_100.0, BATCH, hosts, loops, limiter)


def a_host(state: str, ago: float, running: list[str]) -> dict[str, Any]:
    return {"state": state, "last_heartbeat_ago": ago, "running": running, "clock_skew": 0.5}


def test_the_batch_id_is_a_run_id_the_same_on_every_host_and_apart_per_name() -> None:
    first = fleet_run_id("nightly", BATCH.submitted_at)
    assert RUN_ID.match(first)
    assert first == fleet_run_id("nightly", BATCH.submitted_at)
    assert first != fleet_run_id("weekly", BATCH.submitted_at)
    assert first.startswith("20261130T")


def test_the_summary_has_an_exit_code_only_once_every_loop_ended() -> None:
    loops: dict[str, dict[str, Any]] = {
        "a": {
            "state": "done",
            "reason": "done",
            "iterations": 1,
            "host": "w1",
            "ended": "2026-11-30T01:34:00+00:00",
        },
        "b": {"state": "running", "host": "w2"},
    }
    running = fleet_summary(a_status(loops, {}).as_json(), run_id="r")
    assert "exit_code" not in running
    assert [e["change"] for e in running["loops"]] == ["a", "b"]
    assert running["loops"][0] == {
        "change": "a",
        "state": "done",
        "reason": "done",
        "iterations": 1,
        "host": "w1",
    }
    assert not is_fleet_batch(running)  # not an export's
    loops["b"] = {"state": "escalated", "reason": "iterations-exhausted", "host": "w2"}
    ended = fleet_summary(a_status(loops, {}).as_json(), run_id="r", exported_at=5.0)
    assert ended["exit_code"] == 1
    assert is_fleet_batch(ended)
    assert ended["limiter"] == {"calls": 5, "window": 60.0}


def test_the_frame_shows_permits_pause_hosts_loops_and_a_lost_host_once() -> None:
    hosts = {"w1": a_host("lost", 9.5, ["a"]), "w2": a_host("working", 0.2, [])}
    loops = {"a": {"state": "waiting", "host": "w1"}, "b": {"state": "queued"}}
    status = a_status(loops, hosts)
    told: set[str] = set()
    notices = newly_lost(status, told)
    assert notices == [
        "host w1 is LOST: no heartbeat for 9.5s (longer than a lease); it was running a"
    ]
    assert newly_lost(status, told) == []  # said once
    text = [line for line, _style in frame_lines(status, notices)]
    assert (
        text[0]
        == 'fleet "nightly": 2 loop(s) — 1 queued, 0 running, 1 waiting, 0 done, 0 escalated'
    )
    assert "permits: 5/5 in use (per 60s, the whole fleet) · next in 3.0s" in text
    assert "pause: the provider asked to wait, 40s left" in text
    assert any(line.startswith("  w1") and "LOST" in line and "skew +0.5s" in line for line in text)
    assert any("its host w1 was lost; waiting for takeover" in line for line in text)
    assert text[-1].startswith("! host w1 is LOST")


def test_a_fleet_report_counts_the_waits_for_a_permit_its_timelines_tell() -> None:
    def line(kind: str, ts: str, **fields: Any) -> str:
        return json.dumps({"event": kind, "ts": ts, "change": "a", "seq": 1, **fields})

    started = line("run.started", "2026-11-30T01:00:00+00:00", run_id="r1", supervised=True)
    begun = line("iteration.started", "2026-11-30T01:00:30+00:00", iteration=1, run_id="r1")
    timeline = f"{started}\n{begun}\n".encode()
    summary = fleet_summary(
        a_status({"a": {"state": "running", "host": "w1"}}, {}).as_json(), run_id="b"
    )
    report = build_fleet_report(summary, {"a": timeline}, root="/nowhere", dirs={"a": ""})
    assert report.limiter_waits == 1
    [loop] = report.loops
    assert loop.where == "branch forge/a (last on host w1)"
    assert loop.ending == "unfinished"
    assert loop.resume == ("forge timeline --fleet a", "forge status --fleet")
    look = ("forge timeline --fleet c", "forge status --fleet")
    assert fleet_resume("c", "done") == ()
    assert fleet_resume("c", "cancelled") == (*look, "forge fleet requeue c --reason WHY")
    assert fleet_resume("c", "circuit-open") == (
        *look,
        "forge circuit c --reset --reason WHY --fleet",
    )
    unknown = build_fleet_report(summary, {"a": timeline}, root="/nowhere")
    assert unknown.loops[0].where == "last on host w1"
    assert unknown.loops[0].root == "/nowhere"
