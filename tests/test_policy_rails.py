"""Safe-policy rails: every guard has a safer direction, and each looser value warns."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from orchestra._durations import Duration
from orchestra._policy import Policy
from orchestra._policy._rails import (
    NOT_A_GUARD,
    SAFER,
    guarded_settings,
    is_looser,
    relaxed_settings,
)

DEFAULTS = dict(guarded_settings(Policy()))


def test_every_number_and_switch_of_the_guarded_tables_is_declared() -> None:
    undeclared = sorted(set(DEFAULTS) - set(SAFER) - set(NOT_A_GUARD))
    assert undeclared == []
    assert sorted(set(SAFER) - set(DEFAULTS)) == []  # no stale entry either
    assert "stagnation.weights.no_files_modified" in DEFAULTS


def _looser(direction: str, default: Any) -> Any:
    """A value just looser than ``default`` for a setting safer in ``direction``."""
    if direction in ("on",):
        return False
    if direction == "set":
        return ""
    if direction == "kept":
        return 0
    if isinstance(default, Duration):
        return Duration(default.seconds / 2)
    if isinstance(default, float):
        return default / 2 if direction == "higher" else min(1.0, default + (1 - default) / 2)
    return default - 1 if direction == "higher" else default + 1


def _evolved(policy: Policy, dotted: str, value: Any) -> Policy:
    """``policy`` with the setting at ``dotted`` (``table.key`` or ``table.sub.key``) replaced."""
    head, _, rest = dotted.partition(".")
    if "." not in rest:
        return attrs.evolve(policy, **{head: attrs.evolve(getattr(policy, head), **{rest: value})})
    inner = getattr(policy, head)
    return attrs.evolve(policy, **{head: _evolved(inner, rest, value)})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(SAFER))
def test_each_looser_value_warns(name: str) -> None:
    default = DEFAULTS[name]
    value = _looser(SAFER[name], default)
    assert is_looser(SAFER[name], value, default)
    found = relaxed_settings(_evolved(Policy(), name, value))
    assert [text for text in found if text.startswith(f"{name} ")], found
    # Acknowledged, it is said no more.
    acknowledged = _evolved(Policy(), name, value)
    acknowledged = attrs.evolve(
        acknowledged, policy=attrs.evolve(acknowledged.policy, allow_relaxed=True)
    )
    assert relaxed_settings(acknowledged) == []


def test_the_shipped_defaults_and_stricter_values_are_quiet() -> None:
    assert relaxed_settings(Policy()) == []
    stricter = _evolved(Policy(), "stagnation.window", 2)
    stricter = _evolved(stricter, "alerts.loop_count", 10)
    stricter = _evolved(stricter, "recovery.watch", 5)
    assert relaxed_settings(stricter) == []


def test_the_reported_loose_settings_each_warn() -> None:
    cases = {
        "stagnation.window": 100,
        "stagnation.weights.no_files_modified": 0,
        "alerts.loop_count": 1000,
        "alerts.no_tasks": 100,
        "recovery.enabled": False,
        "alerts.enabled": False,
        "recovery.lessons": "",
        "recovery.watch": 1,
    }
    for name, value in cases.items():
        found = relaxed_settings(_evolved(Policy(), name, value))
        assert any(text.startswith(f"{name} = ") for text in found), (name, found)
    found = relaxed_settings(_evolved(Policy(), "recovery.lessons", ""))
    assert found == [
        'recovery.lessons = "" turns off what the shipped default "memory/forge-lessons.md" '
        "keeps on"
    ]
