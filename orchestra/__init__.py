"""Forge keeps autonomous coding agents on a leash.

The command line (``forge``) is the main interface; these names are the
library's public API, for tools that embed Forge's gates. Everything in a
``_``-prefixed module is private. Names are resolved on first use, so that
``forge`` commands which need little (the agent hooks run on every tool call)
do not pay for importing trio and rich.
"""

from __future__ import annotations

import importlib

# Not typing's: importing typing costs more than the agent hooks' whole check.
# Type checkers treat a module-level TYPE_CHECKING as True all the same.
TYPE_CHECKING = False

__version__ = "0.1.0"

_EXPORTS = {
    "ChangePaths": "._state",
    "ConfigError": "._errors",
    "CorruptStateError": "._errors",
    "Duration": "._durations",
    "Executor": "._executor",
    "ForgeError": "._errors",
    "GateReading": "._engine",
    "IterationRecord": "._engine",
    "LoopPlan": "._engine",
    "LoopProgress": "._engine",
    "LoopRules": "._engine",
    "LoopSettings": "._engine",
    "Observation": "._executor",
    "Policy": "._policy",
    "RunSummary": "._engine",
    "SecscanGate": "._engine",
    "StateError": "._errors",
    "UsageError": "._errors",
    "VerifyAttempts": "._verify",
    "VerifyReport": "._verify",
    "load_executor": "._executor",
    "load_policy": "._policy",
    "make_parser": "._executor",
    "parse_duration": "._durations",
    "decide": "._engine",
    "record_verdict": "._verify",
    "run_loop": "._engine",
    "run_verify": "._verify",
    "shell_command": "._executor",
}

if TYPE_CHECKING:
    from ._durations import Duration as Duration
    from ._durations import parse_duration as parse_duration
    from ._engine import GateReading as GateReading
    from ._engine import IterationRecord as IterationRecord
    from ._engine import LoopPlan as LoopPlan
    from ._engine import LoopProgress as LoopProgress
    from ._engine import LoopRules as LoopRules
    from ._engine import LoopSettings as LoopSettings
    from ._engine import RunSummary as RunSummary
    from ._engine import SecscanGate as SecscanGate
    from ._engine import decide as decide
    from ._engine import run_loop as run_loop
    from ._errors import ConfigError as ConfigError
    from ._errors import CorruptStateError as CorruptStateError
    from ._errors import ForgeError as ForgeError
    from ._errors import StateError as StateError
    from ._errors import UsageError as UsageError
    from ._executor import Executor as Executor
    from ._executor import Observation as Observation
    from ._executor import load_executor as load_executor
    from ._executor import make_parser as make_parser
    from ._executor import shell_command as shell_command
    from ._policy import Policy as Policy
    from ._policy import load_policy as load_policy
    from ._state import ChangePaths as ChangePaths
    from ._verify import VerifyAttempts as VerifyAttempts
    from ._verify import VerifyReport as VerifyReport
    from ._verify import record_verdict as record_verdict
    from ._verify import run_verify as run_verify


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestra' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted([*_EXPORTS, "__version__"])
