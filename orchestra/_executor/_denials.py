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
(frozen paths) or at the project's ``.forge/`` (Forge's state).

Gemini CLI takes policy files with ``--policy``: a ``deny`` rule for its file
tools (``write_file``, ``replace``) whose ``argsPattern`` matches the call's
``file_path``, as the model wrote it (relative to the tree or absolute). The
file lives in the change's state folder, which the agent cannot write.

Patterns are passed as written (a folder as ``folder/**``), never expanded
into files, so the settings and the policy stay small however long the list.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

CLAUDE_SETTINGS = "claude-settings"
GEMINI_POLICY = "gemini-policy"
DENY_FORMATS = (CLAUDE_SETTINGS, GEMINI_POLICY)
"""How a definition's CLI is told the protected paths (``deny_protected``)."""

GEMINI_POLICY_FILE = "deny-policy/protected.toml"
"""The policy file Forge writes in the change's state folder, for ``--policy``."""
GEMINI_FILE_TOOLS = ("write_file", "replace")
GEMINI_DENIAL = (
    "Forge protects this path ([protect] frozen, or Forge's own state): leave it as it is "
    "and reach the goal another way."
)


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


def gemini_policy(protected: ProtectedPaths) -> str:
    """A Gemini CLI policy file (TOML) denying its file tools the protected paths.

    One ``[[rule]]`` per path (each ``argsPattern`` stays short: the CLI refuses
    one over 2,048 characters), at the top priority of its tier. A path under
    the working tree matches written absolute, relative or as ``./relative``.
    """
    entries = [(protected.workdir / entry.removeprefix("./"), entry) for entry in protected.frozen]
    entries.extend((path, "") for path in protected.state)
    rules = []
    for path, entry in entries:
        pattern = _args_pattern(protected.workdir, path, folder=entry.endswith("/"))
        rules.append(
            "[[rule]]\n"
            f"toolName = {json.dumps(list(GEMINI_FILE_TOOLS))}\n"
            f"argsPattern = {json.dumps(pattern)}\n"  # a JSON string is a TOML basic string
            'decision = "deny"\n'
            "priority = 999\n"
            f"denyMessage = {json.dumps(GEMINI_DENIAL)}\n"
        )
    return "\n".join(rules)


def write_policy(path: Path, text: str) -> None:
    """Write a policy file (unless it already holds ``text``): whole, or not at all."""
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)


def _args_pattern(workdir: Path, path: Path, *, folder: bool) -> str:
    """The regex of ``"file_path":"<path>"`` in the CLI's JSON of a call's arguments.

    Written without a quantified group: the CLI drops a pattern with one as a
    possible ReDoS (``(…*…)?``), so alternatives stand in for optional parts.
    """
    absolute = _glob(json.dumps(str(path))[1:-1])
    try:
        relative = _glob(json.dumps(path.relative_to(workdir).as_posix())[1:-1])
    except ValueError:
        written = absolute
    else:
        written = f"(?:{_glob(json.dumps(str(workdir))[1:-1])}/|\\./|){relative}"
    below = '/[^"]*'
    end = below if folder else f"(?:|{below})"
    return f'"file_path":"{written}{end}"'


def _glob(text: str) -> str:
    """``text`` as a regex: ``**`` any characters, ``*`` and ``?`` within one segment."""
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        if text.startswith("**", index):
            out.append('[^"]*')
            index += 2
            continue
        if char == "*":
            out.append('[^/"]*')
        elif char == "?":
            out.append('[^/"]')
        elif char in ".^$+()[]{}|\\":
            out.append("\\" + char)
        else:
            out.append(char)
        index += 1
    return "".join(out)
