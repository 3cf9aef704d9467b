"""What the progress score counts: the same failing tests, test-only edits, Forge's own output."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from .support import FORGE, Repo, forge_env

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
JUNIT = (
    '<testsuite><testcase classname="t" name="a"/>'
    '<testcase classname="t" name="b"><failure message="x"/></testcase></testsuite>'
)


def loop(
    repo: Repo,
    steps: list[dict[str, Any]],
    extra: str = "",
    verify: str = "true",
    iterations: int = 3,
) -> None:
    script = repo.root.parent / "steps.json"
    script.write_text(json.dumps({"steps": steps}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        f"[verify]\ncommand = {json.dumps(verify)}\nspecs = []\nmax_failures = 9\n"
        '[rate_limit]\nbackend = "memory"\n'
        '[breaker]\ncooldown = "0.1s"\ncooldown_max = "0.2s"\nmax_opens = 1\n'
        f"{extra}"
        f'[[loop]]\nchange = "c"\ncmd = {json.dumps(cmd)}\nmax_iterations = {iterations}\n',
    )
    repo.commit("loop")


def events(repo: Repo) -> list[dict[str, Any]]:
    lines = (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def scores(repo: Repo) -> list[int]:
    return [e["score"] for e in events(repo) if e["event"] == "iteration.finished"]


def openings(repo: Repo) -> list[str]:
    return [e["reason"] for e in events(repo) if e["event"] == "breaker.opened"]


def test_the_same_failing_tests_two_iterations_running_cost_the_same_error(repo: Repo) -> None:
    report = repo.root / ".forge" / "junit.xml"
    verify = f"mkdir -p .forge && printf '%s' {shlex.quote(JUNIT)} > {shlex.quote(str(report))}"
    steps = [{"write": {"src/app.py": f"X = {n}\n"}} for n in range(1, 4)]
    loop(repo, steps, verify=verify)
    assert repo.forge("supervise").code == 1
    # +1 for the edit each time; from the second on, test b failing again costs -2.
    assert scores(repo) == [1, -1, -1]


def test_an_iteration_that_edits_only_tests_is_not_progress(repo: Repo) -> None:
    steps = [
        {"write": {f"tests/test_{n}.py": f"def test_{n}():\n    assert {n}\n"}} for n in range(1, 4)
    ]
    loop(repo, steps, "[stagnation]\nno_progress = 3\nwindow = 10\n")
    assert repo.forge("supervise").code == 1
    assert scores(repo) == [0, 0, 0]
    assert openings(repo)[:1] == ["stagnation: no-progress (3)"]


def test_forge_s_own_redirected_output_is_not_the_agent_s_work(repo: Repo) -> None:
    loop(repo, [{"print": "thinking\n"}], "[stagnation]\nno_progress = 3\nwindow = 10\n")
    with (repo.root / "nightly.log").open("w") as log:
        done = subprocess.run(
            [str(FORGE), "supervise"],
            cwd=repo.root,
            env=forge_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    assert done.returncode == 1, (repo.root / "nightly.log").read_text()
    finished = [e for e in events(repo) if e["event"] == "iteration.finished"]
    assert [e["signals"]["files_modified"] for e in finished] == [0, 0, 0]
    assert openings(repo)[:1] == ["stagnation: no-progress (3)"]


def test_without_a_tasks_file_loop_count_counts_the_change_s_iterations(repo: Repo) -> None:
    steps = [{"write": {"src/app.py": f"X = {n}\n"}} for n in range(1, 6)]
    loop(repo, steps, "[alerts]\nloop_count = 3\n", iterations=5)
    assert repo.forge("supervise").code == 1
    raised = [(e["iteration"], e["alert"]) for e in events(repo) if e["event"] == "alert.raised"]
    assert raised == [(4, "loop-count")]
