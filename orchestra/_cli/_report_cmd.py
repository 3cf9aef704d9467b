"""``forge report``: a batch's morning report as HTML and Markdown; and the end of a batch.

``forge supervise`` calls :func:`after_batch` once its ``summary.json`` is
written: it writes the report next to it (unless ``[report] write = false``)
and sends the ``[notify]`` notifications. Nothing there may change the
batch's exit code: a report or a notification that fails is reported and the
batch ends as it would have.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import EXIT_OK, ForgeError, UsageError
from .._fleet import fleet_meant
from .._report import (
    gather_report,
    is_fleet_host_run,
    known_runs,
    resolve_run,
    run_folder,
    write_report,
)
from ._common import policy_from, project_from
from ._console import Output
from ._report_show import json_document, report_redactor, show_report
from ._status_cmd import _declared_roots

if TYPE_CHECKING:
    from .._notify import LiveNotices
    from .._policy import Policy, SecscanPolicy


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    source = getattr(args, "from_dir", None)
    root = project.root
    if source and getattr(args, "fleet", False):
        raise UsageError(
            "--fleet and --from: one or the other",
            hint="--fleet reads the batch from the server, --from DIR from an export",
        )
    if source:
        root = Path(source).resolve()
        if not root.is_dir():
            raise UsageError(f"--from {source}: no such folder")
        roots = [root]
    else:
        roots = [project.root, *(_declared_roots(project) or [])]
    if not source and _from_fleet(args, roots):
        from ._fleet_report import fleet_report

        return fleet_report(args, out, project, _report_files(args))
    run_id = resolve_run(roots, args.run)
    output_lines = 20
    lessons = "memory/forge-lessons.md"
    markdown_max = 60_000
    secscan: SecscanPolicy | None = None
    try:
        policy = policy_from(project, args=args).policy
        output_lines, lessons = policy.report.output_lines, policy.recovery.lessons
        markdown_max = policy.report.markdown_max
        secscan = policy.secscan
    except ForgeError as exc:  # a broken policy must not hide last night's report
        out.note(f"note: the policy could not be read ({exc.message}); using defaults")
    report = gather_report(
        root,
        run_id,
        other_roots=roots[1:],
        output_lines=output_lines,
        forge_files=(lessons,),
        redact=report_redactor(secscan, root, out),
    )
    html, markdown = _report_files(args)
    files = write_report(report, root, html=html, markdown=markdown, markdown_max=markdown_max)
    show_report(report, files, args, out)
    if out.json_mode:
        out.document(json_document(report, files))
    return EXIT_OK


def _from_fleet(args: argparse.Namespace, roots: list[Path]) -> bool:
    """Whether the report is the fleet batch's, read from its Redis server.

    With ``--fleet``, always. With ``FORGE_REDIS_URL`` set, or in a fleet host's
    folder (whose runs are hosts' summaries), when no batch here can be reported.
    """
    if getattr(args, "fleet", False):
        return True
    try:
        resolve_run(roots, args.run)
    except UsageError:
        return fleet_meant(False) or _fleet_hosts_here(roots)
    return False


def _fleet_hosts_here(roots: list[Path]) -> bool:
    known = known_runs(roots)
    return bool(known) and all(is_fleet_host_run(roots, run_id) for run_id in known)


def _report_files(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """Where ``--html`` and ``--markdown`` ask the files to be written (None: the run's folder)."""
    return _output_path(args.html, "--html"), _output_path(args.markdown, "--markdown")


def _output_path(value: str | None, flag: str) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"{flag} {value}: is a folder; name a file")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {value}: no such folder {path.parent}")
    return path


def after_batch(
    root: Path,
    policy: Policy,
    summary: Mapping[str, Any],
    summary_path: Path,
    out: Output,
    *,
    live: LiveNotices | None = None,
) -> None:
    """Write the batch's report and send its notifications; never raises.

    The batch is over and its summary written: whatever goes wrong here is
    said on stderr, and the batch ends with the exit code its loops earned.
    ``live`` holds what was sent while the batch ran, not to be sent again.
    """
    try:
        _after_batch(root, policy, summary, summary_path, out, live)
    except Exception as exc:  # a report's failure must not become the batch's
        out.note(f"report: failed ({type(exc).__name__}: {exc}); the batch's result stands")


def _after_batch(
    root: Path,
    policy: Policy,
    summary: Mapping[str, Any],
    summary_path: Path,
    out: Output,
    live: LiveNotices | None,
) -> None:
    notify = policy.notify
    if not policy.report.write and not (
        notify.on_escalate or notify.on_finish or notify.on_alert or notify.webhook
    ):
        return  # nothing to write and nobody to tell
    run_id = str(summary["run_id"])
    files = {"summary": str(summary_path)}
    try:
        report = gather_report(
            root,
            run_id,
            other_roots=[Path(str(e["dir"])) for e in summary.get("loops") or [] if e.get("dir")],
            output_lines=policy.report.output_lines,
            forge_files=(policy.recovery.lessons,),
            redact=report_redactor(policy.secscan, root, out),
        )
    except (ForgeError, OSError) as exc:
        out.note(f"report: cannot be made: {getattr(exc, 'message', exc)}")
        return
    if policy.report.write:
        try:
            written = write_report(report, root, markdown_max=policy.report.markdown_max)
        except (ForgeError, OSError) as exc:
            out.note(f"report: cannot be written: {getattr(exc, 'message', exc)}")
        else:
            files["html"] = str(written.html)
            files["markdown"] = str(written.markdown)
            out.line(f"report: {written.html}", style="bold")
    from .._notify import notify_batch  # only a batch that ends sends anything

    notify_batch(
        policy.notify,
        summary,
        report,
        root=root,
        run_folder=run_folder(root, run_id),
        files=files,
        say=lambda text: out.note(text, style="red"),
        live=live,
    )
