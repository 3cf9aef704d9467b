"""A probe must clear what opened the circuit: repeating the detector's pattern fails it."""

from __future__ import annotations

import json
from typing import Any

from .support import Repo, supervise_claude_json

BREAKER = '[breaker]\ncooldown = "0.1s"\ncooldown_max = "0.2s"\nmax_opens = 1\n'


def supervise(repo: Repo, steps: list[dict[str, Any]], stagnation: str) -> list[dict[str, Any]]:
    return supervise_claude_json(repo, steps, f"{BREAKER}[stagnation]\n{stagnation}", iterations=6)


def result(**fields: Any) -> str:
    reply = {"type": "result", "subtype": "success", "is_error": False, "result": "working"}
    return json.dumps({**reply, **fields}) + "\n"


def openings(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events if e["event"] == "breaker.opened"]


def test_a_probe_that_edits_only_tests_again_does_not_close_the_circuit(repo: Repo) -> None:
    steps = [
        {"write": {f"tests/test_a{n}.py": f"def test_{n}():\n    assert {n}\n"}, "print": result()}
        for n in range(1, 7)
    ]
    events = supervise(repo, steps, "window = 2\ntest_fix_ratio = 0.8\n")
    reasons = openings(events)
    assert reasons[0].startswith("stagnation: test-fix-loop"), reasons
    assert "breaker.closed" not in [e["event"] for e in events]
    assert (
        reasons[1] == "probe failed: it repeats the test-fix-loop pattern that opened the circuit"
    )
    stopped = [(e["reason"], e["iterations"]) for e in events if e["event"] == "run.stopped"]
    assert stopped == [("circuit-open", 3)]


def test_a_probe_denied_again_does_not_close_the_circuit(repo: Repo) -> None:
    denied = [{"tool_name": "Bash", "tool_input": {"command": "git push --force"}}]
    steps = [
        {"write": {f"src/m{n}.py": f"X = {n}\n"}, "print": result(permission_denials=denied)}
        for n in range(1, 7)
    ]
    events = supervise(repo, steps, "permission_denials = 2\n")
    reasons = openings(events)
    assert reasons[0].startswith("stagnation: permission-denials"), reasons
    assert "breaker.closed" not in [e["event"] for e in events]
    assert reasons[1] == (
        "probe failed: it repeats the permission-denials pattern that opened the circuit"
    )


def test_a_probe_that_clears_the_pattern_closes_the_circuit(repo: Repo) -> None:
    denied = [{"tool_name": "Bash", "tool_input": {"command": "git push --force"}}]
    steps: list[dict[str, Any]] = [
        {"write": {f"src/m{n}.py": f"X = {n}\n"}, "print": result(permission_denials=denied)}
        for n in range(1, 3)
    ]
    steps.append({"write": {"src/m3.py": "X = 3\n"}, "print": result()})
    steps.append({"print": result(result="FORGE_DONE")})
    events = supervise(repo, steps, "permission_denials = 2\n")
    assert len(openings(events)) == 1
    assert "breaker.closed" in [e["event"] for e in events]
    stopped = [e["reason"] for e in events if e["event"] == "run.stopped"]
    assert stopped == ["done"]


def test_the_denied_commands_are_named_in_the_timeline_the_status_log_and_the_report(
    repo: Repo,
) -> None:
    denied = [{"tool_name": "Bash", "tool_input": {"command": "git push --force"}}]
    steps: list[dict[str, Any]] = [
        {"write": {"src/m1.py": "X = 1\n"}, "print": result(permission_denials=denied)},
        {"print": result(result="FORGE_DONE")},
    ]
    events = supervise(repo, steps, "permission_denials = 3\n")
    finished = [e for e in events if e["event"] == "iteration.finished"]
    assert finished[0]["denied"] == ["Bash: git push --force"]
    status = (repo.change_dir("c") / "status.md").read_text()
    assert "- Denied: Bash: git push --force" in status
    report = repo.forge("report")
    assert report.code == 0, report
    [html] = list((repo.root / ".forge" / "runs").glob("*/report.html"))
    assert "denied: Bash: git push --force" in html.read_text()


def test_an_agent_that_asks_is_told_to_decide_its_question_shown_and_told(repo: Repo) -> None:
    env = repo.root.parent / "env-2.json"
    told = repo.root.parent / "told.jsonl"
    notify = f'[notify]\non_question = "(cat; echo; env | grep ^FORGE_QUESTION=) >> {told}"\n'
    question = "Should I use PostgreSQL or SQLite? Please let me know."
    steps: list[dict[str, Any]] = [
        {"print": result(result=f"I looked at the schema.\n\n{question}")},
        {
            "record_env": str(env),
            "write": {"src/db.py": "ENGINE = 'sqlite'\n"},
            "print": result(result="Chose SQLite.\nFORGE_DONE"),
        },
    ]
    events = supervise(repo, steps, notify)
    finished = [e for e in events if e["event"] == "iteration.finished"]
    assert finished[0]["question"] == question
    assert finished[1]["question"] is None
    seen = json.loads(env.read_text())
    assert seen["FORGE_QUESTION"] == question
    assert "Nobody answers during this run: decide yourself" in seen["FORGE_PROMPT"]
    status = (repo.change_dir("c") / "status.md").read_text()
    assert f"- Question: {question}" in status
    stopped = [e["reason"] for e in events if e["event"] == "run.stopped"]
    assert stopped == ["done"]
    # Told once, the moment it was asked: the question, its loop and what happens next.
    payload, variable = [line for line in told.read_text().splitlines() if line]
    notice = json.loads(payload)
    assert notice["event"] == "question"
    assert notice["question"]["change"] == "c"
    assert notice["question"]["iteration"] == 1
    assert notice["question"]["text"] == question
    assert "decide" in notice["question"]["next"]
    assert variable == f"FORGE_QUESTION={question}"
