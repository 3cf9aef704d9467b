"""Field validators for policy tables.

Each raises :class:`FieldError`, which names the field it guards, so that the
loader can report ``forge.toml: verify.max_failures: expected an integer >= 1,
got 0`` even though attrs runs validators inside ``__init__``, where cattrs no
longer knows which attribute it was structuring.

Each is also a :class:`Check` that says what it accepts in JSON Schema words
(``{"minimum": 1}``), from which ``forge policy schema`` is generated: the
bound an editor shows is the bound the loader enforces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
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

# A path or glob inside the project, as _inside decides: not blank, not absolute
# or home-relative, no ".." segment (either slash separates).
INSIDE_PATTERN = r"^(?![/~])(?!(?:.*[/\\])?\.\.(?:[/\\]|$))(?=.*\S)"

# A duration as parse_duration reads it ("90s", "1h30m", "2D", " 15m ", "900"),
# in JSON Schema's regular expressions, which have no flags: hence [dD].
_NUMBER = r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_SPELLED = "".join(f"(?:{_NUMBER}[{unit}{unit.upper()}])?" for unit in "dhms")
DURATION_PATTERN = rf"^(?=\s*\S)\s*(?:{_SPELLED}|{_NUMBER})\s*$"
# Longer than zero: some digit from 1 to 9 outside an exponent.
POSITIVE_DURATION_PATTERN = r"^(?=(?:[^eE]|[eE][+-]?\d+)*?[1-9])" + DURATION_PATTERN[1:]


@attrs.frozen
class Check:
    """A field validator and what it accepts, as JSON Schema keywords."""

    function: Validator
    schema: Mapping[str, Any]

    def __call__(self, instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        self.function(instance, attribute, value)


def schema_of(validator: object) -> Mapping[str, Any]:
    """The JSON Schema keywords of a field's validator (none for a plain function)."""
    return validator.schema if isinstance(validator, Check) else {}


def at_least(minimum: int) -> Validator:
    """An integer no smaller than ``minimum``."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
        if value < minimum:
            raise FieldError(attribute.name, f"an integer >= {minimum}", value)

    return Check(check, {"minimum": minimum})


def between(low: float, high: float, *, what: str | None = None) -> Validator:
    """An integer or float within ``[low, high]``."""
    expected = what or f"a number from {low:g} to {high:g}"

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
        if not low <= value <= high:
            raise FieldError(attribute.name, expected, value)

    bounds = {"minimum": low, "maximum": high}
    return Check(check, {key: bound for key, bound in bounds.items() if math.isfinite(bound)})


def in_choices(choices: tuple[str, ...]) -> Validator:
    """One of a few words."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in choices:
            raise FieldError(attribute.name, "one of " + ", ".join(repr(c) for c in choices), value)

    return Check(check, {"enum": list(choices)})


def in_each(choices: tuple[str, ...]) -> Validator:
    """A list of words, each one of a few."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
        for index, entry in enumerate(value):
            if entry not in choices:
                expected = "one of " + ", ".join(repr(c) for c in choices)
                raise FieldError(f"{attribute.name}[{index}]", expected, entry)

    return Check(check, {"items": {"enum": list(choices)}})


def _non_empty_list(
    _instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]
) -> None:
    """At least one entry, none of them blank."""
    if not value:
        raise FieldError(attribute.name, "a list of at least one entry", list(value))
    for index, entry in enumerate(value):
        if not entry.strip():
            raise FieldError(f"{attribute.name}[{index}]", "a non-empty string", entry)


non_empty_list = Check(_non_empty_list, {"minItems": 1, "items": {"pattern": r"\S"}})


def optional(validator: Validator) -> Validator:
    """Apply ``validator`` unless the value is unset (None)."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            validator(instance, attribute, value)

    # TOML has no null: an unset value is an absent key, so the schema is the value's.
    return Check(check, schema_of(validator))


def _relative_paths(
    _instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]
) -> None:
    """Paths or globs inside the project: relative, never climbing out with ``..``."""
    for index, entry in enumerate(value):
        if not _inside(entry):
            raise FieldError(
                f"{attribute.name}[{index}]",
                "a path or glob relative to the project, inside it",
                entry,
            )


relative_paths = Check(_relative_paths, {"items": {"pattern": INSIDE_PATTERN}})


def _relative_path(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    """One path inside the project (relative, never climbing out with ``..``)."""
    if not _inside(value):
        raise FieldError(attribute.name, "a path relative to the project, inside it", value)


relative_path = Check(_relative_path, {"pattern": INSIDE_PATTERN})


def _relative_path_or_none(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    """One path inside the project, or "" for none."""
    if value and not _inside(value):
        raise FieldError(
            attribute.name, 'a path relative to the project, inside it, or "" for none', value
        )


relative_path_or_none = Check(_relative_path_or_none, {"pattern": f"^$|{INSIDE_PATTERN}"})


def _inside(entry: str) -> bool:
    parts = entry.replace("\\", "/").split("/")
    return bool(entry.strip()) and not entry.startswith(("/", "~")) and ".." not in parts


def _non_empty(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    """A string with something in it besides whitespace."""
    if not value.strip():
        raise FieldError(attribute.name, "a non-empty string", value)


non_empty = Check(_non_empty, {"pattern": r"\S"})


def _positive_duration(_instance: Any, attribute: attrs.Attribute[Any], value: Duration) -> None:
    """A duration longer than zero."""
    if value.seconds <= 0:
        raise FieldError(attribute.name, "a duration longer than 0s", str(value))


positive_duration = Check(
    _positive_duration, {"pattern": POSITIVE_DURATION_PATTERN, "exclusiveMinimum": 0}
)
