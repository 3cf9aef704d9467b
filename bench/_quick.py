"""``--quick``, shared by every bench: tiny sizes, one or two runs, nothing judged.

A quick run proves the bench still works against today's Forge (tests/test_benches.py
runs each one so); its figures are printed as usual but mean little, and no goal or
threshold is judged from them.
"""

from __future__ import annotations

import argparse
import os
import sys

# How an installed forge runs: its bytecode cached on disk. This machine's
# environment may set PYTHONDONTWRITEBYTECODE, which would have every forge a
# bench starts compile its sources again; and NO_COLOR changes what is printed.
FORGE_ENV = {
    k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NO_COLOR")
}


def parse_args(parser: argparse.ArgumentParser, **quick: object) -> argparse.Namespace:
    """Parse the command line; with ``--quick``, ``quick`` replaces the defaults.

    Options given explicitly still win over the quick sizes.
    """
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, one or two runs, no goal judged: checks that the bench works",
    )
    if "--quick" in sys.argv[1:]:
        parser.set_defaults(**quick)
    return parser.parse_args()


def verdict(args: argparse.Namespace, met: bool) -> str:
    """``met`` or ``NOT met``; in quick mode, that nothing is judged."""
    if args.quick:
        return "not judged (--quick)"
    return "met" if met else "NOT met"
