"""An agent that asks is heard: ``[run] on_question = "wait"``, answered or not.

The mock-clock part runs the real loop engine with a real fake agent and
jumps trio's clock over the wait; the end-to-end part runs ``forge
supervise``, whose ``[notify] on_question`` command is the test's signal that
the question was asked, and answers it with ``forge steer``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing

from orchestra._durations import Duration
from orchestra._engine import (
    DONE,
    LoopPlan,
    LoopProgress,
    LoopSettings,
    SecscanGate,
    run_loop,
    supervised_rules,
)
from orchestra._executor import Executor, ExecutorSpec
from orchestra._policy import Policy, RunPolicy, VerifyPolicy
from orchestra._state import ChangePaths, Guidance, give_guidance
from tests.support import FAKE_AGENT, Repo, spawn_forge

QUESTION = "Should I use PostgreSQL or SQLite?"
EPOCH = 1_800_000_000.0


def _result(text: str) -> str:
    reply = {"type": "result", "subtype": "success", "is_error": False, "result": text}
    return json.dumps(reply) + "\n"


def _steps(folder: Path) -> list[dict[str, Any]]:
    return [
        {
            "write": {"schema.sql": "-- looked\n"},
            "print": _result(f"I read the schema.\n\n{QUESTION}"),
        },
        {
            "record_env": str(folder / "env-2.json"),
            "write": {"db.py": "ENGINE = 'sqlite'\n"},
            "print": _result("Chose SQLite.\nFORGE_DONE"),
        },
    ]


def _events(root: Path) -> list[dict[str, Any]]:
    timeline = root / ".forge" / "changes" / "c" / "timeline.jsonl"
    return [json.loads(line) for line in timeline.read_text().splitlines()]


async def _loop(
    tmp_path: Path, clock: trio.testing.MockClock, answer: str | None
) -> tuple[str, list[float]]:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps({"steps": _steps(tmp_path)}))
    argv = (sys.executable, str(FAKE_AGENT), str(script))
    executor = Executor(name="fake", spec=ExecutorSpec(argv=argv, output="claude-json"))
    policy = Policy(
        verify=VerifyPolicy(command="true", specs=()),
        run=RunPolicy(max_iterations=4, on_question="wait", question_wait=Duration(1800)),
    )
    paths = ChangePaths(tmp_path, "c")
    plan = LoopPlan(
        paths=paths,
        executor=executor,
        max_iterations=4,
        time_limit=600,
        grace=1,
        done_marker="FORGE_DONE",
        workdir=tmp_path,
    )
    progress = LoopProgress("c", 4)
    settings = LoopSettings(
        policy, supervised_rules(policy), SecscanGate(), None, lambda: EPOCH + trio.current_time()
    )
    ended: list[str] = []
    waits: list[float] = []

    async def loop() -> None:
        ended.append((await run_loop(plan, settings, progress=progress)).reason)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        while not ended:
            await trio.testing.wait_all_tasks_blocked(cushion=0.002)
            if progress.status == "waiting for an answer" and progress.answer_until is not None:
                waits.append(progress.answer_until - trio.current_time())
                if answer is not None:
                    # A person answers ten minutes into the wait.
                    clock.jump(600)
                    by = "alice@laptop"
                    give_guidance(paths, Guidance(text=answer, by=by, at="2026-12-04T00:00:00Z"))
                else:
                    clock.jump(progress.answer_until - trio.current_time())
    return ended[0], waits


async def test_an_unanswered_question_waits_its_time_then_the_loop_decides(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    reason, waits = await _loop(tmp_path, mock_clock, answer=None)

    assert reason == DONE
    assert waits == [1800]  # one wait, the whole of question_wait
    [waited] = [e for e in _events(tmp_path) if e["event"] == "question.waited"]
    assert waited["iteration"] == 1
    assert waited["answered"] is False
    assert waited["waited"] == 1800
    seen = json.loads((tmp_path / "env-2.json").read_text())
    assert "Nobody answers during this run: decide yourself" in seen["FORGE_PROMPT"]
    assert "FORGE_GUIDANCE" not in seen


async def test_an_answer_given_while_it_waits_goes_to_the_next_iteration(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    reason, _ = await _loop(tmp_path, mock_clock, answer="use SQLite")

    assert reason == DONE
    [waited] = [e for e in _events(tmp_path) if e["event"] == "question.waited"]
    assert waited["answered"] is True
    assert 600 <= waited["waited"] < 1800  # it went on once the answer was there
    seen = json.loads((tmp_path / "env-2.json").read_text())
    assert seen["FORGE_GUIDANCE"] == "Guidance from a person (alice@laptop): use SQLite"
    assert f"ended on a question ({QUESTION}). A person answered it" in seen["FORGE_PROMPT"]
    assert seen["FORGE_QUESTION"] == QUESTION


def test_the_notice_names_the_answer_and_forge_steer_answers_it(repo: Repo, tmp_path: Path) -> None:
    told = tmp_path / "told"
    os.mkfifo(told)
    script = tmp_path / "steps.json"
    script.write_text(json.dumps({"steps": _steps(tmp_path)}))
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write("executors/fakejson.toml", f'argv = {json.dumps(argv)}\noutput = "claude-json"\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        '[run]\non_question = "wait"\nquestion_wait = "20m"\n'
        f'[notify]\non_question = "cat > {told}"\n'
        '[[loop]]\nchange = "c"\nexecutor = "fakejson"\nmax_iterations = 4\n',
    )
    repo.commit("loop")
    forge = spawn_forge(["supervise", "--plain"], cwd=repo.root)
    try:
        with open(told, encoding="utf-8") as fifo:  # the question was asked
            notice = json.loads(fifo.read())
        answered = repo.forge("steer", "c", "use SQLite")
        assert answered.code == 0, answered.err
    finally:
        out, err = forge.communicate(timeout=120)
    assert forge.returncode == 0, out + err
    question = notice["question"]
    assert question["text"] == QUESTION
    assert question["answer"] == 'forge steer c "ANSWER"'
    assert question["next"] == (
        'the loop waits up to 20m for an answer: forge steer c "ANSWER"; then it decides'
    )
    assert (
        'c: iteration 1 asked a question: waiting up to 20m for an answer (forge steer c "…")'
        in out.splitlines()
    )
    seen = json.loads((tmp_path / "env-2.json").read_text())
    assert seen["FORGE_GUIDANCE"].endswith("): use SQLite")
    [waited] = [e for e in _events(repo.root) if e["event"] == "question.waited"]
    assert waited["answered"] is True
