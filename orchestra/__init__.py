"""Forge keeps autonomous coding agents on a leash.

The command line (``forge``) is the main interface; these names are the
library's public API, for tools that embed Forge's gates: the policy, one
bounded loop and its decision function, the executors, the verify gate, the
loop circuit and the shared rate limiter, and the errors. Everything in a
``_``-prefixed module is private. Names are resolved on first use, so that
``forge`` commands which need little (the agent hooks run on every tool call)
do not pay for importing trio and rich.
"""

from __future__ import annotations

import importlib
import sys

from ._version import __version__ as __version__

# Not typing's: importing typing costs more than the agent hooks' whole check.
# Type checkers treat a module-level TYPE_CHECKING as True all the same.
TYPE_CHECKING = False

# The one list of the public API: each name and the module it comes from.
# ``__getattr__``, ``__dir__`` and ``__all__`` derive from it; the imports for
# type checkers below repeat it, and tests/test_architecture.py fails when the
# two differ.
_EXPORTS = {
    # Errors.
    "ConfigError": "._errors",
    "CorruptStateError": "._errors",
    "ForgeError": "._errors",
    "StateError": "._errors",
    "UsageError": "._errors",
    # Durations, as policies spell them.
    "Duration": "._durations",
    "parse_duration": "._durations",
    # The policy.
    "Policy": "._policy",
    "load_policy": "._policy",
    # A change's state on disk.
    "ChangePaths": "._state",
    # One bounded loop and its decision function.
    "GateReading": "._engine",
    "IterationRecord": "._engine",
    "LoopPlan": "._engine",
    "LoopProgress": "._engine",
    "LoopRules": "._engine",
    "LoopSettings": "._engine",
    "RunSummary": "._engine",
    "SecscanGate": "._engine",
    "decide": "._engine",
    "run_loop": "._engine",
    # The agent CLIs.
    "Executor": "._executor",
    "Observation": "._executor",
    "load_executor": "._executor",
    "shell_command": "._executor",
    # The verify gate.
    "VerifyAttempts": "._verify",
    "VerifyReport": "._verify",
    "record_verdict": "._verify",
    "run_verify": "._verify",
    # The loop circuit: its states, the pure moves between them, its file.
    "CLOSED": "._circuit",
    "CLOSED_CIRCUIT": "._circuit",
    "HALF_OPEN": "._circuit",
    "OPEN": "._circuit",
    "CircuitState": "._circuit",
    "close": "._circuit",
    "cooldown_remaining": "._circuit",
    "half_open": "._circuit",
    "load_circuit": "._circuit",
    "reset_circuit": "._circuit",
    "save_circuit": "._circuit",
    "trip": "._circuit",
    # The shared rate limiter and the stores of its log.
    "BackendReading": "._ratelimit",
    "LimiterStatistics": "._ratelimit",
    "MemoryBackend": "._ratelimit",
    "RateLimitBackend": "._ratelimit",
    "RateLimitStoreError": "._ratelimit",
    "RateLimiter": "._ratelimit",
    "SqliteBackend": "._ratelimit",
    "open_limiter": "._ratelimit",
}

if TYPE_CHECKING:
    from ._circuit import CLOSED as CLOSED
    from ._circuit import CLOSED_CIRCUIT as CLOSED_CIRCUIT
    from ._circuit import HALF_OPEN as HALF_OPEN
    from ._circuit import OPEN as OPEN
    from ._circuit import CircuitState as CircuitState
    from ._circuit import close as close
    from ._circuit import cooldown_remaining as cooldown_remaining
    from ._circuit import half_open as half_open
    from ._circuit import load_circuit as load_circuit
    from ._circuit import reset_circuit as reset_circuit
    from ._circuit import save_circuit as save_circuit
    from ._circuit import trip as trip
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
    from ._executor import shell_command as shell_command
    from ._policy import Policy as Policy
    from ._policy import load_policy as load_policy
    from ._ratelimit import BackendReading as BackendReading
    from ._ratelimit import LimiterStatistics as LimiterStatistics
    from ._ratelimit import MemoryBackend as MemoryBackend
    from ._ratelimit import RateLimitBackend as RateLimitBackend
    from ._ratelimit import RateLimiter as RateLimiter
    from ._ratelimit import RateLimitStoreError as RateLimitStoreError
    from ._ratelimit import SqliteBackend as SqliteBackend
    from ._ratelimit import open_limiter as open_limiter
    from ._state import ChangePaths as ChangePaths
    from ._verify import VerifyAttempts as VerifyAttempts
    from ._verify import VerifyReport as VerifyReport
    from ._verify import record_verdict as record_verdict
    from ._verify import run_verify as run_verify
else:
    # Hidden from type checkers, which take the exports from the imports above.
    __all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestra' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    # Kept on the package, so the next read is an ordinary attribute.
    setattr(sys.modules[__name__], name, value)
    return value


def __dir__() -> list[str]:
    return sorted([*_EXPORTS, "__version__"])
