"""Forge's Claude Code hooks run once per event, however many ways they were wired.

The ``claude`` executor passes Forge's hooks with the invocation itself
(``--settings``), marked with :data:`FROM_EXECUTOR`, and sets
:data:`HOOKS_PASSED` in the agent's environment. Claude Code also runs the
hooks of the project's ``.claude/settings.json`` (``forge init
--claude-hooks`` writes them there, for interactive sessions): inside a Forge
loop those stand aside, so each stop runs verify once and the breaker counts
each failure once.
"""

from __future__ import annotations

import os

HOOKS_PASSED = "FORGE_HOOKS_PASSED"
FROM_EXECUTOR = "--from-executor"
LOOP_VERIFY = "FORGE_LOOP_VERIFY"
"""The loop's own ``[verify]`` (JSON), for the Stop hook the executor passes: the
hook's verdict is the iteration's, so it must verify as the loop would (a
``[loop.verify]`` override included), not as the working tree's forge.toml says."""
GUARD_REFUSAL = "Refused by Forge's guard"
"""How the reason of every ``deny`` the PreToolUse hook answers begins (the parser finds it)."""


def forge_command() -> str:
    """This very Forge as a shell command, for the hooks and the guard an agent's CLI runs.

    ``-I`` (isolated mode) keeps the agent's working directory off the module
    path: a folder named ``orchestra`` in the tree must never stand in for
    Forge's guard (nor ``PYTHON*`` variables in the agent's environment).
    """
    import shlex  # only the executor side builds it; the hooks never do
    import sys

    return f"{shlex.quote(sys.executable)} -I -m orchestra"


def stands_aside(from_executor: bool) -> bool:
    """Whether this hook run is a duplicate: the executor passed Forge's hooks itself."""
    return not from_executor and os.environ.get(HOOKS_PASSED) == "1"
