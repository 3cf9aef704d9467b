"""Two effective policies compared key by key, each value with the layer that set it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._dump import policy_as_dict
from ._load import LoadedPolicy


@attrs.frozen
class Difference:
    """One key whose effective value differs, and where each side's value came from.

    Values are as ``forge policy show --json`` gives them: durations in their
    canonical spelling (so ``"60s"`` and ``"1m"`` are the same value), None
    where the key is unset.
    """

    key: str
    a: Any
    b: Any
    a_source: str
    b_source: str


def policy_differences(a: LoadedPolicy, b: LoadedPolicy) -> list[Difference]:
    """The keys whose effective values differ between ``a`` and ``b``, sorted by key."""
    a_values = policy_as_dict(a.policy)
    b_values = policy_as_dict(b.policy)
    found = []
    for key in sorted(a.sources):
        a_value, b_value = _lookup(a_values, key), _lookup(b_values, key)
        if a_value != b_value:
            found.append(
                Difference(
                    key=key,
                    a=a_value,
                    b=b_value,
                    a_source=a.sources[key],
                    b_source=b.sources.get(key, "default"),
                )
            )
    return found


def _lookup(values: Mapping[str, Any], dotted: str) -> Any:
    current: Any = values
    for part in dotted.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    return current
