"""Whether a ``forge`` command runs inside an agent's iteration, and what it may do there.

Forge's controls (a secret-scan waiver, a circuit or breaker reset, starting
a loop, writing the policy) are a person's decisions. An agent that could
run them from its own shell would waive the secret it just leaked, reset the
circuit that stopped it, or start loops of its own. So the command line asks
:func:`check_command` once, before the command runs (``_cli._main``): inside
an executor a control refuses (exit 2) and the refusal is recorded on the
change's timeline. This module is the one list of which commands are
controls (:data:`CONTROLS`, :data:`CONTROL_FLAGS`): a command added to Forge
is allowed inside an iteration only if it reads.

Three commands are the agent's channel to Forge (:data:`CHANNELS`): ``forge
checkpoint``, ``forge event`` and ``forge verify --change``. Inside an
executor they run for the loop's own change only (another change: refused),
and write no state themselves: the first two leave their command line in the
change's inbox for the loop to run after the iteration, the verify verifies
without recording.

The rule, in order:

1. **Process ancestry** (Linux): every loop (``forge run``, ``forge
   supervise``, ``forge fleet work``) starts each executor as the leader of
   a session of its own and is a child subreaper. So whatever the agent
   starts, however it detaches (``setsid``, a double fork), has that loop
   process among its ancestors: a detached orphan is re-parented to the
   loop itself. A command whose ancestor chain (not counting itself)
   holds a loop process is inside that loop's executor, unless it is in the
   loop's own session: only the loop's own helpers are (the requests it runs
   from the inbox), since a process can leave its session only for a new
   one, never join another. An agent cannot rewrite another process's
   command line, nor choose its ancestors or its session.
2. **The environment**, a seatbelt only: every executor runs with
   ``FORGE_ITERATION`` set, which an agent can unset.

The sandbox adds no marker of its own: what bubblewrap can set for the
processes inside it is their environment (``--setenv``), which they can
change, and the trace it cannot help leaving (``.forge/`` mounted read-only)
is seen only by processes the ancestry already finds, as bubblewrap shares
the loop's process table.

The change named is the one the executor runs for: ``FORGE_CHANGE`` as the
process below the loop (the executor, or an orphan the loop adopted) was
started with (``/proc/<pid>/environ``, which later changes to the
environment do not alter), else this process's own, else the loop's
``--change``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import attrs

from ._errors import UsageError

# The commands that run executors: (command,) or (command, action).
_LOOPS = (("run",), ("supervise",), ("fleet", "work"))
_PROC = "/proc"
# An ancestor chain longer than this is a loop in /proc's answers (pid reuse mid-walk).
_MAX_DEPTH = 256

# The controls, by the handler that runs them: each starts agents, or writes
# Forge's state or policy. Every other command reads (status, timeline,
# resume, policy show/check/diff/simulate, fleet status, guard, the hooks) or
# writes only where its caller names (policy dump/schema -o, which a shell
# redirect does as well; the protected paths are guarded whoever writes).
CONTROLS: dict[str, str] = {
    "_run_cmd:run": "forge run",
    "_supervise_cmd:run": "forge supervise",
    "_fleet_cmd:submit_cmd": "forge fleet submit",
    "_fleet_cmd:work_cmd": "forge fleet work",
    "_fleet_cmd:export_cmd": "forge fleet export",
    "_fleet_control_cmd:requeue_cmd": "forge fleet requeue",
    "_fleet_control_cmd:cancel_cmd": "forge fleet cancel",
    "_executors_cmd:run": "forge executors check",
    "_steer_cmd:run": "forge steer",
    "_pause_cmd:pause": "forge pause",
    "_pause_cmd:stop": "forge stop",
    "_init_cmd:run": "forge init",
    "_contract_cmd:loop_start": "forge loop start",
    "_report_cmd:run": "forge report",
    "_secscan_cmd:waive": "forge secscan waive",
    "_land_cmd:run": "forge land",
    "_clean_cmd:run": "forge clean",
}
# Commands that read unless a flag makes them a control: (handler, flag) -> name.
CONTROL_FLAGS: dict[tuple[str, str], str] = {
    ("_circuit_cmd:run", "reset"): "forge circuit --reset",
    ("_verify_cmd:run", "reset_breaker"): "forge verify --reset-breaker",
    ("_spend_cmd:run", "reset"): "forge spend --reset",
    ("_contract_cmd:resume", "paused"): "forge resume",
}
# Controls a flag turns back into a reading: forge init/land/clean --dry-run only print.
_READING_FLAGS = {
    ("_init_cmd:run", "dry_run"),
    ("_land_cmd:run", "dry_run"),
    ("_clean_cmd:run", "dry_run"),
}
# The agent's channel: allowed for the loop's own change (``--change``), and
# then answered without writing state. verify is one only with --change.
CHANNELS: dict[str, str] = {
    "_contract_cmd:checkpoint": "forge checkpoint",
    "_contract_cmd:event": "forge event",
    "_verify_cmd:run": "forge verify",
}


@attrs.frozen
class Inside:
    """The executor a command runs inside: its loop's process and the change, if known."""

    loop_pid: int | None
    change: str | None
    how: str  # "process ancestry" | "environment"
    # Where the executor was started to keep its state and leave its requests
    # (FORGE_STATE_DIR, FORGE_INBOX): where a refusal is recorded.
    state_dir: str | None = None
    inbox: str | None = None

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
        env = os.environ
        return Inside(
            None,
            env.get("FORGE_CHANGE") or None,
            "environment",
            state_dir=env.get("FORGE_STATE_DIR") or None,
            inbox=env.get("FORGE_INBOX") or None,
        )
    return None


