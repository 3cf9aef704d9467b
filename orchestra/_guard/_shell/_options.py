"""Reading a command's arguments as GNU-style options and operands.

Short options cluster (``-rf``), ``--name=value`` and options given in
``with_value`` take a value, ``--`` ends the options. An opaque argument is
always an operand: what it will be is known only when the command runs.

This runs on every tool call of an agent: it imports nothing at run time.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Arg


def parse_options(
    argv: list[Arg], with_value: frozenset[str] = frozenset(), *, first: bool = False
) -> tuple[list[tuple[str, str]], list[Arg]]:
    """GNU-style (option, value) pairs and operands; ``first``: options end at the first operand."""
    options: list[tuple[str, str]] = []
    operands: list[Arg] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        text = arg.text
        index += 1
        if arg.opaque or not text.startswith("-") or text == "-" or (first and operands):
            operands.append(arg)
            if first:
                operands.extend(argv[index:])
                break
            continue
        if text == "--":
            operands.extend(argv[index:])
            break
        if text.startswith("--") and "=" in text:
            name, _, value = text.partition("=")
            options.append((name, value))
        elif text in with_value:
            value = argv[index].text if index < len(argv) else ""
            options.append((text, value))
            index += 1
        elif not text.startswith("--") and text[:2] in with_value:
            options.append((text[:2], text[2:]))
        else:
            options.append((text, ""))
    return options, operands


def has_flag(options: list[tuple[str, str]], letters: str, *longs: str) -> bool:
    """Whether a short option holds one of ``letters`` or a long one is one of ``longs``."""
    for name, _ in options:
        if name.startswith("--"):
            if name in longs:
                return True
        elif any(letter in name[1:] for letter in letters):
            return True
    return False


def option_value(options: list[tuple[str, str]], *names: str) -> str | None:
    """The value of the first of the options ``names`` given, or None."""
    return next((value for name, value in options if name in names), None)
