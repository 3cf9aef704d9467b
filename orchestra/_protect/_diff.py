"""What an iteration did to the protected paths: two manifests in, violations out.

Pure: no I/O. An ``exist`` path must still exist (as the same kind of thing);
a ``frozen`` path must be unchanged, and nothing may appear inside a frozen
directory that existed. A ``grows`` file whose content changed is reported as
modified here; the check then tells an append (allowed) from an edit. A
protected path that did not exist before and appears is not a violation:
creating ``AGENTS.md`` harms nothing. Forge's own state is the exception: a
waivers file or a breaker that appears is a decision nobody made.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import attrs

from ._manifest import DIRECTORY, Manifest
from ._spec import FROZEN, GROWS

DELETED = "deleted"
MODIFIED = "modified"
REPLACED = "replaced"
ADDED = "added"


@attrs.frozen
class Violation:
    """One protected path harmed by an iteration."""

    path: str  # absolute
    name: str  # as the user wrote it: relative to the project
    protection: str
    harm: str  # deleted | modified | replaced | added

    def describe(self) -> str:
        return f"{self.name} {self.harm} (protected: {self.protection})"


def violations(
    before: Manifest, after: Manifest, sealed: Callable[[str], bool] | None = None
) -> list[Violation]:
    """Every harm done between two manifests, in path order.

    ``sealed`` names the frozen paths that must not appear either (Forge's own
    state: see ``_spec.sealed_state``), wherever they appear.
    """
    found: list[Violation] = []
    for path, node in before.nodes.items():
        protection = before.protection[path]
        name = before.names[path]
        now = after.nodes.get(path)
        if now is None:
            found.append(Violation(path, name, protection, DELETED))
        elif now.kind != node.kind:
            found.append(Violation(path, name, protection, REPLACED))
        elif protection in (FROZEN, GROWS) and not node.same_content(now):
            # Content, link target or permissions; a folder's own times may move.
            found.append(Violation(path, name, protection, MODIFIED))
    for path, node in after.nodes.items():
        if path in before.nodes or after.protection.get(path) != FROZEN:
            continue
        parent = os.path.dirname(path)
        earlier_parent = before.nodes.get(parent)
        in_frozen_folder = earlier_parent is not None and earlier_parent.kind == DIRECTORY
        # A folder where a state file goes holds no decision: Forge's next
        # write of that file fails, and the loop stops on its state gate.
        born = node.kind != DIRECTORY and sealed is not None and sealed(after.names[path])
        if in_frozen_folder or born:
            name = after.names[path]
            found.append(Violation(path, name, FROZEN, ADDED))
    return sorted(found, key=lambda v: v.path)
