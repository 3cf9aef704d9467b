"""How a written report is shown: its notes and files printed, its JSON document, its redaction.

Shared by ``forge report`` of a local batch and of a fleet batch.
"""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import ForgeError
from ._console import Output

if TYPE_CHECKING:
    from .._policy import SecscanPolicy
    from .._redact import Redact
    from .._report import BatchReport, ReportFiles


def show_report(
    report: BatchReport, files: ReportFiles, args: argparse.Namespace, out: Output
) -> None:
    """Print the report's notes, its outcome and where its files are; open it when asked."""
    for note in report.notes:
        out.note(note)
    out.line(report.outcome)
    out.line(f"report: {files.html}")
    out.line(f"markdown: {files.markdown}")
    if args.open and files.html is not None:
        opened = webbrowser.open(files.html.resolve().as_uri())
        if not opened:
            out.note("--open: no browser found; open the file above")


def json_document(report: BatchReport, files: ReportFiles) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "outcome": report.outcome,
        "from_summary": report.from_summary,
        "html": str(files.html),
        "markdown": str(files.markdown),
        "loops": [
            {
                "change": loop.change,
                "ending": loop.ending,
                "escalated": loop.escalated,
                "recovered": loop.recovered,
                "resume": list(loop.resume),
            }
            for loop in report.loops
        ],
    }


def report_redactor(secscan: SecscanPolicy | None, root: Path, out: Output) -> Redact | None:
    """The project's redaction of secrets, for the diffs the report shows.

    The diffs are redacted even where the loops' scan is off: a report is read
    by more people than a log. Rules that cannot be loaded leave the diffs'
    lines out (the report says so).
    """
    from .._policy import SecscanPolicy
    from .._secscan import output_redactor

    policy = attrs.evolve(secscan or SecscanPolicy(), enabled=True)
    try:
        return output_redactor(policy, root=root)
    except ForgeError as exc:
        out.note(f"note: the secret-scan rules could not be loaded ({exc.message}); no diff shown")
        return None
