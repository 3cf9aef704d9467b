"""The ``forge`` command line: parse arguments, run one command, map errors to exit codes.

Command modules are imported only when their command runs, so a quick command
does not pay for the imports of a heavy one.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ForgeError
from .._hook_passing import FROM_EXECUTOR, HOOKS_PASSED
from .._inside import check_command
from .._names import check_change_name
from ._usage import VERSION_FLAGS, first_unknown_flag, unknown_word, version_text

if TYPE_CHECKING:
    from typing import TypeAlias

    # What add_subparsers returns; named in annotations only.
    _Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

_EPILOG = """exit codes:
  0    clean: done, PASS, nothing to do (bare `forge verify` is always 0)
  1    stop and escalate: breaker open, gate open or blocked
  2    usage or configuration error
  130  interrupted
"""


def _change_name(value: str) -> str:
    try:
        return check_change_name(value)
    except ForgeError as exc:
        raise argparse.ArgumentTypeError(f"{exc.message} ({exc.hint})") from None


def _integer(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
    return number


def build_parser(command: str | None = None, action: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``forge``; with ``command``, of that command only.

    A command's parser does not depend on its siblings', so a command line
    that names one is parsed by a parser built for it alone: building all of
    them (argparse looks up translations for each) is a large part of a quick
    command's start. Likewise ``action`` (``show`` of ``forge policy show``)
    builds only that action's parser of a command that has several.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config", metavar="FILE", help="policy file (default: nearest forge.toml)"
    )
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    common.add_argument("--plain", action="store_true", help="plain text, no colour or styles")
    common.add_argument(
        "--set",
        action="append",
        metavar="TABLE.KEY=VALUE",
        help="set one policy value (highest layer; repeatable), e.g. --set verify.max_failures=5",
    )
    parser = argparse.ArgumentParser(
        prog="forge",
        description="Forge keeps autonomous coding agents on a leash.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Answered before parsing (parse_args): declared for --help and completion.
    parser.add_argument(
        *VERSION_FLAGS, action="store_true", help="Forge's version, Python's and the agent CLIs'"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add in _COMMANDS.items():
        if name == command == "policy":
            _add_policy(commands, common, action)
        elif command is None or name == command:
            add(commands, common)
    _describe(commands)
    return parser


_CHANGE_HELP = "the change's name, as forge status lists it"
# Shown under each command's --help: the line a person most often types.
_EXAMPLES = {
    "init": ["forge init --dry-run", "forge init --claude-hooks"],
    "verify": ["forge verify --change billing", "forge verify --change billing --reset-breaker"],
    "run": [
        "forge run --change billing --executor claude --max-iterations 3",
        'forge run --change billing --cmd "./agent.sh" --yes',
    ],
    "supervise": ["forge supervise --dry-run", "forge supervise"],
    "status": ["forge status", "forge status --json"],
    "land": [
        "forge land --dry-run",
        "forge land",
        "forge land billing --squash --keep",
        "forge land --rework",
        "forge land --pr",
        "forge land --status",
        "forge land --fleet",
    ],
    "circuit": [
        "forge circuit billing",
        'forge circuit billing --reset --reason "fixed the fixture"',
    ],
    "loop": ['forge loop start --change billing --goal "refunds" --rubric "R1: tests pass"'],
    "checkpoint": ["forge checkpoint --change billing --stage iteration-2"],
    "event": ['forge event --change billing forge.blocked --detail "needs the tax table"'],
    "resume": ["forge resume billing", "forge resume --change billing"],
    "pause": [
        'forge pause billing --reason "reviewing its migration"',
        "forge pause billing --fleet",
    ],
    "stop": ['forge stop billing --reason "superseded by refunds"'],
    "steer": [
        'forge steer billing "the test fixture is in tests/conftest.py, use it"',
        "forge steer billing --file guidance.md --until-cleared",
        "forge steer billing --clear",
    ],
    "attach": ["forge attach billing", "forge attach billing --events"],
    "clean": [
        "forge clean --dry-run",
        'forge clean --abandon billing --reason "superseded by refunds"',
    ],
    "policy": ["forge policy show", "forge policy check", "forge policy dump --defaults"],
    "spend": ["forge spend billing", "forge spend billing --reset"],
    "timeline": [
        "forge timeline billing",
        "forge timeline billing -n 20 --since 2h --kind verify --kind circuit",
        "forge timeline billing --follow",
        "forge timeline billing --raw",
    ],
    "hook": ["forge hook pre-tool-use < event.json"],
}


def _describe(commands: _Commands) -> None:
    """Give each command's --help its one-line purpose as a description, and its examples."""
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    for name, sub in commands.choices.items():
        said = helps.get(name)
        if sub.description is None and said:
            sub.description = said[:1].upper() + said[1:] + "."
        examples = _EXAMPLES.get(name)
        if not examples:
            continue
        shown = "examples:\n" + "\n".join(f"  {line}" for line in examples)
        if sub.epilog is None:
            sub.epilog = shown
            sub.formatter_class = argparse.RawDescriptionHelpFormatter
        elif sub.formatter_class is argparse.RawDescriptionHelpFormatter:
            sub.epilog = f"{shown}\n\n{sub.epilog}"


