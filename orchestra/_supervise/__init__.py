"""forge supervise: many bounded loops, their circuits, one shared rate limiter."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._dashboard import Dashboard as Dashboard
    from ._dashboard import limiter_line as limiter_line
    from ._engine import Supervision as Supervision
    from ._engine import run_supervised as run_supervised
    from ._loops import LoopSetup as LoopSetup
    from ._loops import resolve_loops as resolve_loops
    from ._progress import LoopProgress as LoopProgress
    from ._supervisor import LoopRun as LoopRun
    from ._supervisor import interrupted_results as interrupted_results
    from ._supervisor import prepare as prepare
    from ._supervisor import supervise as supervise
    from ._trips import Trip as Trip
    from ._trips import TripContext as TripContext
    from ._trips import judge as judge
    from ._trips import trip_condition as trip_condition

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._dashboard": ("Dashboard", "limiter_line"),
            "._engine": ("Supervision", "run_supervised"),
            "._loops": ("LoopSetup", "resolve_loops"),
            "._progress": ("LoopProgress",),
            "._supervisor": ("LoopRun", "interrupted_results", "prepare", "supervise"),
            "._trips": ("Trip", "TripContext", "judge", "trip_condition"),
        },
    )
