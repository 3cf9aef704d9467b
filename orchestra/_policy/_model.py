"""The policy model: every tunable Forge has, with its default.

This module is the one place in the code where a default lives. Each table of
``forge.toml`` is a frozen attrs class; adding a table means adding a class and
one field of :class:`Policy`. Every field carries a ``doc`` used by
``forge policy show`` and by the commented ``policies/default.toml``.
"""

from typing import Any, TypeGuard, TypeVar

import attrs

from .._durations import Duration
from ._fields import (
    ConflictError,
    at_least,
    between,
    non_empty,
    optional,
    positive_duration,
    relative_paths,
)

MAX_ITERATIONS_CEILING = 50

_TABLES: set[type] = set()
_T = TypeVar("_T", bound=type)


def _doc(text: str, example: object = None) -> dict[str, Any]:
    """Field metadata: its documentation and, for a value that is unset by default, an example."""
    return {"doc": text, "example": example}


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
        validator=relative_paths,
        metadata=_doc("Where spec scenarios are found (directories, files or globs)."),
    )
    tests: tuple[str, ...] = attrs.field(
        default=("tests/",),
        validator=relative_paths,
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
class RunPolicy:
    """``[run]``: one bounded loop of ``forge run``, and each iteration of any loop."""

    max_iterations: int = attrs.field(
        default=5,
        validator=between(1, MAX_ITERATIONS_CEILING, what="an integer from 1 to 50 (the ceiling)"),
        metadata=_doc("Iterations a run may use; finishing them is not success. Ceiling 50."),
    )
    timeout: Duration = attrs.field(
        default=Duration(15 * 60),
        validator=positive_duration,
        metadata=_doc("Longest one iteration may run; past it the executor tree is stopped."),
    )
    grace: Duration = attrs.field(
        default=Duration(10),
        metadata=_doc("Time between SIGTERM and SIGKILL when an executor tree is stopped."),
    )
    done_marker: str = attrs.field(
        default="FORGE_DONE",
        validator=non_empty,
        metadata=_doc("A line of exactly this text (trimmed) signals that the work is done."),
    )
    executor: str = attrs.field(
        default="",
        metadata=_doc('A named executor definition (executors/<name>.toml), e.g. "claude".'),
    )
    cmd: str = attrs.field(
        default="", metadata=_doc("Or a shell command run with sh -c as the executor.")
    )
    prompt: str = attrs.field(
        default="", metadata=_doc("The prompt a named executor receives as {prompt}.")
    )

    def __attrs_post_init__(self) -> None:
        if self.executor and self.cmd:
            raise ConflictError("cmd", "set either run.cmd or run.executor, not both")


@_table
@attrs.frozen
class BudgetPolicy:
    """``[budget]``: spend ceilings per change; an absent ceiling can never open the gate."""

    max_tokens: int | None = attrs.field(
        default=None,
        validator=optional(at_least(1)),
        metadata=_doc("Tokens (input and output) a change may spend.", example=2_000_000),
    )
    max_tool_calls: int | None = attrs.field(
        default=None,
        validator=optional(at_least(1)),
        metadata=_doc("Tool calls a change's executors may make.", example=500),
    )
    max_cost_usd: float | None = attrs.field(
        default=None,
        validator=optional(between(0.0, float("inf"), what="a cost of 0 or more")),
        metadata=_doc("Cost in US dollars a change may spend.", example=20.0),
    )

    @property
    def has_ceiling(self) -> bool:
        return any(v is not None for v in (self.max_tokens, self.max_tool_calls, self.max_cost_usd))


@_table
@attrs.frozen
class Policy:
    """The effective policy: built-in defaults, extended files, forge.toml, flags."""

    verify: VerifyPolicy = attrs.field(
        factory=VerifyPolicy, metadata=_doc("forge verify and its circuit-breaker.")
    )
    run: RunPolicy = attrs.field(
        factory=RunPolicy, metadata=_doc("forge run: the bounded loop and its executor.")
    )
    budget: BudgetPolicy = attrs.field(
        factory=BudgetPolicy, metadata=_doc("The spend budget gate.")
    )


def is_table(annotation: object) -> TypeGuard[type]:
    """Whether a field's type is a table of its own rather than a value."""
    return isinstance(annotation, type) and annotation in _TABLES
