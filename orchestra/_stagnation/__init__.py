"""Stagnation: per-iteration signals, the progress score and the detectors."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._assess import HIGH as HIGH
    from ._assess import LOW as LOW
    from ._assess import MEDIUM as MEDIUM
    from ._assess import Assessment as Assessment
    from ._assess import assess as assess
    from ._assess import repeats as repeats
    from ._assess import score as score
    from ._probe import Snapshot as Snapshot
    from ._probe import WorkspaceProbe as WorkspaceProbe
    from ._probe import count_checked as count_checked
    from ._probe import tasks_all_ticked as tasks_all_ticked
    from ._signals import Signals as Signals
    from ._signals import error_fingerprint as error_fingerprint
    from ._signals import error_lines_of as error_lines_of
    from ._signals import trailing_streak as trailing_streak

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._assess": (
                "Assessment",
                "HIGH",
                "LOW",
                "MEDIUM",
                "assess",
                "repeats",
                "score",
            ),
            "._probe": (
                "Snapshot",
                "WorkspaceProbe",
                "count_checked",
                "tasks_all_ticked",
            ),
            "._signals": (
                "Signals",
                "error_fingerprint",
                "error_lines_of",
                "trailing_streak",
            ),
        },
    )
