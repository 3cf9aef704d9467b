"""Process hygiene of ``forge supervise``: nothing outlives it, nothing leaks while it runs.

tests/test_interrupt_e2e.py interrupts ``forge verify``; tests/test_run_e2e.py
interrupts ``forge run`` with one stubborn grandchild; tests/test_supervise_e2e.py
interrupts a supervisor whose single agent is an ordinary sleeper. Here the
supervisor is interrupted with several loops at once, each executor ignoring
SIGTERM with a grandchild that ignores it too and holds the output pipe, and
one loop caught in its verify command with a stubborn tree of its own.

Guards: the process runner's group SIGTERM -> grace -> SIGKILL, applied to every
loop's tree and to the verify command's tree when the supervisor is cancelled;
run_interruptible turning SIGTERM into a cancellation; the subreaper sweep.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from ..support import FORGE, Repo, forge_env
from .harness import agent_cmd, alive, descendants, kill_all, open_fds, pids_in, wait_until

# A verify command whose tree ignores SIGTERM: a grandchild holding the output
# pipe, and the shell itself sleeping on. Both pids are written to $PIDS_FILE.
STUBBORN_VERIFY = (
    "trap '' TERM; ( trap '' TERM; echo grandchild; exec sleep 300 ) & "
    'echo $! > "{pids}"; echo $$ >> "{pids}"; sleep 300'
)


def _stubborn_loops(repo: Repo) -> list[Path]:
    """Write three loops that will all be busy with stubborn trees; their pid files."""
    scripts = repo.root.parent
    pid_files = [scripts / "agent-a.pids", scripts / "agent-b.pids", scripts / "verify-c.pids"]
    stubborn = [
        agent_cmd(
            scripts,
            f"stubborn-{name}",
            {"spawn_stubborn": str(path), "ignore_term": True, "sleep": 600},
        )
        for name, path in zip("ab", pid_files, strict=False)
    ]
    quick = agent_cmd(scripts, "quick", {"print": "working\n"})
    verify = STUBBORN_VERIFY.format(pids=pid_files[2])
    repo.write(
        "forge.toml",
        f"""
[run]
grace = "0.5s"
[verify]
command = "true"
specs = []
[rate_limit]
backend = "memory"

[[loop]]
change = "a"
cmd = {json.dumps(stubborn[0])}
[[loop]]
change = "b"
cmd = {json.dumps(stubborn[1])}
worktree = true
[[loop]]
change = "c"
cmd = {json.dumps(quick)}
worktree = true
[loop.verify]
command = {json.dumps(verify)}
""",
    )
    repo.commit("loops")
    return pid_files


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupting_supervise_leaves_no_process_of_any_tree(
    repo: Repo, sig: signal.Signals
) -> None:
    pid_files = _stubborn_loops(repo)
    forge = subprocess.Popen(
        [str(FORGE), "supervise"],
        cwd=repo.root,
        env=forge_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tree: set[int] = set()
    try:
        wait_until(
            lambda: all(len(pids_in(p)) == 2 for p in pid_files) or forge.poll() is not None,
            what="every loop's stubborn tree",
        )
        assert forge.poll() is None, forge.communicate()
        recorded = {pid for p in pid_files for pid in pids_in(p)}
        tree = descendants(forge.pid) | recorded
        assert all(alive(pid) for pid in recorded)
        forge.send_signal(sig)
        # EOF on forge's own pipes: nothing it started kept them open either.
        out, err = forge.communicate(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.communicate()
        survivors = [pid for pid in tree if alive(pid)]
        kill_all(survivors)
    assert forge.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert "supervise: INTERRUPTED" in out
    assert not survivors, f"still running after forge exited: {survivors}"
    assert len(tree) >= 6  # 3 trees of at least 2 processes each were seen running
    for change in "abc":
        events = [
            json.loads(line)
            for line in (repo.change_dir(change) / "timeline.jsonl").read_text().splitlines()
        ]
        assert events[-1]["event"] == "run.stopped"
        assert events[-1]["reason"] == "interrupted"


@pytest.mark.reliability
def test_supervise_keeps_its_file_descriptors_flat_over_many_iterations(repo: Repo) -> None:
    """A leak of one descriptor per iteration, or per verify, shows as steady growth."""
    agent = agent_cmd(repo.root.parent, "busy", {"print": "working\n", "stderr": "note\n"})
    repo.write(
        "forge.toml",
        f"""
[verify]
command = "echo checked"
specs = []
[stagnation]
no_progress = 1000
identical_errors = 1000
window = 1000
[[loop]]
change = "long"
cmd = {json.dumps(agent)}
max_iterations = 40
""",
    )
    repo.commit("loop")
    forge = subprocess.Popen(
        [str(FORGE), "supervise"],
        cwd=repo.root,
        env=forge_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    timeline = repo.change_dir("long") / "timeline.jsonl"

    def started() -> int:
        text = timeline.read_text() if timeline.exists() else ""
        return text.count('"event":"iteration.started"')

    samples: dict[int, int] = {}
    try:
        for mark in (5, 10, 20, 30, 38):
            wait_until(lambda m=mark: started() >= m or forge.poll() is not None, timeout=60)
            if forge.poll() is not None:
                break
            samples[mark] = open_fds(forge.pid)
        forge.wait(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.wait()
    assert len(samples) >= 4, samples
    counts = list(samples.values())
    assert max(counts[1:]) <= counts[0] + 4, f"descriptors grow with iterations: {samples}"
