"""Reading policy files and layering them into one effective policy.

Layering, lowest first: built-in defaults, the files a policy ``extends`` (in
order, each after its own extends), the policy file itself, then command-line
flags. Every leaf value remembers the layer it came from, which is what
``forge policy show`` prints.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from cattrs.errors import BaseValidationError

from .._errors import ConfigError
from .._shipped import shipped_dir, shipped_names
from ._converter import POLICY_CONVERTER
from ._model import Policy, is_table
from ._schema import unknown_keys, validation_problems

DEFAULT_SOURCE = "default"
# Keys a policy file may hold beyond the policy's tables.
_FILE_ONLY = frozenset({"extends", "loop"})
_SHIPPED_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


@attrs.frozen
class Layer:
    """One source of policy values: a file or the command line."""

    source: str
    data: Mapping[str, Any]


@attrs.frozen
class DeclaredLoops:
    """The ``[[loop]]`` tables of the highest policy file that declares any."""

    path: Path
    source: str
    tables: tuple[Any, ...]


@attrs.frozen
class LoadedPolicy:
    """The effective policy and, for each dotted key, the layer that set it.

    ``merged`` is the layered data before it became a :class:`Policy`: the
    supervisor lays each loop's own tables over it.
    """

    policy: Policy
    sources: Mapping[str, str]
    files: tuple[Path, ...]
    merged: Mapping[str, Any] = attrs.field(factory=dict)
    loops: DeclaredLoops | None = None


def load_policy(
    config: Path | None,
    *,
    root: Path,
    flags: Sequence[Layer] = (),
    overlays: Sequence[Path] = (),
) -> LoadedPolicy:
    """Load the effective policy.

    Args:
        config: The policy file (usually ``forge.toml``), or None for defaults only.
        root: The project root, against which file names are shown.
        flags: Layers from the command line, highest last.
        overlays: Further policy files laid over ``config`` (a supervisor's batch file).

    Raises:
        ConfigError: listing every problem found, each naming file, key and expectation.
    """
    layers: list[Layer] = []
    files: list[Path] = []
    problems: list[str] = []
    loops: DeclaredLoops | None = None
    tops = [config, *overlays] if config is not None else list(overlays)
    for top in tops:
        for path, data in _extends_chain(top.resolve(), root, stack=()):
            if path in files:
                continue
            files.append(path)
            source = display_name(path, root)
            problems.extend(unknown_keys(data, Policy, source, top_level=_FILE_ONLY))
            if "loop" in data:
                tables = data["loop"]
                if isinstance(tables, list):
                    loops = DeclaredLoops(path=path, source=source, tables=tuple(tables))
                else:
                    problems.append(f"{source}: loop: expected [[loop]] tables, got {tables!r}")
            layers.append(Layer(source, {k: v for k, v in data.items() if k not in _FILE_ONLY}))
    for flag in flags:
        problems.extend(unknown_keys(flag.data, Policy, flag.source))
        layers.append(flag)
    merged, sources = merge_layers(layers)
    for field in attrs.fields(Policy):
        # A table written as a value is already reported above; cattrs would only repeat it.
        if is_table(field.type) and not isinstance(merged.get(field.name, {}), dict):
            del merged[field.name]
    policy, value_problems = _structure(merged, sources)
    problems.extend(value_problems)
    if problems or policy is None:
        raise ConfigError("the policy is invalid", problems=problems)
    return LoadedPolicy(
        policy=policy,
        sources=_with_defaults(sources),
        files=tuple(files),
        merged=merged,
        loops=loops,
    )


def structure_policy(data: Mapping[str, Any], source: str) -> Policy:
    """A policy from already layered data, or ConfigError naming ``source`` for each problem."""
    policy, problems = _structure(dict(data), {})
    if problems or policy is None:
        raise ConfigError(
            "the policy is invalid",
            problems=[p.replace("policy: ", f"{source}: ", 1) for p in problems],
        )
    return policy


def display_name(path: Path, root: Path) -> str:
    """A file name as a person reads it: relative to the project, or marked as shipped."""
    shipped = shipped_dir("policies").resolve()
    if path.is_relative_to(shipped):
        return f"{path.relative_to(shipped)} (shipped)"
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


def merge_layers(layers: Sequence[Layer]) -> tuple[dict[str, Any], dict[str, str]]:
    """Deep-merge layers, lowest first; a list or scalar replaces, a table merges."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def merge_into(
        target: dict[str, Any], data: Mapping[str, Any], prefix: str, source: str
    ) -> None:
        for key, value in data.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping):
                existing = target.get(key)
                child = existing if isinstance(existing, dict) else {}
                target[key] = child
                merge_into(child, value, f"{dotted}.", source)
            else:
                target[key] = value
                sources[dotted] = source

    for layer in layers:
        merge_into(merged, layer.data, "", layer.source)
    return merged, sources


