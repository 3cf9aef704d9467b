"""``forge policy simulate --sweep TABLE.KEY=V1,V2,...``: one key's values over a batch.

The batch (``--run``, ``--all``, or one ``--change``) is replayed once per
value, the value laid over the candidate as ``--set`` would lay it, and shown
as a matrix: a row per change, a column per value, each cell what that loop
did under that value. The closing line names the value that catches the
stuck loops earliest without a false trip, or says why none does.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from .._engine import Sweep, SweepCell, sweep
from .._errors import EXIT_OK, ConfigError, UsageError
from .._policy import Layer, Policy, leaf_keys, load_policy, policy_json_schema
from ._common import set_layer
from ._console import Output
from ._whatif_cmd import BatchSimulation, batch_request, replayed

# How each kind of cell stands out in the matrix.
_CELL_STYLES = {"false-trip": "red", "recovered": "yellow", "trip": "green"}


def run(args: argparse.Namespace, out: Output) -> int:
    request = batch_request(args)
    key, values = sweep_values(args.sweep)
    layers = value_layers(request, args.sweep, key, values)
    result = sweep(
        key,
        [
            (value, replayed(request, (layer,), out if index == 0 else None))
            for index, (value, layer) in enumerate(zip(values, layers, strict=True))
        ],
    )
    if out.json_mode:
        out.document(
            {"run_id": request.run_id, "policy": request.described, "sweep": result.as_json()}
        )
        return EXIT_OK
    if args.change is not None:
        scope = f'change "{args.change}"'
    else:
        scope = f"run {request.run_id}" if request.run_id else "every change's history"
    out.line(
        f"sweep: {key} over {scope}, {len(request.changes)} change(s), policy: {request.described}"
    )
    if not result.rows:
        out.line("nothing to replay: no change has recorded iterations")
        return EXIT_OK
    _render(result, out)
    return EXIT_OK


def sweep_values(text: str) -> tuple[str, list[str]]:
    """``TABLE.KEY=V1,V2,...``: the key and its values (split at the commas).

    Raises:
        UsageError: The text is not of that form.
    """
    key, _, values_text = text.partition("=")
    key = key.strip()
    values = [value.strip() for value in values_text.split(",") if value.strip()]
    if not key or "." not in key or not all(key.split(".")) or not values:
        raise UsageError(
            f"--sweep {text}: expected TABLE.KEY=V1,V2,...",
            hint="e.g. --sweep stagnation.no_progress=2,3,5",
        )
    return key, values


def value_layers(
    request: BatchSimulation, text: str, key: str, values: Sequence[str]
) -> list[Layer]:
    """Each value as a policy layer, checked as ``--set`` checks its value.

    Each layer is named after its place in the list, so a bad one is found:
    ``--sweep stagnation.no_progress=2,x,5: value 2 of 3 ("x"): expected an
    integer, got a string ('x')``.

    Raises:
        ConfigError: The key is unknown (with the key it likely means, and what
            that key takes), or some values do not fit it (each one named).
    """
    project, flags = request.project, list(request.settings)
    layers = [
        Layer(f'--sweep {text}: value {index} of {len(values)} ("{value}")', layer.data)
        for index, value in enumerate(values, 1)
        for layer in [set_layer(f"{key}={value}")]
    ]
    if key not in leaf_keys(Policy):
        # The key is wrong whatever the values: said once, as --set says it.
        try:
            load_policy(
                project.config,
                root=project.root,
                flags=[*flags, Layer(f"--sweep {text}", layers[0].data)],
            )
        except ConfigError as exc:
            raise ConfigError(exc.message, problems=exc.problems, hint=_likely(key)) from exc
    problems: list[str] = []
    bad = 0
    for layer in layers:
        try:
            load_policy(project.config, root=project.root, flags=[*flags, layer])
        except ConfigError as exc:
            bad += 1
            # The key is in the layer's name already: "value 2 of 3 ("x"): expected ...".
            named = f"{layer.source}: {key}: "
            problems += [p.replace(named, f"{layer.source}: ", 1) for p in exc.problems]
    if bad:
        raise ConfigError(
            f"--sweep {key}: {bad} of {len(values)} value(s) invalid",
            problems=problems,
            hint=_takes(key),
        )
    return layers


def _likely(key: str) -> str | None:
    """What the key a typo likely means takes: ``stagnation.no_progress takes an integer >= 1``."""
    import difflib  # only for a mistake

    close = difflib.get_close_matches(key, leaf_keys(Policy), n=1, cutoff=0.6)
    return _takes(close[0]) if close else None


def _takes(key: str) -> str | None:
    """What ``key`` takes, in words, from the policy's JSON Schema (None: not a policy key)."""
    schema = policy_json_schema()
    node: Mapping[str, Any] = schema
    for part in key.split("."):
        properties = _resolved(schema, node).get("properties", {})
        if part not in properties:
            return None
        node = properties[part]
    node = _resolved(schema, node)
    said = f"{key} takes {_kind(node)}"
    if "default" in node:
        said += f" (default {node['default']!r})"
    description = node.get("description")
    return f"{said}: {description}" if description else said