def control_of(args: argparse.Namespace) -> str | None:
    """The control a parsed command line is (``forge circuit --reset``), or None."""
    handler = str(getattr(args, "handler", ""))
    if any(getattr(args, flag, False) for known, flag in _READING_FLAGS if known == handler):
        return None
    for (known, flag), name in CONTROL_FLAGS.items():
        if known == handler and getattr(args, flag, False):
            return name
    return CONTROLS.get(handler)


def channel_of(args: argparse.Namespace) -> str | None:
    """The channel command a parsed command line is (``forge checkpoint``), or None."""
    name = CHANNELS.get(str(getattr(args, "handler", "")))
    return name if name is not None and getattr(args, "change", None) else None


def check_command(args: argparse.Namespace, find_root: Callable[[], Path | None]) -> Inside | None:
    """Refuse a control inside an executor; for a channel command there, the executor.

    Args:
        args: The parsed command line.
        find_root: The project's root, asked only to record a refusal (None: not recorded).

    Returns:
        The executor a channel command (``forge checkpoint``, ``forge event``,
        ``forge verify --change``) runs inside, for its own change; None for any
        command outside an executor, and for every command that only reads.

    Raises:
        UsageError: a control inside an executor, or a channel command there
            that names another change than the loop's (exit 2).
    """
    control = control_of(args)
    channel = channel_of(args) if control is None else None
    if control is None and channel is None:
        return None
    inside = inside_an_executor()
    if inside is None:
        return None
    if control is not None:
        _refuse(control, inside, find_root(), "is a person's control and cannot run")
    change = str(args.change)
    if inside.change != change:
        # Unnamed, the loop's change cannot be told from another: refused too.
        command = f"{channel} --change {change}"
        _refuse(
            command,
            inside,
            find_root(),
            "names another change than its loop's and cannot run",
            hint=(
                "inside a loop, forge checkpoint, forge event and forge verify --change "
                "name the loop's own change"
            ),
        )
    return inside


def _refuse(
    command: str,
    inside: Inside,
    root: Path | None,
    why: str,
    hint: str = "run it from your own terminal, outside any forge loop",
) -> NoReturn:
    recorded = _record(root, command, inside) if root is not None else None
    context = [f"recorded on {recorded}"] if recorded else []
    raise UsageError(f"{command} {why} {inside.describe()}", context=context, hint=hint)


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
            if _same_session(pid):
                return None  # the loop's own helper: no executor's process is in its session
            started = _environ(proc, child)
            change = (
                started.get("FORGE_CHANGE")
                or os.environ.get("FORGE_CHANGE")
                or _option(argv, "--change")
            )
            return Inside(
                pid,
                change or None,
                "process ancestry",
                # bwrap's own environment lacks them (it sets the agent's): ours then.
                state_dir=started.get("FORGE_STATE_DIR") or os.environ.get("FORGE_STATE_DIR"),
                inbox=started.get("FORGE_INBOX") or os.environ.get("FORGE_INBOX"),
            )
        child, pid = pid, _parent(proc, pid)
    return None


def _same_session(pid: int) -> bool:
    try:
        return os.getsid(0) == os.getsid(pid)
    except OSError:
        return False


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
    """Record ``control.refused`` on the change's timeline; where, or None when it cannot.

    The change's folder is the loop's (``FORGE_STATE_DIR``: in a worktree the
    project found from the working folder is the worktree's copy). Inside the
    sandbox that folder is read-only: the refusal is left in the run's inbox,
    and the loop records it once the iteration has ended.
    """
    from ._errors import ForgeError
    from ._names import check_change_name
    from ._state import ChangePaths, OtherEvent, append_event, exclusive_lock

    if not inside.change:
        return None
    fields: dict[str, object] = {
        "command": command,
        "pid": os.getpid(),
        "loop_pid": inside.loop_pid,
        "found_by": inside.how,
    }
    try:
        paths = ChangePaths(root, check_change_name(inside.change))
    except ForgeError:
        return None
    folder = Path(inside.state_dir) if inside.state_dir else paths.folder
    if not folder.is_dir() or folder.name != paths.name:
        folder = paths.folder
    paths = ChangePaths(folder.parent.parent.parent, paths.name)
    if not paths.folder.is_dir():
        return _leave_in_inbox(inside, fields)
    try:
        with exclusive_lock(paths.lock):
            append_event(paths.timeline, paths.name, OtherEvent(name=REFUSED_EVENT, fields=fields))
    except (ForgeError, OSError):
        # Read-only inside the sandbox: the loop records it after the iteration.
        return _leave_in_inbox(inside, fields)
    return str(paths.timeline)


def _leave_in_inbox(inside: Inside, fields: dict[str, object]) -> str | None:
    """The refusal left in the run's inbox for its loop to record (or None: no inbox)."""
    if not inside.inbox:
        return None
    from ._sandbox import queue_refusal

    try:
        return str(queue_refusal(Path(inside.inbox), fields))
    except OSError:
        return None


REFUSED_EVENT = "control.refused"
