"""Signals measured in real git repositories changed by the real fake agent."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestra._executor import IterationContext, run_iteration, shell_command
from orchestra._policy import StagnationPolicy
from orchestra._stagnation import Signals, Snapshot, WorkspaceProbe, count_checked

from .support import Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>
"""


def junit(**outcomes: str) -> str:
    cases = []
    for name, outcome in outcomes.items():
        inner = {"fail": "<failure message='x'/>", "skip": "<skipped/>", "pass": ""}[outcome]
        cases.append(f'<testcase classname="tests.test_cart" name="{name}">{inner}</testcase>')
    return JUNIT.format(cases="".join(cases))


class Agent:
    """Plays one step of the fake agent per iteration in ``root`` and measures it."""

    def __init__(
        self, root: Path, policy: StagnationPolicy | None = None, *, reuse: bool = False
    ) -> None:
        self.root = root
        self.probe = WorkspaceProbe(root, policy or StagnationPolicy())
        self.number = 0
        # As a loop does it: the snapshot after an iteration is the next one's "before".
        self.reuse = reuse
        self.carried: Snapshot | None = None

    async def step(self, during: Callable[[], None] | None = None, **step: Any) -> Signals:
        self.number += 1
        script = self.root.parent / f"step-{self.number}.json"
        script.write_text(json.dumps({"steps": [step]}))
        command = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
        before = self.carried or self.probe.snapshot()
        if during is not None:
            during()  # what the agent does besides the script (a commit, say)
        outcome = await run_iteration(
            shell_command(command),
            IterationContext(
                change="c",
                number=1,
                max_iterations=1,
                workdir=self.root,
                state_dir=self.root / ".forge" / "changes" / "c",
                report_path=self.root / ".forge" / "report.json",
                log_path=self.root / ".forge" / "log",
            ),
            time_limit=60,
            grace=1,
            done_marker="FORGE_DONE",
        )
        if not self.reuse:
            return self.probe.measure(before, outcome, None)
        after = self.probe.take()
        signals = self.probe.measure(before, outcome, None, after=after)
        self.carried = self.probe.mark_seen(after)
        return signals


@pytest.fixture(params=["fresh", "reused"])
def agent(repo: Repo, request: pytest.FixtureRequest) -> Agent:
    repo.write("cart.py", "def total(items):\n    return sum(items)\n")
    repo.write("tasks.md", "- [ ] totals\n- [ ] discounts\n- [ ] refunds\n")
    repo.commit("start")
    return Agent(repo.root, reuse=request.param == "reused")


async def test_edits_new_untracked_files_and_deletions(agent: Agent) -> None:
    signals = await agent.step(
        write={"cart.py": "def total(items):\n    return sum(items) or 0\n", "notes.txt": "new"},
        delete=["tasks.md"],
    )
    assert signals.files_modified == 3
    assert signals.meaningful_files == 3


async def test_nothing_changed(agent: Agent) -> None:
    signals = await agent.step(print="thinking\n")
    assert (signals.files_modified, signals.meaningful_files, signals.diff_fingerprint) == (
        0,
        0,
        None,
    )
    assert signals.output_lines == 1


async def test_a_whitespace_change_is_not_meaningful(agent: Agent) -> None:
    signals = await agent.step(write={"cart.py": "def total(items):\n\n    return sum(items)  \n"})
    assert signals.files_modified == 1
    assert signals.meaningful_files == 0


async def test_ignored_files_do_not_count(agent: Agent, repo: Repo) -> None:
    repo.write(".gitignore", "build/\n")
    repo.commit("ignore build")
    signals = await agent.step(write={"build/out.o": "binary"})
    assert signals.files_modified == 0


async def test_a_commit_by_the_agent_still_counts(agent: Agent, repo: Repo) -> None:
    def commit() -> None:
        repo.write("cart.py", "def total(items):\n    return 42\n")
        repo.write("refunds.py", "REFUNDS = []\n")
        repo.commit("the agent committed its work")

    signals = await agent.step(during=commit, print="committed\n")
    assert signals.files_modified == 2
    assert signals.meaningful_files == 2


async def test_reverts_to_an_earlier_content(agent: Agent) -> None:
    first = await agent.step(write={"cart.py": "A = 1\n"})
    second = await agent.step(write={"cart.py": "A = 2\n"})
    back = await agent.step(write={"cart.py": "A = 1\n"})
    assert (first.reverts, second.reverts, back.reverts) == (0, 0, 1)
    original = await agent.step(write={"cart.py": "def total(items):\n    return sum(items)\n"})
    assert original.reverts == 1  # back to what it was before the loop began


