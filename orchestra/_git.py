"""The one place Forge starts git.

Every git command Forge runs goes through :func:`run_git`, so all of them get
the same treatment:

- a time limit (:data:`GIT_TIMEOUT`), so a git stuck on a lock or a network
  filesystem cannot hang a loop;
- an environment without the location variables a git hook exports
  (``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE`` …): left in place they
  would point git at another repository or index than the folder it runs in;
- ``GIT_OPTIONAL_LOCKS=0``, so a ``git status`` never takes the index lock
  while an agent may be committing in the same repository, and
  ``GIT_TERMINAL_PROMPT=0``, so git never waits for a password;
- no standard input unless some is given;
- a missing git, a timeout or an exit code other than 0 become a
  :class:`GitResult` that says so, never an exception.
"""

from __future__ import annotations

import os
import subprocess
from functools import partial
from pathlib import Path

import attrs

GIT_TIMEOUT = 120.0
"""Seconds any git command may take unless its caller has a reason to allow more."""

# Location variables a git hook exports (and the alternates a pre-receive hook
# sets): inherited, they would make `git` in another folder work on the hook's
# repository instead.
LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_QUARANTINE_PATH",
)


@attrs.frozen
class GitResult:
    """How one git command ended.

    Attributes:
        args: The arguments after ``git``.
        returncode: Its exit code; None when it did not run to the end (no
            git on PATH, or the time limit passed).
        stdout: What it printed on standard output.
        stderr: What it printed on standard error, or why it did not run.
    """

    args: tuple[str, ...]
    returncode: int | None
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def ok(self) -> bool:
        """Whether git ran and exited with 0."""
        return self.returncode == 0

    def message(self) -> str:
        """What git said (standard error first), as text for an error's context."""
        said = (self.stderr + self.stdout).decode(errors="replace").strip()
        return said or f"git {' '.join(self.args)} exited with {self.returncode}"


def git_environment() -> dict[str, str]:
    """The environment git runs in: Forge's own, minus the location variables."""
    env = {key: value for key, value in os.environ.items() if key not in LOCATION_VARIABLES}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def run_git(
    cwd: Path, *args: str, input: bytes | None = None, timeout: float = GIT_TIMEOUT
) -> GitResult:
    """Run ``git <args>`` in ``cwd`` and collect its output.

    Args:
        cwd: The folder git runs in (it finds the repository from there).
        args: The git command and its arguments.
        input: Bytes for its standard input; without them it reads nothing.
        timeout: Seconds before it is killed; keep :data:`GIT_TIMEOUT` unless
            the command's work grows with the repository (a checkout).
    """
    command = ("git", *args)
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=git_environment(),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return GitResult(args, None, stderr=f"no answer within {timeout:g}s".encode())
    except OSError as exc:  # no git on PATH, or cwd is gone
        return GitResult(args, None, stderr=f"cannot run git: {exc}".encode())
    return GitResult(args, done.returncode, done.stdout, done.stderr)


def git_output(
    cwd: Path, *args: str, input: bytes | None = None, timeout: float = GIT_TIMEOUT
) -> bytes | None:
    """The standard output of ``git <args>``, or None when it did not succeed."""
    result = run_git(cwd, *args, input=input, timeout=timeout)
    return result.stdout if result.ok else None


async def run_git_async(
    cwd: Path,
    *args: str,
    input: bytes | None = None,
    # Not a trio deadline: subprocess enforces it inside the worker thread,
    # which trio cannot cancel.
    timeout: float = GIT_TIMEOUT,  # noqa: ASYNC109
) -> GitResult:
    """:func:`run_git` in a worker thread, for async callers.

    A cancellation waits for git to finish (at most ``timeout``): stopping git
    half-way through writing a worktree or a ref would leave the repository
    for a person to repair.
    """
    call = partial(run_git, cwd, *args, input=input, timeout=timeout)
    import trio  # here: the read-only commands that find a project never need it

    return await trio.to_thread.run_sync(call)
