"""The policy reference in Markdown, generated from the model.

``docs/policy.md`` holds hand-written prose around one generated section: every
table and key of :class:`Policy`, its default and its documentation, taken from
the model exactly as ``policies/default.toml`` is. A test pins that section to
the model, so the reference cannot drift from the code. Regenerate it with::

    python -m orchestra._policy docs/policy.md
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import attrs
import tomli_w

from ._dump import policy_as_dict
from ._model import Policy, is_table

BEGIN_MARKER = (
    "<!-- BEGIN GENERATED from the policy model: python -m orchestra._policy docs/policy.md -->"
)
END_MARKER = "<!-- END GENERATED -->"


def markdown_reference(policy: Policy | None = None) -> str:
    """Every table and key of the policy as Markdown, each table a heading and a key table.

    Args:
        policy: the values shown as defaults; the built-in defaults when omitted.
    """
    values = policy_as_dict(policy if policy is not None else Policy())
    sections: list[str] = []
    for field in attrs.fields(Policy):
        if is_table(field.type):
            _table_sections(sections, field.name, field.type, values[field.name])
    return "\n".join(sections)


def with_reference(document: str, reference: str) -> str:
    """``document`` with the text between the generated-section markers replaced.

    Raises:
        ValueError: the document lacks the markers, or has them out of order.
    """
    start = document.find(BEGIN_MARKER)
    end = document.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError(f"expected the markers {BEGIN_MARKER!r} and {END_MARKER!r}, in order")
    head = document[: start + len(BEGIN_MARKER)]
    return f"{head}\n\n{reference}\n{document[end:]}"


def generated_section(document: str) -> str:
    """The text between the markers, as :func:`markdown_reference` would write it."""
    start = document.find(BEGIN_MARKER)
    end = document.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError(f"expected the markers {BEGIN_MARKER!r} and {END_MARKER!r}, in order")
    return document[start + len(BEGIN_MARKER) : end].strip("\n") + "\n"


def _table_sections(sections: list[str], dotted: str, cls: type, values: dict[str, Any]) -> None:
    lines = [f"### `[{dotted}]`", ""]
    description = _description(cls)
    if description:
        lines += [description, ""]
    lines += ["| key | default | meaning |", "| --- | --- | --- |"]
    nested = []
    for field in attrs.fields(cls):
        if is_table(field.type):
            nested.append(field)
            continue
        meaning = _cell(field.metadata.get("doc", ""))
        value = values[field.name]
        if value is None:
            example = field.metadata.get("example")
            default = "unset" if example is None else f"unset (e.g. `{_inline(example)}`)"
        else:
            default = f"`{_inline(value)}`"
        lines.append(f"| `{field.name}` | {_cell(default)} | {meaning} |")
    sections.append("\n".join(lines) + "\n")
    for field in nested:
        _table_sections(sections, f"{dotted}.{field.name}", field.type, values[field.name])


def _description(cls: type) -> str:
    """The class docstring as Markdown, without its ``[table]``: prefix."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    doc = re.sub(r"^``\[[a-z_.]+\]``:\s*", "", doc)
    doc = _outside_code(doc.replace("``", "`"), _angles)
    return doc[:1].upper() + doc[1:]


def _inline(value: object) -> str:
    """A value as TOML on one line (tomli-w writes arrays over several)."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    return tomli_w.dumps({"v": value}).removeprefix("v = ").rstrip("\n")


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: pipes escaped, angle brackets outside code shown."""
    return _outside_code(text.replace("|", "\\|"), _angles)


def _angles(text: str) -> str:
    """``<name>`` shown as written rather than taken for an HTML tag."""
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _outside_code(text: str, change: Callable[[str], str]) -> str:
    parts = text.split("`")
    for index in range(0, len(parts), 2):  # even parts lie outside code spans
        parts[index] = change(parts[index])
    return "`".join(parts)
