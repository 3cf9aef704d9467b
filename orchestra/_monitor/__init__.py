"""Monitoring: what a person watching a loop is told, below the engine that runs it.

- ``_alerts``: the monitored figures against ``[alerts]``, raised and cleared by
  the engine's :func:`decide` (pure).
- ``_statuslog``: a section of the status log (``status.md``) per iteration, rendered.
- ``_statusfile``: the status log on disk, appended to and rewritten only past its bound.
- ``_lessons``: the lessons file a stalled loop appends to.
- ``_errorlines``: the errors an iteration ended with, as the status log shows them.

Nothing here imports the engine: the engine judges the alerts and renders the
status log and the lessons file (``orchestra._engine._watch``) from its own
records, passing plain values down.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._alerts import ALERT_MEMORY as ALERT_MEMORY
    from ._alerts import Alert as Alert
    from ._alerts import CallsLeft as CallsLeft
    from ._alerts import clears as clears
    from ._alerts import promoted as promoted
    from ._alerts import step_alerts as step_alerts
    from ._errorlines import error_lines as error_lines
    from ._lessons import Lesson as Lesson
    from ._lessons import append_lesson as append_lesson
    from ._statusfile import StatusLog as StatusLog
    from ._statuslog import StatusEntry as StatusEntry
    from ._statuslog import render_log as render_log
    from ._statuslog import render_section as render_section

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._alerts": (
                "ALERT_MEMORY",
                "Alert",
                "CallsLeft",
                "clears",
                "promoted",
                "step_alerts",
            ),
            "._errorlines": ("error_lines",),
            "._lessons": ("Lesson", "append_lesson"),
            "._statusfile": ("StatusLog",),
            "._statuslog": ("StatusEntry", "render_log", "render_section"),
        },
    )
