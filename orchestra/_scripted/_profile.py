"""How one agent CLI is pointed at a scripted model server, with no account of the user's.

A :class:`CliProfile` pairs a shipped executor with the provider API its CLI
speaks, and knows the CLI's own settings: the variables and configuration
files (under a scratch home, never the user's) that send it to the server on
loopback with a fake key, and keep it off the network otherwise (no update
checks, no telemetry).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import attrs

from ._server import Provider


@attrs.frozen
class CliProfile:
    """A shipped executor, the API its CLI speaks, and how to point the CLI at a server.

    Attributes:
        executor: The shipped executor's name (``claude``, ``codex``, ``gemini``).
        provider: Makes the provider's adapter for a server.
        environment: ``(server_url, home)`` to the variables the CLI needs;
            it may write configuration files under ``home``, a scratch folder.
    """

    executor: str
    provider: Callable[[], Provider]
    environment: Callable[[str, Path], dict[str, str]]


def scratch_home(home: Path) -> dict[str, str]:
    """The variables that make ``home`` every CLI's home and configuration root."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


# Each vendor's module defines PROFILE; imported only when asked for.
_PROFILE_MODULES = {"claude": "._anthropic", "codex": "._openai", "gemini": "._gemini"}


def profile_for(executor: str) -> CliProfile | None:
    """The profile of a shipped executor's CLI, or None for one Forge has no server for."""
    module = _PROFILE_MODULES.get(executor)
    if module is None:
        return None
    found: CliProfile = importlib.import_module(module, __package__).PROFILE
    return found


def profiled_executors() -> tuple[str, ...]:
    """The executors ``forge executors check`` can check."""
    return tuple(_PROFILE_MODULES)
