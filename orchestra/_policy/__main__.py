"""Regenerate the policy reference: ``python -m orchestra._policy docs/policy.md``.

Each file named keeps its hand-written prose; only the text between its
generated-section markers is replaced with :func:`markdown_reference`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ._reference import markdown_reference, with_reference


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the generated section of each Markdown file named on the command line."""
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        print("usage: python -m orchestra._policy FILE.md ...", file=sys.stderr)
        return 2
    reference = markdown_reference()
    for name in paths:
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        updated = with_reference(text, reference)
        if updated != text:
            path.write_text(updated, encoding="utf-8")
            print(f"updated {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
