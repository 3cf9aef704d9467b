"""forge supervise: many bounded loops at once, sharing one rate limiter and a dashboard."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .._engine import LoopProgress as LoopProgress
    from ._dashboard import Dashboard as Dashboard
    from ._dashboard import limiter_line as limiter_line
    from ._loop_tables import LoopSetup as LoopSetup
    from ._loop_tables import resolve_loops as resolve_loops
    from ._shared_trees import SharedTree as SharedTree
    from ._shared_trees import separate_trees as separate_trees
    from ._shared_trees import shared_trees as shared_trees
    from ._supervisor import LoopRun as LoopRun
    from ._supervisor import Supervision as Supervision
    from ._supervisor import interrupted_results as interrupted_results
    from ._supervisor import prepare as prepare
    from ._worktree import WorktreeError as WorktreeError
    from ._worktree import ensure_worktree as ensure_worktree

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            ".._engine": ("LoopProgress",),
            "._dashboard": (
                "Dashboard",
                "limiter_line",
            ),
            "._loop_tables": (
                "LoopSetup",
                "resolve_loops",
            ),
            "._shared_trees": (
                "SharedTree",
                "separate_trees",
                "shared_trees",
            ),
            "._supervisor": (
                "LoopRun",
                "Supervision",
                "interrupted_results",
                "prepare",
            ),
            "._worktree": ("WorktreeError", "ensure_worktree"),
        },
    )
