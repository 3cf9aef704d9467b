"""``python -m orchestra._scripted install DIR``: the proven agent CLIs, for the test suite."""

from __future__ import annotations

import sys
from pathlib import Path

from .._errors import ForgeError
from ._install import install


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "install":
        print("usage: python -m orchestra._scripted install DIR", file=sys.stderr)
        return 2
    try:
        installed = install(Path(argv[1]))
    except ForgeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for spec in installed:
        print(f"installed {spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
