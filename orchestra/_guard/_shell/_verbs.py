"""The rules for commands that delete or change the files they are given.

- **Deleting**: ``rm``, ``rmdir``, ``unlink``, ``shred``, ``trash`` (and
  ``trash-put``, ``rmtrash``, ``gvfs-trash``, ``gio trash``: recursive), the
  source of ``mv``, the files ``rename`` renames; ``rsync --delete`` deletes in its destination and
  ``--remove-source-files`` its sources.
- **Changing**: ``sed -i`` (and ``perl -i``, ``ruby -i`` for
  :mod:`._interpreters`), ``truncate``, ``tee``, ``dd of=``, ``touch``,
  ``chmod``/``chown``/``chgrp``/``chattr``/``setfacl``, ``sponge``,
  ``mkfifo``/``mknod``, the file an option names (``sort -o``, ``wget -O``,
  ``curl -o``; ``curl -O`` the last part of its URL), ``uniq``'s output operand, the destination of
  ``cp``/``mv``/``ln``/``install``/``rsync``; a recursive ``cp``/``chmod
  -R``/``rsync`` changes its whole target folder.

What deleting or changing a path harms is :mod:`._harm`'s to judge.

This runs on every tool call of an agent: it imports only :mod:`os`,
:mod:`re` and its sibling modules.
"""

from __future__ import annotations

import os
import re

from ._harm import check_delete, check_write
from ._options import has_flag, option_value, parse_options
from ._state import Arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis, Handler, State


