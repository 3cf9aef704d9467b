"""What an iteration did to the protected paths: two manifests in, violations out.

Pure: no I/O. An ``exist`` path must still exist (as the same kind of thing);
a ``frozen`` path must be unchanged, and nothing may appear inside a frozen
directory that existed. A ``grows`` file whose content changed is reported as
modified here; the check then tells an append (allowed) from an edit. A
protected path that did not exist before and appears is not a violation:
creating ``AGENTS.md`` harms nothing.
"""

from __future__ import annotations

import os

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


def violations(before: Manifest, after: Manifest) -> list[Violation]:
    """Every harm done between two manifests, in path order."""
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
    for path, _node in after.nodes.items():
        if path in before.nodes or after.protection.get(path) != FROZEN:
            continue
        parent = os.path.dirname(path)
        earlier_parent = before.nodes.get(parent)
        if earlier_parent is not None and earlier_parent.kind == DIRECTORY:
            name = after.names[path]
            found.append(Violation(path, name, FROZEN, ADDED))
    return sorted(found, key=lambda v: v.path)
