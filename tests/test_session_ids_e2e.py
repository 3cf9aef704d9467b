"""A session id the agent reports is checked before it reaches an argv (the real ``forge``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .support import Repo
from .test_supervise_e2e import FAKE_AGENT

NOTE = (
    "session id 'S-9\\r\\nGARBAGE' is not a valid id ([A-Za-z0-9._:-]{1,128}): "
    "not resumed, a fresh session"
)


def _executor(repo: Repo, session: str) -> Path:
    """``executors/fake.toml``: Claude-like output naming ``session``; each argv logged."""
    log = repo.root.parent / "argv.log"
    result = {"type": "result", "subtype": "success", "is_error": False, "session_id": session}
    script = repo.root.parent / "agent.json"
    script.write_text(
        json.dumps({"steps": [{"record_argv": str(log) + ".last", "print": json.dumps(result)}]})
    )
    wrapper = repo.root.parent / "agent.py"
    wrapper.write_text(
        "import json, os, subprocess, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"sys.exit(subprocess.call([sys.executable, {str(FAKE_AGENT)!r}, {str(script)!r}]))\n"
    )
    py = json.dumps(sys.executable)
    repo.write(
        "executors/fake.toml",
        f'argv = [{py}, {json.dumps(str(wrapper))}, "new"]\n'
        f'resume_argv = [{py}, {json.dumps(str(wrapper))}, "resume", "{{session}}"]\n'
        'output = "claude-json"\nsession = "continue"\n',
    )
    repo.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\n[run]\nmax_iterations = 3\n')
    repo.commit()
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_forge_run_resumes_a_valid_session(repo: Repo) -> None:
    log = _executor(repo, "S-9")
    done = repo.forge("run", "--change", "c", "--executor", "fake", "--yes")
    assert done.code == 1, done.out  # three iterations, none said done
    assert _calls(log) == [["new"], ["resume", "S-9"], ["resume", "S-9"]], done.out
    assert not any("note: session" in line for line in done.lines)


def test_forge_run_never_passes_an_invalid_session_id_and_says_so(repo: Repo) -> None:
    log = _executor(repo, "S-9\r\nGARBAGE")
    done = repo.forge("run", "--change", "c", "--executor", "fake", "--yes")
    assert done.code == 1, done
    assert "Traceback" not in done.err
    # Every iteration a fresh session: the id never reaches the command line.
    assert _calls(log) == [["new"], ["new"], ["new"]]
    assert done.lines.count(f"  note: {NOTE}") == 2  # before iterations 2 and 3
    # The timeline keeps what the agent reported, for a person to read.
    timeline = repo.change_dir("c") / "timeline.jsonl"
    sessions = [
        record.get("session")
        for record in map(json.loads, timeline.read_text().splitlines())
        if record["event"] == "iteration.finished"
    ]
    assert sessions == ["S-9\r\nGARBAGE"] * 3


def test_forge_supervise_says_it_as_the_loops_event(repo: Repo) -> None:
    log = _executor(repo, "S-9\r\nGARBAGE")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n'
        '[[loop]]\nchange = "a"\nexecutor = "fake"\nmax_iterations = 2\n',
    )
    repo.commit()
    done = repo.forge("supervise")
    assert done.code == 1, done
    assert _calls(log) == [["new"], ["new"]]
    assert f"a: {NOTE}" in done.lines


def test_the_plan_and_the_policy_name_the_session_age(repo: Repo) -> None:
    _executor(repo, "S-9")
    plan = repo.forge(
        "run", "--change", "c", "--executor", "fake", "--set", 'run.session_max_age="2h"'
    )
    assert (
        "  session: continue (each iteration resumes the previous one's session; one older "
        "than 2h starts afresh)"
    ) in plan.lines
    shown = repo.forge("policy", "show")
    assert any(line.split()[:2] == ["run.session_max_age", '"12h"'] for line in shown.lines)
    refused = repo.forge("policy", "check", "--set", 'run.session_max_age="0s"')
    assert refused.code == 2
    assert "run.session_max_age" in refused.err
