"""The reliability suite's marker and the rule that keeps its slow part out of ``make test``.

Tests marked ``reliability`` (hundreds of kill -9 trials, big hypothesis runs)
run only with ``-m reliability`` or ``FORGE_RELIABILITY=1``; the rest of this
folder is fast and runs with every ``make test``.
"""

from __future__ import annotations

import os

import pytest

from ..conftest import repo as repo

MARKER = "reliability"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: slow fault-injection tests; run with -m {MARKER} or FORGE_RELIABILITY=1",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = MARKER in (config.getoption("markexpr", "") or "")
    if wanted or os.environ.get("FORGE_RELIABILITY") == "1":
        return
    skip = pytest.mark.skip(reason=f"slow: run with -m {MARKER} or FORGE_RELIABILITY=1")
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item.add_marker(skip)
