"""Safe-policy rails: settings looser than Forge ships, said out loud.

A cooldown under 30 minutes lets a stalled loop retry the same failing state
over and over; a trip threshold looser than the shipped default lets a loop
spin longer before anyone hears of it; a guard turned off hears nothing.
None of it is refused (a test suite or a demo wants seconds), but ``forge
policy check``, ``forge run``'s plan and ``forge supervise --dry-run`` warn
about each one until ``[policy] allow_relaxed = true`` acknowledges them.

Every number and switch of ``[stagnation]`` (its weights included),
``[breaker]``, ``[verify]``, ``[alerts]`` and ``[recovery]`` has its safer
direction declared in :data:`SAFER`, or a reason in :data:`NOT_A_GUARD` why
it has none; the check itself is generic, and a test holds every such field
of the model to one of the two, so a new key cannot be forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from .._durations import Duration
from ._model import Policy

MIN_COOLDOWN = 30 * 60.0
_ACK = "set [policy] allow_relaxed = true to acknowledge"

# The tables whose settings guard a loop.
GUARDED_TABLES = ("stagnation", "breaker", "verify", "alerts", "recovery")

# Which way a setting is safer:
#   "lower":  a higher value than the default is looser (a threshold to trip at);
#   "higher": a lower value is looser (a cooldown, a share of calls left, the watch);
#   "on":     false is looser (a guard turned off);
#   "set":    an empty value turns the feature off;
#   "kept":   0 turns the feature off (any other value only says how much is kept).
SAFER: dict[str, str] = {
    "stagnation.window": "lower",
    "stagnation.no_progress": "lower",
    "stagnation.identical_errors": "lower",
    "stagnation.output_decline": "lower",
    "stagnation.output_min_lines": "lower",
    "stagnation.permission_denials": "lower",
    "stagnation.test_fix_ratio": "lower",
    # A weight raised (a reward, or a penalty toward 0) makes a stalled loop score better.
    "stagnation.weights.test_passing": "lower",
    "stagnation.weights.task_completed": "lower",
    "stagnation.weights.file_modified": "lower",
    "stagnation.weights.error_resolved": "lower",
    "stagnation.weights.same_error": "lower",
    "stagnation.weights.no_files_modified": "lower",
    "stagnation.weights.revert": "lower",
    "breaker.cooldown": "higher",
    "breaker.cooldown_max": "higher",
    "breaker.max_opens": "lower",
    "verify.max_failures": "lower",
    "alerts.enabled": "on",
    "alerts.loop_count": "lower",
    "alerts.no_tasks": "lower",
    "alerts.no_files": "lower",
    "alerts.pass_rate": "lower",
    "alerts.error_frequency": "lower",
    "alerts.output_volume": "lower",
    "alerts.calls_remaining": "higher",
    "alerts.negative_score": "lower",
    "alerts.status_log": "kept",
    "recovery.enabled": "on",
    "recovery.watch": "higher",
    "recovery.lessons": "set",
}

# Numbers and switches of those tables that guard nothing, and why.
NOT_A_GUARD: dict[str, str] = {
    "verify.timeout": "a slow suite needs a longer one; either way the verify still judges",
}


def _fields(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every setting under ``value``, nested tables flattened to dotted names."""
    for field in attrs.fields(type(value)):
        current = getattr(value, field.name)
        name = f"{prefix}.{field.name}"
        if attrs.has(type(current)) and not isinstance(current, Duration):
            yield from _fields(current, name)
        else:
            yield name, current


def guarded_settings(policy: Policy) -> Iterator[tuple[str, Any]]:
    """The number and switch settings of the guarded tables, as ``(dotted name, value)``."""
    for table in GUARDED_TABLES:
        for name, value in _fields(getattr(policy, table), table):
            if isinstance(value, bool | int | float | Duration) or name in SAFER:
                yield name, value


def _number(value: Any) -> float:
    return value.seconds if isinstance(value, Duration) else float(value)


def is_looser(direction: str, value: Any, default: Any) -> bool:
    """Whether ``value`` is looser than ``default`` for a setting safer in ``direction``."""
    if direction == "lower":
        return _number(value) > _number(default)
    if direction == "higher":
        return _number(value) < _number(default)
    if direction == "on":
        return bool(default) and not value
    if direction == "set":
        return bool(default) and not value
    if direction == "kept":
        return _number(default) > 0 and _number(value) == 0
    raise ValueError(f"unknown direction {direction!r}")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Duration):
        return f'"{value}"'
    return repr(value)


def relaxed_settings(policy: Policy) -> list[str]:
    """What in ``policy`` is looser than safe, one sentence each (none when acknowledged)."""
    if policy.policy.allow_relaxed:
        return []
    found: list[str] = []
    cooldown = policy.breaker.cooldown
    if policy.breaker.on_open == "cooldown" and cooldown.seconds < MIN_COOLDOWN:
        found.append(
            f'breaker.cooldown = "{cooldown}" is under the 30-minute minimum: a stalled loop '
            "would retry the same failing state in quick succession"
        )
    defaults = dict(guarded_settings(Policy()))
    for name, value in guarded_settings(policy):
        direction = SAFER.get(name)
        if direction is None or name == "breaker.cooldown":
            continue  # the cooldown has its own minimum, above
        default = defaults[name]
        if not is_looser(direction, value, default):
            continue
        if direction in ("on", "set", "kept"):
            found.append(
                f"{name} = {_shown(value)} turns off what the shipped default "
                f"{_shown(default)} keeps on"
            )
        else:
            found.append(
                f"{name} = {_shown(value)} is looser than the shipped default {_shown(default)}"
            )
    return found


def relaxed_warnings(policy: Policy) -> list[str]:
    """:func:`relaxed_settings` as the warning lines the commands print."""
    return [f"warning: {text} ({_ACK})" for text in relaxed_settings(policy)]


def batch_relaxed_warnings(policy: Policy, loops: Iterable[tuple[str, Policy]]) -> list[str]:
    """The warnings of a policy and of each of its loops (``(change, policy)``), once each.

    A loop's own warning (its ``[loop.breaker]`` the loose one) names the loop.
    """
    found = relaxed_warnings(policy)
    for change, loop_policy in loops:
        for warning in relaxed_warnings(loop_policy):
            if warning not in found:
                found.append(warning.replace("warning: ", f"warning: loop {change}: ", 1))
    return found
