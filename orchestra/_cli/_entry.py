"""The ``forge`` console script.

``forge guard`` and ``forge hook pre-tool-use`` run on every tool call of an
agent: they are dispatched here before the full command line (argparse, rich)
is imported. Everything else goes to :func:`orchestra._cli._main.main`.
"""

from __future__ import annotations

import sys


def entry() -> None:
    """Exit with the code of the ``forge`` command in ``sys.argv``."""
    argv = sys.argv[1:]
    if argv[:1] in (["guard"], ["hook"]):
        from ._hooks import fast

        code = fast(argv)
        if code is not None:
            sys.exit(code)
    from ._main import main

    sys.exit(main())
