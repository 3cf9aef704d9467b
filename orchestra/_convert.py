"""Strict cattrs converters, one per format.

cattrs' stock hooks are lenient in ways a safety tool cannot afford: they turn
``"3"`` into ``3``, ``2.7`` into ``2`` and ``true`` into ``1``. The hooks here
accept a value only when it already has the expected type, so a typo in a
policy or a damaged state file is an error rather than a silent guess.
"""

from __future__ import annotations

from typing import Any

from cattrs import Converter

from ._durations import Duration, parse_duration


def type_name(value: object) -> str:
    """How a value's type is named in error messages."""
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "a list",
        dict: "a table",
        type(None): "nothing",
    }.get(type(value), type(value).__name__)


def _strict_int(value: Any, _type: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type_name(value)} ({value!r})")
    return value


def _strict_float(value: Any, _type: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type_name(value)} ({value!r})")
    return float(value)


def _strict_bool(value: Any, _type: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {type_name(value)} ({value!r})")
    return value


def _strict_str(value: Any, _type: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type_name(value)} ({value!r})")
    return value


def _strict_tuple_of_str(value: Any, _type: type) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list of strings, got {type_name(value)} ({value!r})")
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"expected a list of strings, found {type_name(item)} ({item!r})")
    return tuple(value)


def make_strict(converter: Converter) -> Converter:
    """Install the strict scalar hooks (and durations) on a preconf converter."""
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook_func(
        lambda annotation: annotation == tuple[str, ...], _strict_tuple_of_str
    )
    converter.register_structure_hook(Duration, lambda value, _type: parse_duration(value))
    converter.register_unstructure_hook(Duration, str)
    converter.register_unstructure_hook(tuple, list)
    return converter
