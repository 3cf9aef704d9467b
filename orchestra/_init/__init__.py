"""``forge init``: a forge.toml for an existing repository, and Claude Code's hooks wired in."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._detect import AGENT_CLIS as AGENT_CLIS
    from ._detect import Detected as Detected
    from ._detect import detect as detect
    from ._write import forge_toml as forge_toml
    from ._write import merge_claude_hooks as merge_claude_hooks

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._detect": ("AGENT_CLIS", "Detected", "detect"),
            "._write": ("forge_toml", "merge_claude_hooks"),
        },
    )
