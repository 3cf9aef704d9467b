"""The morning report: a batch's results as an HTML page and its Markdown twin."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._build import LoopFacts as LoopFacts
    from ._build import build_report as build_report
    from ._build import resume_commands as resume_commands
    from ._fleet import build_fleet_report as build_fleet_report
    from ._fleet import fleet_run_id as fleet_run_id
    from ._fleet import fleet_summary as fleet_summary
    from ._gather import gather_report as gather_report
    from ._gather import is_fleet_host_run as is_fleet_host_run
    from ._gather import known_runs as known_runs
    from ._gather import resolve_run as resolve_run
    from ._gather import run_folder as run_folder
    from ._gather import with_diffs as with_diffs
    from ._html import render_html as render_html
    from ._lines import KNOWN_KINDS as KNOWN_KINDS
    from ._lines import event_iteration as event_iteration
    from ._lines import event_words as event_words
    from ._markdown import render_markdown as render_markdown
    from ._model import BatchReport as BatchReport
    from ._model import LoopReport as LoopReport
    from ._write import HTML_NAME as HTML_NAME
    from ._write import MARKDOWN_NAME as MARKDOWN_NAME
    from ._write import ReportFiles as ReportFiles
    from ._write import write_report as write_report

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._build": ("LoopFacts", "build_report", "resume_commands"),
            "._gather": (
                "gather_report",
                "known_runs",
                "resolve_run",
                "run_folder",
                "is_fleet_host_run",
                "with_diffs",
            ),
            "._html": ("render_html",),
            "._lines": ("KNOWN_KINDS", "event_iteration", "event_words"),
            "._markdown": ("render_markdown",),
            "._model": ("BatchReport", "LoopReport"),
            "._write": ("HTML_NAME", "MARKDOWN_NAME", "ReportFiles", "write_report"),
            "._fleet": (
                "build_fleet_report",
                "fleet_run_id",
                "fleet_summary",
            ),
        },
    )
