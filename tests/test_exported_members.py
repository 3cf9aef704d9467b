"""The public API is a curated list: adding or dropping a name is a decision, not an accident."""

from __future__ import annotations

import importlib
import inspect

import orchestra

EXPECTED = {
    # Errors.
    "ConfigError",
    "CorruptStateError",
    "ForgeError",
    "StateError",
    "UsageError",
    # Durations.
    "Duration",
    "parse_duration",
    # The policy.
    "Policy",
    "load_policy",
    # A change's state on disk.
    "ChangePaths",
    # One bounded loop and its decision function.
    "GateReading",
    "IterationRecord",
    "LoopPlan",
    "LoopProgress",
    "LoopRules",
    "LoopSettings",
    "RunSummary",
    "SecscanGate",
    "decide",
    "run_loop",
    # The agent CLIs.
    "Executor",
    "Observation",
    "load_executor",
    "shell_command",
    # The verify gate.
    "VerifyAttempts",
    "VerifyReport",
    "record_verdict",
    "run_verify",
    # The loop circuit.
    "CLOSED",
    "CLOSED_CIRCUIT",
    "HALF_OPEN",
    "OPEN",
    "CircuitState",
    "close",
    "cooldown_remaining",
    "half_open",
    "load_circuit",
    "reset_circuit",
    "save_circuit",
    "trip",
    # The shared rate limiter.
    "BackendReading",
    "LimiterStatistics",
    "MemoryBackend",
    "RateLimitBackend",
    "RateLimitStoreError",
    "RateLimiter",
    "SqliteBackend",
    "open_limiter",
}


def test_exported_members() -> None:
    public = {name for name in dir(orchestra) if not name.startswith("_")}
    assert public == EXPECTED


def test_all_is_the_same_list() -> None:
    assert orchestra.__all__ == sorted(EXPECTED)
    namespace: dict[str, object] = {}
    exec("from orchestra import *", namespace)
    assert {name for name in namespace if name != "__builtins__"} == EXPECTED


def test_exported_members_come_from_private_modules() -> None:
    for name in EXPECTED:
        value = getattr(orchestra, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            module = value.__module__
        else:
            # A constant has no module of its own: its home is where the list says.
            module = orchestra._EXPORTS[name]
            home = importlib.import_module(module, "orchestra")
            assert getattr(home, name) is value, name
            module = home.__name__
        assert module.startswith("orchestra._"), (name, module)


def test_the_version_has_one_home() -> None:
    from orchestra._version import __version__

    assert orchestra.__version__ == __version__
