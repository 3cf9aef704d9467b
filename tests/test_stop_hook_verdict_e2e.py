"""A Stop hook's verdict is a loop iteration's only if it judged that tree under the loop's checks.

An executor that passes Forge's Stop hook (``claude_hooks``) gets no second
verify from the loop when the hook verified the iteration's final tree under
the loop's own ``[verify]``. An agent that runs the hook itself with checks of
its choosing (``FORGE_LOOP_VERIFY='{"command": "true"}'``), or edits on after
the hook's verdict, gets the loop's own verify instead.
"""

from __future__ import annotations

import json
import sys

from .support import Repo

# A stand-in agent passed Forge's hooks (the definition says claude_hooks): it
# runs the Stop hook itself, as an agent could from its shell, then acts.
HOOKED = """\
argv = ["sh", "-c", "{prompt}"]
claude_hooks = true
"""
FORGE = f"{sys.executable} -I -m orchestra"


def supervise(repo: Repo, prompt: str) -> list[dict[str, object]]:
    repo.write("executors/hooked.toml", HOOKED)
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "test -f fixed.txt"\nspecs = []\n'
        '[rate_limit]\nbackend = "memory"\n[breaker]\non_open = "escalate"\n'
        # A hook's verdict counts only where it can record it: in the sandbox
        # the change's state is read-only (tests/test_sandbox_e2e.py).
        '[sandbox]\nmode = "off"\n'
        f'[[loop]]\nchange = "c"\nexecutor = "hooked"\nmax_iterations = 1\n'
        f"prompt = {json.dumps(prompt)}\n",
    )
    repo.commit("policy")
    done = repo.forge("supervise")
    assert done.code in (0, 1), done
    timeline = repo.change_dir("c") / "timeline.jsonl"
    events = [json.loads(line) for line in timeline.read_text().splitlines()]
    return [e for e in events if e["event"] == "iteration.finished"]


def hook_stop(checks: str = "") -> str:
    prefix = f"FORGE_LOOP_VERIFY='{checks}' " if checks else ""
    return f'echo "{{}}" | {prefix}{FORGE} hook stop --from-executor >/dev/null 2>&1; '


def test_a_verdict_under_checks_the_agent_chose_is_not_the_iterations(repo: Repo) -> None:
    [event] = supervise(repo, hook_stop('{"command": "true"}') + "echo FORGE_DONE")
    assert event["verify_by_hook"] is False
    assert event["verify"] == "FAIL"  # the loop's own verify: fixed.txt is not there


def test_a_verdict_on_an_earlier_tree_is_not_the_iterations(repo: Repo) -> None:
    # The hook judged the tree before the agent's last edit.
    [event] = supervise(repo, hook_stop() + "touch fixed.txt; echo FORGE_DONE")
    assert event["verify_by_hook"] is False
    assert event["verify"] == "PASS"


def test_the_hooks_verdict_on_the_final_tree_is_the_iterations(repo: Repo) -> None:
    [event] = supervise(repo, "touch fixed.txt; " + hook_stop() + "echo FORGE_DONE")
    assert event["verify_by_hook"] is True
    assert event["verify"] == "PASS"