def _rm(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    options, targets = parse_options(argv)
    recursive = verb in _TRASH or has_flag(options, "rR", "--recursive")
    for target in targets:
        check_delete(analysis, verb, target, state, recursive=recursive)


_TRASH = frozenset({"trash", "trash-put", "rmtrash", "gvfs-trash", "gio trash"})


def _gio(analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """``gio trash`` (a folder and all it holds), ``gio remove``; ``gio move``/``copy``."""
    if not argv or argv[0].opaque:
        return
    sub = argv[0].text
    if sub in ("trash", "remove", "rm"):
        _rm(analysis, "gio trash" if sub == "trash" else "gio remove", argv[1:], state, stdin)
    elif sub in ("move", "mv", "copy", "cp"):
        move(analysis, "mv" if sub in ("move", "mv") else "cp", argv[1:], state, stdin)


def _rmdir(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    options, targets = parse_options(argv)
    parents = has_flag(options, "p", "--parents")
    for target in targets:
        check_delete(analysis, verb, target, state, recursive=False)
        text = target.text.rstrip("/")
        while parents and not target.opaque and "/" in text:
            text = text.rsplit("/", 1)[0]
            check_delete(analysis, verb, Arg(text), state, recursive=False)


def move(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``mv``, ``cp``, ``ln`` and ``install``: where things land, and what ``mv`` takes away."""
    with_value = frozenset(
        {"-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "-g", "--owner"}
    )
    options, operands = parse_options(argv, with_value)
    if verb == "git mv" and has_flag(options, "n", "--dry-run"):
        return
    if verb == "install" and has_flag(options, "d", "--directory"):
        for operand in operands:
            check_write(analysis, verb, operand, state, follow=False)
        return
    directory = option_value(options, "-t", "--target-directory")
    plain = has_flag(options, "T", "--no-target-directory")
    if directory is not None:
        sources, destination = operands, Arg(directory)
    elif verb == "ln" and len(operands) == 1:
        sources, destination = operands, Arg(".")
    elif len(operands) >= 2:
        sources, destination = operands[:-1], operands[-1]
    else:
        return
    if verb in ("mv", "git mv"):
        for source in sources:
            check_delete(analysis, verb, source, state, recursive=True)
    recursive = verb == "cp" and has_flag(options, "rRa", "--recursive", "--archive")
    follow = verb in ("cp", "install")
    into = directory is not None or (
        not plain and not destination.opaque and _is_dir(destination.text, state)
    )
    if not into or destination.opaque:
        check_write(analysis, verb, destination, state, follow=follow, recursive=recursive)
        return
    for source in sources:
        if source.opaque:
            check_write(analysis, verb, destination, state, recursive=True)
            continue
        name = os.path.basename(source.text.rstrip("/")) or source.text
        landing = Arg(os.path.join(destination.text, name))
        check_write(analysis, verb, landing, state, follow=follow, recursive=recursive)


def _rename(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``rename EXPR FILE…`` (and ``rename FROM TO FILE…``): each file is moved away."""
    options, operands = parse_options(argv, frozenset({"-e"}))
    if has_flag(options, "n", "--no-act", "--dry-run"):
        return
    files = operands if option_value(options, "-e") is not None else operands[1:]
    for name in files:
        check_delete(analysis, verb, name, state, recursive=True)


def _rsync(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """The destination changes (and with ``--delete*`` loses what the sources lack)."""
    options, operands = parse_options(argv, _RSYNC_VALUES)
    if has_flag(options, "n", "--dry-run") or len(operands) < 2:
        return
    local = [a for a in operands if a.opaque or not re.match(_REMOTE, a.text)]
    *sources, destination = operands
    if destination in local:
        if any(name.startswith("--del") for name, _ in options):
            check_delete(analysis, f"{verb} --delete", destination, state, recursive=True)
        check_write(analysis, verb, destination, state, recursive=True)
    if option_value(options, "--remove-source-files") is not None:
        for source in sources:
            if source in local:
                check_delete(
                    analysis, f"{verb} --remove-source-files", source, state, recursive=True
                )


_REMOTE = r"[^/]*:"  # host:path, user@host:path, rsync://…; compiled on first use
_RSYNC_VALUES = frozenset(
    {"-e", "--rsh", "-f", "--filter", "--exclude", "--include", "-T", "--temp-dir", "-B"}
    | {"--backup-dir", "--log-file", "--files-from", "--exclude-from", "--include-from"}
    | {"--chmod", "--port", "--password-file", "--partial-dir", "--compare-dest", "--suffix"}
    | {"--copy-dest", "--link-dest", "--max-size", "--min-size", "--timeout", "--bwlimit"}
)


def _is_dir(text: str, state: State) -> bool:
    if not os.path.isabs(text) and state.cwd is None:
        return False
    return os.path.isdir(os.path.join(state.cwd or "/", text))


def _change(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """Commands that change the files they are given: ``truncate``, ``tee``, ``touch``, …"""
    with_value = _CHANGE_VALUES.get(verb, frozenset())
    options, operands = parse_options(argv, with_value)
    if verb in ("chmod", "chown", "chgrp"):
        # chmod -w FILE: the mode looked like an option, so every operand is a file.
        mode_option = verb == "chmod" and any(re.fullmatch(r"-[rwxXst]+", n) for n, _ in options)
        if option_value(options, "--reference") is None and not mode_option:
            operands = operands[1:]
    if verb in ("mknod",):
        operands = operands[:1]  # mknod NAME TYPE [MAJOR MINOR]
    if verb == "chattr":
        operands = [a for a in operands if a.opaque or a.text[:1] not in "+="]
    if verb == "dd":
        operands = [Arg(a.text[3:]) for a in argv if a.text.startswith("of=") and not a.opaque]
    recursive = verb in ("chmod", "chown", "chgrp") and has_flag(options, "R", "--recursive")
    for operand in operands:
        check_write(analysis, verb, operand, state, recursive=recursive)


def _output(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """Commands told by an option where to write: ``sort -o``, ``wget -O``, ``curl -o``."""
    names = _OUTPUT_OPTIONS[verb]
    values = frozenset(n for n in names if not n.startswith("--")) | _OUTPUT_VALUES.get(verb, set())
    options, operands = parse_options(argv, values)
    for name, value in options:
        if name in names and value not in ("", "-"):
            check_write(analysis, verb, Arg(value), state)
    if verb == "uniq" and len(operands) >= 2:
        check_write(analysis, verb, operands[1], state)
    if verb == "curl" and has_flag(options, "O", "--remote-name", "--remote-name-all"):
        for url in operands:  # curl -O https://host/a/forge.toml writes ./forge.toml
            name = url.text.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            check_write(analysis, verb, Arg(name, url.opaque), state)


_OUTPUT_OPTIONS = {
    "sort": frozenset({"-o", "--output"}),
    "wget": frozenset({"-O", "--output-document", "-o", "--output-file", "-a", "--append-output"}),
    "curl": frozenset({"-o", "--output", "-c", "--cookie-jar", "-D", "--dump-header"}),
    "uniq": frozenset(),
}
_OUTPUT_VALUES = {
    "sort": {"-k", "-t", "-S", "-T", "--key", "--field-separator"},
    "wget": {"-P", "-e", "-U", "-t", "-T", "-w"},
    "curl": {"-d", "-H", "-X", "-u", "-A", "-e", "-F", "-T", "-b", "-x", "-m", "-w", "-K"},
    "uniq": {"-f", "-s", "-w"},
}


_CHANGE_VALUES = {
    "truncate": frozenset({"-s", "--size", "-r", "--reference"}),
    "touch": frozenset({"-r", "--reference", "-d", "--date", "-t"}),
    "tee": frozenset({"--output-error"}),
    "mknod": frozenset({"-m", "--mode"}),
    "mkfifo": frozenset({"-m", "--mode"}),
    "setfacl": frozenset({"-m", "--modify", "-x", "--remove", "-M", "-X", "--set", "--set-file"}),
}


def in_place(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``sed -i``, ``perl -i``, ``ruby -i``: the files after the script change."""
    script_given = False
    editing = False
    files: list[Arg] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        text = arg.text
        index += 1
        if arg.opaque or not text.startswith("-") or text == "-":
            files.append(arg)
            continue
        if text == "--":
            files.extend(argv[index:])
            break
        if text.startswith("--"):
            name = text.partition("=")[0]
            editing = editing or name == "--in-place"
            if name in ("--expression", "--file"):
                script_given = True
                index += "=" not in text
            continue
        letters = text[1:]
        for position, letter in enumerate(letters):
            if letter == "i":
                editing = True
                if text == "-i" and index < len(argv) and argv[index].text == "":
                    index += 1  # BSD sed -i '': the empty backup suffix
                break
            takes_rest, takes_next = _SCRIPT_OPTIONS[verb]
            if letter in takes_rest:
                script_given = script_given or letter in "efE"
                if position == len(letters) - 1 and letter in takes_next:
                    index += 1  # the value is the next argument
                break
    if not editing:
        return
    for target in files if script_given else files[1:]:
        check_write(analysis, verb, target, state)


# Per interpreter: option letters that take the rest of their word as a value, and
# those of them that take the next argument when nothing follows in the word.
_SCRIPT_OPTIONS = {
    "sed": ("efl", "efl"),
    "perl": ("eEIMmxdDlC0", "eEI"),
    "ruby": ("eIrCxEKTUWF0l", "eIrC"),
}


VERBS: dict[str, Handler] = {
    "rm": _rm,
    "trash": _rm,
    "trash-put": _rm,
    "rmtrash": _rm,
    "gvfs-trash": _rm,
    "gio": _gio,
    "srm": _rm,
    "shred": _rm,
    "unlink": _rm,
    "rmdir": _rmdir,
    "mv": move,
    "cp": move,
    "ln": move,
    "install": move,
    "rsync": _rsync,
    "truncate": _change,
    "tee": _change,
    "touch": _change,
    "dd": _change,
    "chmod": _change,
    "chown": _change,
    "chgrp": _change,
    "sed": in_place,
    "rename": _rename,
    "sponge": _change,
    "mkfifo": _change,
    "mknod": _change,
    "chattr": _change,
    "setfacl": _change,
    **dict.fromkeys(_OUTPUT_OPTIONS, _output),
}
