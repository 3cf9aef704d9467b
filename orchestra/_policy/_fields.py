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

    def describe(self) -> str:
        """What is wrong, without the field's name."""
        return f"expected {self.expected}, got {self.got!r}"


class ConflictError(FieldError):
    """Two fields of one table that must not both be set."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(field, message, None)
        self.message = message

    def describe(self) -> str:
        return self.message


Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def at_least(minimum: int) -> Validator:
    """An integer no smaller than ``minimum``."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
        if value < minimum:
            raise FieldError(attribute.name, f"an integer >= {minimum}", value)

    return check


def between(low: float, high: float, *, what: str | None = None) -> Validator:
    """An integer or float within ``[low, high]``."""
    expected = what or f"a number from {low:g} to {high:g}"

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
        if not low <= value <= high:
            raise FieldError(attribute.name, expected, value)

    return check


def in_choices(choices: tuple[str, ...]) -> Validator:
    """One of a few words."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in choices:
            raise FieldError(attribute.name, "one of " + ", ".join(repr(c) for c in choices), value)

    return check


def optional(validator: Validator) -> Validator:
    """Apply ``validator`` unless the value is unset (None)."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            validator(instance, attribute, value)

    return check


def relative_paths(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    """Paths or globs inside the project: relative, never climbing out with ``..``."""
    for index, entry in enumerate(value):
        if not _inside(entry):
            raise FieldError(
                f"{attribute.name}[{index}]",
                "a path or glob relative to the project, inside it",
                entry,
            )


def relative_path(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    """One path inside the project (relative, never climbing out with ``..``)."""
    if not _inside(value):
        raise FieldError(attribute.name, "a path relative to the project, inside it", value)


def _inside(entry: str) -> bool:
    parts = entry.replace("\\", "/").split("/")
    return bool(entry.strip()) and not entry.startswith(("/", "~")) and ".." not in parts


def non_empty(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    """A string with something in it besides whitespace."""
    if not value.strip():
        raise FieldError(attribute.name, "a non-empty string", value)


def positive_duration(_instance: Any, attribute: attrs.Attribute[Any], value: Duration) -> None:
    """A duration longer than zero."""
    if value.seconds <= 0:
        raise FieldError(attribute.name, "a duration longer than 0s", str(value))
