"""What hides secrets in a command's output: the rules and the redaction alone.

Kept apart from the project scanner (:mod:`._project`): ``forge verify`` and
the Stop hook redact their checks' output on every run, and need neither the
tree scan, its cache nor the waivers (and their YAML reader).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._rules import Ruleset, load_rules
from ._views import redact

if TYPE_CHECKING:
    from pathlib import Path

    from .._policy import SecscanPolicy


class SecretRedactor:
    """Redacts a text with a ruleset; tells a stream which line may go on in the next.

    Called like a function (``redactor(text)``). A stream redactor asks
    :meth:`may_continue` of the last line it has: a line whose last word could
    begin a secret is held until the next line arrives, so that a token cut by
    a line end is redacted whole.
    """

    def __init__(self, ruleset: Ruleset) -> None:
        self.ruleset = ruleset

    def __call__(self, text: str) -> str:
        return redact(text, self.ruleset)

    def may_continue(self, line: str) -> bool:
        """Whether the last word of ``line`` could be the first part of a secret."""
        stripped = line.rstrip("\r\n")
        if not stripped or stripped[-1].isspace():
            return False
        word = stripped.rsplit(None, 1)[-1][-1024:]
        lowered = word.lower().encode("utf-8", "surrogatepass") + b"\n"
        return self.ruleset.line_cut.search(lowered) is not None


def output_redactor(policy: SecscanPolicy, *, root: Path) -> SecretRedactor | None:
    """What hides secrets in command output (verify's checks), or None when the scan is off.

    Raises:
        ConfigError: the rules file cannot be loaded.
    """
    if not policy.enabled:
        return None
    return SecretRedactor(load_rules(policy.rules, root=root))
