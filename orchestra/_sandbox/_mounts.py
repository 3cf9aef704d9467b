"""What bubblewrap mounts for one iteration, and its arguments: the pure core.

The whole filesystem is bound as it is (``--dev-bind / /``), then, in order,
each later mount laid over the earlier ones:

1. ``.forge/`` read-only: Forge's state is Forge's to write;
2. the loop's working tree (when it lies under ``.forge/``, a worktree) and
   the change's inbox writable again;
3. every path that must exist bound onto itself (``--bind P P``): a mount
   point can be written but not deleted or renamed;
4. every frozen path bound read-only onto itself (``--ro-bind P P``).

No new session and no new PID namespace: the executor stays in the process
group Forge started, so stopping the group stops the whole tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

# Past this many paths that must exist, the rest are left to the check after
# the iteration: every one is a mount, and a start must stay cheap.
MAX_EXIST_MOUNTS = 4096


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@attrs.frozen
class Mounts:
    """The mounts of one sandboxed iteration (absolute paths, as found on disk)."""

    workdir: Path
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    exist: tuple[Path, ...] = ()
    frozen: tuple[Path, ...] = ()
    # Paths that must exist beyond MAX_EXIST_MOUNTS: the check after the iteration guards them.
    left_to_check: int = 0


def plan_mounts(
    *,
    workdir: Path,
    forge_dir: Path | None,
    writable: Iterable[Path],
    frozen: Iterable[Path],
    exist: Iterable[Path],
) -> Mounts:
    """The mounts for these paths, each kept only where it protects something.

    A frozen path inside another frozen one adds nothing, nor does a path
    already read-only under ``.forge/`` (but for the writable folders). A path
    that must exist is skipped where a frozen mount covers it: frozen wins.
    """
    holes = tuple(sorted(set(writable)))

    def read_only_already(path: Path, covers: Sequence[Path]) -> bool:
        for outer in covers:
            if _under(path, outer) and not any(
                _under(hole, outer) and _under(path, hole) for hole in holes
            ):
                return True
        return False

    base = (forge_dir,) if forge_dir is not None else ()
    kept_frozen: list[Path] = []
    for path in sorted(set(frozen)):
        if not read_only_already(path, (*base, *kept_frozen)):
            kept_frozen.append(path)
    kept_exist = [
        path
        for path in sorted(set(exist))
        if not read_only_already(path, (*base, *kept_frozen))
        and not any(_under(path, outer) for outer in kept_frozen)
    ]
    left = max(0, len(kept_exist) - MAX_EXIST_MOUNTS)
    return Mounts(
        workdir=workdir,
        read_only=base,
        writable=holes,
        exist=tuple(kept_exist[:MAX_EXIST_MOUNTS]),
        frozen=tuple(kept_frozen),
        left_to_check=left,
    )


def bwrap_arguments(program: str, mounts: Mounts) -> tuple[str, ...]:
    """``bwrap`` and its options, up to and including the ``--`` before the command."""
    # No --die-with-parent: its death signal follows the *thread* that forked
    # bwrap, and trio forks from a worker thread that exits after 10 idle
    # seconds, which would SIGKILL every iteration longer than that. Forge's
    # process-group watch already stops the tree should Forge itself die.
    args: list[str] = [program, "--dev-bind", "/", "/"]
    for path in mounts.read_only:
        args += ["--ro-bind", str(path), str(path)]
    for path in mounts.writable:
        args += ["--bind", str(path), str(path)]
    for path in mounts.exist:
        args += ["--bind", str(path), str(path)]
    for path in mounts.frozen:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--chdir", str(mounts.workdir), "--"]
    return tuple(args)


def _count(number: int, what: str) -> str:
    return f"{number} {what} path{'s' if number != 1 else ''}"


def describe_mounts(mounts: Mounts) -> str:
    """The plan's words for the sandbox in force, e.g. ``bubblewrap — 8 frozen paths ...``."""
    text = (
        f"bubblewrap — {_count(len(mounts.frozen), 'frozen')} read-only, "
        f"{_count(len(mounts.exist), 'exist')} undeletable"
    )
    if mounts.left_to_check:
        text += f" ({mounts.left_to_check} more left to the check after each iteration)"
    if mounts.read_only:
        text += "; .forge read-only (but the change's inbox)"
    return text