def _extends_chain(
    path: Path, root: Path, stack: tuple[Path, ...]
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The files a policy file stands on and their data, lowest first, ending with itself."""
    if path in stack:
        cycle = " -> ".join(display_name(p, root) for p in (*stack, path))
        raise ConfigError("the policy files extend each other in a cycle", problems=[cycle])
    source = display_name(path, root)
    data = _read_toml(path, source)
    extends = data.get("extends", [])
    if not isinstance(extends, list) or not all(isinstance(item, str) for item in extends):
        raise ConfigError(
            "the policy is invalid",
            problems=[
                f"{source}: extends: expected a list of policy names or paths, got {extends!r}"
            ],
        )
    for item in extends:
        yield from _extends_chain(_resolve_extended(item, path, source), root, (*stack, path))
    yield path, data


def _resolve_extended(item: str, referrer: Path, source: str) -> Path:
    if "\x00" in item:  # no file system takes one: say so rather than crash on it
        raise ConfigError(
            "the policy is invalid",
            problems=[f"{source}: extends: {item!r} is not a path (it holds a NUL byte)"],
        )
    if _SHIPPED_NAME.fullmatch(item):
        candidate = shipped_dir("policies") / f"{item}.toml"
        if candidate.is_file():
            return candidate.resolve()
        known = ", ".join(shipped_names("policies")) or "none"
        raise ConfigError(
            "the policy is invalid",
            problems=[f"{source}: extends: no shipped policy named {item!r} (shipped: {known})"],
            hint='to extend a file of your own, give its path: extends = ["policies/mine.toml"]',
        )
    candidate = (referrer.parent / item).resolve()
    if not candidate.is_file():
        raise ConfigError(
            "the policy is invalid",
            problems=[f"{source}: extends: {item!r} is not a file (looked for {candidate})"],
        )
    return candidate


def read_config_text(path: Path, source: str, what: str = "the policy file") -> str:
    """A configuration file's text; a ConfigError naming ``source`` when it cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {what}", problems=[f"{source}: {exc.strerror or exc}"]
        ) from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read {what}", problems=[f"{source}: not valid UTF-8 (byte {exc.start})"]
        ) from exc


def _read_toml(path: Path, source: str) -> dict[str, Any]:
    text = read_config_text(path, source)
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ConfigError(
            "the policy file is too deeply nested", problems=[f"{source}: nesting too deep"]
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            "the policy file is not valid TOML", problems=[f"{source}: {exc}"]
        ) from exc


def _structure(
    merged: dict[str, Any], sources: Mapping[str, str]
) -> tuple[Policy | None, list[str]]:
    """The policy, or every value problem (unknown keys are reported per file instead)."""
    try:
        return POLICY_CONVERTER.structure(merged, Policy), []
    except BaseValidationError as exc:
        return None, validation_problems(exc, lambda dotted: _source_of(dotted, sources))


def _source_of(dotted: str, sources: Mapping[str, str]) -> str:
    dotted = dotted.split("[", 1)[0]  # "verify.specs[0]" was set with "verify.specs"
    while dotted:
        if dotted in sources:
            return sources[dotted]
        dotted = dotted.rpartition(".")[0]
    return "policy"


def _with_defaults(sources: Mapping[str, str]) -> dict[str, str]:
    """Every leaf key of the policy, with ``default`` where no layer set it."""
    full = dict.fromkeys(leaf_keys(Policy), DEFAULT_SOURCE)
    full.update({key: value for key, value in sources.items() if key in full})
    return full


def leaf_keys(cls: type, prefix: str = "") -> list[str]:
    """Dotted names of every leaf value of a policy table, in declaration order."""
    keys: list[str] = []
    for field in attrs.fields(cls):
        if is_table(field.type):
            keys.extend(leaf_keys(field.type, f"{prefix}{field.name}."))
        else:
            keys.append(f"{prefix}{field.name}")
    return keys
