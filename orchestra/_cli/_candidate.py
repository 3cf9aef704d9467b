"""The policy a replay is judged under: ``--policy FILE``, or the recorded one with ``--set``.

Shared by ``forge policy simulate`` for one change and for a whole batch
(``_simulate_cmd``, ``_whatif_cmd``), so that neither imports the other for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._errors import UsageError
from .._policy import Layer, Policy, load_policy, merge_layers, policy_as_dict, structure_policy


def policy_file(text: str, *, root: Path, settings: list[Layer]) -> Policy:
    """The policy in ``--policy FILE``, with the ``--set`` layers on top.

    Raises:
        UsageError: There is no such file.
    """
    file = Path(text).resolve()
    if not file.is_file():
        raise UsageError(f"--policy {text}: no such file")
    return load_policy(file, root=root, flags=settings).policy


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
