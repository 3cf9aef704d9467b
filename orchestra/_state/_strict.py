"""The one strict converter of typed payloads: JSON values into an attrs class's fields.

Each class's converter is built once, from its fields' resolved types (the
annotations evaluated as :func:`typing.get_type_hints` would, not read as
strings), the first time a value of that class is structured. The rules are JSON's:

- an int stands for a float (and becomes one); a bool is neither an int nor a float;
- ``None`` fits only a type that allows it; ``Any`` takes anything;
- ``dict[str, X]`` wants string keys and values that fit ``X``; ``list[X]`` and
  ``tuple[X, ...]`` want a JSON array whose items fit ``X``;
- an attrs class wants a JSON object: its required fields present and each
  value fitting its field; a key it does not declare is not read (a newer
  forge may have written it).

A value that does not fit raises :class:`Misfit` naming where
(``rate_limit.resets_at: expected a number, got a string ('soon')``).

Hand-built rather than a cattrs converter: ``forge timeline`` decodes every
event and must start fast, and importing cattrs alone costs about 20 ms, a
quarter of the command's start-up (the YAML state files, read by commands
that load far more, keep their cattrs converter).
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

T = TypeVar("T")
# A check takes a JSON value and the path it was found at, and returns the
# value as its type holds it, or raises Misfit.
Check = Callable[[Any, str], Any]

_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


class Misfit(ValueError):
    """A JSON value that does not fit its field's type."""


def _misfit(path: str, wanted: str, value: object) -> Misfit:
    got = _NAMES.get(type(value), type(value).__name__)
    return Misfit(f"{path}: expected {wanted}, got {got} ({value!r})")


def _anything(value: Any, _path: str) -> Any:
    return value


def _none(value: Any, path: str) -> None:
    if value is not None:
        raise _misfit(path, "null", value)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _misfit(path, "a string", value)
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _misfit(path, "a boolean", value)
    return value


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _misfit(path, "an integer", value)
    return value


def _float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _misfit(path, "a number", value)
    return float(value)


_SCALARS: dict[object, Check] = {
    Any: _anything,
    type(None): _none,
    str: _str,
    bool: _bool,
    int: _int,
    float: _float,
}


def _optional(check: Check) -> Check:
    def optional(value: Any, path: str) -> Any:
        return None if value is None else check(value, path)

    return optional


def _union(checks: list[Check], wanted: str) -> Check:
    def union(value: Any, path: str) -> Any:
        for check in checks:
            try:
                return check(value, path)
            except Misfit:
                continue
        raise _misfit(path, wanted, value)

    return union


def _list(item: Check, make: type[list[Any]] | type[tuple[Any, ...]]) -> Check:
    def sequence(value: Any, path: str) -> Any:
        if not isinstance(value, list | tuple):
            raise _misfit(path, "a list", value)
        if item is _anything:
            return make(value)
        return make(item(v, f"{path}[{i}]") for i, v in enumerate(value))

    return sequence


