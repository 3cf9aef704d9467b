"""Archivers: they write their archive, delete what they packed, extract over the tree.

- ``tar`` creating or updating (``c``, ``r``, ``u``, ``A``) writes its archive
  (``-f``); ``--remove-files`` deletes the files it packed, folders and all.
- ``zip`` writes its archive (the first operand); ``-m``/``--move`` deletes the
  files it packed (folders and all with ``-r``).

Extracting (``tar x``, ``unzip``, ``7z x``, ``cpio -i``) writes what the
archive holds into its destination (``-C``, ``-d``, ``-o``, ``-D``; the
working folder otherwise), over what is there. An archive that exists and is
small enough (:data:`MAX_ARCHIVE`, :data:`MAX_MEMBERS`, :data:`MAX_UNPACKED`)
is read: each member it holds is judged as a write. Any other — read from
stdin, missing yet, too large, unreadable — is known only when it runs: the
extraction is refused when its destination holds a frozen path. Listing
(``tar t``, ``unzip -l``, ``7z l``, ``cpio -t``) and extracting to stdout
(``tar -O``, ``unzip -p``) write nothing. (``rsync --delete`` and
``--remove-source-files`` are :mod:`._verbs`'.)

This runs on every tool call of an agent that runs one of these: it imports
only :mod:`os` and its sibling modules, and :mod:`tarfile` or :mod:`zipfile`
for an extraction whose archive it reads.
"""

from __future__ import annotations

import os

from ._harm import FROZEN_ONLY, PATH_WORK, check_delete, check_unknown, check_write
from ._options import has_flag, option_value, parse_options
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ._state import Analysis, Handler, State

MAX_ARCHIVE = 4 << 20
"""The largest archive (bytes, compressed) whose members the guard reads before extracting."""
MAX_MEMBERS = 4096
"""The most members read from one archive; past it, what it holds is taken as unknown."""
MAX_UNPACKED = 32 << 20
"""The most bytes a compressed tar archive is unpacked to while reading its members."""

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
    extracts = any(letter == "x" for letter in letters) or any(
        name in ("--extract", "--get") for name in longs
    )
    to_stdout = "O" in letters or "--to-stdout" in longs
    if extracts and not to_stdout:
        folder = _tar_folder(argv)
        known = None if archive is None or archive.opaque else archive.text
        _extract(analysis, verb, known if known != "-" else None, folder, state, _tar_names)
    if "--remove-files" in longs:
        for operand in operands:
            check_delete(analysis, f"{verb} --remove-files", operand, state, recursive=True)


def _tar_folder(argv: list[Arg]) -> Arg:
    """Where ``tar`` extracts: the last ``-C``/``--directory`` before the members."""
    folder = Arg(".")
    for index, arg in enumerate(argv):
        text = arg.text
        if text in ("-C", "--directory") and index + 1 < len(argv):
            folder = argv[index + 1]
        elif text.startswith("--directory="):
            folder = Arg(text.partition("=")[2], arg.opaque)
        elif text.startswith("-C") and len(text) > 2 and not arg.opaque:
            folder = Arg(text[2:])
    return folder


def _extract(
    analysis: Analysis,
    verb: str,
    archive: str | None,
    folder: Arg,
    state: State,
    names: Callable[[str], list[str] | None],
) -> None:
    """Judge extracting ``archive`` (None: known only when it runs) into ``folder``."""
    members = None
    if archive is not None and not folder.opaque and (state.cwd or os.path.isabs(archive)):
        path = os.path.join(state.cwd or "/", archive)
        try:
            small = os.path.isfile(path) and os.path.getsize(path) <= MAX_ARCHIVE
        except OSError:
            small = False
        members = names(path) if small else None
    where = f"{verb} extracting {archive or 'an archive known only when it runs'}"
    if members is None:
        unknown = Arg(folder.text.rstrip("/") + "/" if folder.text else "", opaque=True)
        check_unknown(analysis, where, unknown, state, FROZEN_ONLY, "change")
        return
    if not analysis.spend(PATH_WORK * len(members)):
        return
    for member in members:
        check_write(analysis, where, Arg(os.path.join(folder.text, member)), state)


def _tar_names(path: str) -> list[str] | None:
    """The members of a tar archive (any compression Python reads), or None."""
    import tarfile  # only for an extraction: costly to import

    names: list[str] = []
    unpacked = 0
    try:
        with tarfile.open(path) as archive:
            # Member by member, each size counted before reading past it: a small
            # compressed archive can unpack to gigabytes, which the guard does not read.
            while (member := archive.next()) is not None:
                names.append(member.name.lstrip("/"))  # tar strips a leading /
                unpacked += member.size
                if len(names) > MAX_MEMBERS or unpacked > MAX_UNPACKED:
                    return None
    except (OSError, tarfile.TarError, EOFError, ValueError):
        return None
    return names


def _zip_names(path: str) -> list[str] | None:
    """The members of a zip archive, or None."""
    import zipfile  # only for an extraction: costly to import

    try:
        with zipfile.ZipFile(path) as archive:  # its directory only: nothing is unpacked
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return None
    return names if len(names) <= MAX_MEMBERS else None


def _unzip(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``unzip ARCHIVE [MEMBERS] [-d FOLDER]``; ``-l``/``-t``/``-v``/``-p``/``-Z`` write nothing."""
    options, operands = parse_options(argv, frozenset({"-d", "-x", "-P"}))
    if has_flag(options, "lptvZz") or not operands:
        return
    archive = operands[0]
    folder = Arg(option_value(options, "-d") or ".")
    _extract(analysis, verb, None if archive.opaque else archive.text, folder, state, _zip_names)


def _7z(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``7z x``/``e ARCHIVE [-oFOLDER]``: its members are known only when it runs."""
    if not argv or argv[0].opaque or argv[0].text not in ("x", "e"):
        return
    folder = next((Arg(a.text[2:], a.opaque) for a in argv if a.text.startswith("-o")), Arg("."))
    _extract(analysis, verb, None, folder, state, _zip_names)


def _cpio(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``cpio -i`` (its archive on stdin) and ``cpio -p FOLDER`` write what they are given."""
    options, operands = parse_options(argv, frozenset({"-D", "--directory", "-H", "-E", "-F"}))
    folder = Arg(option_value(options, "-D", "--directory") or ".")
    if has_flag(options, "i", "--extract") and not has_flag(options, "t", "--list"):
        _extract(analysis, verb, None, folder, state, _zip_names)
    elif has_flag(options, "p", "--pass-through") and operands:
        _extract(analysis, verb, None, operands[0], state, _zip_names)


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


ARCHIVERS: dict[str, Handler] = {
    "tar": _tar,
    "gtar": _tar,
    "bsdtar": _tar,
    "zip": _zip,
    "unzip": _unzip,
    "7z": _7z,
    "7za": _7z,
    "7zz": _7z,
    "cpio": _cpio,
}
