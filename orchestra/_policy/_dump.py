"""Writing a policy back out: plain TOML, a dict, and the commented reference."""

from __future__ import annotations

from typing import Any

import attrs
import tomli_w

from ._converter import POLICY_CONVERTER
from ._model import Policy, is_table


def policy_as_dict(policy: Policy) -> dict[str, Any]:
    """The policy as plain data (durations as strings; unset values as None), for JSON."""
    data: dict[str, Any] = POLICY_CONVERTER.unstructure(policy)
    return data


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
    for table_field in attrs.fields(Policy):
        if not is_table(table_field.type):
            continue
        lines.append("")
        lines.append(f"# {table_field.metadata.get('doc', '')}")
        lines.append(f"[{table_field.name}]")
        for field in attrs.fields(table_field.type):
            lines.append(f"# {field.metadata.get('doc', '')}")
            value = values[table_field.name][field.name]
            if value is None:  # unset by default: show an example, commented out
                example = tomli_w.dumps({field.name: field.metadata.get("example")})
                lines.append("# " + example.rstrip("\n") + "   (unset by default)")
            else:
                lines.append(tomli_w.dumps({field.name: value}).rstrip("\n"))
    return "\n".join(lines) + "\n"
