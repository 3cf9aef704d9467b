"""The loops a supervisor runs: ``[[loop]]`` tables, each with its own effective policy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._errors import ConfigError
from .._names import CHANGE_NAME
from .._policy import (
    LOOP_POLICY_TABLES,
    FieldError,
    Layer,
    LoadedPolicy,
    Policy,
    merge_layers,
    structure_file,
    structure_policy,
    unknown_keys,
)

PER_LOOP_TABLES = LOOP_POLICY_TABLES  # the policy model says which tables a loop overrides
_TABLE_CLASSES: dict[str, type] = {
    field.name: field.type
    for field in attrs.fields(Policy)
    if field.name in PER_LOOP_TABLES and isinstance(field.type, type)
}


def _check_change(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not CHANGE_NAME.fullmatch(value):
        raise FieldError(attribute.name, "a change name [a-z0-9][a-z0-9._-]{0,63}", value)


@attrs.frozen
class LoopTable:
    """What one ``[[loop]]`` table says, besides the policy tables it overrides.

    ``executor``, ``cmd``, ``prompt`` and ``max_iterations`` are shorthands for
    the same keys of ``[run]``.
    """

    change: str = attrs.field(validator=_check_change)
    executor: str | None = None
    cmd: str | None = None
    prompt: str | None = None
    max_iterations: int | None = None
    dir: str = ""
    worktree: bool = False
    base: str = "HEAD"
    # A fleet's loop may name a git URL instead of a folder: each host clones it.
    repo: str = ""
    ref: str = "HEAD"
    push: bool = False
    verify: dict[str, Any] = attrs.field(factory=dict)
    run: dict[str, Any] = attrs.field(factory=dict)
    budget: dict[str, Any] = attrs.field(factory=dict)
    breaker: dict[str, Any] = attrs.field(factory=dict)
    stagnation: dict[str, Any] = attrs.field(factory=dict)
    recovery: dict[str, Any] = attrs.field(factory=dict)
    alerts: dict[str, Any] = attrs.field(factory=dict)
    sandbox: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class LoopSetup:
    """One loop, resolved: its change, where it works, and its effective policy."""

    change: str
    policy: Policy
    root: Path
    worktree: bool
    base: str
    source: str
    repo: str = ""
    ref: str = "HEAD"
    push: bool = False


def resolve_loops(loaded: LoadedPolicy, supervisor_root: Path) -> list[LoopSetup]:
    """Every declared loop with its own policy: the supervisor's, then the loop's tables.

    Raises:
        ConfigError: a loop table that is invalid, two loops on one change, or a
            ``dir`` that is not a folder; every problem names file, loop and key.
    """
    declared = loaded.loops
    if declared is None:
        return []
    setups: list[LoopSetup] = []
    problems: list[str] = []
    seen: dict[tuple[Path, str], int] = {}
    for index, table in enumerate(declared.tables):
        where = f"{declared.source}: loop[{index}]"
        if not isinstance(table, Mapping):
            problems.append(f"{where}: expected a [[loop]] table, got {table!r}")
            continue
        try:
            change = table.get("change")
            named = f"the [[loop]] of change {change!r}" if isinstance(change, str) else None
            spec = structure_file(
                table, LoopTable, where, table=named or f"[[loop]] number {index + 1}"
            )
        except ConfigError as exc:
            problems.extend(p.replace(f"{where}: ", f"{where}.", 1) for p in exc.problems)
            continue
        # The policy tables a loop overrides are checked key by key, like a file:
        # a typo there must not quietly drop the loop or its control.
        typos = [
            problem
            for name in PER_LOOP_TABLES
            for problem in unknown_keys(
                getattr(spec, name), _TABLE_CLASSES[name], f"{where}", prefix=f"{name}."
            )
        ]
        if typos:
            problems.extend(t.replace(f"{where}: ", f"{where}.", 1) for t in typos)
            continue
        root = (declared.path.parent / spec.dir).resolve() if spec.dir else supervisor_root
        if spec.repo and spec.dir:
            problems.append(f"{where}.repo: a loop names a dir or a repo, not both")
            continue
        if not spec.repo and not root.is_dir():
            problems.append(f"{where}.dir: {spec.dir!r} is not a folder (looked for {root})")
            continue
        key = (root, spec.change)
        if key in seen:
            problems.append(f"{where}.change: {spec.change!r} is already loop[{seen[key]}]")
            continue
        seen[key] = index
        try:
            policy = structure_policy(_loop_layers(loaded.merged, spec), where)
        except ConfigError as exc:
            problems.extend(exc.problems or [f"{where}: {exc.message}"])
            continue
        setups.append(
            LoopSetup(
                change=spec.change,
                policy=policy,
                root=root,
                worktree=spec.worktree,
                base=spec.base,
                source=where,
                repo=spec.repo,
                ref=spec.ref,
                push=spec.push,
            )
        )
    if problems:
        raise ConfigError("the loops are invalid", problems=problems)
    return setups


def _loop_layers(merged: Mapping[str, Any], spec: LoopTable) -> dict[str, Any]:
    shorthand = {
        key: value
        for key, value in (
            ("executor", spec.executor),
            ("cmd", spec.cmd),
            ("prompt", spec.prompt),
            ("max_iterations", spec.max_iterations),
        )
        if value is not None
    }
    run = {**spec.run, **shorthand}
    # A loop's own command replaces an executor it would inherit, and the other way round.
    if run.get("cmd"):
        run.setdefault("executor", "")
    if run.get("executor"):
        run.setdefault("cmd", "")
    overrides = {name: dict(getattr(spec, name)) for name in PER_LOOP_TABLES}
    overrides["run"] = run
    layered, _ = merge_layers([Layer("policy", merged), Layer("loop", overrides)])
    return layered
