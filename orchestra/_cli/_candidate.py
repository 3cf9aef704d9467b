"""The policy a replay is judged under: ``--policy FILE``, or the recorded one with ``--set``.

A replay must judge each change under the very policy its loop would run
under, so ``--policy FILE`` (a path, or a shipped policy's name) is layered as
the live loop layers it: the built-in defaults, the file (with what it
extends), the file's own ``[[loop]]`` tables for the loop of that change, and
the ``--set`` layers on top. Shared by ``forge policy simulate`` for one change
and for a whole batch (``_simulate_cmd``, ``_whatif_cmd``), so that neither
imports the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._errors import UsageError
from .._policy import Layer, Policy, load_policy, merge_layers, policy_as_dict, structure_policy
from .._shipped import shipped_dir, shipped_names
from .._supervise import resolve_loops


@attrs.frozen
class Candidate:
    """A candidate policy file: the policy of each change it declares a loop for, and the rest's.

    Attributes:
        base: The file's policy, for a change it declares no loop for.
        loops: Per change, the policy its ``[[loop]]`` table makes of the file's.
    """

    base: Policy
    loops: Mapping[str, Policy] = attrs.field(factory=dict)

    def for_change(self, change: str) -> Policy:
        return self.loops.get(change, self.base)


def policy_file(text: str, *, root: Path, settings: list[Layer]) -> Candidate:
    """The policies of ``--policy FILE`` (a path, or a shipped policy's name), ``--set`` on top.

    Raises:
        UsageError: There is no such file and no shipped policy of that name.
        ConfigError: The file, or one of its loop tables, is invalid.
    """
    file = _candidate_path(text)
    loaded = load_policy(file, root=root, flags=settings)
    # The loop tables override the file, and the candidate's --set overrides both.
    loops = {
        setup.change: with_settings(setup.policy, settings) for setup in resolve_loops(loaded, root)
    }
    return Candidate(loaded.policy, loops)


def _candidate_path(text: str) -> Path:
    path = Path(text).resolve()
    if path.is_file():
        return path
    if text in shipped_names("policies"):
        return shipped_dir("policies") / f"{text}.toml"
    shipped = ", ".join(shipped_names("policies")) or "none"
    raise UsageError(
        f"--policy {text}: no such file, nor a shipped policy of that name",
        hint=f"a policy file's path, or a shipped policy: {shipped}",
    )


def with_settings(policy: Policy, settings: list[Layer]) -> Policy:
    """``policy`` with the ``--set`` layers on top (``policy`` itself when there are none)."""
    if not settings:
        return policy
    base = _without_none(policy_as_dict(policy))
    merged, _ = merge_layers([Layer("policy", base), *settings])
    return structure_policy(merged, "--set")


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None
    }
