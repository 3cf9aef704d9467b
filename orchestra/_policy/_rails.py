"""Safe-policy rails: settings looser than Forge ships, said out loud.

A cooldown under 30 minutes lets a stalled loop retry the same failing state
over and over; a trip threshold looser than the shipped default lets a loop
spin longer before anyone hears of it. Neither is refused (a test suite or a
demo wants seconds), but ``forge policy check``, ``forge run``'s plan and
``forge supervise --dry-run`` warn about each one until ``[policy]
allow_relaxed = true`` acknowledges them.
"""

from __future__ import annotations

from ._model import Policy

MIN_COOLDOWN = 30 * 60.0
_ACK = "set [policy] allow_relaxed = true to acknowledge"

# (table, key, looser when the value is "higher" or "lower" than the default)
_THRESHOLDS = (
    ("verify", "max_failures", "higher"),
    ("breaker", "max_opens", "higher"),
    ("stagnation", "no_progress", "higher"),
    ("stagnation", "identical_errors", "higher"),
    ("stagnation", "permission_denials", "higher"),
    ("stagnation", "output_decline", "higher"),
    ("stagnation", "output_min_lines", "higher"),
    ("stagnation", "test_fix_ratio", "higher"),
    ("recovery", "watch", "lower"),
)


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
    defaults = Policy()
    for table, key, looser in _THRESHOLDS:
        value = getattr(getattr(policy, table), key)
        default = getattr(getattr(defaults, table), key)
        if (looser == "higher" and value > default) or (looser == "lower" and value < default):
            found.append(
                f"{table}.{key} = {value!r} is looser than the shipped default {default!r}"
            )
    return found


def relaxed_warnings(policy: Policy) -> list[str]:
    """:func:`relaxed_settings` as the warning lines the commands print."""
    return [f"warning: {text} ({_ACK})" for text in relaxed_settings(policy)]
