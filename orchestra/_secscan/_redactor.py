"""What hides secrets in a command's output: the rules and the redaction alone.

Kept apart from the project scanner (:mod:`._project`): ``forge verify`` and
the Stop hook redact their checks' output on every run, and need neither the
tree scan, its cache nor the waivers (and their YAML reader).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ._match import redact
from ._rules import load_rules

if TYPE_CHECKING:
    from pathlib import Path

    from .._policy import SecscanPolicy
    from .._redact import Redact


def output_redactor(policy: SecscanPolicy, *, root: Path) -> Redact | None:
    """What hides secrets in command output (verify's checks), or None when the scan is off.

    Raises:
        ConfigError: the rules file cannot be loaded.
    """
    if not policy.enabled:
        return None
    return partial(redact, ruleset=load_rules(policy.rules, root=root))
