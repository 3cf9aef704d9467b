"""Where a loop stands (orchestra._cli._standing): the decisions only a person may take."""

from __future__ import annotations

from typing import Any

from orchestra._cli._standing import (
    DONE,
    IDLE,
    INTERRUPTED,
    NEEDS_YOU,
    RUNNING,
    Blocker,
    Decision,
    Held,
    headline,
    standing,
)

STARTED = {"event": "run.started", "run_id": "r", "supervised": True}


def _stopped(reason: str, gate: str | None = None, detail: str | None = None) -> dict[str, Any]:
    return {"event": "run.stopped", "run_id": "r", "reason": reason, "gate": gate, "detail": detail}


def test_a_run_without_an_ending_is_running_and_an_ending_settles_it() -> None:
    assert standing("c", [], Held(), where="", root="/p").state == IDLE
    assert standing("c", [STARTED], Held(), where="", root="/p").state == RUNNING
    assert standing("c", [STARTED, _stopped("done")], Held(), where="", root="/p").state == DONE
    interrupted = [STARTED, _stopped("interrupted")]
    assert standing("c", interrupted, Held(), where="", root="/p").state == INTERRUPTED
    # A new run after an ending: its own ending is the one that counts.
    again = [STARTED, _stopped("gate-open"), STARTED]
    assert standing("c", again, Held(), where="", root="/p").state == RUNNING


def test_an_integrity_trip_is_reviewed_then_the_circuit_reset() -> None:
    held = Held(circuit_escalated=True, circuit_reason="integrity: forge.toml deleted")
    stands = standing("docs", [STARTED], held, where="", root="/p")
    assert stands.state == NEEDS_YOU
    assert stands.decisions == (
        Decision(
            "integrity trip to review: integrity: forge.toml deleted",
            "forge timeline docs --kind integrity",
        ),
        Decision("reset the circuit", "forge circuit docs --reset --reason WHY"),
    )


def test_a_spent_budget_is_granted_by_a_person_once() -> None:
    held = Held(circuit_escalated=True, circuit_reason="budget: 500 tokens of 100")
    records = [STARTED, _stopped("gate-open", "spend budget", "500 tokens spent, ceiling 100")]
    stands = standing("b", records, held, where="/p/sub", root="/p")
    assert stands.blocker == Blocker("spend budget", "500 tokens spent, ceiling 100")
    commands = [decision.command for decision in stands.decisions]
    assert commands == [
        "cd /p/sub && forge spend b --reset",
        "cd /p/sub && forge circuit b --reset --reason WHY",
    ]
    assert stands.then == ("cd /p/sub && forge spend b", "forge supervise --only b")


def test_a_gate_stop_names_the_gate_and_the_commands_that_run_it_again() -> None:
    records = [STARTED, _stopped("gate-open", "verify circuit-breaker", "3 consecutive\nfailures")]
    held = Held(verify_open=True, verify_failures=3, verify_max=3)
    stands = standing("v", records, held, where="", root="/p")
    assert stands.blocker == Blocker("verify circuit-breaker", "3 consecutive failures")
    assert stands.decisions == (
        Decision(
            "verify breaker OPEN: 3/3 consecutive failures",
            "forge verify --change v --reset-breaker",
        ),
    )
    # The command already among the decisions is not said twice.
    assert stands.then == ("forge verify --change v", "forge supervise --only v")


def test_the_headline_counts_in_order_and_in_words() -> None:
    assert headline([]) == "no loops yet"
    assert headline([DONE]) == "1 loop: 1 done"
    states = [DONE, NEEDS_YOU, RUNNING, NEEDS_YOU]
    assert headline(states) == "4 loops: 2 need you · 1 running · 1 done"
    assert headline([NEEDS_YOU, IDLE]) == "2 loops: 1 needs you · 1 idle"
