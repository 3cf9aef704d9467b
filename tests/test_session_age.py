"""Sessions: an id from the agent is checked before any argv; an old session is not continued."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from orchestra._durations import Duration
from orchestra._engine import LoopPlan, LoopProgress, LoopSettings, run_loop, supervised_rules
from orchestra._engine._session import Resume, Session, carried, resumable
from orchestra._executor import Executor, ExecutorSpec, valid_session_id
from orchestra._policy import Policy, RunPolicy, VerifyPolicy
from orchestra._state import ChangePaths

from .test_supervised_loop import EPOCH, FAKE_AGENT

HOUR = 3600.0


@pytest.mark.parametrize(
    "session",
    ["S-9", "0199a1b2-c3d4-7e8f-9a0b-1c2d3e4f5a6b", "thread_01.a:b", "x" * 128],
)
def test_ids_of_the_conservative_charset_are_valid(session: str) -> None:
    assert valid_session_id(session)


@pytest.mark.parametrize(
    "session",
    [
        "",
        "S-9\r\nGARBAGE",
        "a b",
        "--dangerously-skip-permissions x",
        "$(rm -rf ~)",
        "é",
        "x" * 129,
    ],
)
def test_anything_else_is_no_session_id(session: str) -> None:
    assert not valid_session_id(session)


def test_an_invalid_id_never_reaches_the_argv() -> None:
    executor = Executor(
        name="fake",
        spec=ExecutorSpec(
            argv=("agent", "new"),
            resume_argv=("agent", "--resume", "{session}"),
            output="claude-json",
            session="continue",
        ),
    )
    assert executor.argv({}, session="S-9") == ["agent", "--resume", "S-9"]
    assert executor.argv({}, session="S-9\r\nGARBAGE") == ["agent", "new"]


def test_resumable_says_why_a_session_is_not_continued() -> None:
    assert resumable(None, now=0.0, max_age=HOUR) == Resume()
    young = Session("S-1", began=0.0)
    assert resumable(young, now=HOUR - 1, max_age=HOUR) == Resume(session="S-1")
    old = resumable(young, now=HOUR, max_age=HOUR)
    assert old.session is None
    assert old.note == (
        "session S-1 began 1h ago, past [run] session_max_age (1h): not resumed, a fresh session"
    )
    bad = resumable(Session("S-9\r\nGARBAGE", 0.0), now=1.0, max_age=HOUR)
    assert bad.session is None
    assert bad.note is not None
    assert bad.note.startswith("session id 'S-9\\r\\nGARBAGE' is not a valid id")


def test_a_continued_session_keeps_its_age_and_a_new_one_begins() -> None:
    first = carried(None, "S-1", resumed=None, began=10.0)
    assert first == Session("S-1", 10.0)
    assert carried(first, "S-1", resumed="S-1", began=20.0) == first
    assert carried(first, None, resumed="S-1", began=20.0) == first
    # Not resumed (too old): the same id reported again is a session begun now.
    assert carried(first, "S-1", resumed=None, began=30.0) == Session("S-1", 30.0)
    assert carried(first, "S-2", resumed="S-1", began=30.0) == Session("S-2", 30.0)


def _session_executor(tmp_path: Path, log: Path) -> Executor:
    """Claude-like output naming one session, whatever the call; each argv appended to log."""
    result = {"type": "result", "subtype": "success", "is_error": False, "session_id": "S-1"}
    steps = [
        {"append": {"work.txt": f"step {n}\n"}, "print": json.dumps({**result, "result": "w"})}
        for n in range(1, 6)
    ]
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"steps": steps}))
    agent = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    wrapper = f'echo "$*" >> {shlex.quote(str(log))}; exec {agent}'
    return Executor(
        name="fake",
        spec=ExecutorSpec(
            argv=("sh", "-c", wrapper, "sh", "new"),
            resume_argv=("sh", "-c", wrapper, "sh", "resume", "{session}"),
            output="claude-json",
            session="continue",
        ),
    )


async def test_a_session_older_than_session_max_age_is_not_continued(tmp_path: Path) -> None:
    log = tmp_path / "argv.log"
    log.touch()
    policy = Policy(
        verify=VerifyPolicy(command="true", specs=()),
        run=RunPolicy(max_iterations=5, session_max_age=Duration(10 * HOUR)),
    )
    plan = LoopPlan(
        paths=ChangePaths(tmp_path, "c"),
        executor=_session_executor(tmp_path, log),
        max_iterations=5,
        time_limit=600,
        grace=1,
        done_marker="FORGE_DONE",
        workdir=tmp_path,
    )

    def wall_clock() -> float:
        # Four hours pass with each call of the agent: iteration k starts at 4(k-1) h.
        return EPOCH + 4 * HOUR * len(log.read_text().splitlines())

    said: list[str] = []
    settings = LoopSettings(policy, supervised_rules(policy), wall_clock=wall_clock)
    await run_loop(
        plan,
        settings,
        progress=LoopProgress("c", 5),
        on_event=lambda kind, change, text: said.append(f"{kind}: {text}"),
    )
    calls = log.read_text().splitlines()
    # S-1 began at 0h; resumed at 4h and 8h; 12h is past 10h: a fresh one, begun at 12h.
    assert calls == ["new", "resume S-1", "resume S-1", "new", "resume S-1"]
    notes = [line for line in said if line.startswith("session: ")]
    assert notes == [
        "session: session S-1 began 12h ago, past [run] session_max_age (10h): "
        "not resumed, a fresh session"
    ]
