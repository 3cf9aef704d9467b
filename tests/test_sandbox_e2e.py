"""The sandbox end to end: what an agent must not write, the kernel refuses.

Real ``forge run`` and ``forge supervise`` in a scratch git repository; the
agents are real shell scripts. Inside bubblewrap a frozen file is read-only
(EROFS), a file that must exist cannot be deleted or renamed (EBUSY: it is a
mount point), and ``.forge/`` is read-only but for the change's inbox, where
``$FORGE_REPORT`` points.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .support import Repo, spawn_forge

PROTECTED = {
    "forge.toml": '[verify]\ncommand = ""\n',
    "AGENTS.md": "be careful\n",
    "specs/cart.md": "# cart\n",
}
PLAN_LINE = (
    "  sandbox:  bubblewrap — 1 frozen path read-only, 3 exist paths undeletable; "
    ".forge read-only (but the change's inbox)"
)
REMAIN = "the guard and the check after each iteration remain"
# Every harm the sandbox refuses, each reported on the agent's own stderr.
HARM = """\
echo "max_failures = 99" >> forge.toml
rm AGENTS.md
mv specs/cart.md specs/gone.md
echo "state: closed" > .forge/changes/c/breaker.yaml
echo "my work" > notes.txt
echo '{"done": true, "tokens": 1234}' > "$FORGE_REPORT"
echo "report: $FORGE_REPORT"
"""


@pytest.fixture
def project(repo: Repo) -> Repo:
    for name, text in PROTECTED.items():
        repo.write(name, text)
    repo.commit("protected content")
    return repo


def shell_agent(repo: Repo, body: str) -> str:
    """A real shell script outside the project, and the --cmd that runs it."""
    script = repo.root.parent / f"agent-{len(list(repo.root.parent.glob('agent-*')))}.sh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def events(repo: Repo, change: str, name: str) -> list[dict[str, Any]]:
    lines = (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def iteration_log(repo: Repo, change: str) -> str:
    [log] = (repo.change_dir(change) / "runs").glob("*/iteration-1.log")
    return log.read_text()


def untouched(repo: Repo, **texts: str) -> None:
    """Each protected file holds what it held (``forge_toml``: another policy)."""
    expected = {**PROTECTED, "forge.toml": texts.get("forge_toml", PROTECTED["forge.toml"])}
    for name, text in expected.items():
        assert (repo.root / name).read_text() == text, name


def test_the_kernel_refuses_every_harm_and_the_check_finds_none(project: Repo) -> None:
    done = project.forge("run", "--yes", "--change", "c", "--cmd", shell_agent(project, HARM))
    assert done.code == 0, done
    assert done.lines[-1] == "run: DONE after 1 iteration(s)"
    log = iteration_log(project, "c")
    assert "cannot create forge.toml: Read-only file system" in log
    assert "cannot remove 'AGENTS.md': Device or resource busy" in log
    assert "cannot move 'specs/cart.md' to 'specs/gone.md': Device or resource busy" in log
    assert "cannot create .forge/changes/c/breaker.yaml: Read-only file system" in log
    untouched(project)
    assert not (project.root / "specs/gone.md").exists()
    assert not (project.change_dir("c") / "breaker.yaml").exists()
    # Nothing reached the disk: the check after the iteration restores nothing.
    assert events(project, "c", "protect.violation") == []
    # Ordinary files stay the agent's to edit.
    assert (project.root / "notes.txt").read_text() == "my work\n"
    # $FORGE_REPORT is in the inbox; Forge read it (its tokens) and emptied the inbox.
    inbox = project.change_dir("c") / "inbox"
    [started] = events(project, "c", "run.started")
    assert f"report: {inbox}/{started['run_id']}/report.json" in log  # this run's own folder
    [finished] = events(project, "c", "iteration.finished")
    assert finished["tokens"] == 1234
    assert list(inbox.iterdir()) == []


def test_with_the_sandbox_off_the_check_after_restores(project: Repo) -> None:
    policy = PROTECTED["forge.toml"] + '[sandbox]\nmode = "off"\n'
    project.write("forge.toml", policy)
    project.commit("no sandbox")
    plan = project.forge("run", "--change", "c", "--cmd", "true")
    assert f'  sandbox:  none ([sandbox] mode = "off") — {REMAIN}' in plan.lines
    done = project.forge("run", "--yes", "--change", "c", "--cmd", shell_agent(project, HARM))
    assert done.code == 1, done
    assert "  gate:   integrity" in done.lines
    log = iteration_log(project, "c")
    assert "Read-only file system" not in log
    assert "Device or resource busy" not in log
    untouched(project, forge_toml=policy)  # restored, this time
    [violation] = events(project, "c", "protect.violation")
    harmed = {h["path"]: h["harm"] for h in violation["harmed"]}
    assert harmed["forge.toml"] == "modified"
    assert harmed["AGENTS.md"] == "deleted"
    assert harmed["specs/cart.md"] == "deleted"
    # The report is where it always was, in the run's folder.
    assert f"report: {project.change_dir('c')}/runs/" in log


def test_the_plan_says_which_protection_is_in_force(project: Repo) -> None:
    done = project.forge("run", "--change", "c", "--cmd", "true")
    assert done.code == 0, done
    assert done.lines[0] == 'Plan: up to 5 iteration(s) on change "c"'
    assert PLAN_LINE in done.lines
    # A dry run mounts nothing and leaves no inbox or scratch file behind.
    assert not (project.root / ".forge").exists()


def _without_bubblewrap(tmp_path: Path) -> dict[str, str]:
    """A PATH with what the plan needs (a shell, git) and no bwrap."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sh", "git"):
        found = shutil.which(tool)
        assert found is not None
        (folder / tool).symlink_to(found)
    return {"PATH": str(folder)}


