"""The protected paths told to an agent CLI's own permission system.

Forge holds ``[protect]`` with its sandbox, its guard and the check after each
iteration. A CLI that has a permission system of its own is told the same
paths too, so that it refuses a write to one before trying it (and says so to
the model in its own words). That is a courtesy to the agent, not the
protection: the sandbox, the guard and the check stay in force.

Claude Code takes ``permissions.deny`` rules with ``--settings``. One
``Edit(…)`` rule covers every built-in tool that edits files (Edit, Write,
MultiEdit, NotebookEdit): a ``Write(…)`` rule with a path is accepted but
never consulted. A rule's path starting with ``//`` is absolute; one with a
single ``/`` is relative to the settings' source, not the filesystem root,
so Forge writes every path absolute, anchored at the loop's working tree
(frozen paths) or at the project's ``.forge/`` (Forge's state). Patterns are
passed as written (a folder as ``folder/**``), never expanded into files, so
the settings stay small however long the list.
"""

from __future__ import annotations

from pathlib import Path

import attrs


@attrs.frozen
class ProtectedPaths:
    """What the agent must not write, as the loop's effective policy says.

    Attributes:
        workdir: The loop's working tree; ``frozen`` is relative to it.
        frozen: ``[protect] frozen``: files, ``folders/`` and globs that must
            not change.
        state: Forge's state, absolute: the project's ``.forge/`` or, for a
            loop whose working tree lies under it (a worktree), what is beside
            that tree there (see :func:`state_paths`).
    """

    workdir: Path
    frozen: tuple[str, ...] = ()
    state: tuple[Path, ...] = ()

    @property
    def count(self) -> int:
        """How many paths the CLI is told (the frozen entries, and Forge's state as one)."""
        return len(self.frozen) + (1 if self.state else 0)


def state_paths(state_folder: Path, workdir: Path) -> tuple[Path, ...]:
    """Forge's state to deny a loop's agent: ``state_folder``, unless the tree lies in it.

    A deny rule has no exceptions, so a working tree under ``.forge/`` (a
    worktree, ``.forge/worktrees/<loop>``) cannot be carved out of a rule for
    the whole folder: then what lies beside the tree at each level is denied
    instead, as it stands now, and ``changes/`` always.
    """
    try:
        inner = workdir.relative_to(state_folder)
    except ValueError:
        return (state_folder,)
    found: list[Path] = [state_folder / "changes"]
    level = state_folder
    for part in inner.parts:
        try:
            beside = sorted(level.iterdir())
        except OSError:
            beside = []
        found.extend(path for path in beside if path.name != part)
        level = level / part
    return tuple(dict.fromkeys(found))


def claude_deny_rules(protected: ProtectedPaths) -> list[str]:
    """Claude Code ``permissions.deny`` rules refusing its file tools the protected paths.

    Each entry becomes ``Edit(//absolute/entry)``: a folder (``policies/``) as
    what is under it (``policies/**``); an entry without a trailing slash, which
    names a file or, when it is a folder, its subtree, as both.
    """
    entries = [(protected.workdir, entry) for entry in protected.frozen]
    entries.extend((path, "") for path in protected.state)
    rules: list[str] = []
    for base, entry in entries:
        path = _absolute(base, entry.removeprefix("./").rstrip("/"))
        if not entry.endswith("/"):
            rules.append(f"Edit({path})")
        rules.append(f"Edit({path}/**)")
    return list(dict.fromkeys(rules))


def _absolute(base: Path, entry: str) -> str:
    """``entry`` (relative to ``base``) as a rule path: ``//`` and the absolute path."""
    return "//" + "/".join(part for part in (str(base).strip("/"), entry) if part)