def _add_verify(commands: _Commands, common: argparse.ArgumentParser) -> None:
    verify = commands.add_parser(
        "verify",
        parents=[common],
        help="run tests, lint and scenario coverage; with --change, drive the breaker",
        description="Run the test command, the lint command and spec scenario coverage, "
        "and print a report ending in 'Verdict: PASS' or 'Verdict: FAIL'. Bare verify "
        "only reports (exit 0). With --change it feeds that change's circuit-breaker, "
        "which exits 1 once it opens.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("--change", type=_change_name, help="opt into the breaker of this change")
    verify.add_argument(
        "--max-failures", type=_integer, metavar="N", help="failures that open the breaker"
    )
    verify.add_argument(
        "--reset-breaker",
        action="store_true",
        help="clear the change's breaker (a human intervened)",
    )
    verify.set_defaults(handler="_verify_cmd:run")


def _add_run(commands: _Commands, common: argparse.ArgumentParser) -> None:
    run = commands.add_parser(
        "run",
        parents=[common],
        help="run an agent loop, bounded by gates (dry run unless --yes)",
        description="Run an agent command again and again, checking the gates (verify "
        "circuit-breaker, spend budget, secscan) before the first iteration and after "
        "every one. Without --yes it prints the plan and executes nothing. Only the "
        "executor signalling done is a clean exit; every other ending escalates (exit 1).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--change", type=_change_name, help="the change (default: the git branch)")
    how = run.add_mutually_exclusive_group()
    how.add_argument("--cmd", help="the agent command, run with sh -c each iteration")
    how.add_argument("--executor", metavar="NAME", help="a named executor (executors/NAME.toml)")
    run.add_argument("--prompt", help="the prompt a named executor receives as {prompt}")
    run.add_argument(
        "--max-iterations",
        type=_integer,
        metavar="N",
        help="iteration cap (default 5, max 50)",
    )
    run.add_argument("--timeout", metavar="DURATION", help='per-iteration limit, e.g. "15m"')
    run.add_argument("--max-tokens", type=_integer, metavar="N", help="token ceiling")
    run.add_argument("--max-tool-calls", type=_integer, metavar="N", help="tool-call ceiling")
    run.add_argument("--max-cost-usd", type=float, metavar="USD", help="cost ceiling")
    run.add_argument("--yes", action="store_true", help="execute (without it: a dry run)")
    run.set_defaults(handler="_run_cmd:run")


def _add_supervise(commands: _Commands, common: argparse.ArgumentParser) -> None:
    supervise = commands.add_parser(
        "supervise",
        parents=[common],
        help="run every declared [[loop]] at once under one rate limit",
        description="Run the loops declared as [[loop]] tables (in forge.toml or a --batch "
        "file) concurrently, each with its own circuit, all sharing one rate limiter. "
        "Exit 0 when every loop ended done, 1 otherwise, 130 when interrupted.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    supervise.add_argument("--batch", metavar="FILE", help="a file of [[loop]] tables to run")
    supervise.add_argument("--only", metavar="C1,C2", help="run only these loops")
    supervise.add_argument("--dry-run", action="store_true", help="print each loop's plan")
    supervise.add_argument(
        "--check-executors",
        action="store_true",
        help="first run forge executors check on the agent CLIs the loops use; "
        "start nothing if one fails",
    )
    supervise.add_argument(
        "--fleet",
        action="store_true",
        help="work the batch submitted to the fleet's Redis server (as forge fleet work)",
    )
    supervise.set_defaults(handler="_supervise_cmd:run")


def _add_fleet(commands: _Commands, common: argparse.ArgumentParser) -> None:
    fleet = commands.add_parser(
        "fleet",
        parents=[common],
        help="a nightly batch worked by several hosts through one Redis server",
        description="Several hosts work one batch of loops through one Redis server "
        "([fleet] redis, or FORGE_REDIS_URL): one rate limit for all, each change "
        "run by one host at a time, a quiet host's loops taken over by the others.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = fleet.add_subparsers(dest="action", metavar="ACTION", required=True)
    submit = actions.add_parser(
        "submit", parents=[common], help="enqueue a batch's [[loop]] tables for the fleet"
    )
    submit.add_argument("--batch", metavar="FILE", required=True, help="the batch file")
    submit.add_argument(
        "--replace",
        action="store_true",
        help="drop the batch already submitted under this name, and all its state",
    )
    submit.set_defaults(handler="_fleet_cmd:submit_cmd")
    work = actions.add_parser(
        "work", parents=[common], help="claim and run loops on this host until the batch ends"
    )
    work.add_argument(
        "--max-parallel", type=_integer, metavar="N", help="loops at once on this host"
    )
    work.add_argument("--host", metavar="NAME", help="this host's name (default: host-pid)")
    work.add_argument("--cache", metavar="DIR", help="where repo loops are cloned")
    work.add_argument(
        "--export",
        metavar="DIR",
        help="write the ended batch here before it expires ([fleet] export)",
    )
    work.set_defaults(handler="_fleet_cmd:work_cmd")
    status = actions.add_parser(
        "status", parents=[common], help="hosts, loops and the shared rate limit"
    )
    status.add_argument(
        "--watch",
        action="store_true",
        help="keep showing it, refreshed every heartbeat, until Ctrl-C",
    )
    status.add_argument(
        "--count",
        type=_integer,
        metavar="N",
        help="with --watch: stop after N frames (default: until interrupted)",
    )
    status.set_defaults(handler="_fleet_cmd:status_cmd")
    export = actions.add_parser(
        "export", parents=[common], help="write the batch's state as .forge/ files"
    )
    export.add_argument("--to", metavar="DIR", help="the project folder to write into")
    export.set_defaults(handler="_fleet_cmd:export_cmd")
    for action, what in (
        ("requeue", "put an ended loop back in the queue, its state kept"),
        ("cancel", "stop one loop wherever it runs (it ends cancelled)"),
    ):
        control = actions.add_parser(action, parents=[common], help=what)
        control.add_argument("change", type=_change_name, help=_CHANGE_HELP)
        control.add_argument("--reason", metavar="TEXT", help="why, kept in the timeline")
        control.set_defaults(handler=f"_fleet_control_cmd:{action}_cmd")


def _add_guard(commands: _Commands, common: argparse.ArgumentParser) -> None:
    guard = commands.add_parser(
        "guard",
        parents=[common],
        help="refuse a shell command that would harm a protected path (exit 2)",
        description="Decide whether a shell command would delete or change a protected "
        "path ([protect] in forge.toml) before it runs: exit 0 to allow, exit 2 to refuse "
        "with the reason on stderr. For agents' pre-tool hooks: forge guard -- <command...>.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    guard.add_argument("--stdin", action="store_true", help="read the command from stdin")
    guard.add_argument("--cwd", metavar="DIR", help="where the command would run (default: .)")
    guard.add_argument("words", nargs=argparse.REMAINDER, help="-- then the command")
    guard.set_defaults(handler="_hook_cmd:guard")


_FROM_EXECUTOR_HELP = (
    "the hook the claude executor passes with --settings; inside its loop "
    f"({HOOKS_PASSED}=1) a hook without this flag (from .claude/settings.json) does nothing"
)


def _add_hook(commands: _Commands, common: argparse.ArgumentParser) -> None:
    hook = commands.add_parser("hook", help="Claude Code hooks: pre-tool-use, stop")
    hook_commands = hook.add_subparsers(dest="hook_command", metavar="EVENT", required=True)
    pre_tool_use = hook_commands.add_parser(
        "pre-tool-use",
        help="PreToolUse: refuse Bash, Write and Edit calls that harm protected paths",
        description="Reads Claude Code's PreToolUse JSON on stdin; exit 2 refuses the call "
        "(the reason on stderr), exit 0 allows it.",
    )
    pre_tool_use.add_argument(FROM_EXECUTOR, action="store_true", help=_FROM_EXECUTOR_HELP)
    pre_tool_use.set_defaults(handler="_hook_cmd:pre_tool_use", json=False, plain=True)
    stop = hook_commands.add_parser(
        "stop",
        parents=[common],
        help="Stop: run the change's verify breaker; block the stop while it fails",
        description="Reads Claude Code's Stop JSON on stdin and runs forge verify for the "
        "change (FORGE_CHANGE, else the git branch). On FAIL with the breaker closed it "
        'prints {"decision": "block", ...} so the agent keeps fixing; on PASS, or once the '
        "breaker is open (a human must review), it lets the agent stop.",
    )
    stop.add_argument("--change", type=_change_name, help="the change (default: FORGE_CHANGE)")
    stop.add_argument(FROM_EXECUTOR, action="store_true", help=_FROM_EXECUTOR_HELP)
    stop.set_defaults(handler="_hook_cmd:stop")


def _add_secscan(commands: _Commands, common: argparse.ArgumentParser) -> None:
    secscan = commands.add_parser(
        "secscan",
        parents=[common],
        help="scan the working tree for secrets (exit 1 on unwaived findings at fail_on)",
        description="Scan the project's working tree (tracked files and untracked ones that "
        "are not ignored) with the [secscan] rules, apply the waivers, and list what is "
        "left. Exit 1 when an unwaived finding is at or above [secscan] fail_on.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    secscan.add_argument(
        "--history",
        nargs="?",
        const="",
        metavar="RANGE",
        help="scan the lines the commits of RANGE added instead of the tree "
        "(default: the commits not yet on the upstream, else the last 50)",
    )
    secscan.set_defaults(handler="_secscan_cmd:scan")
    secscan_commands = secscan.add_subparsers(dest="secscan_command", metavar="ACTION")
    waive = secscan_commands.add_parser(
        "waive", parents=[common], help="waive a finding by its fingerprint (a human decides)"
    )
    waive.add_argument("fingerprint", help="the finding's fingerprint, as forge secscan shows it")
    waive.add_argument("--reason", required=True, help="why it is not a leak")
    waive.add_argument("--expires", metavar="DURATION", help='how long it holds, e.g. "30d"')
    waive.add_argument("--who", help="who decides (default: git user.name)")
    waive.set_defaults(handler="_secscan_cmd:waive")


def _add_status(commands: _Commands, common: argparse.ArgumentParser) -> None:
    status = commands.add_parser(
        "status", parents=[common], help="every change's circuit, verify streak, spend"
    )
    status.add_argument(
        "--fleet",
        action="store_true",
        help="the fleet batch's, from its Redis server (implied when FORGE_REDIS_URL is set)",
    )
    status.set_defaults(handler="_status_cmd:status")


_FLEET_CONTROL_HELP = "the fleet's loop, on its Redis server (implied when FORGE_REDIS_URL is set)"


def _add_circuit(commands: _Commands, common: argparse.ArgumentParser) -> None:
    circuit = commands.add_parser(
        "circuit", parents=[common], help="a supervised loop's circuit, and resetting it"
    )
    circuit.add_argument("change", type=_change_name, help=_CHANGE_HELP)
    circuit.add_argument(
        "--reset",
        action="store_true",
        help="close the circuit and count the loop's iterations afresh (a human reviewed it)",
    )
    circuit.add_argument(
        "--reason",
        help="why the circuit may be reset (required with --reset; kept in the timeline)",
    )
    circuit.add_argument("--fleet", action="store_true", help=_FLEET_CONTROL_HELP)
    circuit.set_defaults(handler="_circuit_cmd:run")


def _add_land(commands: _Commands, common: argparse.ArgumentParser) -> None:
    land = commands.add_parser(
        "land", parents=[common], help="land the batch's done changes on the base, each verified"
    )
    land.add_argument("changes", nargs="*", type=_change_name, metavar="CHANGE", help=_CHANGE_HELP)
    land.add_argument(
        "--base", metavar="BRANCH", help="the branch to land on (default: checked out)"
    )
    land.add_argument("--order", metavar="C1,C2", help="land these first, in this order")
    land.add_argument("--rebase", action="store_true", help="replay the commits (the default)")
    land.add_argument("--merge", action="store_true", help="one merge commit per change")
    land.add_argument("--squash", action="store_true", help="one commit per change")
    land.add_argument("--keep", action="store_true", help="keep each landed change's worktree")
    land.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    land.add_argument(
        "--rework",
        action="store_true",
        help="hand a conflicted or failed change back to its loop, the base merged in",
    )
    land.add_argument(
        "--pr", action="store_true", help="push each branch and open a pull request (gh)"
    )
    land.add_argument(
        "--status", action="store_true", help="the opened pull requests' state and checks"
    )
    land.add_argument(
        "--fleet",
        action="store_true",
        help="the fleet batch's pushed branches, fetched (implied when FORGE_REDIS_URL is set)",
    )
    land.set_defaults(handler="_land_cmd:run")


def _add_steer(commands: _Commands, common: argparse.ArgumentParser) -> None:
    steer = commands.add_parser(
        "steer", parents=[common], help="guidance for a loop's next iteration, from a person"
    )
    steer.add_argument("change", type=_change_name, metavar="CHANGE", help=_CHANGE_HELP)
    steer.add_argument(
        "text", nargs="?", metavar="TEXT", help="the guidance (none: list what waits)"
    )
    steer.add_argument("--file", metavar="FILE", help="the guidance, read from a file")
    keep = steer.add_mutually_exclusive_group()
    keep.add_argument(
        "--once", action="store_true", help="for the next iteration only (the default)"
    )
    keep.add_argument(
        "--until-cleared", action="store_true", help="for every iteration until --clear"
    )
    keep.add_argument("--clear", action="store_true", help="remove the guidance waiting")
    steer.add_argument("--fleet", action="store_true", help=_FLEET_CONTROL_HELP)
    steer.set_defaults(handler="_steer_cmd:run")


def _add_attach(commands: _Commands, common: argparse.ArgumentParser) -> None:
    attach = commands.add_parser(
        "attach",
        parents=[common],
        help="watch a loop's agent output live, across iterations and runs, until Ctrl-C",
    )
    attach.add_argument("change", type=_change_name, metavar="CHANGE", help=_CHANGE_HELP)
    attach.add_argument(
        "--events",
        action="store_true",
        help="also the change's new timeline events, in words, as they happen",
    )
    attach.set_defaults(handler="_attach_cmd:run")


def _add_clean(commands: _Commands, common: argparse.ArgumentParser) -> None:
    clean = commands.add_parser(
        "clean", parents=[common], help="remove the worktrees and branches of landed changes"
    )
    clean.add_argument(
        "--abandon",
        metavar="CHANGE",
        type=_change_name,
        help="give up a change's work and remove it too (needs --reason; kept in the timeline)",
    )
    clean.add_argument("--reason", help="why the change is abandoned (required with --abandon)")
    clean.add_argument(
        "--dry-run", action="store_true", help="say what would be removed and kept; remove nothing"
    )
    clean.set_defaults(handler="_clean_cmd:run")


def _add_loop(commands: _Commands, common: argparse.ArgumentParser) -> None:
    loop = commands.add_parser("loop", help="the loop contract: goal, rubric, budget")
    loop_commands = loop.add_subparsers(dest="loop_command", metavar="ACTION", required=True)
    loop_start = loop_commands.add_parser(
        "start", parents=[common], help="establish a loop contract and persist it"
    )
    loop_start.add_argument("--change", type=_change_name, required=True)
    loop_start.add_argument("--goal", required=True, help="the user outcome")
    loop_start.add_argument("--scope", action="append", help="what this loop may change")
    loop_start.add_argument("--non-goal", action="append", help="what it will not change")
    loop_start.add_argument(
        "--rubric", action="append", metavar='"ID: criterion"', help="an acceptance criterion"
    )
    loop_start.add_argument("--max-fix-iterations", type=_integer, metavar="N")
    loop_start.add_argument(
        "--mode", default="loop", help="loop (default), structured or direct-downgraded"
    )
    loop_start.add_argument(
        "--restart", action="store_true", help="replace an existing contract (its budget too)"
    )
    loop_start.add_argument("--plan", metavar="FILE", help="a plan file to keep a Loop Trace in")
    loop_start.add_argument("--route", help="'goal' for the outer Goal route")
    loop_start.add_argument("--autonomy-policy", help="the Goal route's autonomy policy")
    loop_start.add_argument("--max-goal-steps", type=_integer, metavar="N")
    loop_start.set_defaults(handler="_contract_cmd:loop_start")


def _add_checkpoint(commands: _Commands, common: argparse.ArgumentParser) -> None:
    checkpoint = commands.add_parser(
        "checkpoint", parents=[common], help="update the loop contract at a stage"
    )
    checkpoint.add_argument("--change", type=_change_name, required=True)
    checkpoint.add_argument(
        "--stage", required=True, help="iteration-2, verify-failed, ship-ready ..."
    )
    checkpoint.add_argument(
        "--current-stage", help="discover, plan, execute, verify, iterate, ship"
    )
    checkpoint.add_argument("--rubric", action="append", metavar='ID=STATUS[:"evidence"]')
    checkpoint.add_argument("--failure", help="the failure evidence of a failed verify")
    checkpoint.add_argument("--strategy-change", help="what is different in the next pass")
    checkpoint.add_argument("--next-action", help="ship, iterate, ask, block or downgrade")
    checkpoint.add_argument("--current-task", help="the task in hand")
    checkpoint.add_argument("--discovery-depth", help="discovery's depth: D0, D1 or D2")
    checkpoint.add_argument("--discovery-file", action="append", help="a file discovery read")
    checkpoint.add_argument("--impact", action="append", help="an impacted caller/contract/test")
    checkpoint.add_argument("--risk", help="discovery's risk: low, medium or high")
    checkpoint.add_argument(
        "--blocker", action="append", help="a blocker (repeatable): stop condition blocked"
    )
    checkpoint.add_argument(
        "--clear-blockers", action="store_true", help="the blockers are resolved: clear them"
    )
    checkpoint.add_argument(
        "--owner-decision",
        metavar="TEXT",
        help="the one decision only the owner may make: stop condition owner_decision_required",
    )
    checkpoint.add_argument(
        "--decided", metavar="TEXT", help="the owner's decision on the pending question"
    )
    checkpoint.add_argument("--residual-risk", action="append", help="a residual risk")
    checkpoint.set_defaults(handler="_contract_cmd:checkpoint")


def _add_event(commands: _Commands, common: argparse.ArgumentParser) -> None:
    event = commands.add_parser("event", parents=[common], help="record a loop event")
    event.add_argument("--change", type=_change_name, required=True)
    event.add_argument("name", help="forge.loop.started, forge.iteration.started, ...")
    event.add_argument("--detail", help="a short detail (forge.blocked: what blocks the loop)")
    event.set_defaults(handler="_contract_cmd:event")


def _add_resume(commands: _Commands, common: argparse.ArgumentParser) -> None:
    resume = commands.add_parser(
        "resume",
        parents=[common],
        help="let a paused loop go on (CHANGE), or reconstruct a loop contract (--change)",
    )
    resume.add_argument(
        "paused",
        nargs="?",
        type=_change_name,
        metavar="CHANGE",
        help="the loop forge pause holds: it goes on",
    )
    resume.add_argument(
        "--change", type=_change_name, help="the change whose loop contract is reconstructed"
    )
    resume.add_argument(
        "--events", type=_integer, metavar="N", help="last events shown (default 5; with --change)"
    )
    resume.add_argument("--reason", help="why it may go on (kept in the timeline)")
    resume.add_argument("--fleet", action="store_true", help=_FLEET_CONTROL_HELP)
    resume.set_defaults(handler="_contract_cmd:resume")


def _add_pause(commands: _Commands, common: argparse.ArgumentParser) -> None:
    pause = commands.add_parser(
        "pause",
        parents=[common],
        help="hold a running loop after its current iteration, until forge resume",
    )
    pause.add_argument("change", type=_change_name, metavar="CHANGE", help=_CHANGE_HELP)
    pause.add_argument("--reason", help="why it holds (kept in the timeline)")
    pause.add_argument("--fleet", action="store_true", help=_FLEET_CONTROL_HELP)
    pause.set_defaults(handler="_pause_cmd:pause")


def _add_stop(commands: _Commands, common: argparse.ArgumentParser) -> None:
    stop = commands.add_parser(
        "stop",
        parents=[common],
        help="end one running loop after its current iteration (the others go on)",
    )
    stop.add_argument("change", type=_change_name, metavar="CHANGE", help=_CHANGE_HELP)
    stop.add_argument("--reason", help="why it stops (kept in the timeline)")
    stop.add_argument("--fleet", action="store_true", help=_FLEET_CONTROL_HELP)
    stop.set_defaults(handler="_pause_cmd:stop")


def _add_policy(
    commands: _Commands, common: argparse.ArgumentParser, action: str | None = None
) -> None:
    """``forge policy`` and its actions; with ``action``, that one only."""
    policy = commands.add_parser(
        "policy", help="show, check, dump, compare the effective policy; its JSON Schema"
    )
    policy_commands = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    for name, add in _POLICY_ACTIONS.items():
        if action is None or name == action:
            add(policy_commands, common)


def _add_policy_show(policy_commands: _Commands, common: argparse.ArgumentParser) -> None:
    show = policy_commands.add_parser(
        "show", parents=[common], help="each effective value and where it came from"
    )
    show.set_defaults(handler="_policy_cmd:show")


def _add_policy_check(policy_commands: _Commands, common: argparse.ArgumentParser) -> None:
    check = policy_commands.add_parser(
        "check", parents=[common], help="validate a policy file (exit 0 or 2)"
    )
    check.add_argument("file", nargs="?", help="the file to check (default: forge.toml)")
    check.set_defaults(handler="_policy_cmd:check")


def _add_policy_dump(policy_commands: _Commands, common: argparse.ArgumentParser) -> None:
    dump = policy_commands.add_parser(
        "dump", parents=[common], help="the effective policy as TOML that loads back the same"
    )
    dump.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    dump.add_argument(
        "--defaults", action="store_true", help="the built-in defaults, each key commented"
    )
    dump.add_argument(
        "--schema",
        metavar="PATH_OR_URL",
        help="begin with a '#:schema PATH_OR_URL' line, which TOML editors validate against",
    )
    dump.set_defaults(handler="_policy_cmd:dump")


def _add_policy_schema(policy_commands: _Commands, common: argparse.ArgumentParser) -> None:
    schema = policy_commands.add_parser(
        "schema",
        help="the JSON Schema of forge.toml, for editors (always JSON)",
        description="Print the JSON Schema (draft 2020-12) of forge.toml, generated from the "
        "policy model: every table and key with its type, bounds, default and meaning; "
        "unknown keys refused. Point Even Better TOML or Taplo at it.",
    )
    schema.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    schema.add_argument("--json", action="store_true", help="accepted; the output is JSON anyway")
    schema.add_argument("--plain", action="store_true", help="plain text, no colour or styles")
    schema.set_defaults(handler="_policy_cmd:schema")


def _add_policy_diff(policy_commands: _Commands, common: argparse.ArgumentParser) -> None:
    diff = policy_commands.add_parser(
        "diff",
        parents=[common],
        help="the keys whose effective values differ between two policies, and why",
        description="Compare two effective policies key by key: each of A and B is a policy "
        "file, the name of a shipped policy, or '-' for this project's policy (forge.toml). "
        "Prints every key whose values differ, with both values and the layer each came "
        "from; exit 0 whether or not they differ. --set applies to B, --set-a to A.",
    )
    diff.add_argument("a", metavar="A", help="a policy file, a shipped policy name, or -")
    diff.add_argument("b", metavar="B", help="a policy file, a shipped policy name, or -")
    diff.add_argument(
        "--set-a",
        action="append",
        metavar="TABLE.KEY=VALUE",
        help="set one value of A (repeatable), as --set does for B",
    )
    diff.set_defaults(handler="_policy_cmd:diff")


def _add_policy_simulate(policy_commands: _Commands, common: argparse.ArgumentParser) -> None:
    simulate = policy_commands.add_parser(
        "simulate",
        parents=[common],
        help="replay recorded iterations under a policy: where would each loop trip?",
    )
    simulate.add_argument("--change", type=_change_name, help="one change, iteration by iteration")
    simulate.add_argument(
        "--run",
        metavar="RUN-ID",
        nargs="?",
        const="latest",
        help="every change of a supervised run, one row each (the default: the latest run)",
    )
    simulate.add_argument(
        "--all", action="store_true", help="every change with history, its whole history"
    )
    simulate.add_argument(
        "--sweep",
        metavar="TABLE.KEY=V1,V2,...",
        help="replay the batch (or --change C) once per value of one key: a matrix of what "
        "each loop did, and the value that catches the stuck loops earliest without a false trip",
    )
    simulate.add_argument("--policy", metavar="FILE", help="replay under this policy file instead")
    simulate.set_defaults(handler="_simulate_cmd:run")


# ``forge policy``'s actions, in the order its help lists them.
_POLICY_ACTIONS = {
    "show": _add_policy_show,
    "check": _add_policy_check,
    "dump": _add_policy_dump,
    "schema": _add_policy_schema,
    "diff": _add_policy_diff,
    "simulate": _add_policy_simulate,
}


def _add_spend(commands: _Commands, common: argparse.ArgumentParser) -> None:
    spend = commands.add_parser(
        "spend", parents=[common], help="what a change has spent against its budget"
    )
    spend.add_argument(
        "change", nargs="?", type=_change_name, help=f"{_CHANGE_HELP} (--fleet: optional)"
    )
    spend.add_argument(
        "--reset", action="store_true", help="start the totals again (a human granted more)"
    )
    spend.add_argument("--fleet", action="store_true", help=_FLEET_CONTROL_HELP)
    spend.set_defaults(handler="_spend_cmd:run")


def _add_timeline(commands: _Commands, common: argparse.ArgumentParser) -> None:
    timeline = commands.add_parser("timeline", parents=[common], help="a change's session timeline")
    timeline.add_argument("change", type=_change_name, help=_CHANGE_HELP)
    timeline.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    timeline.add_argument("-n", type=_integer, metavar="N", help="only the last N events")
    timeline.add_argument(
        "--since", metavar="WHEN", help='only events since a span ago ("10m", "2h") or a time'
    )
    timeline.add_argument(
        "--kind",
        action="append",
        default=[],
        metavar="KIND",
        help="only events of this kind (verify, iteration.finished, a prefix, circuit); repeatable",
    )
    timeline.add_argument(
        "--raw", action="store_true", help="each event's fields as written (key=value)"
    )
    timeline.add_argument(
        "--fleet",
        action="store_true",
        help="read it from the fleet's Redis server (implied when FORGE_REDIS_URL is set)",
    )
    timeline.set_defaults(handler="_timeline_cmd:run")


def _add_init(commands: _Commands, common: argparse.ArgumentParser) -> None:
    init = commands.add_parser(
        "init",
        parents=[common],
        help="write a commented forge.toml for this repository (its tests, linter, venv, agents)",
    )
    init.add_argument(
        "--claude-hooks",
        action="store_true",
        help="also merge Forge's hooks into .claude/settings.json (nothing there is replaced)",
    )
    init.add_argument("--dry-run", action="store_true", help="print what would be written")
    init.set_defaults(handler="_init_cmd:run")


def _add_executors(commands: _Commands, common: argparse.ArgumentParser) -> None:
    executors = commands.add_parser(
        "executors",
        help="the named executors: check the agent CLIs installed here before a night",
        description="Check the agent CLIs installed on this machine against the shipped "
        "(or your own) executor definitions, before a night: each CLI is run by forge run "
        "against a scripted model server on loopback (no API key, no network, no cost).",
    )
    actions = executors.add_subparsers(dest="executors_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        parents=[common],
        help="run each CLI against a scripted server and print what works",
        description="Run each named executor's CLI (default: every one Forge knows that is "
        "on PATH) through forge run against a scripted model server, and print a table: the "
        "CLI's release, and whether its flags are accepted, edits permitted, shell commands "
        "run, Forge's hooks honoured, its output parsed and its tokens read. Exit 0 when "
        "every check passed, 1 when one failed.",
        epilog="examples:\n  forge executors check\n  forge executors check claude codex\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("names", nargs="*", metavar="NAME", help="executors to check")
    check.set_defaults(handler="_executors_cmd:run")


def _add_report(commands: _Commands, common: argparse.ArgumentParser) -> None:
    report = commands.add_parser(
        "report",
        parents=[common],
        help="a supervised batch's morning report, as HTML and Markdown",
        description="Write the report of a forge supervise run: its outcome, the loops that "
        "escalated (first) with what to run to resume them, every loop's timeline and "
        "progress score, and the spend. One self-contained HTML file (no network needed) and "
        "its Markdown twin, by default next to the run's summary.json. Works on any earlier "
        "run, and from the timelines alone when the run left no summary.",
    )
    report.add_argument(
        "--run", metavar="RUN-ID", help="the run (default: the latest); see .forge/runs/"
    )
    report.add_argument("--html", metavar="FILE", help="write the HTML page here")
    report.add_argument("--markdown", metavar="FILE", help="write the Markdown here")
    report.add_argument("--open", action="store_true", help="open the HTML page in a browser")
    report.add_argument(
        "--fleet",
        action="store_true",
        help="the fleet batch's, read from its Redis server (implied in a fleet host's folder)",
    )
    report.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="a folder written by forge fleet export --to DIR (or any project folder)",
    )
    report.set_defaults(handler="_report_cmd:run")


def _add_completion(commands: _Commands, common: argparse.ArgumentParser) -> None:
    completion = commands.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description="Print a script that completes forge's commands, actions, options and "
        "change names in your shell. Load it from your shell's startup file.",
        epilog="examples:\n"
        '  eval "$(forge completion bash)"            # in ~/.bashrc\n'
        '  eval "$(forge completion zsh)"             # in ~/.zshrc\n'
        "  forge completion fish > ~/.config/fish/completions/forge.fish",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    completion.set_defaults(handler="_completion:run", json=False, plain=False)


_COMMANDS: dict[str, Callable[[_Commands, argparse.ArgumentParser], None]] = {
    "init": _add_init,
    "verify": _add_verify,
    "run": _add_run,
    "supervise": _add_supervise,
    "fleet": _add_fleet,
    "guard": _add_guard,
    "hook": _add_hook,
    "secscan": _add_secscan,
    "status": _add_status,
    "circuit": _add_circuit,
    "land": _add_land,
    "clean": _add_clean,
    "steer": _add_steer,
    "pause": _add_pause,
    "stop": _add_stop,
    "attach": _add_attach,
    "loop": _add_loop,
    "checkpoint": _add_checkpoint,
    "event": _add_event,
    "resume": _add_resume,
    "policy": _add_policy,
    "spend": _add_spend,
    "timeline": _add_timeline,
    "report": _add_report,
    "executors": _add_executors,
    "completion": _add_completion,
}


# Commands that read a few files, print and exit. The console script runs them
# with the garbage collector off (reference counting frees their garbage; what
# cycles they leave go with the process) and ends them without the
# interpreter's teardown; see _entry.
_BRIEF = frozenset(
    {
        "_circuit_cmd:run",
        "_policy_cmd:check",
        "_policy_cmd:diff",
        "_policy_cmd:dump",
        "_policy_cmd:schema",
        "_policy_cmd:show",
        "_spend_cmd:run",
        "_status_cmd:status",
        "_timeline_cmd:run",
    }
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line (default: ``sys.argv[1:]``); exits 2 on a usage error."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] and words[0] in VERSION_FLAGS:
        print("\n".join(version_text()))
        sys.exit(EXIT_OK)
    if not words:
        # A bare forge is a question: what can it do? Help, not an error.
        build_parser().print_help()
        sys.exit(EXIT_OK)
    # Help, a mistyped command or none: the whole parser, which lists them all.
    command = words[0] if words[0] in _COMMANDS else None
    if command is None and not words[0].startswith("-"):
        build_parser().error(unknown_word("command", words[0], _COMMANDS))
    # Likewise a policy action: a mistyped one gets every action's parser.
    action = (
        words[1] if command == "policy" and words[1:2] and words[1] in _POLICY_ACTIONS else None
    )
    if command == "policy" and action is None and words[1:2] and not words[1].startswith("-"):
        _subparser(build_parser("policy"), "policy").error(
            unknown_word("policy action", words[1], _POLICY_ACTIONS)
        )
    parser = build_parser(command, action)
    args, extras = parser.parse_known_args(words)
    if extras:
        # The command's own usage, not forge's: the mistake is in its options.
        own = _subparser(parser, *(word for word in (command, action) if word))
        flag = first_unknown_flag(extras)
        if flag is not None:
            known = [name for item in own._actions for name in item.option_strings]
            own.error(unknown_word("option", flag, known))
        own.error("unrecognized arguments: " + " ".join(extras))
    if command == "resume":
        _resume_which(args, _subparser(parser, "resume"))
    # The words as given: a request left in the inbox is this command line again.
    args.command_line = tuple(words)
    return args


def _resume_which(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """``forge resume CHANGE`` lifts a pause (a control); ``--change C`` reads the contract."""
    if args.paused is not None and args.change is not None:
        parser.error("give CHANGE (a paused loop goes on) or --change C (its contract), not both")
    if args.paused is not None:
        if args.events is not None:
            parser.error("--events goes with --change C (the contract), not with CHANGE")
        args.change = args.paused  # the contract's resume hands it to forge pause's module
        return
    if args.change is None:
        parser.error("give CHANGE (a paused loop goes on) or --change C (its contract)")
    for flag, given in (("--reason", args.reason is not None), ("--fleet", args.fleet)):
        if given:
            parser.error(f"{flag} goes with CHANGE (a paused loop goes on), not with --change C")
    args.events = 5 if args.events is None else args.events


def _subparser(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    """The parser of ``forge NAME [ACTION]`` inside ``parser`` (``parser`` itself for none)."""
    for name in names:
        for item in parser._actions:
            if isinstance(item, argparse._SubParsersAction) and name in item.choices:
                parser = item.choices[name]
                break
    return parser


def is_brief(args: argparse.Namespace) -> bool:
    """Whether the command reads a few files, prints and exits (status, spend, policy ...)."""
    return args.handler in _BRIEF and not getattr(args, "follow", False)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command and return its exit code."""
    module_name, _, function_name = args.handler.partition(":")
    from ._console import Output

    out = Output(plain=args.plain, json_mode=args.json)
    try:
        # One check for every command, before it runs: inside an agent's
        # iteration a control refuses, and a channel command learns its loop.
        args.inside = check_command(args, lambda: _root_or_none(args))
        module = importlib.import_module(f"orchestra._cli.{module_name}")
        code: int = getattr(module, function_name)(args, out)
    except ForgeError as exc:
        out.note(exc.render(), style="red")
        return exc.exit_code
    except KeyboardInterrupt:
        # On a terminal, the "^C" the terminal echoed ends no line: start a new one.
        out.note(("\n" if sys.stderr.isatty() else "") + "interrupted", style="red")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_USAGE
    return code


def _root_or_none(args: argparse.Namespace) -> Path | None:
    """The project's root, to record a refusal in; None where there is no project."""
    from ._common import project_from

    try:
        return project_from(args).root
    except (ForgeError, OSError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``forge`` and return its exit code."""
    return run(parse_args(argv))
