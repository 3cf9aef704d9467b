"""Writing a run's report files next to its ``summary.json``."""

from __future__ import annotations

from pathlib import Path

import attrs

from .._state import atomic_write
from ._gather import run_folder
from ._html import render_html
from ._markdown import render_markdown
from ._model import BatchReport

HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"


@attrs.frozen
class ReportFiles:
    """Where a report was written."""

    html: Path | None
    markdown: Path | None


def write_report(
    report: BatchReport,
    root: Path,
    *,
    html: Path | None = None,
    markdown: Path | None = None,
    markdown_max: int = 0,
) -> ReportFiles:
    """Write the HTML and Markdown reports (default: in ``.forge/runs/<id>/``), atomically.

    ``markdown_max`` (0: no limit) caps the Markdown's length: a longer one is
    made compact and points to the HTML report.
    """
    folder = run_folder(root, report.run_id)
    html_path = html or folder / HTML_NAME
    markdown_path = markdown or folder / MARKDOWN_NAME
    atomic_write(html_path, render_html(report).encode("utf-8"))
    text = render_markdown(report, max_chars=markdown_max, full_report=str(html_path))
    atomic_write(markdown_path, text.encode("utf-8"))
    return ReportFiles(html_path, markdown_path)
