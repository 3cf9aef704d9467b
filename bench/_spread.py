"""Figures over repeated runs, printed the same way by every bench: min/median/max.

A shared machine is noisy: a single run's ratio can be off by a third. Each
bench repeats its measurement (three times by default) and prints the spread,
so a reader sees how much one figure can be trusted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """``min/median/max`` of ``values``, each formatted with ``fmt``."""
    if not values:
        raise ValueError("no figures to spread")
    low, mid, high = min(values), statistics.median(values), max(values)
    return "/".join(fmt.format(value) for value in (low, mid, high))
