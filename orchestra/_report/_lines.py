"""One timeline event in words, on its own (pure).

The morning report folds a loop's events into marks, some of which (a
cooldown, a wait for a permit) it infers from the gaps between events.
``forge timeline`` shows each event as it was written, one line each: this
module says what one event means without the events around it, in the
report's words wherever the report has them (``_fold``'s labels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._durations import brief_seconds
from .._inside import REFUSED_EVENT as _REFUSED
from .._state import (
    BLOCKED,
    CHECKPOINT,
    CONTROL_PAUSED,
    CONTROL_RESUMED,
    CONTROL_STOP,
    GUIDANCE_CLEARED,
    GUIDANCE_DELIVERED,
    GUIDANCE_GIVEN,
    ITERATION_BEGUN,
    LOOP_PAUSED,
    LOOP_RESUMED,
    LOOP_STARTED,
    QUESTION_WAITED,
    SHIP_READY,
    STRATEGY_CHANGED,
    VERIFY_BREAKER,
    AlertCleared,
    AlertRaised,
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    BreakerReset,
    ContractEvent,
    Event,
    IterationFinished,
    IterationStarted,
    OtherEvent,
    ProtectViolation,
    RecoveryStep,
    RunStarted,
    RunStopped,
    SpendReset,
    StateCorrupt,
    StateRebuilt,
    VerifyRecorded,
    event_name,
)

# A recovery step handed out when the loop escalated, before it could be tried.
NOT_TRIED = " (not tried: the loop escalated first)"

KNOWN_KINDS: tuple[str, ...] = (
    *(
        cls.kind
        for cls in (
            RunStarted,
            RunStopped,
            IterationStarted,
            IterationFinished,
            VerifyRecorded,
            BreakerOpened,
            BreakerHalfOpen,
            BreakerClosed,
            ProtectViolation,
            BreakerReset,
            SpendReset,
            StateCorrupt,
            StateRebuilt,
            AlertRaised,
            AlertCleared,
            RecoveryStep,
        )
    ),
    LOOP_STARTED,
    ITERATION_BEGUN,
    STRATEGY_CHANGED,
    BLOCKED,
    SHIP_READY,
    CHECKPOINT,
    _REFUSED,
    GUIDANCE_GIVEN,
    GUIDANCE_DELIVERED,
    GUIDANCE_CLEARED,
    QUESTION_WAITED,
    CONTROL_PAUSED,
    CONTROL_RESUMED,
    CONTROL_STOP,
    LOOP_PAUSED,
    LOOP_RESUMED,
)
"""Every event kind this release writes, each with its own words below."""


def event_iteration(event: Event) -> int | None:
    """The iteration an event belongs to, when it names one."""
    number = getattr(event, "iteration", None)
    if number is None and isinstance(event, ContractEvent | OtherEvent):
        number = event.fields.get("iteration")
    if isinstance(number, int) and not isinstance(number, bool):
        return number
    return None


def event_words(event: Event) -> str:
    """What one event says, in words: ``circuit OPEN (opening 1): verify: 3 failures``.

    Every kind of event has its words; an event this release does not know
    is its name and its plain fields (``key=value``, never a nested value).
    """
    for words in (_loop_words, _circuit_words, _state_words, _notice_words):
        said = words(event)
        if said is not None:
            return said
    if isinstance(event, ContractEvent | OtherEvent):
        return _named_words(event_name(event), event.fields)
    return event_name(event)  # a kind added to the timeline before its words were


def _loop_words(event: Event) -> str | None:
    if isinstance(event, RunStarted):
        return _started(event)
    if isinstance(event, RunStopped):
        words = f"run stopped: {event.reason} after {_count(event.iterations, 'iteration')}"
        if event.gate:
            words += f" (gate: {event.gate})"
        return f"{words}: {event.detail}" if event.detail else words
    if isinstance(event, IterationStarted):
        return f"iteration {event.iteration} started"
    if isinstance(event, IterationFinished):
        words = f"{iteration_label(event)}; took {brief_seconds(event.duration)}"
        refused = refusal_words(event)
        return f"{words}; {refused}" if refused else words
    if isinstance(event, VerifyRecorded):
        return _verified(event)
    return None


def _started(event: RunStarted) -> str:
    words = "supervised run started" if event.supervised else "run started"
    plan = event.plan
    limit, executor = plan.get("max_iterations"), plan.get("executor")
    if isinstance(limit, int) and not isinstance(limit, bool):
        words += f": up to {_count(limit, 'iteration')}"
    if isinstance(executor, str) and executor:
        words += f" with {executor}"
    used = plan.get("iterations_used")
    if isinstance(used, int) and not isinstance(used, bool) and used:
        words += f" ({used} used before)"
    if event.circuit and event.circuit != "closed":
        words += f"; circuit {event.circuit.upper()}"
    return words


def _verified(event: VerifyRecorded) -> str:
    limit = f" of {event.max_failures}" if event.max_failures else ""
    words = f"verify {event.verdict} ({event.consecutive_failures}{limit} consecutive failures)"
    failed = [
        str(check.get("name", "?"))
        for check in event.checks
        if isinstance(check, dict) and check.get("passed") is False
    ]
    if failed:
        words += f", failed: {', '.join(failed)}"
    if event.blocked:
        words += f"; BLOCKED: {event.blocked}"
    elif event.open:
        words += "; verify breaker OPEN"
    return f"{words}; took {brief_seconds(event.duration)}" if event.duration else words


def _circuit_words(event: Event) -> str | None:
    if isinstance(event, BreakerOpened):
        if event.escalated:
            return f"circuit OPEN for good (opening {event.opens}): {event.reason}; escalated"
        words = f"circuit OPEN (opening {event.opens}): {event.reason}"
        return f"{words}; cooldown {brief_seconds(event.cooldown)}" if event.cooldown else words
    if isinstance(event, BreakerHalfOpen):
        return "circuit HALF-OPEN: one probe iteration"
    if isinstance(event, BreakerClosed):
        return f"circuit CLOSED: {event.reason}"
    if isinstance(event, ProtectViolation):
        harmed = "; ".join(harm_words(h) for h in event.harmed) or "a protected path"
        return f"integrity: {harmed}"
    return None


def _state_words(event: Event) -> str | None:
    if isinstance(event, BreakerReset):
        breaker = f"{event.breaker} breaker" if event.breaker == VERIFY_BREAKER else event.breaker
        words = f"a person reset the {breaker}"
        return f"{words}: {event.reason}" if event.reason else words
    if isinstance(event, SpendReset):
        return (
            f"a person reset the spend totals (were {event.tokens} tokens, "
            f"{event.tool_calls} tool calls, ${event.cost_usd:.4f})"
        )
    if isinstance(event, StateCorrupt):
        words = f"state file {event.file} was unreadable: moved aside to {event.moved_to}"
        return f"{words} ({event.reason})" if event.reason else words
    if isinstance(event, StateRebuilt):
        return f"state file {event.file} rebuilt from the timeline"
    return None


def _notice_words(event: Event) -> str | None:
    if isinstance(event, AlertRaised):
        return f"{event.alert} raised at iteration {event.iteration}: {event.detail}"
    if isinstance(event, AlertCleared):
        return f"{event.alert} cleared at iteration {event.iteration}"
    if isinstance(event, RecoveryStep):
        words = f"{event.trip_kind} {event.step}/{event.steps}: {event.strategy}"
        if event.escalated and event.step >= event.steps:
            return words + " (reached: escalated)"
        if event.escalated:
            return words + NOT_TRIED
        return words
    return None


def _holding_words(name: str, fields: Mapping[str, Any], said: Mapping[str, str]) -> str | None:
    """A person's pause, resume and stop (``forge pause`` ...), and the loop holding for them."""
    by = said.get("by", "a person")
    why = f": {said['reason']}" if said.get("reason") else ""
    if name == CONTROL_PAUSED:
        return f"paused by {by}{why}"
    if name == CONTROL_RESUMED:
        return f"resumed by {by}{why}"
    if name == CONTROL_STOP:
        return f"stop asked by {by}{why}"
    number = fields.get("iteration", "?")
    if name == LOOP_PAUSED:
        return f"held before iteration {number} — {said.get('why', 'paused')}"
    if name == LOOP_RESUMED:
        waited = fields.get("waited")
        took = f" after {brief_seconds(float(waited))}" if isinstance(waited, int | float) else ""
        return f"went on with iteration {number}{took}"
    return None


