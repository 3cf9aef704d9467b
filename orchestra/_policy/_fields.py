"""Field validators for policy tables.

Each raises :class:`FieldError`, which names the field it guards, so that the
loader can report ``forge.toml: verify.max_failures: expected an integer >= 1,
got 0`` even though attrs runs validators inside ``__init__``, where cattrs no
longer knows which attribute it was structuring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .._durations import Duration


class FieldError(ValueError):
    """A policy value is of the right type but out of range."""

    def __init__(self, field: str, expected: str, got: object) -> None:
        super().__init__(f"{field}: expected {expected}, got {got!r}")
        self.field = field
        self.expected = expected
        self.got = got


Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def at_least(minimum: int) -> Validator:
    """An integer no smaller than ``minimum``."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
        if value < minimum:
            raise FieldError(attribute.name, f"an integer >= {minimum}", value)

    return check


def between(low: float, high: float) -> Validator:
    """An integer or float within ``[low, high]``."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
        if not low <= value <= high:
            raise FieldError(attribute.name, f"a number from {low:g} to {high:g}", value)

    return check


def positive_duration(_instance: Any, attribute: attrs.Attribute[Any], value: Duration) -> None:
    """A duration longer than zero."""
    if value.seconds <= 0:
        raise FieldError(attribute.name, "a duration longer than 0s", str(value))
