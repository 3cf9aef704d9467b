"""Whether a ``forge`` command runs inside an agent's iteration, and refusing it there.

Forge's controls (a secret-scan waiver, a circuit or breaker reset) are a
person's decisions. An agent that could run them from its own shell would
waive the secret it just leaked, or reset the circuit that stopped it. So
each state-changing control command asks :func:`inside_an_executor` first
and, inside one, refuses (exit 2) and records the refusal on the change's
timeline.

The rule, in order:

1. **Process ancestry** (Linux): every loop (``forge run``, ``forge
   supervise``, ``forge fleet work``) starts each executor as the leader of
   a session of its own and is a child subreaper. So whatever the agent
   starts, however it detaches (``setsid``, a double fork), has that loop
   process among its ancestors: a detached orphan is re-parented to the
   loop itself. A command whose ancestor chain (not counting itself)
   holds a loop process is inside that loop's executor. An agent cannot
   rewrite another process's command line, nor choose its ancestors.
2. **The environment**, a seatbelt only: every executor runs with
   ``FORGE_ITERATION`` set, which an agent can unset.

Another line of defence goes here, beside these two: a marker the sandbox
an executor runs in sets (a file only the sandbox shows, say), checked in
:func:`inside_an_executor` like the rest.

The change named is the one the executor runs for: ``FORGE_CHANGE`` as the
process below the loop (the executor, or an orphan the loop adopted) was
started with (``/proc/<pid>/environ``, which later changes to the
environment do not alter), else this process's own, else the loop's
``--change``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from ._errors import UsageError

# The commands that run executors: (command,) or (command, action).
_LOOPS = (("run",), ("supervise",), ("fleet", "work"))
_PROC = "/proc"
# An ancestor chain longer than this is a loop in /proc's answers (pid reuse mid-walk).
_MAX_DEPTH = 256


@attrs.frozen
class Inside:
    """The executor a command runs inside: its loop's process and the change, if known."""

    loop_pid: int | None
    change: str | None
    how: str  # "process ancestry" | "environment"

    def describe(self) -> str:
        change = f'change "{self.change}"' if self.change else "a change Forge cannot name"
        where = f"forge loop process {self.loop_pid}" if self.loop_pid else "an executor"
        return f"inside the executor of {change} ({where}, found by {self.how})"


def inside_an_executor(proc: str = _PROC) -> Inside | None:
    """The executor whose process tree this process is in, or None outside any."""
    found = _by_ancestry(proc)
    if found is not None:
        return found
    if "FORGE_ITERATION" in os.environ:
        return Inside(None, os.environ.get("FORGE_CHANGE") or None, "environment")
    return None


def refuse_inside_an_executor(command: str, root: Path | None = None) -> None:
    """Refuse ``command`` when it runs inside an executor, recording it on the change's timeline.

    Raises:
        UsageError: inside an executor (exit 2).
    """
    inside = inside_an_executor()
    if inside is None:
        return
    recorded = _record(root, command, inside) if root is not None else None
    context = [f"recorded on {recorded}"] if recorded else []
    raise UsageError(
        f"{command} is a person's control and cannot run {inside.describe()}",
        context=context,
        hint="run it from your own terminal, outside any forge loop",
    )


def is_loop_command(argv: Sequence[str]) -> bool:
    """Whether a command line is a forge loop (``forge run``, ``supervise``, ``fleet work``)."""
    rest: Sequence[str] | None = None
    for index, arg in enumerate(argv):
        if os.path.basename(arg) == "forge":
            rest = argv[index + 1 :]
            break
        if arg == "-m" and index + 1 < len(argv) and argv[index + 1].startswith("orchestra"):
            rest = argv[index + 2 :]
            break
    if rest is None:
        return False
    return any(tuple(rest[: len(loop)]) == loop for loop in _LOOPS)


def _by_ancestry(proc: str) -> Inside | None:
    child = os.getpid()
    pid = _parent(proc, child)
    for _ in range(_MAX_DEPTH):
        if pid is None or pid <= 1:
            return None
        argv = _cmdline(proc, pid)
        if argv is not None and is_loop_command(argv):
            change = (
                _environ(proc, child).get("FORGE_CHANGE")
                or os.environ.get("FORGE_CHANGE")
                or _option(argv, "--change")
            )
            return Inside(pid, change or None, "process ancestry")
        child, pid = pid, _parent(proc, pid)
    return None


def _parent(proc: str, pid: int) -> int | None:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (in parentheses) may hold spaces and ')': split after the last one.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _cmdline(proc: str, pid: int) -> list[str] | None:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _environ(proc: str, pid: int) -> dict[str, str]:
    try:
        with open(f"{proc}/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    pairs = (part.decode("utf-8", "replace").partition("=") for part in raw.split(b"\0"))
    return {name: value for name, _, value in pairs if name}


def _option(argv: Sequence[str], name: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(f"{name}="):
            return arg.partition("=")[2]
    return None


def _record(root: Path, command: str, inside: Inside) -> str | None:
    """Append ``control.refused`` to the change's timeline; where, or None when it cannot."""
    from ._errors import ForgeError
    from ._names import check_change_name
    from ._state import ChangePaths, OtherEvent, append_event, exclusive_lock

    if not inside.change:
        return None
    try:
        paths = ChangePaths(root, check_change_name(inside.change))
        if not paths.folder.is_dir():
            return None
        fields: dict[str, object] = {
            "command": command,
            "pid": os.getpid(),
            "loop_pid": inside.loop_pid,
            "found_by": inside.how,
        }
        with exclusive_lock(paths.lock):
            append_event(paths.timeline, paths.name, OtherEvent(name=REFUSED_EVENT, fields=fields))
    except (ForgeError, OSError):
        return None
    return str(paths.timeline)


REFUSED_EVENT = "control.refused"
