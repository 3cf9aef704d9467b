"""``forge guard`` and ``forge hook pre-tool-use``: the checks an agent runs on every tool call.

Both decide before anything runs. Exit 0 allows (silently); exit 2 refuses,
with the reason on stderr. Called by Claude Code (which sets
``CLAUDE_PROJECT_DIR`` for its hooks), ``forge hook pre-tool-use`` refuses in
Claude Code's own terms instead: a ``permissionDecision`` of ``deny`` on
stdout (exit 0), whose reason Claude Code hands the model as the tool's
result — a plain sentence it can act on, where an exit 2 reaches it as a
"hook error" naming Forge's interpreter. Any failure of the check itself
(unreadable input, a policy that does not load, a bug) exits 2: Claude Code
runs a tool call whose hook exits with any other code, so a guard that
crashed would fail open.

This module is imported without argparse, rich or trio; it parses its few
flags itself and leaves anything unusual (``--help``, ``--json``) to the full
command line.
"""

from __future__ import annotations

import json
import os
import sys

from .._hook_passing import FROM_EXECUTOR, GUARD_REFUSAL, stands_aside
from .._project_root import find_root
from .._protect import load_spec

TYPE_CHECKING = False  # not typing's: this module runs on every tool call
if TYPE_CHECKING:
    from .._guard import Refusal

EXIT_ALLOW = 0
EXIT_REFUSE = 2
REFUSALS_SHOWN = 10
"""The refusals a refused command lists; the rest are counted (``--json`` has them all)."""
# Claude Code's file tools and the key naming the file each writes.
_FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}


def fast(argv: list[str]) -> int | None:
    """Run ``guard`` or ``hook pre-tool-use`` from ``argv``; None to use the full parser."""
    try:
        if argv[:2] == ["hook", "pre-tool-use"] and argv[2:] in ([], [FROM_EXECUTOR]):
            payload = sys.stdin.read()
            if stands_aside(from_executor=len(argv) == 3):
                return EXIT_ALLOW  # the executor's own guard decides this call
            return pre_tool_use(payload)
        if argv[:1] == ["guard"]:
            parsed = _guard_args(argv[1:])
            if parsed is None:
                return None
            command, cwd, config = parsed
            if command is None:
                command = sys.stdin.read()
            return guard(command, cwd=cwd or os.getcwd(), config=config)
    except Exception as exc:
        return _refuse(f"forge: the guard could not decide ({_describe(exc)}); refusing")
    return None


def _guard_args(args: list[str]) -> tuple[str | None, str | None, str | None] | None:
    """(command or None for stdin, --cwd, --config); None when the full parser must take it."""
    cwd = config = None
    stdin = False
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            words = args[index + 1 :]
            if stdin or not words:
                return None
            return command_line(words), cwd, config
        if arg == "--stdin":
            stdin = True
        elif arg in ("--cwd", "--config") and index + 1 < len(args):
            if arg == "--cwd":
                cwd = args[index + 1]
            else:
                config = args[index + 1]
            index += 1
        else:
            return None
        index += 1
    return (None, cwd, config) if stdin else None


def refusals_for(command: str, *, cwd: str, config: str | None = None) -> list[Refusal]:
    """Why ``command``, run in ``cwd``, would harm the project's protected paths."""
    from .._guard import analyse_command

    root, found = find_root(os.environ.get("CLAUDE_PROJECT_DIR") or cwd, config)
    refusals = analyse_command(command, cwd=cwd, root=root, spec=load_spec(root, found))
    for other, policy in _other_projects(command, root, config):
        refusals += analyse_command(command, cwd=cwd, root=other, spec=load_spec(other, policy))
    return refusals


def _other_projects(text: str, root: str, config: str | None) -> list[tuple[str, str]]:
    """Without ``CLAUDE_PROJECT_DIR``, the working folder may lie outside the project
    (or the event name none): the projects ``text``'s absolute paths reach are judged too."""
    if config is not None or os.environ.get("CLAUDE_PROJECT_DIR"):
        return []
    # Most commands name no absolute path: they pay for no import and no regex.
    if not text.startswith("/") and not any(f"{c}/" in text for c in " \t\n'\"=:(<>;|&`"):
        return []
    from .._guard import projects_named

    return projects_named(text, besides=root)


def command_line(words: list[str]) -> str:
    """The shell command that ``forge guard -- WORDS`` checks."""
    # One word is a shell command line; several are argv words to quote.
    if len(words) == 1:
        return words[0]
    import shlex  # only here: the one-word form is the hooks' common case

    return shlex.join(words)


def guard(command: str, *, cwd: str, config: str | None = None) -> int:
    """Refuse (exit 2) a shell command that would harm a protected path."""
    refusals = refusals_for(command, cwd=cwd, config=config)
    if not refusals:
        return EXIT_ALLOW
    return _refuse(*refusal_lines(refusals))


def refusal_lines(refusals: list[Refusal]) -> list[str]:
    """One line per refusal (each names a protected path and its rule), at most
    :data:`REFUSALS_SHOWN`, then how many more."""
    lines = [f"forge guard: refused — {r.reason}" for r in refusals[:REFUSALS_SHOWN]]
    hidden = len(refusals) - REFUSALS_SHOWN
    if hidden > 0:
        lines.append(f"forge guard: … and {hidden} more (forge guard --json lists every one)")
    return lines


