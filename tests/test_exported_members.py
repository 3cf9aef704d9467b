"""The public API is a curated list: adding or dropping a name is a decision, not an accident."""

from __future__ import annotations

import orchestra

EXPECTED = {
    "ChangePaths",
    "ConfigError",
    "CorruptStateError",
    "Duration",
    "Executor",
    "ForgeError",
    "GateReading",
    "IterationRecord",
    "LoopPlan",
    "LoopProgress",
    "LoopRules",
    "LoopSettings",
    "Observation",
    "Policy",
    "RunSummary",
    "SecscanGate",
    "StateError",
    "UsageError",
    "VerifyAttempts",
    "VerifyReport",
    "load_executor",
    "load_policy",
    "make_parser",
    "parse_duration",
    "decide",
    "record_verdict",
    "run_loop",
    "run_verify",
    "shell_command",
}


def test_exported_members() -> None:
    public = {name for name in dir(orchestra) if not name.startswith("_")}
    assert public == EXPECTED


def test_exported_members_come_from_private_modules() -> None:
    for name in EXPECTED:
        module = getattr(getattr(orchestra, name), "__module__", "")
        assert module.startswith("orchestra._"), (name, module)
