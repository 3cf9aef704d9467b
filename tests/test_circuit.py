"""The loop circuit's rules, as pure functions of state, policy and time."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from orchestra._circuit import (
    CLOSED,
    CLOSED_CIRCUIT,
    HALF_OPEN,
    OPEN,
    close,
    cooldown_remaining,
    half_open,
    trip,
)
from orchestra._durations import Duration
from orchestra._policy import BreakerPolicy

POLICY = BreakerPolicy(cooldown=Duration(1800), cooldown_max=Duration(4 * 3600), max_opens=3)


def test_first_trip_opens_with_the_base_cooldown() -> None:
    opened = trip(CLOSED_CIRCUIT, "verify: 3 consecutive failures", now=1000.0, policy=POLICY)
    assert (opened.state, opened.cooldown, opened.opens, opened.escalated) == (OPEN, 1800, 1, False)
    assert opened.opened_at == 1000.0
    assert opened.reason == "verify: 3 consecutive failures"


def test_cooldown_counts_down_on_the_clock_it_is_given() -> None:
    opened = trip(CLOSED_CIRCUIT, "r", now=1000.0, policy=POLICY)
    assert cooldown_remaining(opened, 1000.0) == 1800
    assert cooldown_remaining(opened, 1000.0 + 1799) == 1
    assert cooldown_remaining(opened, 1000.0 + 1800) == 0
    assert cooldown_remaining(opened, 1000.0 + 99999) == 0


def test_opened_at_in_the_future_keeps_the_whole_cooldown() -> None:
    opened = trip(CLOSED_CIRCUIT, "r", now=5000.0, policy=POLICY)
    assert cooldown_remaining(opened, 100.0) == 1800  # the clock went back: not closed, not stuck


def test_failed_probes_double_the_cooldown_up_to_the_cap() -> None:
    policy = attrs.evolve(POLICY, max_opens=10)
    circuit = trip(CLOSED_CIRCUIT, "r", now=0.0, policy=policy)
    cooldowns = [circuit.cooldown]
    for _ in range(5):
        circuit = trip(half_open(circuit), "probe failed", now=0.0, policy=policy)
        cooldowns.append(circuit.cooldown)
    assert cooldowns == [1800, 3600, 7200, 14400, 14400, 14400]


def test_a_successful_probe_closes_and_resets_the_cooldown() -> None:
    circuit = trip(CLOSED_CIRCUIT, "r", now=0.0, policy=POLICY)
    circuit = trip(half_open(circuit), "probe failed", now=10.0, policy=POLICY)
    assert circuit.cooldown == 3600
    closed = close(half_open(circuit))
    assert (closed.state, closed.cooldown, closed.reason) == (CLOSED, None, None)
    again = trip(closed, "r", now=20.0, policy=POLICY)
    assert again.cooldown == 1800  # the doubling starts over


def test_max_opens_then_escalate() -> None:
    circuit = CLOSED_CIRCUIT
    for _ in range(3):
        circuit = trip(circuit, "r", now=0.0, policy=POLICY)
        assert not circuit.escalated
        circuit = half_open(circuit)
    circuit = trip(circuit, "r", now=0.0, policy=POLICY)
    assert circuit.opens == 4
    assert circuit.escalated


def test_on_open_escalate_and_incurable_reasons_escalate_at_once() -> None:
    escalating = attrs.evolve(POLICY, on_open="escalate")
    assert trip(CLOSED_CIRCUIT, "r", now=0.0, policy=escalating).escalated
    assert trip(CLOSED_CIRCUIT, "budget", now=0.0, policy=POLICY, curable=False).escalated


def test_half_open_admits_the_probe() -> None:
    circuit = half_open(trip(CLOSED_CIRCUIT, "r", now=0.0, policy=POLICY))
    assert circuit.state == HALF_OPEN
    assert cooldown_remaining(circuit, 10**9) == 0


@given(
    base=st.integers(min_value=1, max_value=10**5),
    factor=st.integers(min_value=1, max_value=64),
    probes=st.integers(min_value=0, max_value=30),
    now=st.floats(min_value=0, max_value=1e10),
    later=st.floats(min_value=-1e10, max_value=1e10),
)
def test_the_remaining_cooldown_never_exceeds_the_cooldown(
    base: int, factor: int, probes: int, now: float, later: float
) -> None:
    policy = BreakerPolicy(
        cooldown=Duration(base), cooldown_max=Duration(base * factor), max_opens=100
    )
    circuit = trip(CLOSED_CIRCUIT, "r", now=now, policy=policy)
    for _ in range(probes):
        circuit = trip(half_open(circuit), "r", now=now, policy=policy)
    assert circuit.cooldown is not None
    assert base <= circuit.cooldown <= base * factor
    assert 0 <= cooldown_remaining(circuit, now + later) <= circuit.cooldown
