"""One loop's sandbox: chosen from ``[sandbox]`` once, its mounts found per iteration."""

from __future__ import annotations

from pathlib import Path

import attrs

from .._errors import ConfigError
from .._policy import Policy
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
    ``scratch`` names files under ``.forge/`` the project's own tests write
    (the JUnit report of ``[stagnation] junit_xml``): they stay writable, or
    an agent running the verify command itself would see it fail.
    """

    program: str
    root: Path
    workdir: Path
    state_folder: Path
    workdir_spec: ProtectSpec
    root_spec: ProtectSpec | None = None
    scratch: tuple[str, ...] = ()

    @property
    def inbox(self) -> Path:
        return inbox_of(self.state_folder)

    def mounts(self, *, starting: bool = False) -> Mounts:
        """The mounts for an iteration starting now (globs match what exists now).

        Only ``starting`` an iteration creates the scratch files it mounts: a
        plan shown in a dry run leaves the disk as it was.
        """
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
        elif starting:
            writable += self._scratch_files(forge_dir)
        return plan_mounts(
            workdir=self.workdir,
            forge_dir=forge_dir,
            writable=writable,
            frozen=frozen,
            exist=exist,
        )

    def _scratch_files(self, forge_dir: Path) -> list[Path]:
        """The scratch files under ``.forge/``, created empty when missing (a mount needs one)."""
        found = []
        for name in self.scratch:
            path = self.workdir / name
            if ".." in Path(name).parts or not path.is_relative_to(forge_dir):
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch(exist_ok=True)
            except OSError:
                continue  # left read-only: a verify writing it fails, and says so
            if path.is_file() and not path.is_symlink():
                found.append(path)
        return found

    def wrapper(self) -> tuple[Mounts, tuple[str, ...]]:
        """The mounts and the ``bwrap ... --`` that goes before the executor's command."""
        mounts = self.mounts(starting=True)
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
    policy: Policy,
    *,
    root: Path,
    workdir: Path,
    state_folder: Path,
    availability: Availability | None = None,
) -> SandboxChoice:
    """The sandbox the policy's ``[sandbox] mode`` asks for, where this machine can give it.

    Raises:
        ConfigError: ``mode = "bubblewrap"`` where bubblewrap is missing or fails.
    """
    mode, protect = policy.sandbox.mode, policy.protect
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
        scratch=(policy.stagnation.junit_xml,),
    )
    return SandboxChoice(sandbox)
