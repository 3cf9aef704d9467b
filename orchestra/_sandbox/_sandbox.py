"""One loop's sandbox: chosen from ``[sandbox]`` once, its mounts found per iteration."""

from __future__ import annotations

from pathlib import Path

import attrs

from .._errors import ConfigError
from .._policy import ProtectPolicy
from .._protect import ProtectSpec
from ._detect import Availability, bubblewrap
from ._expand import protected_paths
from ._inbox import inbox_of
from ._mounts import Mounts, bwrap_arguments, describe_mounts, plan_mounts

# Set in a sandboxed executor's environment: what runs inside knows Forge's
# state is read-only to it, and where its inbox is.
SANDBOX_ENV = "FORGE_SANDBOX"
INBOX_ENV = "FORGE_INBOX"
BUBBLEWRAP = "bubblewrap"
OFF = "off"
_REMAINING = "the guard and the check after each iteration remain"


@attrs.frozen(eq=False)
class Sandbox:
    """What one loop's executors cannot write, and the bubblewrap that enforces it.

    ``workdir_spec`` holds ``[protect]``'s lists for the working tree; in a
    worktree, ``root_spec`` holds what must exist in the main checkout too.
    """

    program: str
    root: Path
    workdir: Path
    state_folder: Path
    workdir_spec: ProtectSpec
    root_spec: ProtectSpec | None = None

    @property
    def inbox(self) -> Path:
        return inbox_of(self.state_folder)

    def mounts(self) -> Mounts:
        """The mounts for an iteration starting now (globs match what exists now)."""
        found = protected_paths(self.workdir, self.workdir_spec)
        frozen, exist = list(found.frozen), list(found.exist)
        if self.root_spec is not None:
            in_root = protected_paths(self.root, self.root_spec)
            frozen += in_root.frozen
            exist += in_root.exist
        forge_dir = self.root / ".forge"
        writable = [self.inbox]
        if self.workdir.is_relative_to(forge_dir):
            writable.append(self.workdir)  # a worktree under .forge/worktrees/
        return plan_mounts(
            workdir=self.workdir,
            forge_dir=forge_dir,
            writable=writable,
            frozen=frozen,
            exist=exist,
        )

    def wrapper(self) -> tuple[Mounts, tuple[str, ...]]:
        """The mounts and the ``bwrap ... --`` that goes before the executor's command."""
        mounts = self.mounts()
        return mounts, bwrap_arguments(self.program, mounts)


@attrs.frozen(eq=False)
class SandboxChoice:
    """The protection in force for one loop: a sandbox, or why there is none."""

    sandbox: Sandbox | None
    why_not: str = ""

    def describe(self) -> str:
        """The plan's line after ``sandbox:``."""
        if self.sandbox is None:
            return f"none ({self.why_not}) — {_REMAINING}"
        return describe_mounts(self.sandbox.mounts())


def choose_sandbox(
    mode: str,
    protect: ProtectPolicy,
    *,
    root: Path,
    workdir: Path,
    state_folder: Path,
    availability: Availability | None = None,
) -> SandboxChoice:
    """The sandbox ``[sandbox] mode`` asks for, where this machine can give it.

    Raises:
        ConfigError: ``mode = "bubblewrap"`` where bubblewrap is missing or fails.
    """
    if mode == OFF:
        return SandboxChoice(None, '[sandbox] mode = "off"')
    found = availability if availability is not None else bubblewrap()
    if found.path is None:
        if mode == BUBBLEWRAP:
            raise ConfigError(
                f'[sandbox] mode = "bubblewrap", but {found.reason}',
                hint='install it (apt-get install -y bubblewrap), or set [sandbox] mode = "auto"',
            )
        return SandboxChoice(None, found.reason)
    root, workdir = root.resolve(), workdir.resolve()
    same = root == workdir
    sandbox = Sandbox(
        program=found.path,
        root=root,
        workdir=workdir,
        state_folder=root / state_folder.resolve().relative_to(root),
        workdir_spec=ProtectSpec(protect.exist, protect.frozen),
        # A worktree's loop may reach the main checkout: what must exist there too.
        root_spec=None if same else ProtectSpec(protect.exist),
    )
    return SandboxChoice(sandbox)
