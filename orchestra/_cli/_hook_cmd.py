"""``forge guard`` (full form, with --json) and ``forge hook stop``.

The everyday forms of ``forge guard`` and ``forge hook pre-tool-use`` are
handled by :mod:`._hooks` before this command line is even imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import EXIT_OK, ForgeError, UsageError
from .._hook_passing import LOOP_VERIFY, stands_aside
from ._hooks import EXIT_REFUSE, command_line, event_cwd, refusal_lines, refusals_for
from ._hooks import pre_tool_use as _pre_tool_use
from ._unrecorded import NOT_RECORDED

# The Stop hook imports its machinery (the verify, trio, the policy, the
# secret scan's rules) as it needs each: ``forge guard --json`` needs none of
# it, and a stop whose gate is already open only reads the breaker.
if TYPE_CHECKING:
    from .._policy import Layer
    from .._state import ChangePaths
    from .._verify import VerifyReport
    from .._workspace import Project
    from ._console import Output

ESCALATE = "escalate: a human should review before continuing"
# Set by Forge in a sandboxed executor's environment (orchestra._sandbox, not
# imported here: the hooks keep their imports cheap).
_SANDBOX_ENV = "FORGE_SANDBOX"
_INBOX_ENV = "FORGE_INBOX"
# In the inbox: how many verifies the Stop hook saw fail in this iteration.
_STOP_FAILURES = "stop-failures"
SANDBOXED = f"in Forge's sandbox: {NOT_RECORDED}"
# Claude Code shows a hook's stderr to the user, without blocking, on this code.
EXIT_HOOK_ERROR = 1
_FAILURE_LINES = 5


def guard(args: argparse.Namespace, out: Output) -> int:
    words = list(args.words)
    if words[:1] == ["--"]:
        words = words[1:]
    if args.stdin:
        command = sys.stdin.read()
    elif words:
        command = command_line(words)
    else:
        raise UsageError("nothing to check", hint="forge guard -- <command...>, or --stdin")
    refusals = refusals_for(command, cwd=args.cwd or os.getcwd(), config=args.config)
    for line in refusal_lines(refusals):
        out.note(line, style="red")
    if out.json_mode:
        out.document(
            {
                "command": command,
                "allowed": not refusals,
                "refusals": [
                    {"path": r.path, "protection": r.mode, "rule": r.rule, "reason": r.reason}
                    for r in refusals
                ],
            }
        )
    return EXIT_REFUSE if refusals else EXIT_OK


def pre_tool_use(args: argparse.Namespace, _out: Output) -> int:
    payload = sys.stdin.read()
    if stands_aside(from_executor=args.from_executor):
        return EXIT_OK
    return _pre_tool_use(payload)


def stop(args: argparse.Namespace, out: Output) -> int:
    """Claude Code's Stop hook: keep the agent fixing while verify fails and the breaker holds.

    A problem of the hook itself (bad input, a policy that does not load)
    exits 1, which Claude Code shows without blocking: a broken hook must not
    trap an agent in a loop that no verify can end.
    """
    if stands_aside(from_executor=args.from_executor):
        sys.stdin.read()
        return EXIT_OK  # the Stop hook the executor passed verifies this stop
    try:
        return _stop(args, out)
    except ForgeError as exc:
        out.note(f"forge hook stop: {exc.render()}", style="red")
        return EXIT_HOOK_ERROR


def _stop(args: argparse.Namespace, out: Output) -> int:
    from .._verify import breaker_line, gate_detail, read_breaker, record_attempt
    from .._workspace import default_change, find_project

    event = _stop_event(sys.stdin.read())
    start = Path(os.environ.get("CLAUDE_PROJECT_DIR") or event_cwd(event))
    project = find_project(start, Path(args.config) if args.config else None)
    change = args.change or os.environ.get("FORGE_CHANGE") or default_change(project.root)
    if os.environ.get(_SANDBOX_ENV) and os.environ.get(_INBOX_ENV):
        return _sandboxed_stop(args, out, project, Path(os.environ[_INBOX_ENV]))
    paths = _change_paths(project.root, change)
    before = read_breaker(paths).after
    if before.gate_open:
        # Nothing a retry can change: let the agent stop and say who acts next.
        message = f"forge: {gate_detail(before)} for change {change!r} — {ESCALATE}"
        return _answer(out, {"systemMessage": message}, note=message)
    from .._policy import verify_digest
    from .._secscan import output_redactor
    from .._verify import run_verify
    from .._workspace import tree_state
    from ._common import policy_from
    from ._trio_run import run_interruptible

    policy = policy_from(project, _loop_verify(args), args).policy
    tree = tree_state(project.root)
    redact = output_redactor(policy.secscan, root=project.root)
    grace = policy.run.grace.seconds
    report = run_interruptible(run_verify, project.root, policy.verify, grace, redact)

    update = record_attempt(
        paths,
        report,
        max_failures=policy.verify.max_failures,
        tree=tree,
        checks=verify_digest(policy),
    )
    previous = update.before.consecutive_failures if report.passed else 0
    line = breaker_line(update.after, change, previous_streak=previous)
    if report.passed:
        return _answer(out, None, note=f"forge: Verdict: PASS — {line}")
    if update.after.gate_open:
        message = f"forge: Verdict: FAIL — {line} {ESCALATE}"
        return _answer(out, {"systemMessage": message}, note=message)
    reason = f"forge verify: Verdict: FAIL. {line}\n{failure_summary(report)}"
    return _answer(out, {"decision": "block", "reason": reason})


def _sandboxed_stop(args: argparse.Namespace, out: Output, project: Project, inbox: Path) -> int:
    """The Stop hook inside Forge's sandbox, where the change's state is read-only.

    It still verifies, so a failing verify keeps the agent fixing, but it
    records nothing: whatever it could write, the agent could forge, so the
    loop verifies the tree the iteration ends with itself. Its own bound is
    ``[verify] max_failures`` failed verifies in one iteration, counted in the
    inbox: past it, the agent may stop and the loop's verify decides.
    """
    from ._common import policy_from
    from ._unrecorded import verify_unrecorded

    policy = policy_from(project, _loop_verify(args), args).policy
    report = verify_unrecorded(project, policy)
    if report.passed:
        return _answer(out, None, note=f"forge: Verdict: PASS ({SANDBOXED})")
    failures = _count_failure(inbox)
    limit = policy.verify.max_failures
    if failures >= limit:
        message = (
            f"forge: Verdict: FAIL — {failures} failed verifies in this iteration "
            f"(max_failures = {limit}); {SANDBOXED}"
        )
        return _answer(out, {"systemMessage": message}, note=message)
    reason = (
        f"forge verify: Verdict: FAIL. {failures} of {limit} failed verifies in this "
        f"iteration; {SANDBOXED}.\n{failure_summary(report)}"
    )
    return _answer(out, {"decision": "block", "reason": reason})


def _count_failure(inbox: Path) -> int:
    """Add one to the inbox's count of failed verifies and return it (1 when unreadable)."""
    path = inbox / _STOP_FAILURES
    try:
        count = int(path.read_text(encoding="ascii").strip() or 0) + 1
    except (OSError, ValueError):
        count = 1
    try:
        path.write_text(f"{count}\n", encoding="ascii")
    except OSError as exc:
        raise UsageError(
            f"cannot count the Stop hook's verifies in {inbox}: {exc.strerror or exc}"
        ) from exc
    return count


