"""Executors: agent CLIs run as subprocesses, and what their output means."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._definition import OUTPUT_FORMATS as OUTPUT_FORMATS
    from ._definition import SESSION_MODES as SESSION_MODES
    from ._definition import AgentCli as AgentCli
    from ._definition import Executor as Executor
    from ._definition import ExecutorSpec as ExecutorSpec
    from ._definition import ModelPrice as ModelPrice
    from ._definition import claude_hook_settings as claude_hook_settings
    from ._definition import load_executor as load_executor
    from ._definition import shell_command as shell_command
    from ._denials import ProtectedPaths as ProtectedPaths
    from ._denials import claude_deny_rules as claude_deny_rules
    from ._denials import state_paths as state_paths
    from ._iteration import IterationContext as IterationContext
    from ._iteration import IterationOutcome as IterationOutcome
    from ._iteration import run_iteration as run_iteration
    from ._limits import backoff_pause as backoff_pause
    from ._limits import detect_limit as detect_limit
    from ._observation import ModelTokens as ModelTokens
    from ._observation import Observation as Observation
    from ._observation import RateLimitEvent as RateLimitEvent
    from ._parsers import make_parser as make_parser
    from ._pricing import default_price as default_price
    from ._pricing import estimate_cost as estimate_cost
    from ._report import ExecutorReport as ExecutorReport
    from ._report import read_report as read_report
    from ._sessionid import SESSION_ID_CHARSET as SESSION_ID_CHARSET
    from ._sessionid import valid_session_id as valid_session_id

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._definition": (
                "OUTPUT_FORMATS",
                "AgentCli",
                "SESSION_MODES",
                "Executor",
                "ExecutorSpec",
                "ModelPrice",
                "claude_hook_settings",
                "load_executor",
                "shell_command",
            ),
            "._denials": ("ProtectedPaths", "claude_deny_rules", "state_paths"),
            "._limits": ("backoff_pause", "detect_limit"),
            "._sessionid": ("SESSION_ID_CHARSET", "valid_session_id"),
            "._pricing": ("default_price", "estimate_cost"),
            "._iteration": ("IterationContext", "IterationOutcome", "run_iteration"),
            "._observation": ("ModelTokens", "Observation", "RateLimitEvent"),
            "._parsers": ("make_parser",),
            "._report": ("ExecutorReport", "read_report"),
        },
    )
