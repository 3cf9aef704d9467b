"""``forge secscan``: the secret scan's findings; ``forge secscan waive``: a human's waiver."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path

from .._errors import EXIT_ESCALATE, EXIT_OK, UsageError
from .._git import git_output
from .._secscan import (
    Finding,
    ProjectScanner,
    add_waiver,
    apply_waivers,
    load_rules,
    load_waivers,
    scan_history,
)
from ._common import policy_from, project_from
from ._console import Output

_SEVERITY_STYLE = {"critical": "bold red", "high": "red", "medium": "yellow", "low": None}


def scan(args: argparse.Namespace, out: Output) -> int:
    if getattr(args, "history", None) is not None:
        return history(args, out)
    project = project_from(args)
    policy = policy_from(project, args=args).policy.secscan
    scanner = ProjectScanner.for_project(policy, root=project.root, workdir=project.root)
    report = scanner.scan()
    result = report.result
    blocking = report.blocking
    code = EXIT_ESCALATE if blocking else EXIT_OK
    if out.json_mode:
        out.document(
            {
                "rules": policy.rules,
                "fail_on": policy.fail_on,
                "findings": [f.as_dict() for f in report.kept],
                "waived": [f.as_dict() for f in report.waived],
                "blocking": len(blocking),
                "files": {
                    "considered": result.files_considered,
                    "read": result.files_read,
                    "cached": result.files_cached,
                    "skipped": result.files_skipped,
                    "skipped_large": list(result.skipped_large),
                },
                "duration": round(result.duration, 3),
                "cache_note": result.cache_note,
                "exit_code": code,
            }
        )
        return code
    out.line(
        f"secscan: {len(report.kept)} finding(s) in {result.files_considered} file(s) "
        f"({result.files_read} read, {result.files_cached} from cache) — rules "
        f'"{policy.rules}", gate opens at {policy.fail_on}'
    )
    for finding in report.kept:
        _finding_line(finding, out)
    if report.waived:
        out.line(f"  waived: {len(report.waived)} (in {policy.waivers})", style="dim")
    if result.skipped_large:
        out.line(
            f"  not scanned: {len(result.skipped_large)} file(s) over {policy.max_file_bytes} "
            "bytes",
            style="dim",
        )
    if result.cache_note:
        out.note(f"note: {result.cache_note}")
    if blocking:
        out.line(
            f"secscan: {len(blocking)} unwaived finding(s) at or above {policy.fail_on} — "
            "remove the secret, or: forge secscan waive <fingerprint> --reason '…'",
            style="bold red",
        )
    else:
        out.line(f"secscan: clean — no unwaived findings at or above {policy.fail_on}")
    return code


def history(args: argparse.Namespace, out: Output) -> int:
    """``forge secscan --history [RANGE]``: the secrets a range's commits added."""
    project = project_from(args)
    policy = policy_from(project, args=args).policy.secscan
    ruleset = load_rules(policy.rules, root=project.root)
    scanned = scan_history(project.root, ruleset, args.history or None)
    waivers = load_waivers(project.root / policy.waivers)
    outcome = apply_waivers([found.finding for found in scanned.findings], waivers)
    kept = [found for found in scanned.findings if found.finding in outcome.kept]
    blocking = [found for found in kept if found.finding.at_least(policy.fail_on)]
    code = EXIT_ESCALATE if blocking else EXIT_OK
    if out.json_mode:
        out.document(
            {
                "range": scanned.range,
                "commits": scanned.commits,
                "rules": policy.rules,
                "fail_on": policy.fail_on,
                "findings": [found.as_dict() for found in kept],
                "waived": len(scanned.findings) - len(kept),
                "blocking": len(blocking),
                "exit_code": code,
            }
        )
        return code
    out.line(
        f"secscan: {len(kept)} finding(s) in the lines {scanned.commits} commit(s) added "
        f'({scanned.range}) — rules "{policy.rules}", gate opens at {policy.fail_on}'
    )
    for found in kept:
        out.line(f"  commit {found.commit[:12]}:", style="dim")
        _finding_line(found.finding, out)
    if len(kept) < len(scanned.findings):
        waived = len(scanned.findings) - len(kept)
        out.line(f"  waived: {waived} (in {policy.waivers})", style="dim")
    if blocking:
        out.line(
            f"secscan: {len(blocking)} unwaived finding(s) at or above {policy.fail_on} in "
            "the history — rotate the secret and rewrite the commits before they are pushed",
            style="bold red",
        )
    else:
        out.line(f"secscan: history clean — no unwaived findings at or above {policy.fail_on}")
    return code


def waive(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    policy = policy_from(project, args=args).policy.secscan
    if not args.reason or not args.reason.strip():
        raise UsageError("a waiver needs a reason", hint="--reason 'a test fixture, not a key'")
    try:
        waiver = add_waiver(
            project.root / policy.waivers,
            fingerprint=args.fingerprint,
            reason=args.reason,
            who=args.who or _who(project.root),
            expires_in=args.expires,
        )
    except ValueError as exc:
        raise UsageError(str(exc), hint="e.g. --expires 30d") from None
    until = f"until {waiver.expires}" if waiver.expires else "with no expiry"
    line = f"secscan: waived {waiver.fingerprint} {until} — {waiver.reason} ({waiver.who})"
    out.line(line)
    if out.json_mode:
        out.document({"waiver": waiver.as_dict(), "message": line})
    return EXIT_OK


def _finding_line(finding: Finding, out: Output) -> None:
    out.styled(
        (f"  {finding.severity.upper():<8}", _SEVERITY_STYLE.get(finding.severity)),
        (f" {finding.rule_id:<22} {finding.path}:{finding.line}  {finding.preview}", None),
        (f"  {finding.fingerprint}", "dim"),
    )


def _who(root: Path) -> str:
    """The person waiving: git's user.name, else the login name."""
    name = git_output(root, "config", "user.name")
    text = name.decode(errors="replace").strip() if name else ""
    return text or getpass.getuser()
