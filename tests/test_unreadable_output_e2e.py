"""A garbled reply is one failed iteration of a supervised loop, never its ending."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .support import Repo, supervise_claude_json

DONE = {"type": "result", "subtype": "success", "is_error": False, "result": "FORGE_DONE"}

# What a CLI that was cut short or confused prints instead of its result.
GARBLED = {
    "an empty array": "[]\n",
    "an array with no result message": json.dumps([{"type": "system", "subtype": "init"}]) + "\n",
    "a truncated JSON line": '{"type": "result", "subtype": "succ\n',
}


def supervise(repo: Repo, *steps: dict[str, Any], breaker: str = "") -> list[dict[str, Any]]:
    return supervise_claude_json(repo, steps, breaker, iterations=4)


@pytest.mark.parametrize("garbled", GARBLED.values(), ids=list(GARBLED))
def test_a_garbled_reply_fails_its_iteration_and_the_loop_goes_on(repo: Repo, garbled: str) -> None:
    events = supervise(repo, {"print": garbled + "FORGE_DONE\n"}, {"print": json.dumps(DONE)})
    finished = [e for e in events if e["event"] == "iteration.finished"]
    assert [e["iteration"] for e in finished] == [1, 2]
    assert finished[0]["parse_note"], finished[0]
    stopped = [e for e in events if e["event"] == "run.stopped"]
    assert [(e["reason"], e["iterations"]) for e in stopped] == [("done", 2)]


def test_garbled_replies_open_the_circuit_and_probe_like_any_failure(repo: Repo) -> None:
    """Every reply garbled: the circuit opens, cools down, probes and escalates; no early end."""
    breaker = '[breaker]\ncooldown = "0.1s"\ncooldown_max = "0.2s"\nmax_opens = 1\n'
    stall = "[stagnation]\nno_progress = 2\n"
    events = supervise(repo, {"print": "[]\n"}, breaker=breaker + stall)
    kinds = [e["event"] for e in events]
    assert "breaker.opened" in kinds, kinds
    assert "breaker.half_open" in kinds, kinds
    stopped = [e for e in events if e["event"] == "run.stopped"]
    assert [e["reason"] for e in stopped] == ["circuit-open"]
    opened = next(e for e in events if e["event"] == "breaker.opened")
    assert opened["reason"], opened
    # The probe's failure names the raw log a person reads.
    reopened = [e for e in events if e["event"] == "breaker.opened"][-1]
    assert "could not be read" in reopened["reason"], reopened
    assert "iteration-" in reopened["reason"], reopened
