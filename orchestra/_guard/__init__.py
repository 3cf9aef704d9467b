"""The guard: what refuses an agent's command before it runs.

Forge's first line of defence, asked on every tool call of an agent: the
shell analyser (:mod:`._shell`) reads a command line as a shell would and
says which protected paths it would delete, overwrite or move; a file write
is checked the same way. The hooks (``forge guard``, ``forge hook
pre-tool-use``, in ``orchestra._cli._hooks``) ask it for the CLIs that take
hooks (Claude Code, Codex); for a CLI that takes none (Gemini CLI),
:mod:`._wrapper` puts a ``bash`` of Forge's in front of the agent's shell.
The protected paths themselves are ``orchestra._protect``'s; without
``CLAUDE_PROJECT_DIR``, :mod:`._projects` finds the other projects a
command's absolute paths reach.

Names are resolved on first use: a hook importing this facade pays only for
the modules behind the names it asks for.
"""

from __future__ import annotations

from .._lazy import lazy_exports

# Not typing's: importing typing costs more than the agent hooks' whole check.
# Type checkers treat a module-level TYPE_CHECKING as True all the same.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from ._projects import projects_named as projects_named
    from ._shell import Refusal as Refusal
    from ._shell import analyse_command as analyse_command
    from ._shell import check_file_write as check_file_write
    from ._wrapper import shell_guard_environment as shell_guard_environment
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._shell": ("Refusal", "analyse_command", "check_file_write"),
            "._wrapper": ("shell_guard_environment",),
            "._projects": ("projects_named",),
        },
    )