def _steering_words(name: str, fields: Mapping[str, Any], said: Mapping[str, str]) -> str | None:
    """A person's guidance (``forge steer``) and a loop waiting for its answer."""
    if name == GUIDANCE_GIVEN:
        keep = said.get("keep", "once")
        return f"guidance from {said.get('by', 'a person')} ({keep}): {said.get('text', '')}"
    if name == GUIDANCE_DELIVERED:
        texts = fields.get("texts")
        count = len(texts) if isinstance(texts, list) else 0
        return (
            f"iteration {fields.get('iteration', '?')} given {_count(count, 'piece')} of guidance"
        )
    if name == GUIDANCE_CLEARED:
        return f"guidance cleared by {said.get('by', 'a person')}"
    held = _holding_words(name, fields, said)
    if held is not None:
        return held
    if name == QUESTION_WAITED:
        answered = "answered" if fields.get("answered") is True else "no answer: it decided"
        waited = fields.get("waited")
        took = f" after {brief_seconds(float(waited))}" if isinstance(waited, int | float) else ""
        number = fields.get("iteration", "?")
        return f"waited for an answer to iteration {number}'s question{took}: {answered}"
    return None


def _named_words(name: str, fields: Mapping[str, Any]) -> str:
    """The loop contract's events, a refused command, and kinds known only by name."""
    said = {key: value for key, value in fields.items() if isinstance(value, str) and value}
    if name == LOOP_STARTED:
        return f"loop started: {said.get('goal', 'no goal given')}"
    if name == ITERATION_BEGUN and "iteration" in fields:
        return f"pass {fields['iteration']} begun at stage {said.get('stage', '?')}"
    if name == STRATEGY_CHANGED:
        return f"strategy changed: {said.get('strategy_change', '?')}"
    if name == BLOCKED:
        return f"blocked: {said.get('detail', 'no detail given')}"
    if name == SHIP_READY:
        return f"ready to ship: {said.get('goal', '')}".rstrip(": ")
    if name == CHECKPOINT:
        words = f"checkpoint at stage {said.get('stage', '?')}"
        for key, label in (("next_action", "next"), ("owner_decision", "owner decision")):
            if key in said:
                words += f"; {label}: {said[key]}"
        return words
    if name == _REFUSED:
        words = f"refused {said.get('command', 'a command')} from inside the loop"
        return f"{words} (found by {said['found_by']})" if "found_by" in said else words
    steered = _steering_words(name, fields, said)
    if steered is not None:
        return steered
    text = fields_text(fields)
    return f"{name}: {text}" if text else name


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def harm_words(harmed: Mapping[str, Any]) -> str:
    path = harmed.get("path", "?")
    words = f"{path} {harmed.get('harm', 'harmed')}"
    if harmed.get("protection"):
        words += f" (protected: {harmed['protection']})"
    if harmed.get("action"):
        words += f" — {harmed['action']}"
    return words


