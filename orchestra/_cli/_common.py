"""What several commands share: finding the project and loading its policy."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._policy import Layer, LoadedPolicy, load_policy
from .._workspace import Project, find_project


def project_from(args: argparse.Namespace) -> Project:
    config = Path(args.config) if getattr(args, "config", None) else None
    return find_project(Path.cwd(), config)


def policy_from(project: Project, flags: Sequence[Layer] = ()) -> LoadedPolicy:
    return load_policy(project.config, root=project.root, flags=flags)


def flag_layer(flag: str, dotted: str, value: object) -> Layer:
    """A command-line flag as a policy layer: ``--max-failures 5`` sets verify.max_failures."""
    *tables, key = dotted.split(".")
    data: dict[str, Any] = {key: value}
    for table in reversed(tables):
        data = {table: data}
    return Layer(f"flag {flag}", data)
