"""The state files as forge writes them, read without PyYAML or cattrs.

A state file forge wrote is one flat mapping, a ``key: value`` line per field,
each value ``null``, ``true``, ``false``, a number, a plain word or a
single-quoted string. Reading such a file needs neither PyYAML (whose import
is a sizeable part of ``forge status``) nor a converter. This module reads
exactly that form and nothing more: any line it is not certain to read as
PyYAML's safe loader would (a comment, a folded line, a double-quoted string,
a word YAML 1.1 takes for a boolean or a date ...) and any value that does not
fit its field make it give up, and the caller reads the file the full way.
So it never accepts what the full way would reject, nor reads a value
differently.
"""

from __future__ import annotations

import re
from types import UnionType
from typing import Any, TypeVar, Union, cast, get_args, get_origin

import attrs

_T = TypeVar("_T")
_GIVE_UP = object()

_KEY = re.compile(r"[a-z_][a-z0-9_]*")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
# A subset of YAML 1.1's floats; float() reads each as PyYAML does.
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+(?:e[-+][0-9]+)?")
# A plain word starting with a letter: no YAML 1.1 resolver but the boolean
# and null ones (checked below) applies to it, and none of these characters
# comments a plain scalar; ": " (which would end it) is refused separately.
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./:()+, -]*[A-Za-z0-9_./()+-]|[A-Za-z_]")
# A word starting with a digit (a commit hash): letters and digits only, so no
# number or date resolver matches it unless it is 0b... or 0x... (excluded).
_DIGIT_WORD = re.compile(r"[1-9][0-9a-z]*|0[0-9ac-wyz][0-9a-z]*")
# YAML 1.1's booleans and nulls, other than the three spellings read here.
_RESOLVED_WORDS = frozenset({"yes", "no", "on", "off", "true", "false", "null", "y", "n", "~"})
_SCALARS = {"int": int, "float": float, "bool": bool, "str": str, "None": type(None)}


def _kinds(annotation: object) -> list[type] | None:
    """The scalar types a field's annotation allows, or None if it allows anything else.

    The annotation is a string until cattrs (or anyone) resolves the class's
    types, then the types themselves.
    """
    options: tuple[object, ...]
    if isinstance(annotation, str):
        options = tuple(_SCALARS.get(part.strip()) for part in annotation.split("|"))
    elif get_origin(annotation) in (UnionType, Union):
        options = get_args(annotation)
    else:
        options = (annotation,)
    kinds = [
        option for option in options if isinstance(option, type) and option in _SCALARS.values()
    ]
    return kinds if len(kinds) == len(options) else None


_LONGEST_INT = 40


def parse_flat(text: str) -> dict[str, Any] | None:
    """The mapping of a flat state document, or None when it is not one this module reads."""
    data: dict[str, Any] = {}
    lines = text.split("\n")
    if lines[-1] != "":
        return None  # forge ends every document with a newline
    for line in lines[:-1]:
        key, sep, raw = line.partition(": ")
        if not sep or not _KEY.fullmatch(key) or key in _RESOLVED_WORDS or key in data:
            return None
        value = _scalar(raw)
        if value is _GIVE_UP:
            return None
        data[key] = value
    return data if data else None


def _scalar(raw: str) -> object:
    if raw == "null":
        return None
    if raw == "true":
        return True
    if raw == "false":
        return False
    if _INT.fullmatch(raw):
        # Forge writes no count that long; Python refuses to convert one of
        # over 4,300 digits. A hand-made figure goes the full, checking way.
        return int(raw) if len(raw) <= _LONGEST_INT else _GIVE_UP
    if _FLOAT.fullmatch(raw):
        return float(raw)
    if len(raw) >= 2 and raw[0] == "'" and raw[-1] == "'":
        inner = raw[1:-1]
        # Inside single quotes only a doubled quote is special; what Python
        # calls printable YAML allows too.
        if inner.replace("''", "").count("'") or not inner.isprintable():
            return _GIVE_UP
        return inner.replace("''", "'")
    if raw[:1].isdigit():
        return raw if _DIGIT_WORD.fullmatch(raw) and not raw.isdigit() else _GIVE_UP
    if _WORD.fullmatch(raw) and ": " not in raw and raw.lower() not in _RESOLVED_WORDS:
        return raw
    return _GIVE_UP


def structure_flat(data: dict[str, Any], cls: type[_T]) -> _T | None:
    """``cls`` from a flat mapping, as the strict state converter would build it, or None.

    Only for an attrs class whose fields are scalars (``int``, ``float``,
    ``bool``, ``str``, ``None`` and unions of them); None for any other class,
    and for data the converter would reject: a value of the wrong type, a
    missing required key, a value a validator refuses. Unknown keys are
    ignored, as the converter ignores them.
    """
    target: Any = cls  # not narrowed by attrs.has: what it builds is still a _T
    if not attrs.has(target):
        return None
    values: dict[str, Any] = {}
    for field in attrs.fields(target):
        if not field.init or field.name.startswith("_"):
            return None
        kinds = _kinds(field.type)
        if kinds is None:
            return None  # not a scalar field: for the converter to read
        if field.name not in data:
            if field.default is attrs.NOTHING:
                return None
            continue
        value = data[field.name]
        kind = type(value)
        if kind in kinds:
            values[field.name] = value
        elif kind is int and float in kinds:
            values[field.name] = float(value)
        else:
            return None
    try:
        state: _T = cast("_T", target(**values))
    except (TypeError, ValueError):
        return None
    return state
