"""The ``forge`` console script.

``forge guard`` and ``forge hook pre-tool-use`` run on every tool call of an
agent: they are dispatched here before the full command line (argparse, rich)
is imported. Everything else is parsed and run by :mod:`orchestra._cli._main`.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # not typing's: the agent hooks start here
if TYPE_CHECKING:
    from typing import NoReturn


def entry() -> None:
    """Exit with the code of the ``forge`` command in ``sys.argv``."""
    argv = sys.argv[1:]
    if argv[:1] in (["guard"], ["hook"]):
        from ._hooks import fast

        code = fast(argv)
        if code is not None:
            _leave(code)
    # Starting up allocates many objects and frees few: looking for cycles
    # meanwhile is wasted time. A command that runs for long gets the
    # collector back before it starts.
    gc.disable()
    from ._main import is_brief, parse_args, run

    args = parse_args(argv)
    try:
        os.getcwd()
    except FileNotFoundError:
        # Every command finds its project from here: say so, not a traceback.
        sys.stderr.write("forge: the current folder no longer exists: cd into the project\n")
        sys.exit(2)
    if not is_brief(args):
        gc.enable()
        sys.exit(run(args))
    _leave(run(args))


def _leave(code: int) -> NoReturn:
    """Exit with ``code`` once the output is flushed, skipping the interpreter's teardown.

    Only for a command that has closed its files and started no thread: the
    teardown (a collection over every object, each module cleared) is all
    that is left, and it is a tenth of a brief command's time, an eighth of
    an agent hook's.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)  # the ordinary exit reports the failed flush, as ever
    os._exit(code)
