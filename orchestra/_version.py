"""Forge's version, in a module that imports nothing.

Its one home: the package re-exports it as ``orchestra.__version__``, and a
module inside the package that needs it imports it from here, never from the
package root (which would make a low-level module depend on the public API).
Keep it equal to ``version`` in ``pyproject.toml``.
"""

__version__ = "0.1.0"
