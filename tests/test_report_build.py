"""The report's pure core: a run's events folded into what the page shows."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest

from orchestra._report import LoopFacts, build_report, render_html, render_markdown
from orchestra._state import (
    AlertRaised,
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    Event,
    IterationFinished,
    IterationStarted,
    RateLimitEvent,
    RecoveryStep,
    RunStarted,
    RunStopped,
    VerifyRecorded,
    decode_event,
)

from .report_support import BASE, check_page, iso

RUN = "20261130T220000Z-ab12"


def at(seconds: float, event: Event) -> Event:
    return attrs.evolve(event, ts=iso(seconds), change="c")


def finished(number: int, seconds: float, **fields: Any) -> Event:
    return at(
        seconds, IterationFinished(run_id=RUN, iteration=number, duration=2.0, exit=0, **fields)
    )


def iso_epoch(seconds: float) -> float:
    return BASE + seconds


def one_loop(*events: Event, summary: dict[str, Any] | None = None) -> Any:
    report = build_report(RUN, summary, [LoopFacts("c", "/repo", list(events))], root="/repo")
    [loop] = report.loops
    return loop


def kinds(loop: Any) -> list[tuple[str, float, float]]:
    return [(m.kind, m.start, m.duration) for m in loop.marks]


def test_waits_cooldowns_and_circuit_moments_are_placed_on_the_strip() -> None:
    loop = one_loop(
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0.1, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 2.1, verify="FAIL", trip="verify: 1 consecutive failures"),
        at(
            2.1,
            BreakerOpened(
                run_id=RUN, reason="verify: 1 consecutive failures", cooldown=30.0, opens=1
            ),
        ),
        at(32.1, BreakerHalfOpen(run_id=RUN, reason="the cooldown has elapsed", opens=1)),
        at(32.2, IterationStarted(run_id=RUN, iteration=2)),
        finished(2, 34.2, verify="PASS"),
        at(34.2, BreakerClosed(run_id=RUN, reason="the probe passed", opens=1)),
        # Five seconds idle with the circuit closed: a wait for a rate-limit permit.
        at(39.2, IterationStarted(run_id=RUN, iteration=3)),
        finished(3, 41.2, done=True, verify="PASS"),
        at(41.3, RunStopped(run_id=RUN, reason="done", iterations=3)),
    )
    assert kinds(loop) == [
        ("iteration", 0.1, 2.0),
        ("circuit", 2.1, 0.0),
        ("cooldown", 2.1, 30.0),
        ("circuit", 32.1, 0.0),
        ("iteration", 32.2, 2.0),
        ("circuit", 34.2, 0.0),
        ("limiter-wait", 34.2, 5.0),
        ("iteration", 39.2, 2.0),
    ]
    assert [m.tone for m in loop.marks if m.kind == "iteration"] == ["bad", "good", "good"]
    assert loop.cooldown == 30.0
    assert loop.limiter_wait == 5.0
    assert loop.ending == "done"
    assert not loop.escalated
    assert loop.resume == ()


def test_a_provider_pause_and_events_this_release_does_not_know() -> None:
    limit = RateLimitEvent("rejected", 1.0, "five_hour")
    unknown = decode_event(
        {"ts": iso(20), "seq": 9, "event": "fleet.lease.lost", "change": "c", "host": "b", "n": 2}
    )
    loop = one_loop(
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0, IterationStarted(run_id=RUN, iteration=1)),
        finished(
            1, 2, rate_limit=limit, judged=False, cost_estimated=True, cost_usd=0.5, pause=60.0
        ),
        at(
            3,
            AlertRaised(
                run_id=RUN,
                iteration=1,
                alert="no-files",
                detail="no file modified for 3 iterations",
            ),
        ),
        at(
            4,
            RecoveryStep(
                run_id=RUN,
                iteration=1,
                trip_kind="no-progress",
                step=1,
                steps=4,
                strategy="Re-plan.",
            ),
        ),
        unknown,
        at(62, IterationStarted(run_id=RUN, iteration=2)),
    )
    assert [(m.kind, m.start, m.duration) for m in loop.marks] == [
        ("iteration", 0.0, 2.0),
        ("provider-pause", 2.0, 0.0),
        ("alert", 3.0, 0.0),
        ("recovery", 4.0, 0.0),
        ("other", 20.0, 0.0),
        ("provider-pause", 2.0, 60.0),
    ]
    assert loop.marks[1].label == (
        "iteration 1: the provider refused: rejected five_hour; every loop paused 1m"
    )
    assert loop.paused == 60.0  # the wait before iteration 2 is that pause, counted once
    assert loop.marks[4].label == "fleet.lease.lost: host=b, n=2"
    assert (
        loop.marks[2].label == "no-files raised at iteration 1: no file modified for 3 iterations"
    )
    assert loop.marks[3].label == "no-progress 1/4: Re-plan."
    assert [n.name for n in loop.alerts] == ["alert.raised"]
    assert [n.name for n in loop.recovery] == ["recovery.step"]
    assert loop.spend.estimated
    assert loop.spend.cost_usd == 0.5
    assert loop.ending == "unfinished"
    assert not loop.escalated
    html = render_html(build_report(RUN, None, [LoopFacts("c", "/r", [])], root="/r"))
    check_page(html)


def test_only_the_run_asked_for_is_read() -> None:
    other = "20261129T220000Z-0001"
    loop = one_loop(
        at(0, RunStarted(run_id=other, supervised=True)),
        finished(1, 1),
        at(2, RunStopped(run_id=other, reason="done", iterations=1)),
        at(10, RunStarted(run_id=RUN, supervised=True)),
        at(10, IterationStarted(run_id=RUN, iteration=1)),
        at(11, IterationFinished(run_id=other, iteration=7)),  # a concurrent forge run's
        finished(1, 12, tokens=10),
        at(13, RunStopped(run_id=RUN, reason="iterations-exhausted", iterations=1)),
    )
    assert [row.number for row in loop.rows] == [1]
    assert loop.spend.tokens == 10
    assert loop.escalated
    assert loop.resume == (
        "forge timeline c",
        "forge circuit c --reset --reason WHY",
        "forge supervise --only c",
    )


@pytest.mark.parametrize(
    ("gate", "first"),
    [
        ("verify circuit-breaker", "forge verify --change c --reset-breaker"),
        ("spend budget", "forge spend c --reset"),
        ("secscan", "forge secscan waive FINGERPRINT --reason WHY"),
        ("forge state", "forge timeline c"),
    ],
)
def test_each_gate_has_the_command_that_clears_it(gate: str, first: str) -> None:
    loop = one_loop(
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(1, RunStopped(run_id=RUN, reason="gate-open", iterations=0, gate=gate, detail="open")),
    )
    assert loop.escalated
    assert first in loop.resume
    assert loop.resume[-1] == "forge supervise --only c"
    markdown = render_markdown(build_report(RUN, None, [LoopFacts("c", "/repo", [])], root="/repo"))
    assert "No escalations" in markdown


def test_a_loop_in_another_repository_is_resumed_from_there() -> None:
    facts = LoopFacts(
        "c",
        "/other",
        [
            at(0, RunStarted(run_id=RUN, supervised=True)),
            at(1, RunStopped(run_id=RUN, reason="circuit-open", iterations=0)),
        ],
    )
    [loop] = build_report(RUN, None, [facts], root="/repo").loops
    assert loop.resume[1] == "cd /other && forge circuit c --reset --reason WHY"


def test_the_wait_after_a_providers_refusal_is_a_provider_pause() -> None:
    limit = RateLimitEvent("rejected")
    loop = one_loop(
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 2, rate_limit=limit, judged=False),
        at(32, IterationStarted(run_id=RUN, iteration=2)),
        finished(2, 34),
        at(40, IterationStarted(run_id=RUN, iteration=3)),
    )
    assert kinds(loop)[1:4] == [
        ("provider-pause", 2.0, 0.0),
        ("provider-pause", 2.0, 30.0),
        ("iteration", 32.0, 2.0),
    ]
    assert kinds(loop)[4] == ("limiter-wait", 34.0, 6.0)
    assert loop.paused == 30.0
    assert loop.limiter_wait == 6.0
    assert loop.rows[0].note == "the provider refused: rejected"


def test_marks_of_one_instant_are_drawn_apart_and_none_is_covered() -> None:
    # The demo's trip: the circuit opens, the integrity restoration and an alert,
    # all written in the same second.
    from orchestra._state import ProtectViolation

    loop_events = [
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0.1, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 2.1, trip="integrity: a protected path was harmed"),
        at(2.1, ProtectViolation(run_id=RUN, iteration=1, harmed=[{"path": "go.sum"}])),
        at(2.1, BreakerOpened(run_id=RUN, reason="integrity: harmed", cooldown=30.0, opens=1)),
        at(2.1, AlertRaised(run_id=RUN, alert="no-files", iteration=1, detail="3 left")),
        at(2.1, RecoveryStep(run_id=RUN, trip_kind="integrity", step=1, steps=2, strategy="s")),
        at(2.4, RunStopped(run_id=RUN, reason="interrupted", iterations=1)),
    ]
    report = build_report(RUN, None, [LoopFacts("c", "/repo", loop_events)], root="/repo")
    page = render_html(report)
    import re

    strip = re.search(r'<svg class="strip".*?</svg>', page, re.S)
    assert strip is not None
    svg = strip.group(0)
    centres: dict[str, tuple[float, float]] = {}
    for kind in ("circuit", "integrity", "alert", "recovery"):
        shape = re.search(rf'<(\w+) class="m-{kind}" ([^>]*)>', svg)
        assert shape is not None, kind
        attrs_ = dict(re.findall(r'(\w+)="([^"]*)"', shape.group(2)))
        if "points" in attrs_:
            xs = [float(p.split(",")[0]) for p in attrs_["points"].split()]
            ys = [float(p.split(",")[1]) for p in attrs_["points"].split()]
            centres[kind] = (sum(xs) / len(xs), (min(ys) + max(ys)) / 2)
        elif "cx" in attrs_:
            centres[kind] = (float(attrs_["cx"]), float(attrs_["cy"]))
            assert attrs_["fill"] == "none"  # a ring that covers nothing
        else:
            centres[kind] = (
                float(attrs_["x"]) + float(attrs_["width"]) / 2,
                float(attrs_["y"]) + float(attrs_["height"]) / 2,
            )
    # One instant: the same x; each kind on its own row, at least a shape apart.
    assert len({round(x) for x, _ in centres.values()}) == 1
    rows = sorted(y for _, y in centres.values())
    assert all(b - a >= 12 for a, b in itertools.pairwise(rows)), centres


def test_a_cooldown_the_loop_stopped_in_ends_with_the_loop() -> None:
    loop = one_loop(
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0.1, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 1.1, verify="FAIL", trip="verify: 1 consecutive failures"),
        at(1.2, BreakerOpened(run_id=RUN, reason="verify: 1 failure", cooldown=30.0, opens=1)),
        at(2.4, RunStopped(run_id=RUN, reason="interrupted", iterations=1)),
        summary={
            "run_id": RUN,
            "started_at": iso_epoch(0),
            "finished_at": iso_epoch(2.5),
            "loops": [{"change": "c", "dir": "/repo", "reason": "interrupted"}],
        },
    )
    [cooldown] = [m for m in loop.marks if m.kind == "cooldown"]
    assert (cooldown.start, cooldown.duration) == (1.2, 1.2)
    assert cooldown.label.startswith("cooldown 1.2s of a planned 30s (the loop stopped)")
    assert loop.cooldown == 1.2


def test_the_strip_spans_the_batch_as_it_ran() -> None:
    events = [
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0.1, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 1.1, verify="FAIL", trip="verify: 1 consecutive failures"),
        at(1.2, BreakerOpened(run_id=RUN, reason="verify: 1 failure", cooldown=30.0, opens=1)),
    ]  # killed in the cooldown: no run.stopped
    summary = {"run_id": RUN, "started_at": iso_epoch(0), "finished_at": iso_epoch(2.4)}
    report = build_report(RUN, summary, [LoopFacts("c", "/repo", events)], root="/repo")
    assert report.span == pytest.approx(2.4)
    [cooldown] = [m for m in report.loops[0].marks if m.kind == "cooldown"]
    assert cooldown.start + cooldown.duration <= report.span


def test_the_score_chart_has_a_legend_apart_labels_and_marks_the_done_iteration() -> None:
    import re

    loop_events = [
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0.1, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 2.1, score=-1, window_score=-1),
        at(2.2, IterationStarted(run_id=RUN, iteration=2)),
        finished(2, 4.2, score=0, window_score=-1, done=True, verify="PASS"),
        at(4.3, RunStopped(run_id=RUN, reason="done", iterations=2)),
    ]
    report = build_report(RUN, None, [LoopFacts("c", "/repo", loop_events)], root="/repo")
    page = render_html(report)
    found = re.search(r'<svg class="score".*?</svg>', page, re.S)
    assert found is not None
    svg = found.group(0)
    # The legend, drawn once in the page's definitions, is shown under every chart.
    assert svg.endswith('<use href="#score-axes"/><use href="#score-legend"/></svg>')
    legend = re.search(r'<g id="score-legend".*?</g>', page, re.S)
    assert legend is not None
    assert ">iteration score</text>" in legend.group(0)
    assert ">rolling window</text>" in legend.group(0)
    plot = svg
    # The score axis's figures (right-aligned against it), apart from one another.
    figures = r'y="([\d.]+)"[^>]*text-anchor="end">([^<]*)</text>'
    labels = [(float(y), text) for y, text in re.findall(figures, plot)]
    ys = sorted(y for y, _ in labels)
    assert all(b - a >= 9 for a, b in itertools.pairwise(ys)), labels
    assert [text for _, text in labels].count("0") == 1
    assert "+0" not in [text for _, text in labels]
    # The iteration that said done: a ringed check, not a red "no progress" square.
    assert svg.count('<g class="s-done">') == 1
    assert "iteration 2: score +0 (window -1), said done" in svg
    assert svg.count('fill="#cf222e"') == 1  # iteration 1 only
    check_page(page)


def test_words_in_time_order_a_cost_not_reported_and_how_to_go_on() -> None:
    import re

    events = [
        at(0, RunStarted(run_id=RUN, supervised=True)),
        at(0.1, IterationStarted(run_id=RUN, iteration=1)),
        finished(1, 2.1),  # an agent that tells no cost
        # Five idle seconds: a limiter wait, placed where it began (before iteration 2).
        at(7.1, IterationStarted(run_id=RUN, iteration=2)),
        # A person's verify while iteration 2 ran: listed after the iteration's start.
        at(8.0, VerifyRecorded(verdict="FAIL", consecutive_failures=1)),
        finished(2, 9.1),
        # Killed: no run.stopped, no summary.
    ]
    report = build_report(RUN, None, [LoopFacts("c", "/repo", events)], root="/repo")
    [loop] = report.loops
    assert loop.ending == "unfinished"
    page = render_html(report)
    markdown = render_markdown(report)
    listed = re.search(r"Events in words \(\d+\)</summary><ol>(.*?)</ol>", page)
    assert listed is not None
    starts = [float(s) for s in re.findall(r"<li>([\d.]+)s: ", listed.group(1))]
    assert starts == sorted(starts)
    assert len(starts) == 4
    timeline = markdown.split("## Timelines")[1]
    md_starts = [float(s) for s in re.findall(r"^- ([\d.]+)s: ", timeline, re.M)]
    assert md_starts == sorted(md_starts)
    assert "$0.0000" not in page
    assert "$0.0000" not in markdown
    assert "| c | 0 | 0 | not reported |" in markdown  # the spend table
    assert "| c | … unfinished | 2 | 0 | 0 | not reported |" in markdown
    # The loop goes on where it stopped: the command is said, though it is no escalation.
    assert "## Escalations (0)" in markdown
    assert "- c — … unfinished: `forge supervise --only c`" in markdown
    assert "<code>forge supervise --only c</code>" in page
    assert "focus" not in page.split('id="timelines"')[1].split("</p>")[0]
    assert "⏸" not in page
    check_page(page)


def test_a_strategy_handed_out_as_the_loop_escalated_is_not_called_tried() -> None:
    def step(number: int, escalated: bool) -> Event:
        return at(
            number,
            RecoveryStep(
                run_id=RUN,
                iteration=number,
                trip_kind="verify",
                step=number,
                steps=4,
                strategy=f"strategy {number}.",
                escalated=escalated,
            ),
        )

    cut_short = one_loop(at(0, RunStarted(run_id=RUN, supervised=True)), step(3, True))
    assert cut_short.recovery == ()
    assert [n.text for n in cut_short.not_tried] == ["verify 3/4: strategy 3."]
    reached = one_loop(at(0, RunStarted(run_id=RUN, supervised=True)), step(4, True))
    assert [n.text for n in reached.recovery] == ["verify 4/4: strategy 4. (reached: escalated)"]
