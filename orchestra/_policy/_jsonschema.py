"""forge.toml as a JSON Schema (draft 2020-12), generated from the policy model.

Editors that validate TOML against a JSON Schema (Taplo, and Even Better TOML
in VS Code, which is built on it) then complete every table and key, show its
one-line documentation and default, and underline a misspelt key or a value
out of range while it is typed. Types come from the model's annotations,
bounds from its validators (each a :class:`~._fields.Check` that says what it
accepts), descriptions from the ``doc`` every field carries; ``forge policy
schema`` prints it and ``policies/forge.schema.json`` ships it, pinned by a
test. What a schema cannot say (two keys of one table that must not both be
set, ``cooldown_max`` against ``cooldown``) is still checked when the policy
loads.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from .._durations import Duration
from .._names import CHANGE_NAME
from ._dump import policy_as_dict
from ._fields import DURATION_PATTERN, schema_of
from ._model import LOOP_POLICY_TABLES, Policy, is_table

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Next to the shipped policies, where a ``#:schema ./forge.schema.json`` line finds it.
SCHEMA_FILE = "forge.schema.json"


# A [[loop]] table's own keys. The class that reads them belongs to the
# supervisor; a test holds these to its fields and defaults.
_LOOP_KEYS: dict[str, dict[str, Any]] = {
    "change": {
        "description": "The change this loop works on (required); two loops may not share one.",
        "type": "string",
        "pattern": f"^{CHANGE_NAME.pattern}$",
    },
    "executor": {"run_key": "executor"},
    "cmd": {"run_key": "cmd"},
    "prompt": {"run_key": "prompt"},
    "max_iterations": {"run_key": "max_iterations"},
    "dir": {
        "description": "Where the loop works, relative to the file that declares it "
        '("": the project).',
        "type": "string",
        "default": "",
    },
    "worktree": {
        "description": "Work in its own git worktree on branch forge/<change>, reused on a rerun.",
        "type": "boolean",
        "default": False,
    },
    "base": {
        "description": "What the worktree's branch starts from.",
        "type": "string",
        "default": "HEAD",
    },
    "repo": {
        "description": "A fleet loop's git URL (instead of dir): each host clones it.",
        "type": "string",
        "default": "",
    },
    "ref": {
        "description": "What a repo loop's branch forge/<change> starts from.",
        "type": "string",
        "default": "HEAD",
    },
    "push": {
        "description": "Push a repo loop's branch forge/<change> when the loop ends.",
        "type": "boolean",
        "default": False,
    },
}

_SCALARS: dict[object, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    tuple[str, ...]: {"type": "array", "items": {"type": "string"}},
    # parse_duration reads a spelled duration or a number of seconds.
    Duration: {"type": ["string", "number"], "pattern": DURATION_PATTERN, "minimum": 0},
}


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of a policy file: forge.toml, a file it extends, a batch file.

    Every table and key of :class:`Policy` with its type, bounds, default and
    documentation; ``extends``; and the ``[[loop]]`` tables. Unknown keys are
    refused everywhere, as the loader refuses them.
    """
    defaults = policy_as_dict(Policy())
    definitions: dict[str, Any] = {}
    properties: dict[str, Any] = {
        "extends": {
            "description": "Policy files this one stands on, lowest first: a policy shipped "
            'with Forge by name ("default") or a path relative to this file.',
            "type": "array",
            "items": {"type": "string", "minLength": 1},
        }
    }
    for field in attrs.fields(Policy):
        if is_table(field.type):
            _define_table(definitions, field.name, field.type, defaults[field.name])
            properties[field.name] = {
                "description": _doc(field),
                "$ref": f"#/$defs/{field.name}",
            }
    definitions["loop"] = _loop_definition(definitions)
    properties["loop"] = {
        "description": "[[loop]]: the loops forge supervise runs, each with its own "
        "overrides of " + ", ".join(f"[{name}]" for name in LOOP_POLICY_TABLES) + ".",
        "type": "array",
        "items": {"$ref": "#/$defs/loop"},
    }
    return {
        "$schema": DIALECT,
        "title": "forge.toml",
        "description": "A Forge policy file. Generated from the policy model by "
        "`forge policy schema`.",
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "$defs": definitions,
    }


def policy_json_schema_text() -> str:
    """:func:`policy_json_schema` as the JSON text ``forge policy schema`` prints."""
    return json.dumps(policy_json_schema(), indent=2, ensure_ascii=False) + "\n"


def _define_table(
    definitions: dict[str, Any], dotted: str, cls: type, defaults: Mapping[str, Any]
) -> None:
    properties: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if is_table(field.type):
            _define_table(definitions, f"{dotted}.{field.name}", field.type, defaults[field.name])
            properties[field.name] = {
                "description": _doc(field),
                "$ref": f"#/$defs/{dotted}.{field.name}",
            }
        else:
            properties[field.name] = _key_schema(field, defaults[field.name])
    definitions[dotted] = {
        "description": _summary(cls),
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }


def _key_schema(field: attrs.Attribute[Any], default: object) -> dict[str, Any]:
    annotation = _without_none(field.type)
    if annotation not in _SCALARS:
        raise TypeError(f"{field.name}: no JSON Schema for the type {annotation!r}")
    schema: dict[str, Any] = {"description": _doc(field)}
    schema.update(json.loads(json.dumps(_SCALARS[annotation])))  # a copy to add to
    for keyword, value in schema_of(field.validator).items():
        if keyword == "items":
            schema["items"] = {**schema["items"], **value}
        else:
            schema[keyword] = value
    if default is not None:
        schema["default"] = default
    elif field.metadata.get("example") is not None:
        # Unset by default: TOML has no null, so an unset key is simply absent.
        schema["examples"] = [field.metadata["example"]]
    return schema


def _loop_definition(definitions: Mapping[str, Any]) -> dict[str, Any]:
    run_keys = definitions["run"]["properties"]
    properties: dict[str, Any] = {}
    for key, spec in _LOOP_KEYS.items():
        if "run_key" in spec:
            shared = dict(run_keys[spec["run_key"]])
            shared.pop("default", None)  # unset here means: the [run] value applies
            shared["description"] = f"Shorthand for [run] {spec['run_key']}, this loop only: " + (
                shared["description"][:1].lower() + shared["description"][1:]
            )
            properties[key] = shared
        else:
            properties[key] = spec
    for name in LOOP_POLICY_TABLES:
        properties[name] = {
            "description": f"This loop's own [{name}] values, laid over the policy's.",
            "$ref": f"#/$defs/{name}",
        }
    return {
        "description": "One loop of forge supervise.",
        "type": "object",
        "additionalProperties": False,
        "required": ["change"],
        "properties": properties,
    }


def _without_none(annotation: object) -> object:
    """``int | None`` is ``int``: TOML has no null; an unset value is an absent key."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _doc(field: attrs.Attribute[Any]) -> str:
    return str(field.metadata.get("doc", ""))


def _summary(cls: type) -> str:
    """The first paragraph of a table's docstring, as plain text without its ``[table]:``."""
    paragraph = inspect.cleandoc(cls.__doc__ or "").split("\n\n", 1)[0]
    text = " ".join(re.sub(r"^``\[[a-z_.]+\]``:\s*", "", paragraph).replace("``", "").split())
    return text[:1].upper() + text[1:]