def test_without_bubblewrap_auto_says_so_and_bubblewrap_refuses(
    project: Repo, tmp_path: Path
) -> None:
    env = _without_bubblewrap(tmp_path)
    done = project.forge("run", "--change", "c", "--cmd", "true", env=env)
    assert done.code == 0, done
    assert f"  sandbox:  none (bubblewrap not found) — {REMAIN}" in done.lines
    project.write("forge.toml", PROTECTED["forge.toml"] + '[sandbox]\nmode = "bubblewrap"\n')
    refused = project.forge("run", "--change", "c", "--cmd", "true", env=env)
    assert refused.code == 2, refused
    assert '[sandbox] mode = "bubblewrap", but bubblewrap not found' in refused.err


def test_supervise_sandboxes_a_worktree_loop_and_a_loop_may_turn_it_off(project: Repo) -> None:
    boxed = shell_agent(
        project,
        'echo "max_failures = 99" >> forge.toml\n'
        "rm AGENTS.md\n"
        'echo "my work" > notes.txt\n'
        "echo FORGE_DONE\n",
    )
    project.write(
        "forge.toml",
        '[verify]\ncommand = ""\n[rate_limit]\nbackend = "memory"\n'
        f'[[loop]]\nchange = "boxed"\ncmd = "{boxed}"\nworktree = true\nmax_iterations = 1\n'
        '[[loop]]\nchange = "open"\ncmd = "echo FORGE_DONE"\nworktree = true\n'
        'max_iterations = 1\n[loop.sandbox]\nmode = "off"\n',
    )
    project.commit("two loops")
    plan = project.forge("supervise", "--dry-run")
    assert plan.code == 0, plan
    assert PLAN_LINE in plan.lines
    assert f'  sandbox:  none ([sandbox] mode = "off") — {REMAIN}' in plan.lines
    done = project.forge("supervise", "--plain")
    assert done.code == 0, done
    # The worktree under .forge/ stays the agent's to edit; its protected files do not.
    tree = project.root / ".forge/worktrees/boxed"
    assert (tree / "notes.txt").read_text() == "my work\n"
    assert (tree / "forge.toml").read_text() == (project.root / "forge.toml").read_text()
    assert (tree / "AGENTS.md").exists()
    log = iteration_log(project, "boxed")
    assert "cannot create forge.toml: Read-only file system" in log
    assert "cannot remove 'AGENTS.md': Device or resource busy" in log
    assert events(project, "boxed", "protect.violation") == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_stopping_a_sandboxed_executor_leaves_no_process_behind(project: Repo) -> None:
    marker = project.root.parent / "pids"
    # The script, the sh -c that runs it, and above that bubblewrap; a
    # grandchild in the background.
    body = (
        "sleep 300 &\n"
        "box=$(cut -d' ' -f4 /proc/$PPID/stat)\n"
        f'echo "$$ $PPID $box $! $(cat /proc/$box/comm)" > {marker}.tmp\n'
        f"mv {marker}.tmp {marker}\n"
        "sleep 300\n"
    )
    forge = spawn_forge(
        ["run", "--yes", "--change", "c", "--cmd", shell_agent(project, body)], cwd=project.root
    )
    try:
        for _ in range(3000):
            if marker.exists() or forge.poll() is not None:
                break
            time.sleep(0.01)  # polling a real process's progress; no clock to mock here
        *pids, box_name = marker.read_text().split()
        assert box_name == "bwrap"  # the agent runs inside the sandbox
        forge.send_signal(signal.SIGINT)
        out, err = forge.communicate(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.communicate()
    assert forge.returncode == 130, err
    assert "run: INTERRUPTED after" in out
    for pid in pids:
        assert not _alive(int(pid)), pid


# A stand-in agent passed Forge's hooks (claude_hooks): it runs the Stop hook
# itself, as Claude Code would when it stops, and keeps what the hook said.
HOOKED = """\
argv = ["sh", "-c", "{prompt}"]
claude_hooks = true
"""
HOOK = f"{sys.executable} -I -m orchestra hook stop --from-executor"


def test_a_sandboxed_stop_hook_verifies_records_nothing_and_the_loop_verifies(
    project: Repo,
) -> None:
    said = project.root.parent
    prompt = (
        f'echo "{{}}" | {HOOK} > {said}/first.json 2>&1; '
        "touch fixed.txt; "
        f'echo "{{}}" | {HOOK} > {said}/second.txt 2>&1; '
        "echo FORGE_DONE"
    )
    project.write("executors/hooked.toml", HOOKED)
    project.write(
        "forge.toml",
        '[verify]\ncommand = "test -f fixed.txt"\nspecs = []\n'
        '[rate_limit]\nbackend = "memory"\n[breaker]\non_open = "escalate"\n'
        '[[loop]]\nchange = "c"\nexecutor = "hooked"\nmax_iterations = 1\n'
        f"prompt = {json.dumps(prompt)}\n",
    )
    project.commit("policy")
    done = project.forge("supervise")
    assert done.code == 0, done
    # Before the fix the hook keeps the agent fixing; after it, it lets it stop.
    first = json.loads((said / "first.json").read_text().splitlines()[-1])
    assert first["decision"] == "block"
    assert first["reason"].startswith("forge verify: Verdict: FAIL. 1 of 3 failed verifies in")
    assert "in this iteration; in Forge's sandbox: not recorded" in first["reason"]
    assert "Verdict: PASS (in Forge's sandbox: not recorded" in (said / "second.txt").read_text()
    # Neither verdict was recorded: the loop verified the final tree itself.
    [finished] = events(project, "c", "iteration.finished")
    assert finished["verify"] == "PASS"
    assert finished["verify_by_hook"] is False
    assert len(events(project, "c", "verify")) == 1
    assert list((project.change_dir("c") / "inbox").iterdir()) == []


def test_checkpoint_and_event_inside_the_sandbox_are_queued_and_recorded_after(
    project: Repo,
) -> None:
    said = project.root.parent / "said.txt"
    forge = f"{sys.executable} -I -m orchestra"
    body = (
        f"{forge} checkpoint --change c --stage iteration-1 --next-action iterate > {said} 2>&1\n"
        f"{forge} event --change c forge.blocked --detail stuck >> {said} 2>&1\n"
        f"{forge} event --change other forge.blocked --detail theirs >> {said} 2>&1\n"
        'echo "exit $?" >> ' + str(said) + "\n"
    )
    started = project.forge(
        "loop", "start", "--change", "c", "--goal", "a goal", "--rubric", "R1: tests pass"
    )
    assert started.code == 0, started
    cmd = shell_agent(project, body)
    done = project.forge("run", "--yes", "--change", "c", "--cmd", cmd, "--max-iterations", "1")
    assert done.code in (0, 1), done
    text = said.read_text()
    assert "Traceback" not in text
    assert text.count("queued for change") == 2, text
    assert "the loop records it when the iteration ends" in text
    # Another change's is refused at once, from inside the iteration.
    assert "forge event --change other names another change than its loop's" in text
    assert text.rstrip().endswith("exit 2")
    # Recorded after the iteration, outside the sandbox; another change's never.
    [checkpoint] = events(project, "c", "forge.checkpoint")
    assert checkpoint["stage"] == "iteration-1"
    [blocked] = events(project, "c", "forge.blocked")
    assert blocked["detail"] == "stuck"
    assert not project.change_dir("other").exists()
    log = iteration_log(project, "c")
    assert "forge: from the inbox: forge checkpoint --change c" in log
    assert events(project, "c", "protect.violation") == []
    assert list((project.change_dir("c") / "inbox").iterdir()) == []
