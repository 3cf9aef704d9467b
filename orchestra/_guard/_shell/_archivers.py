"""Archivers that write their archive and, asked to, delete what they packed.

- ``tar`` creating or updating (``c``, ``r``, ``u``, ``A``) writes its archive
  (``-f``); ``--remove-files`` deletes the files it packed, folders and all.
- ``zip`` writes its archive (the first operand); ``-m``/``--move`` deletes the
  files it packed (folders and all with ``-r``).

Extracting (``tar x``, ``unzip``) writes whatever the archive holds, which is
known only when it runs: it is not judged. (``rsync --remove-source-files`` is
:mod:`._verbs`'.)

This runs on every tool call of an agent that runs one of these: it imports
only its sibling modules.
"""

from __future__ import annotations

from ._harm import check_delete, check_write
from ._options import has_flag, parse_options
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis, Handler, State

# tar's short options that take a value (the next argument in a cluster such as -cf).
_TAR_VALUED = "fCTXbHKLNVg"


def _tar(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    letters: list[str] = []
    longs: list[str] = []
    archive: Arg | None = None
    operands: list[Arg] = []
    pending: list[str] = []  # valued letters waiting for their argument
    for position, arg in enumerate(argv):
        text = arg.text
        if pending and not arg.opaque:
            if pending.pop(0) == "f":
                archive = arg
            continue
        if arg.opaque or (text[:1] != "-" and (position or not text.isalpha())):
            operands.append(arg)
        elif text.startswith("--"):
            name, _equals, value = text.partition("=")
            longs.append(name)
            if name == "--file" and value:
                archive = Arg(value)
        else:
            # -cf ARCHIVE, or the old style without a dash: tar czf out.tgz src
            cluster = text.lstrip("-")
            for index, letter in enumerate(cluster):
                letters.append(letter)
                if letter in _TAR_VALUED:
                    if text.startswith("-") and cluster[index + 1 :]:
                        if letter == "f":
                            archive = Arg(cluster[index + 1 :])
                        break
                    pending.append(letter)
    writes = any(letter in "cruA" for letter in letters) or any(
        name in ("--create", "--append", "--update", "--concatenate") for name in longs
    )
    if writes and archive is not None and archive.text != "-":
        check_write(analysis, verb, archive, state)
    if "--remove-files" in longs:
        for operand in operands:
            check_delete(analysis, f"{verb} --remove-files", operand, state, recursive=True)


def _zip(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    options, operands = parse_options(
        argv, frozenset({"-b", "-n", "-t", "-tt", "-P", "-O", "-Z", "-s", "-x", "-i"})
    )
    if not operands:
        return
    archive, files = operands[0], operands[1:]
    check_write(analysis, verb, archive, state)
    if has_flag(options, "m", "--move"):
        recursive = has_flag(options, "r", "--recurse-paths")
        for name in files:
            check_delete(analysis, f"{verb} -m", name, state, recursive=recursive)


ARCHIVERS: dict[str, Handler] = {"tar": _tar, "gtar": _tar, "bsdtar": _tar, "zip": _zip}