async def test_circular_changes_share_diff_fingerprints(agent: Agent) -> None:
    a1 = await agent.step(write={"cart.py": "A\n"})
    b1 = await agent.step(write={"cart.py": "B\n"})
    a2 = await agent.step(write={"cart.py": "A\n"})
    b2 = await agent.step(write={"cart.py": "B\n"})
    assert a1.diff_fingerprint == a2.diff_fingerprint
    assert b1.diff_fingerprint == b2.diff_fingerprint
    assert a1.diff_fingerprint != b1.diff_fingerprint


async def test_checkboxes_gained_count_as_tasks(agent: Agent) -> None:
    done_one = await agent.step(
        write={"tasks.md": "- [x] totals\n- [ ] discounts\n- [ ] refunds\n"}
    )
    assert done_one.tasks_completed == 1
    done_two = await agent.step(
        write={"tasks.md": "- [X] totals\n* [x] discounts\n1. [x] refunds\n"}
    )
    assert done_two.tasks_completed == 2
    unchecked = await agent.step(write={"tasks.md": "- [ ] totals\n"})
    assert unchecked.tasks_completed == 0


def test_brackets_that_are_not_checkboxes_do_not_count() -> None:
    text = (
        "- [2026-01-29] released\n- [v1.0] tagged\n- [#123] fixed\n"
        "[x] not a list item\n- [x]no space\n- [x] a real one\n"
    )
    assert count_checked(text) == 1


async def test_tests_newly_passing_and_failing_from_junit(agent: Agent) -> None:
    report = ".forge/junit.xml"
    first = await agent.step(write={report: junit(a="fail", b="pass", c="fail")})
    assert (first.tests_newly_passing, first.tests_newly_failing) == (0, 0)  # no baseline
    second = await agent.step(write={report: junit(a="pass", b="fail", c="pass")})
    assert (second.tests_newly_passing, second.tests_newly_failing) == (2, 1)
    unchanged = await agent.step(print="no new report\n")
    assert (unchanged.tests_newly_passing, unchanged.tests_newly_failing) == (0, 0)


async def test_test_files_and_error_fingerprints(agent: Agent) -> None:
    first = await agent.step(
        write={"tests/test_cart.py": "x = 1\n", "cart.py": "y = 2\n"},
        stderr="Error: at /tmp/run-1/cart.py line 12: value 7 is wrong\n",
        exit=1,
    )
    assert first.test_files_modified == 1
    assert first.error_fingerprint is not None
    second = await agent.step(
        write={"tests/test_cart.py": "x = 3\n"},
        stderr="Error: at /tmp/run-2/cart.py line 40: value 9 is wrong\n",
        exit=1,
    )
    assert second.error_fingerprint == first.error_fingerprint  # the same error, other details
    third = await agent.step(stderr="KeyError: 'cart'\n", exit=1)
    assert third.error_fingerprint != first.error_fingerprint


async def test_outside_git_files_are_hashed(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.txt").write_text("one")
    agent = Agent(root)
    changed = await agent.step(write={"a.txt": "two", "b.txt": "new"})
    assert changed.files_modified == 2
    same = await agent.step(print="nothing\n")
    assert same.files_modified == 0


async def test_configured_tasks_files_and_test_globs(repo: Repo) -> None:
    repo.write("PLAN.md", "- [ ] one\n")
    repo.commit("plan")
    policy = attrs.evolve(StagnationPolicy(), tasks_files=("PLAN.md",), test_globs=("spec/**",))
    agent = Agent(repo.root, policy)
    signals = await agent.step(write={"PLAN.md": "- [x] one\n", "spec/cart_spec.rb": "it"})
    assert signals.tasks_completed == 1
    assert signals.test_files_modified == 1


@pytest.mark.parametrize("reuse", [False, True])
async def test_a_loop_in_a_subfolder_of_a_repository(repo: Repo, reuse: bool) -> None:
    repo.write("service/app.py", "A = 1\n")
    repo.write("other/x.py", "X = 1\n")
    repo.commit("two folders")
    agent = Agent(repo.root / "service", reuse=reuse)
    signals = await agent.step(write={"app.py": "A = 2\n", "new.py": "N = 1\n"})
    assert signals.files_modified == 2  # paths from the folder, not the top of the repository
    assert signals.meaningful_files == 2
    repo.write("other/x.py", "X = 2\n")  # outside the loop's folder: not its work
    quiet = await agent.step(print="")
    assert quiet.files_modified == 0


async def test_a_huge_file_is_judged_by_size_and_time_not_read(agent: Agent) -> None:
    big = agent.root / "blob.bin"

    def grow() -> None:
        with big.open("wb") as handle:
            handle.truncate(200 * 1024 * 1024)  # sparse: no disk, no memory

    signals = await agent.step(during=grow, print="")
    assert signals.files_modified == 1  # it appeared during the iteration
    assert agent.probe.snapshot().files["blob.bin"].exact.startswith("large:")
