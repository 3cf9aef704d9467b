"""Writing a policy back out: plain TOML, a dict, and the commented reference."""

from __future__ import annotations

from typing import Any, cast

import attrs
import tomli_w

from .._durations import Duration
from ._model import Policy, is_table


def verify_digest(policy: Policy) -> str:
    """A short digest of the policy's ``[verify]``: which checks a verdict was reached under.

    A Stop hook's verdict stands for a loop's iteration only when it was
    reached under the loop's own checks, whatever told the hook what they were.
    """
    import hashlib
    import json

    table = _plain(policy.verify)
    text = json.dumps(table, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def policy_as_dict(policy: Policy) -> dict[str, Any]:
    """The policy as plain data (durations as strings; unset values as None), for JSON."""
    data: dict[str, Any] = _plain(policy)
    return data


_SCALARS = (str, int, float, bool, type(None))


def _plain(value: object) -> Any:
    """``value`` as the policy converter unstructures it: tables as dicts, durations as
    strings, lists of strings as lists.

    Written out rather than asked of the converter: cattrs generates (and
    compiles) an unstructuring function per table on first use, a large part
    of ``forge policy show``'s time. tests/test_policy_e2e.py holds the two equal.

    Raises:
        TypeError: a value of a type the policy model does not use.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Duration):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if attrs.has(type(value)):
        fields = attrs.fields(cast("type[attrs.AttrsInstance]", type(value)))
        return {field.name: _plain(getattr(value, field.name)) for field in fields}
    raise TypeError(f"a policy holds no {type(value).__name__} ({value!r})")


def policy_as_toml(policy: Policy) -> str:
    """The policy as TOML that loads back to an equal policy (TOML has no null: unset is absent)."""
    return tomli_w.dumps(_without_none(policy_as_dict(policy)))


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {
        key: _without_none(value) if isinstance(value, dict) else value
        for key, value in data.items()
        if value is not None
    }


def commented_toml(policy: Policy, header: str) -> str:
    """The policy as TOML with each table and key preceded by its documentation.

    This is how ``policies/default.toml`` is produced from the model, so the
    shipped reference can never drift from the defaults in the code.
    """
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    values = policy_as_dict(policy)
    for field in attrs.fields(Policy):
        if is_table(field.type):
            _table_lines(lines, field.name, field.type, values[field.name], field.metadata)
    return "\n".join(lines) + "\n"


def _table_lines(
    lines: list[str], dotted: str, cls: type, values: dict[str, Any], meta: Any
) -> None:
    lines.append("")
    lines.append(f"# {meta.get('doc', '')}")
    lines.append(f"[{dotted}]")
    nested = []
    for field in attrs.fields(cls):
        if is_table(field.type):
            nested.append(field)  # TOML needs a table's own keys before its sub-tables
            continue
        lines.append(f"# {field.metadata.get('doc', '')}")
        value = values[field.name]
        if value is None:  # unset by default: show an example, commented out
            example = tomli_w.dumps({field.name: field.metadata.get("example")})
            lines.append("# " + example.rstrip("\n") + "   (unset by default)")
        else:
            lines.append(tomli_w.dumps({field.name: value}).rstrip("\n"))
    for field in nested:
        _table_lines(
            lines, f"{dotted}.{field.name}", field.type, values[field.name], field.metadata
        )
