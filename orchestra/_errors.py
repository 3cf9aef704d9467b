"""Errors raised by Forge, and the exit code each one maps to.

Every error Forge raises on purpose derives from :class:`ForgeError`, renders
itself for a person (a short message, its context and a hint), and carries the
exit code the command line returns for it. Only the CLI entry point turns an
error into an exit code.

The tree (every subclass, wherever it is defined)::

    ForgeError
    ├── UsageError                exit 2  bad arguments, a change name that is not a name
    │   └── ContractError         exit 2  a checkpoint update the loop contract refuses
    ├── ConfigError               exit 2  a policy file that cannot be used
    │   └── LimitTooLarge         exit 2  more permits asked at once than the rate limit allows
    ├── StateError                exit 1  a state file that cannot be read or written
    │   ├── CorruptStateError     exit 1  moved aside; the gate that needed it blocks
    │   ├── RateLimitStoreError   exit 1  the sqlite rate-limit log cannot be used
    │   ├── ForeignLimiterKey     exit 1  a fleet limiter key holds a value Forge did not write
    │   ├── FleetUnavailable      exit 1  the fleet's Redis server cannot be reached
    │   │   ├── FleetRefused      exit 2  its credentials or TLS refused: waiting will not mend it
    │   │   └── BatchVanished     exit 1  the batch's keys are gone (a restart without persistence)
    │   └── LeaseLost             exit 1  another host took the loop over (its fencing token)
    ├── BudgetExhausted           exit 1  another fix iteration asked for with none left
    ├── GoalStepsExhausted        exit 1  another goal step asked for with none left
    ├── SourceError               exit 1  a fleet loop's repository could not be cloned or pushed
    ├── LandGitError              exit 1  a git command forge land needs failed (not a conflict)
    └── WorktreeError             exit 1  a loop's git worktree could not be created
        └── WorktreeImportError   exit 1  its Python would import the main checkout's code

Defined elsewhere, next to what raises them: ``ContractError``,
``BudgetExhausted`` and ``GoalStepsExhausted`` in :mod:`orchestra._contract`,
``LimitTooLarge`` and ``RateLimitStoreError`` in :mod:`orchestra._ratelimit`,
``WorktreeError`` and ``WorktreeImportError`` in :mod:`orchestra._supervise`,
``FleetUnavailable``, ``FleetRefused``, ``BatchVanished``, ``ForeignLimiterKey``,
``LeaseLost`` and ``SourceError`` in :mod:`orchestra._fleet`, ``LandGitError`` in
:mod:`orchestra._land`. A test
keeps this tree complete.

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
EXIT_ESCALATE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class ForgeError(Exception):
    """Root of every error Forge raises on purpose.

    Args:
        message: One sentence saying what went wrong.
        context: Lines that locate the problem (a file, a change, a command).
        hint: What the reader can do about it.
    """

    exit_code: int = EXIT_ESCALATE

    def __init__(
        self, message: str, *, context: Sequence[str] = (), hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.context = tuple(context)
        self.hint = hint

    def render(self) -> str:
        """The error as a person should read it: message, context, hint."""
        lines = [f"error: {self.message}"]
        lines.extend(f"  {line}" for line in self.context)
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class UsageError(ForgeError):
    """The command line asked for something that cannot be done as asked."""

    exit_code = EXIT_USAGE


class ConfigError(ForgeError):
    """A policy file is missing, unreadable, or says something invalid.

    ``problems`` holds one line per problem, each naming the file, the dotted
    key and what was expected, so that every typo is reported in one pass.
    """

    exit_code = EXIT_USAGE

    def __init__(
        self, message: str, *, problems: Sequence[str] = (), hint: str | None = None
    ) -> None:
        super().__init__(message, context=problems, hint=hint)
        self.problems = tuple(problems)


class StateError(ForgeError):
    """A state file under ``.forge/`` cannot be read or written."""


class CorruptStateError(StateError):
    """A state file was unreadable; it has been moved aside to ``moved_to``."""

    def __init__(self, message: str, *, path: str, moved_to: str, hint: str | None = None) -> None:
        super().__init__(
            message, context=(f"file: {path}", f"moved aside to: {moved_to}"), hint=hint
        )
        self.path = path
        self.moved_to = moved_to