def pre_tool_use(payload: str) -> int:
    """Claude Code's (or Codex's) PreToolUse hook: refuse what ``forge guard`` refuses.

    Codex sends the same JSON: ``Bash`` for its shell tool, and
    ``apply_patch`` with the patch as ``tool_input.command``.
    """
    event = json.loads(payload) if payload.strip() else None
    if not isinstance(event, dict) or not isinstance(event.get("tool_name"), str):
        return _refuse(
            "forge hook pre-tool-use: expected Claude Code's PreToolUse JSON on stdin "
            '(an object with "tool_name" and "tool_input"); refusing'
        )
    tool = event["tool_name"]
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    cwd = event_cwd(event)
    if tool == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return _refuse("forge hook pre-tool-use: a Bash call without a command; refusing")
        refusals = refusals_for(command, cwd=cwd)
        if refusals and _claude_code():
            return _deny([r.reason for r in refusals])
        return _refuse(*refusal_lines(refusals)) if refusals else EXIT_ALLOW
    if tool == "apply_patch":
        patch = tool_input.get("command")
        if not isinstance(patch, str):
            return _refuse("forge hook pre-tool-use: an apply_patch call without a patch; refusing")
        return _patch(patch, cwd=cwd)
    key = _FILE_TOOLS.get(tool)
    if key is None:
        return EXIT_ALLOW
    target = tool_input.get(key)
    if not isinstance(target, str) or not target:
        return _refuse(f"forge hook pre-tool-use: a {tool} call without {key}; refusing")
    return _file_write(tool, target, cwd=cwd)


def _file_write(tool: str, target: str, *, cwd: str) -> int:
    """Refuse a file tool's write of a frozen path."""
    from .._guard import check_file_write

    root, found = find_root(os.environ.get("CLAUDE_PROJECT_DIR") or cwd)
    refusal = check_file_write(target, cwd=cwd, root=root, spec=load_spec(root, found))
    absolute = os.path.join(cwd, target)
    for other, policy in _other_projects(absolute, root, None) if refusal is None else []:
        refusal = check_file_write(target, cwd=cwd, root=other, spec=load_spec(other, policy))
        if refusal is not None:
            break
    if refusal is None:
        return EXIT_ALLOW
    if _claude_code():
        return _deny([f"{tool} — {refusal.reason}"])
    return _refuse(f"forge hook pre-tool-use: refused {tool} — {refusal.reason}")


def _claude_code() -> bool:
    """Whether Claude Code runs this hook (it sets ``CLAUDE_PROJECT_DIR`` for its hooks)."""
    return bool(os.environ.get("CLAUDE_PROJECT_DIR"))


def _deny(reasons: list[str]) -> int:
    """Claude Code's ``deny`` decision, its reason written for the model that made the call.

    The exit code is 0: Claude Code reads a hook's decision only then.
    """
    shown = reasons[:REFUSALS_SHOWN]
    hidden = len(reasons) - len(shown)
    more = [f"… and {hidden} more"] if hidden > 0 else []
    # The fixed opening lets the output parser tell a guard refusal from the
    # permission denials of the CLI's own rules (the refusal is a protection
    # signal, not the agent lacking a permission).
    reason = "\n".join(
        [
            f"{GUARD_REFUSAL}: this call would harm a protected path of the project.",
            *(f"- {line}" for line in [*shown, *more]),
            "Protected paths must stay as they are: leave them alone and reach the goal "
            "another way (a file of your own, or a change elsewhere in the tree).",
        ]
    )
    decision = {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }
    print(json.dumps({"hookSpecificOutput": decision}), flush=True)
    return EXIT_ALLOW


def _patch(patch: str, *, cwd: str) -> int:
    """Codex's ``apply_patch``: each file it adds or updates is a write, each it
    deletes or moves away a removal (judged as ``rm`` of that file would be)."""
    writes, removals = patch_targets(patch)
    for target in writes:
        if _file_write("apply_patch", target, cwd=cwd) != EXIT_ALLOW:
            return EXIT_REFUSE
    if removals:
        import shlex

        return guard(shlex.join(["rm", "--", *removals]), cwd=cwd)
    return EXIT_ALLOW


def patch_targets(patch: str) -> tuple[list[str], list[str]]:
    """The files an ``apply_patch`` patch writes and those it removes, in its order.

    The patch names each file on a header line: ``*** Add File: p``,
    ``*** Update File: p`` (then ``*** Move to: q`` when it is renamed, which
    removes ``p``), ``*** Delete File: p``.
    """
    writes: list[str] = []
    removals: list[str] = []
    for line in patch.splitlines():
        header, _, path = line.partition(": ")
        path = path.strip()
        if not path:
            continue
        if header in ("*** Add File", "*** Update File"):
            writes.append(path)
        elif header == "*** Delete File":
            removals.append(path)
        elif header == "*** Move to" and writes:
            removals.append(writes[-1])  # the file renamed away
            writes.append(path)
    return writes, removals


def event_cwd(event: dict[str, object]) -> str:
    """Where the agent is: the event's ``cwd`` (it follows the agent's cd)."""
    cwd = event.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else os.getcwd()


def _refuse(*lines: str) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return EXIT_REFUSE


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        problems = getattr(exc, "problems", None) or ()
        return "; ".join([message, *map(str, problems)])
    return f"{type(exc).__name__}: {exc}"
