"""The ``forge`` console script.

``forge guard`` and ``forge hook pre-tool-use`` run on every tool call of an
agent: they are dispatched here before the full command line (argparse, rich)
is imported. Everything else is parsed and run by :mod:`orchestra._cli._main`.
"""

from __future__ import annotations

import gc
import os
import sys


def entry() -> None:
    """Exit with the code of the ``forge`` command in ``sys.argv``."""
    argv = sys.argv[1:]
    if argv[:1] in (["guard"], ["hook"]):
        from ._hooks import fast

        code = fast(argv)
        if code is not None:
            sys.exit(code)
    # Starting up allocates many objects and frees few: looking for cycles
    # meanwhile is wasted time. A command that runs for long gets the
    # collector back before it starts.
    gc.disable()
    from ._main import is_brief, parse_args, run

    args = parse_args(argv)
    if not is_brief(args):
        gc.enable()
        sys.exit(run(args))
    code = run(args)
    # A brief command has closed its files: once its output is flushed, the
    # interpreter's teardown (a collection over every object, each module
    # cleared) is all that is left, and it is a tenth of such a command's time.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)  # the ordinary exit reports the failed flush, as ever
    os._exit(code)
