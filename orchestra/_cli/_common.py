"""What several commands share: finding the project and loading its policy."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import UsageError
from .._workspace import Project, find_project

if TYPE_CHECKING:
    from .._policy import BudgetPolicy, Layer, LoadedPolicy


def project_from(args: argparse.Namespace) -> Project:
    config = Path(args.config) if getattr(args, "config", None) else None
    return find_project(Path.cwd(), config)


def policy_from(
    project: Project,
    flags: Sequence[Layer] = (),
    args: argparse.Namespace | None = None,
    overlays: Sequence[Path] = (),
) -> LoadedPolicy:
    """The effective policy: files, overlays, the command's own flags, then every ``--set``."""
    # Imported here: the policy loader (cattrs) is not for the commands that only read state.
    from .._policy import load_policy

    settings = [set_layer(text) for text in getattr(args, "set", None) or []]
    return load_policy(
        project.config, root=project.root, flags=[*flags, *settings], overlays=overlays
    )


def change_budget(
    project: Project, change: str, args: argparse.Namespace | None = None
) -> BudgetPolicy:
    """The spend budget in force for ``change``: its ``[[loop]]`` table's, else the project's.

    A loop declared in forge.toml may set its own ``[loop.budget]``; what holds
    that loop is judged by its own ceilings, not the project's.
    """
    from .._supervise import resolve_loops

    loaded = policy_from(project, args=args)
    for setup in resolve_loops(loaded, project.root):
        if setup.change == change and setup.root == project.root:
            return setup.policy.budget
    return loaded.policy.budget


def set_layer(text: str) -> Layer:
    """``--set verify.max_failures=5``: one policy value from the command line.

    The value is read as TOML (``5``, ``true``, ``"30m"``, ``["a", "b"]``); what
    does not parse as TOML is taken as a string, so ``--set run.timeout=30m`` works.

    Raises:
        UsageError: when the text is not ``table.key=value``.
    """
    import tomllib  # here: commands without --set need no TOML parser

    dotted, sep, raw = text.partition("=")
    dotted = dotted.strip()
    if not sep or "." not in dotted or not all(dotted.split(".")):
        raise UsageError(
            f"--set {text!r}: expected table.key=value", hint="e.g. --set verify.max_failures=5"
        )
    try:
        value = tomllib.loads(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return flag_layer(f"--set {dotted}", dotted, value)


def flag_layer(flag: str, dotted: str, value: object) -> Layer:
    """A command-line flag as a policy layer: ``--max-failures 5`` sets verify.max_failures."""
    from .._policy import Layer

    *tables, key = dotted.split(".")
    data: dict[str, Any] = {key: value}
    for table in reversed(tables):
        data = {table: data}
    return Layer(f"flag {flag}", data)
