"""Every event kind reads as words; a line fits its width and is cut at a word."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestra._oneline import ELLIPSIS, cells, fit, one_line
from orchestra._report import KNOWN_KINDS, event_iteration, event_words
from orchestra._state import ContractEvent, OtherEvent, decode_event

RUN = {"run_id": "r1"}
# One event of each kind this release writes, with the fields it is written with.
SAMPLES: dict[str, dict[str, Any]] = {
    "run.started": {**RUN, "plan": {"max_iterations": 5, "executor": "claude"}},
    "run.stopped": {**RUN, "reason": "done", "iterations": 2},
    "iteration.started": {**RUN, "iteration": 2},
    "iteration.finished": {**RUN, "iteration": 2, "duration": 3.5, "exit": 0},
    "verify": {"verdict": "FAIL", "consecutive_failures": 2, "max_failures": 3, "open": False},
    "breaker.opened": {**RUN, "reason": "verify: 3 failures", "opens": 1, "cooldown": 600.0},
    "breaker.half_open": {**RUN, "reason": "cooldown over"},
    "breaker.closed": {**RUN, "reason": "the probe passed"},
    "protect.violation": {
        **RUN,
        "iteration": 3,
        "harmed": [{"path": "forge.toml", "harm": "modified", "action": "restored"}],
    },
    "breaker.reset": {"breaker": "loop circuit", "reason": "fixed the fixture"},
    "spend.reset": {"tokens": 12, "tool_calls": 3, "cost_usd": 0.5},
    "state.corrupt": {"file": "breaker.yaml", "moved_to": "breaker.yaml.corrupt-1"},
    "state.rebuilt": {"file": "verify-attempts.yaml"},
    "alert.raised": {**RUN, "iteration": 4, "alert": "calls-remaining", "detail": "3 left"},
    "alert.cleared": {**RUN, "iteration": 5, "alert": "calls-remaining"},
    "recovery.step": {**RUN, "trip_kind": "verify", "step": 1, "steps": 2, "strategy": "narrow"},
    "forge.loop.started": {"goal": "refunds", "mode": "plan"},
    "forge.iteration.started": {"stage": "build", "iteration": 2},
    "forge.strategy.changed": {"strategy_change": "smaller steps", "failure": "x"},
    "forge.blocked": {"detail": "needs the tax table"},
    "forge.ship.ready": {"goal": "refunds"},
    "forge.checkpoint": {"stage": "iteration-2", "next_action": "tests", "owner_decision": "ok?"},
    "control.refused": {"command": "forge circuit --reset", "found_by": "env"},
    "guidance.given": {"by": "alice@laptop", "keep": "once", "text": "use SQLite"},
    "guidance.delivered": {**RUN, "iteration": 3, "by": ["alice@laptop"], "texts": ["use it"]},
    "guidance.cleared": {"by": "alice@laptop", "count": 1},
    "question.waited": {**RUN, "iteration": 2, "answered": True, "waited": 600.0},
    "control.paused": {"by": "alice@laptop", "reason": "reviewing its migration"},
    "control.resumed": {"by": "alice@laptop", "reason": "", "held": "paused by alice@laptop"},
    "control.stop": {"by": "bob@desk", "reason": "superseded"},
    "loop.paused": {**RUN, "iteration": 4, "why": "paused by alice@laptop: reviewing"},
    "loop.resumed": {**RUN, "iteration": 4, "waited": 1800.0},
}


def _event(kind: str) -> Any:
    return decode_event({"ts": "2026-12-03T10:00:00Z", "seq": 1, "event": kind, **SAMPLES[kind]})


def test_every_kind_this_release_writes_has_a_sample() -> None:
    assert set(SAMPLES) == set(KNOWN_KINDS)


def test_every_kind_reads_as_words_not_as_its_name_and_fields() -> None:
    for kind in KNOWN_KINDS:
        event = _event(kind)
        if not kind.startswith(("forge.", "control.", "guidance.", "question.", "loop.")):
            assert not isinstance(event, OtherEvent | ContractEvent), kind  # typed, as written
        words = event_words(event)
        assert words, kind
        assert "=" not in words, (kind, words)
        assert "{" not in words, (kind, words)
        assert not words.startswith(f"{kind}:"), (kind, words)


def test_words_say_what_happened() -> None:
    assert event_words(_event("breaker.opened")) == (
        "circuit OPEN (opening 1): verify: 3 failures; cooldown 10m"
    )
    assert event_words(_event("protect.violation")) == ("integrity: forge.toml modified — restored")
    assert event_words(_event("breaker.reset")) == (
        "a person reset the loop circuit: fixed the fixture"
    )
    assert event_words(_event("forge.blocked")) == "blocked: needs the tax table"
    assert event_words(_event("guidance.given")) == "guidance from alice@laptop (once): use SQLite"
    assert event_words(_event("guidance.delivered")) == "iteration 3 given 1 piece of guidance"
    assert event_words(_event("question.waited")) == (
        "waited for an answer to iteration 2's question after 10m: answered"
    )
    assert event_words(_event("iteration.finished")) == "iteration 2, exit 0; took 3.5s"
    assert event_words(_event("control.paused")) == (
        "paused by alice@laptop: reviewing its migration"
    )
    assert event_words(_event("control.stop")) == "stop asked by bob@desk: superseded"
    assert event_words(_event("loop.paused")) == (
        "held before iteration 4 — paused by alice@laptop: reviewing"
    )
    assert event_words(_event("loop.resumed")) == "went on with iteration 4 after 30m"
    assert event_iteration(_event("forge.iteration.started")) == 2
    assert event_iteration(_event("protect.violation")) == 3
    assert event_iteration(_event("run.started")) is None


def test_a_kind_this_release_does_not_know_is_its_name_and_plain_fields() -> None:
    event = decode_event({"event": "custom.thing", "size": 3, "nested": {"a": 1}})
    assert event_words(event) == "custom.thing: size=3"


def test_one_line_flattens_what_a_person_typed() -> None:
    assert one_line("a\n\tb\r\n  c\x07") == "a b c"


def test_fit_cuts_at_a_word_and_measures_wide_characters() -> None:
    assert fit("alpha beta gamma", 16) == "alpha beta gamma"
    assert fit("alpha beta gamma", 15) == "alpha beta…"
    assert fit("alpha, beta", 9) == "alpha…"  # no dangling comma before the ellipsis
    assert fit("漢字漢字 tail", 9) == "漢字漢字…"
    assert fit("unsplittable", 5) == ELLIPSIS
    assert fit("anything", 0) == ""


@given(st.text(alphabet=st.sampled_from("ab 漢,:\u0301"), max_size=60), st.integers(0, 70))
def test_a_fitted_line_is_never_wider_and_is_a_cut_at_a_word(text: str, width: int) -> None:
    fitted = fit(text, width)
    assert cells(fitted) <= width
    if fitted == text:
        return
    kept = fitted.removesuffix(ELLIPSIS)
    assert text.startswith(kept)
    # What was kept ends where a word ended: the next character is not a word's.
    rest = text[len(kept) :]
    assert not kept or not rest or rest[0] in " ,:" or kept[-1] in " ,:"
