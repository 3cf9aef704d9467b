"""Forge's commands inside an agent's iteration: a verify that records nothing, the inbox.

The Stop hook inside Forge's sandbox and ``forge verify --change`` run by the
agent inside its loop both verify this way. A verdict the agent's process
recorded is one the agent could have forged; so the breaker is left alone
and the loop verifies the tree the iteration ended with itself. What the
agent asks of Forge's state (``forge checkpoint``, ``forge event``, and the
recorded verify that ``forge verify --change`` stands for) is left in the
change's inbox, for the loop to run once the iteration has ended.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import StateError

if TYPE_CHECKING:
    from .._policy import Policy
    from .._verify import VerifyReport
    from .._workspace import Project

NOT_RECORDED = "not recorded; the loop verifies the iteration after it ends"
QUEUED_VERIFY = "not recorded now; queued, the loop runs it when the iteration ends"


def verify_unrecorded(project: Project, policy: Policy) -> VerifyReport:
    """Run ``policy``'s verify in the project, its output redacted; write none of Forge's state."""
    from .._secscan import output_redactor
    from .._verify import run_verify
    from ._trio_run import run_interruptible

    redact = output_redactor(policy.secscan, root=project.root)
    return run_interruptible(
        run_verify, project.root, policy.verify, policy.run.grace.seconds, redact
    )


def leave_in_inbox(root: Path, change: str, words: Sequence[str]) -> None:
    """Leave the command line ``words`` (after ``forge``) in ``change``'s inbox.

    Raises:
        StateError: when the request cannot be written.
    """
    from .._sandbox import INBOX_ENV, inbox_of, queue_request

    inbox = Path(os.environ[INBOX_ENV]) if os.environ.get(INBOX_ENV) else None
    if inbox is None:
        inbox = inbox_of(_state_folder(root, change))
    try:
        queue_request(inbox, words)
    except OSError as exc:
        raise StateError(
            f"forge {words[0]} cannot leave its request in {inbox}: {exc.strerror or exc}"
        ) from exc


def _state_folder(root: Path, change: str) -> Path:
    """The change's state folder: the loop's own (``FORGE_STATE_DIR``) in a worktree."""
    from .._state import ChangePaths

    state_dir = os.environ.get("FORGE_STATE_DIR")
    if state_dir and os.environ.get("FORGE_CHANGE") == change:
        return Path(state_dir)
    return ChangePaths(root, change).folder
