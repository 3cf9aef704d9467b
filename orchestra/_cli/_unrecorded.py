"""A verify inside an agent's iteration: it runs the checks and records nothing.

The Stop hook inside Forge's sandbox and ``forge verify --change`` run by the
agent inside its loop both verify this way. A verdict the agent's process
recorded is one the agent could have forged; so the breaker is left alone
and the loop verifies the tree the iteration ended with itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._policy import Policy
    from .._verify import VerifyReport
    from .._workspace import Project

NOT_RECORDED = "not recorded; the loop verifies the iteration after it ends"


def verify_unrecorded(project: Project, policy: Policy) -> VerifyReport:
    """Run ``policy``'s verify in the project, its output redacted; write none of Forge's state."""
    from .._secscan import output_redactor
    from .._verify import run_verify
    from ._trio_run import run_interruptible

    redact = output_redactor(policy.secscan, root=project.root)
    return run_interruptible(
        run_verify, project.root, policy.verify, policy.run.grace.seconds, redact
    )
