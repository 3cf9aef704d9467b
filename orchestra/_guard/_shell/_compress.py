"""Compressors: they replace the file they are given with its (de)compressed form.

``gzip FILE`` writes ``FILE.gz`` and deletes ``FILE``; ``gunzip FILE.gz`` (or
``gzip -d``) writes ``FILE`` and deletes ``FILE.gz``; ``-r`` does so for all a
folder holds. ``-k``/``--keep`` keeps the input, ``-c``/``--stdout``, ``-t``
and ``-l`` write no file. The same for ``bzip2``, ``xz``, ``lzma``, ``lz4``,
``pigz``, ``compress`` and ``zstd`` (which keeps its input unless ``--rm``).

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

# Per compressor: its suffix, and whether its name decompresses.
_TOOLS = {
    "gzip": (".gz", False),
    "pigz": (".gz", False),
    "gunzip": (".gz", True),
    "unpigz": (".gz", True),
    "bzip2": (".bz2", False),
    "bunzip2": (".bz2", True),
    "xz": (".xz", False),
    "unxz": (".xz", True),
    "lzma": (".lzma", False),
    "unlzma": (".lzma", True),
    "lz4": (".lz4", False),
    "compress": (".Z", False),
    "uncompress": (".Z", True),
    "zstd": (".zst", False),
    "unzstd": (".zst", True),
}


def compressor(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """The files written, and the inputs deleted."""
    suffix, decompress = _TOOLS[verb]
    options, operands = parse_options(argv, frozenset({"-S", "--suffix", "-b", "-T", "-o"}))
    if has_flag(options, "ctlh", "--stdout", "--to-stdout", "--test", "--list", "--help"):
        return
    decompress = decompress or has_flag(options, "d", "--decompress", "--uncompress")
    keeps = verb.endswith("zstd") and not has_flag(options, "", "--rm")
    keeps = keeps or has_flag(options, "k", "--keep")
    recursive = has_flag(options, "r", "--recursive")
    for operand in operands:
        text = operand.text
        if decompress:
            output = text[: -len(suffix)] if text.endswith(suffix) else text
        else:
            output = text + suffix
        check_write(analysis, verb, Arg(output, operand.opaque), state, recursive=recursive)
        if not keeps:
            check_delete(analysis, verb, operand, state, recursive=recursive)


COMPRESSORS: dict[str, Handler] = dict.fromkeys(_TOOLS, compressor)