def _dict(item: Check) -> Check:
    def mapping(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _misfit(path, "an object", value)
        for key in value:
            if not isinstance(key, str):
                raise _misfit(f"{path} key", "a string", key)
        if item is _anything:
            return value
        return {k: item(v, f"{path}.{k}") for k, v in value.items()}

    return mapping


def _union_check(args: tuple[Any, ...]) -> Check:
    options = [a for a in args if a is not type(None)]
    if len(options) == 1:
        inner = check_for(options[0])
    else:
        # Tried in order: put float after int where both are allowed.
        inner = _union([check_for(a) for a in options], " or ".join(map(str, options)))
    return _optional(inner) if len(options) < len(args) else inner


def check_for(annotation: Any) -> Check:
    """The check of one resolved type (see the module's docstring for the rules).

    Raises:
        TypeError: for a type this converter has no rule for.
    """
    scalar = _SCALARS.get(annotation)
    if scalar is not None:
        return scalar
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return _union_check(args)
    if origin is list and len(args) == 1:
        return _list(check_for(args[0]), list)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _list(check_for(args[0]), tuple)
    if origin is dict and len(args) == 2 and args[0] is str:
        return _dict(check_for(args[1]))
    if isinstance(annotation, type) and attrs.has(annotation):
        return _object(annotation)
    raise TypeError(f"no strict rule for {annotation!r}")


class Shape:
    """How to structure one attrs class: each field's check, and which are required.

    ``unstructure`` holds, for the fields whose values are not JSON as they
    are (an attrs instance, a tuple), how :meth:`plain` turns them back. A
    plain class rather than an attrs one: it is built at start-up.
    """

    __slots__ = ("checks", "required", "unstructure")

    def __init__(
        self,
        checks: Mapping[str, Check],
        required: frozenset[str],
        unstructure: Mapping[str, Callable[[Any], Any]],
    ) -> None:
        self.checks = checks
        self.required = required
        self.unstructure = unstructure

    def plain(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` (field name to value), changed in place to JSON values, and returned."""
        for name, unstructure in self.unstructure.items():
            value = values.get(name)
            if value is not None:
                values[name] = unstructure(value)
        return values

    def values(self, data: Mapping[str, Any], path: str = "") -> dict[str, Any]:
        """The fields ``data`` holds, converted (keys it does not declare are not read).

        Raises:
            Misfit: when a value does not fit, or a required field is missing.
        """
        missing = self.required.difference(data)
        if missing:
            raise Misfit(f"{path or 'the object'}: missing {', '.join(sorted(missing))}")
        prefix = f"{path}." if path else ""
        checks = self.checks
        return {
            key: checks[key](value, prefix + key) for key, value in data.items() if key in checks
        }


_SHAPES: dict[type, Shape] = {}
# Each annotation's text, as resolved in its module: the events' fields repeat a
# dozen texts (``str | None``, ``int`` ...), each evaluated once.
_RESOLVED: dict[tuple[str, str], Any] = {}


def _resolved_hints(cls: type) -> dict[str, Any]:
    """The class's annotations resolved, as :func:`typing.get_type_hints` gives them.

    Each text is evaluated once per module rather than once per field of
    every class (``get_type_hints`` would cost ``forge timeline`` some
    milliseconds on every start).
    """
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        module = base.__module__
        namespace = vars(sys.modules[module])
        for name, text in inspect.get_annotations(base).items():
            if not isinstance(text, str):
                hints[name] = text
                continue
            key = (module, text)
            if key not in _RESOLVED:
                # Forge's own annotations, evaluated as get_type_hints evaluates them.
                _RESOLVED[key] = eval(text, namespace)
            hints[name] = _RESOLVED[key]
    return hints


def shape_of(cls: type) -> Shape:
    """The shape of an attrs class: built the first time it is asked for, then kept."""
    found = _SHAPES.get(cls)
    if found is None:
        hints = _resolved_hints(cls)
        fields = attrs.fields(cls)
        found = Shape(
            checks={f.name: check_for(hints[f.name]) for f in fields},
            required=frozenset(f.name for f in fields if f.default is attrs.NOTHING),
            unstructure={
                f.name: plain
                for f in fields
                if (plain := _unstructure_for(hints[f.name])) is not None
            },
        )
        _SHAPES[cls] = found
    return found


def _unstructure_for(annotation: Any) -> Callable[[Any], Any] | None:
    """How a value of this type becomes JSON, when it is not JSON as it is."""
    if isinstance(annotation, type) and attrs.has(annotation):
        return attrs.asdict
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return list
    if origin is typing.Union or origin is types.UnionType:
        options = [_unstructure_for(a) for a in typing.get_args(annotation)]
        found = [o for o in options if o is not None]
        return found[0] if len(found) == 1 else None
    return None


def _object(cls: type) -> Check:
    def structure_object(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _misfit(path, "an object", value)
        return cls(**shape_of(cls).values(value, path))

    return structure_object


def strict_structure(cls: type[T], value: Any, path: str = "") -> T:
    """A JSON object as an instance of the attrs class ``cls``, strictly.

    Raises:
        Misfit: when it does not fit (see the module's docstring).
    """
    result: T = _object(cls)(value, path or cls.__name__)
    return result
