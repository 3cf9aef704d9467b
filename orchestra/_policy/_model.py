"""The policy model: every tunable Forge has, with its default.

This module is the one place in the code where a default lives. Each table of
``forge.toml`` is a frozen attrs class; adding a table means adding a class and
one field of :class:`Policy`. Every field carries a ``doc`` used by
``forge policy show`` and by the commented ``policies/default.toml``.
"""

from typing import Any, TypeGuard, TypeVar

import attrs

from .._durations import Duration
from ._fields import at_least, positive_duration

_TABLES: set[type] = set()
_T = TypeVar("_T", bound=type)


def _doc(text: str) -> dict[str, Any]:
    return {"doc": text}


def _table(cls: _T) -> _T:
    """Mark an attrs class as a table of the policy (rather than a value type)."""
    _TABLES.add(cls)
    return cls


@_table
@attrs.frozen
class VerifyPolicy:
    """``[verify]``: what ``forge verify`` runs and when its breaker opens."""

    command: str = attrs.field(
        default="pytest -q --junitxml=.forge/junit.xml",
        metadata=_doc('Test command, run with sh -c from the project root; "" runs none.'),
    )
    lint: str = attrs.field(
        default="", metadata=_doc('Lint command, run after the tests; "" runs none.')
    )
    specs: tuple[str, ...] = attrs.field(
        default=("specs/",),
        metadata=_doc("Where spec scenarios are found (directories, files or globs)."),
    )
    tests: tuple[str, ...] = attrs.field(
        default=("tests/",),
        metadata=_doc('Where tests name the scenarios they cover ("scenario: <id>").'),
    )
    max_failures: int = attrs.field(
        default=3,
        validator=at_least(1),
        metadata=_doc("Consecutive verify failures that open the breaker of a change."),
    )
    timeout: Duration = attrs.field(
        default=Duration(15 * 60),
        validator=positive_duration,
        metadata=_doc("Longest a single verify command may run before it counts as failed."),
    )


@_table
@attrs.frozen
class Policy:
    """The effective policy: built-in defaults, extended files, forge.toml, flags."""

    verify: VerifyPolicy = attrs.field(
        factory=VerifyPolicy, metadata=_doc("forge verify and its circuit-breaker.")
    )


def is_table(annotation: object) -> TypeGuard[type]:
    """Whether a field's type is a table of its own rather than a value."""
    return isinstance(annotation, type) and annotation in _TABLES