def refusal_words(event: IterationFinished) -> str | None:
    """The provider's refusal of an iteration, in words (None: it was not refused)."""
    if event.rate_limit is None and event.judged:
        return None
    limit = event.rate_limit
    which = f"{limit.status} {limit.kind or ''}".strip() if limit is not None else "limit"
    note = f"the provider refused: {which}"
    if event.pause:
        note += f"; every loop paused {brief_seconds(event.pause)}"
    return note


def iteration_label(event: IterationFinished) -> str:
    parts = [f"iteration {event.iteration}", exit_words(event)]
    if event.verify:
        parts.append(f"verify {event.verify}")
    if event.score is not None:
        parts.append(f"score {event.score:+d}")
    if event.done:
        parts.append("done")
    if event.trip:
        parts.append(f"tripped: {event.trip}")
    if event.denied:
        parts.append(f"denied: {'; '.join(event.denied)}")
    if event.question:
        parts.append(f"asked: {event.question}")
    return ", ".join(parts)


def exit_words(event: IterationFinished) -> str:
    if event.start_error:
        return f"could not start: {event.start_error}"
    if event.timed_out:
        return "timed out"
    if event.signal is not None:
        return f"killed by signal {event.signal}"
    return f"exit {event.exit}" if event.exit is not None else "no exit code"


def fields_text(fields: Mapping[str, Any], limit: int = 160) -> str:
    """A generic event's scalar fields, ``key=value`` (for kinds the report does not know)."""
    parts = []
    for key, value in fields.items():
        if key in ("run_id",) or isinstance(value, dict | list) or value is None:
            continue
        parts.append(f"{key}={value}")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"
