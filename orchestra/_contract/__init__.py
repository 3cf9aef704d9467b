"""The loop contract: checkpoints, events, the Loop Trace and resume."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._model import DEPTHS as DEPTHS
    from ._model import RISKS as RISKS
    from ._model import STATUSES as STATUSES
    from ._model import BudgetExhausted as BudgetExhausted
    from ._model import Checkpoint as Checkpoint
    from ._model import ContractError as ContractError
    from ._model import Discovery as Discovery
    from ._model import GoalStepsExhausted as GoalStepsExhausted
    from ._model import Update as Update
    from ._model import VerifyStanding as VerifyStanding
    from ._model import parse_rubric_update as parse_rubric_update
    from ._model import start as start
    from ._passes import pass_begun as pass_begun
    from ._passes import pass_in_progress as pass_in_progress
    from ._prompt import iteration_prompt as iteration_prompt
    from ._rules import apply as apply
    from ._rules import block as block
    from ._rules import next_action_of as next_action_of
    from ._rules import same_strategy as same_strategy
    from ._store import EVENTS as EVENTS
    from ._store import add_trace as add_trace
    from ._store import checkpoint_path as checkpoint_path
    from ._store import load_checkpoint as load_checkpoint
    from ._store import record as record
    from ._store import render as render
    from ._store import save_checkpoint as save_checkpoint

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._model": (
                "BudgetExhausted",
                "Checkpoint",
                "ContractError",
                "DEPTHS",
                "Discovery",
                "GoalStepsExhausted",
                "RISKS",
                "STATUSES",
                "Update",
                "VerifyStanding",
                "parse_rubric_update",
                "start",
            ),
            "._passes": ("pass_begun", "pass_in_progress"),
            "._prompt": ("iteration_prompt",),
            "._rules": ("apply", "block", "next_action_of", "same_strategy"),
            "._store": (
                "EVENTS",
                "add_trace",
                "checkpoint_path",
                "load_checkpoint",
                "record",
                "render",
                "save_checkpoint",
            ),
        },
    )