def _resolved(schema: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        return {**schema["$defs"][reference.removeprefix("#/$defs/")], **node}
    return node


def _kind(node: Mapping[str, Any]) -> str:
    """A JSON Schema type in words: ``an integer >= 1``, ``one of 'cooldown', 'escalate'``."""
    if "enum" in node:
        return "one of " + ", ".join(repr(choice) for choice in node["enum"])
    types = node.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    if "pattern" in node and set(types) == {"string", "number"}:
        return 'a duration like "30m"'
    words = {
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "string": "a string",
        "array": "a list",
        "object": "a table",
    }
    said = " or ".join(words.get(kind, kind) for kind in types) or "a value"
    if "minimum" in node and "maximum" in node:
        said += f" from {node['minimum']} to {node['maximum']}"
    elif "minimum" in node:
        above = ">" if node.get("exclusiveMinimum") else ">="
        said += f" {above} {node['minimum']}"
    return said


def _render(result: Sweep, out: Output) -> None:
    leaf = result.key.rsplit(".", 1)[-1]
    names = [value.value for value in result.values]
    headers = ["change", "recorded", *(f"{leaf}={name}" for name in names)]
    table = [
        [
            row.change,
            f"{row.recorded.reason} @{row.recorded.iteration}" if row.recorded else "-",
            *(cell.text for cell in row.cells),
        ]
        for row in result.rows
    ]
    footer = [
        ["iterations run", "", *(str(value.iterations) for value in result.values)],
        ["cost saved", "", *(f"${value.cost_saved:.4f}" for value in result.values)],
    ]
    lines = [headers, *table, *footer]
    widths = [max(len(line[column]) for line in lines) for column in range(len(headers))]
    out.line(_joined(headers, widths), style="bold")
    for row, texts in zip(result.rows, table, strict=True):
        out.styled(*_row_parts(texts, row.cells, widths))
    for texts in footer:
        out.line(_joined(texts, widths), style="dim")
    out.line()
    out.line(f"verdict: {result.verdict}", style="bold")


def _joined(texts: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(f"{text:<{width}}" for text, width in zip(texts, widths, strict=True)).rstrip()


def _row_parts(
    texts: Sequence[str], cells: Sequence[SweepCell], widths: Sequence[int]
) -> list[tuple[str, str | None]]:
    parts: list[tuple[str, str | None]] = [
        (f"{texts[0]:<{widths[0]}}  {texts[1]:<{widths[1]}}", None)
    ]
    for text, cell, width in zip(texts[2:], cells, widths[2:], strict=True):
        parts.append(("  ", None))
        parts.append((f"{text:<{width}}", _CELL_STYLES.get(cell.kind)))
    # The last cell's padding would trail the line.
    last_text, last_style = parts[-1]
    parts[-1] = (last_text.rstrip(), last_style)
    return parts