def _loop_verify(args: argparse.Namespace) -> list[Layer]:
    """Inside a Forge loop, the loop's own ``[verify]``: the verdict is its iteration's."""
    text = os.environ.get(LOOP_VERIFY) if args.from_executor else None
    if not text:
        return []
    try:
        table = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{LOOP_VERIFY} is not JSON: {exc}") from exc
    if not isinstance(table, dict):
        raise UsageError(f"{LOOP_VERIFY} is not a [verify] table")
    from ._common import flag_layer

    return [flag_layer(f"the loop's [verify] ({LOOP_VERIFY})", "verify", table)]


def _change_paths(root: Path, change: str) -> ChangePaths:
    """Where the change's breaker lives: the loop's own state folder, inside a Forge loop.

    A loop in a worktree runs its agent there, but keeps the change's state
    in the main checkout (``FORGE_STATE_DIR``): the verdict must reach the
    breaker the loop reads, not a copy in the worktree.
    """
    from .._state import ChangePaths

    state_dir = os.environ.get("FORGE_STATE_DIR")
    if state_dir and os.environ.get("FORGE_CHANGE") == change:
        folder = Path(state_dir)
        candidate = ChangePaths(folder.parent.parent.parent, change)
        if candidate.folder == folder:
            return candidate
    return ChangePaths(root, change)


def _stop_event(payload: str) -> dict[str, Any]:
    try:
        event = json.loads(payload) if payload.strip() else {}
    except ValueError as exc:
        raise UsageError(f"expected Claude Code's Stop JSON on stdin: {exc}") from None
    if not isinstance(event, dict):
        raise UsageError("expected Claude Code's Stop JSON on stdin: a JSON object")
    return event


def failure_summary(report: VerifyReport) -> str:
    """What failed, for the agent that must fix it: each failing check and its first lines."""
    lines = []
    for check in report.checks:
        if check.passed:
            continue
        lines.append(f"- {check.name} failed ({check.outcome}): {check.command}")
        shown = check.failure_lines or check.last_lines
        lines.extend(f"    {text}" for text in shown[:_FAILURE_LINES])
    coverage = report.coverage
    if coverage.counts and not coverage.passed:
        uncovered = ", ".join(s.id for s in coverage.uncovered[:_FAILURE_LINES])
        lines.append(f"- scenarios not covered by a test: {uncovered}")
    if report.nothing_checked:
        lines.append("- nothing to verify: no test or lint command and no scenarios")
    lines.append("Fix these and stop again; the verify runs on every stop.")
    return "\n".join(lines)


def _answer(out: Output, document: dict[str, Any] | None, *, note: str | None = None) -> int:
    """Claude Code reads a Stop hook's JSON on stdout when it exits 0."""
    if note is not None:
        out.note(note, style=None)
    if document is not None:
        print(json.dumps(document), flush=True)
    return EXIT_OK
