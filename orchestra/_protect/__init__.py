"""Protected paths: what an agent must not destroy, checked before and after it acts.

Two sides. The agent hooks (``forge guard``, ``forge hook pre-tool-use``, in
``orchestra._guard``) run on every tool call of an agent and ask, before
anything runs, whether a shell command or a file write would harm a
protected path; they read :mod:`._spec` (the protected paths) and
:mod:`._config` (the project's lists, cached) from here, and import only the
standard library's cheapest parts. The loop's side, after the agent acted, takes manifests
(:mod:`._manifest`), compares them (:mod:`._diff`), restores what was harmed
(:mod:`._restore`) and judges the iteration (:mod:`._check`); it may import
anything.

Names are resolved on first use, so that a hook importing this facade pays
only for the modules behind the names it asks for.
"""

from __future__ import annotations

import importlib

# Not typing's: importing typing costs more than the agent hooks' whole check.
# Type checkers treat a module-level TYPE_CHECKING as True all the same.
TYPE_CHECKING = False

_EXPORTS = {
    "INTEGRITY": "._check",
    "IntegrityCheck": "._check",
    "IntegrityReport": "._check",
    "EXIST": "._spec",
    "FROZEN": "._spec",
    "Entry": "._spec",
    "ProtectSpec": "._spec",
    "integrity_check": "._check",
    "load_spec": "._config",
}

if TYPE_CHECKING:
    from ._check import INTEGRITY as INTEGRITY
    from ._check import IntegrityCheck as IntegrityCheck
    from ._check import IntegrityReport as IntegrityReport
    from ._check import integrity_check as integrity_check
    from ._config import load_spec as load_spec
    from ._spec import EXIST as EXIST
    from ._spec import FROZEN as FROZEN
    from ._spec import Entry as Entry
    from ._spec import ProtectSpec as ProtectSpec


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(_EXPORTS)
