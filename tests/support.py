"""Test support: scratch git repositories and the real ``forge`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

FORGE = Path(sys.executable).with_name("forge")
FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


@attrs.frozen
class Completed:
    """How a ``forge`` invocation ended."""

    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


@attrs.frozen
class Repo:
    """A scratch git repository with a committed first state."""

    root: Path

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.root, check=True, capture_output=True, text=True
        )
        return done.stdout

    def commit(self, message: str = "change") -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)

    def forge(self, *args: str, env: dict[str, str] | None = None) -> Completed:
        return run_forge(args, cwd=self.root, env=env)

    def change_dir(self, change: str) -> Path:
        return self.root / ".forge" / "changes" / change


def forge_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_")}
    env.pop("NO_COLOR", None)
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra or {})
    return env


@attrs.frozen
class Supervised:
    """A ``forge supervise`` a test ran to its end: where, and with what environment."""

    cwd: Path
    env: dict[str, str] | None
    args: tuple[str, ...]
    # The run it wrote (its summary's folder under .forge/runs), if it wrote one.
    run_id: str | None = None
    # Its policy files (the project's, the batch file) and their text as it ran:
    # a test may rewrite them for a later run.
    policy_files: tuple[tuple[Path, str], ...] = ()


# The batches this test ran, for the check that their replay moves nothing (conftest).
SUPERVISED: list[Supervised] = []


def run_forge(
    args: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Completed:
    """Run the installed ``forge`` console script, as a user would."""
    supervising = bool(args) and args[0] == "supervise"
    before = _summaries(cwd) if supervising else set()
    policy = _policy_files(cwd, tuple(args)) if supervising else ()
    completed = _run_forge(args, cwd=cwd, env=env, timeout=timeout)
    if supervising and completed.code in (0, 1):
        # This run's own summary: two runs of one second sort in no telling order.
        written = sorted(_summaries(cwd) - before)
        run_id = written[-1] if written else None
        SUPERVISED.append(Supervised(cwd, env, tuple(args), run_id, policy))
    return completed


def _summaries(cwd: Path) -> set[str]:
    return {path.parent.name for path in (cwd / ".forge" / "runs").glob("*/summary.json")}


def project_policy(cwd: Path, args: tuple[str, ...]) -> Path | None:
    """The policy file a command run in ``cwd`` with ``args`` reads (``--config``, forge.toml)."""
    from orchestra._errors import ForgeError
    from orchestra._workspace import find_project

    config = option(args, "--config")
    try:
        return find_project(cwd, None if config is None else cwd / config).config
    except ForgeError:
        return None


def _policy_files(cwd: Path, args: tuple[str, ...]) -> tuple[tuple[Path, str], ...]:
    batch = option(args, "--batch")
    files = [project_policy(cwd, args), None if batch is None else cwd / batch]
    return tuple(
        (path.resolve(), path.read_text(encoding="utf-8"))
        for path in files
        if path is not None and path.is_file()
    )


def options(args: tuple[str, ...], name: str) -> list[str]:
    """Every value of ``name`` in ``args`` (``--name VALUE`` or ``--name=VALUE``)."""
    values = []
    for at, arg in enumerate(args):
        if arg == name and at + 1 < len(args):
            values.append(args[at + 1])
        elif arg.startswith(f"{name}="):
            values.append(arg.partition("=")[2])
    return values


def option(args: tuple[str, ...], name: str) -> str | None:
    """The last value of ``name`` in ``args``, if it has one."""
    values = options(args, name)
    return values[-1] if values else None


def _run_forge(
    args: Sequence[str], *, cwd: Path, env: dict[str, str] | None, timeout: float
) -> Completed:
    done = subprocess.run(
        [str(FORGE), *args],
        cwd=cwd,
        env=forge_env(env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Completed(code=done.returncode, out=done.stdout, err=done.stderr)


def spawn_forge(args: Sequence[str], *, cwd: Path) -> subprocess.Popen[str]:
    """Start the ``forge`` console script in the background (to signal or watch it)."""
    return subprocess.Popen(
        [str(FORGE), *args],
        cwd=cwd,
        env=forge_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def failing_policy(repo: Repo, *, max_failures: int | None = None) -> None:
    """A forge.toml whose test command prints a pytest-like failure and exits 1."""
    lines = [
        "[verify]",
        "command = \"echo 'FAILED tests/test_cart.py::test_total - assert 3 == 4'; exit 1\"",
    ]
    if max_failures is not None:
        lines.append(f"max_failures = {max_failures}")
    repo.write("forge.toml", "\n".join(lines) + "\n")


def supervise_claude_json(
    repo: Repo, steps: Sequence[dict[str, Any]], policy: str, *, iterations: int
) -> list[dict[str, Any]]:
    """``forge supervise`` one loop ``c`` whose fake agent prints Claude Code's JSON; its timeline.

    ``policy`` is TOML laid after a passing verify and a memory rate limit.
    """
    script = repo.root.parent / "steps.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    argv = [sys.executable, str(FAKE_AGENT), str(script)]
    repo.write("executors/fakejson.toml", f'argv = {json.dumps(argv)}\noutput = "claude-json"\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
        f"{policy}"
        f'[[loop]]\nchange = "c"\nexecutor = "fakejson"\nmax_iterations = {iterations}\n',
    )
    repo.commit("loop")
    ran = repo.forge("supervise")
    assert "Traceback" not in ran.err, ran.err
    lines = (repo.change_dir("c") / "timeline.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def wait_started(started: Path) -> None:
    """Wait until a held fake agent says it started (``echo up > FIFO``)."""
    with open(started, encoding="utf-8") as fifo:
        assert fifo.read() == "up\n"


def let_go(go: Path) -> None:
    """Let a fake agent held on ``read word < FIFO`` go on."""
    with open(go, "w", encoding="utf-8") as fifo:
        fifo.write("go\n")
