"""Re-exports resolved on first use, for the subpackage facades.

A facade that imported every module behind it would make ``forge status``
pay for trio, rich and the secret scan because one module it needs lives in
the same package as the supervisor. Instead each facade names where its
names live, and a name's module is imported when the name is first read.
"""

from __future__ import annotations

import importlib
import sys

# Not typing's, nor collections.abc at run time: the agent hooks' facade
# (orchestra._guard) uses this module on every tool call. Type checkers treat
# a module-level TYPE_CHECKING as True all the same.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for the names in ``exports``.

    Args:
        package: the facade's ``__name__``.
        exports: each relative module (``"._model"``) and the names it provides.
    """
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        # Kept on the package, so the next read is an ordinary attribute.
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        # The API, without the facade's own helpers (TYPE_CHECKING, lazy_exports).
        private = (name for name in vars(sys.modules[package]) if name.startswith("_"))
        return sorted({*private, *where})

    return __getattr__, __dir__
