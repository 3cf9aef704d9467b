"""Append-only files (every change's timeline), hashed by what they grew, not whole.

A timeline gains a few events each iteration and is never rewritten, so
hashing it whole for every manifest would cost a loop more with each
iteration. For each such file a manifest keeps what it hashed: the size, the
inode, the bytes themselves (they are also the snapshot a restore puts back)
and the hash state at their end. The next manifest then reads only what was
appended and carries the hash on from there.

Whether the bytes already held may be trusted without reading them again
depends on who could have written meanwhile:

- ``trusted`` (the manifest taken before an iteration, while no agent runs):
  only the new bytes are read. The check never looked for harm in that window
  (the files as found become the baseline); carrying the earlier bytes over
  keeps whatever the previous manifest saw, so it judges no less.
- not trusted (after the agent ran): the file is read whole and its
  beginning compared with the bytes held, byte for byte (no hash); only the
  new bytes are hashed. A file whose beginning changed is not extended: it is
  hashed afresh and so shows as modified.

The hash is the same as a whole-file one (blake2b, carried on), so a node's
digest means the same whichever way it was taken.
"""

from __future__ import annotations

import hashlib
import os
from typing import BinaryIO

import attrs

# Past this size an append-only file is no longer held in memory: it is hashed
# whole each time, as any file, and snapshotted on disk.
HELD_LIMIT = 64 * 1024 * 1024
# Compared in pieces of this size: one buffer the allocator hands back each
# time, where reading the whole beginning would fault in fresh pages each time.
_PIECE = 256 * 1024


@attrs.frozen
class Held:
    """What a manifest hashed of one append-only file: its bytes, in pieces, and the hash.

    The bytes are kept as a few pieces, each at least as long as the ones
    after it: what a manifest gained is a new last piece, merged into the one
    before it once it is as long. So carrying the bytes on copies what was
    appended, not the whole file (each byte is copied a logarithmic number
    of times over the file's life), and they are joined only to be put back.
    """

    inode: int
    pieces: tuple[bytes, ...]
    hasher: hashlib.blake2b = attrs.field(eq=False, repr=False)

    @property
    def digest(self) -> str:
        return self.hasher.hexdigest()

    @property
    def size(self) -> int:
        return sum(map(len, self.pieces))

    def content(self) -> bytes:
        """The bytes held, whole (a copy: for a restore or a comparison)."""
        return b"".join(self.pieces)


def read_held(path: str, inode: int) -> Held | None:
    """The whole file, held, or None when it is unreadable or past ``HELD_LIMIT``."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > HELD_LIMIT:
                return None
            content = handle.read()
    except OSError:
        return None
    if len(content) > HELD_LIMIT:
        return None
    return Held(inode, (content,), hashlib.blake2b(content, digest_size=20))


def extend(path: str, info: os.stat_result, held: Held, *, trusted: bool) -> Held | None:
    """``held`` carried on over what the file gained since; None when it cannot be.

    None when the file is not the one held (another inode), is shorter, grew
    past ``HELD_LIMIT``, cannot be read, or (not ``trusted``) no longer begins
    with the bytes held.
    """
    size = held.size
    if info.st_ino != held.inode or info.st_size < size or info.st_size > HELD_LIMIT:
        return None
    try:
        with open(path, "rb") as handle:
            if trusted:
                handle.seek(size)
            elif not all(_continues_with(handle, piece) for piece in held.pieces):
                return None
            # To its end as it is now (read() sizes its buffer by the file's, where
            # a read of HELD_LIMIT would first allocate all of it).
            tail = handle.read()
    except OSError:
        return None
    if len(tail) + size > HELD_LIMIT:
        return None
    if not tail:
        return held
    hasher = held.hasher.copy()
    hasher.update(tail)
    pieces = [*held.pieces, tail]
    while len(pieces) > 1 and len(pieces[-1]) >= len(pieces[-2]):
        last = pieces.pop()
        pieces[-1] += last
    return Held(held.inode, tuple(pieces), hasher)


def _continues_with(handle: BinaryIO, content: bytes) -> bool:
    """Whether the file, read on from where it stands, goes on with ``content``."""
    offset = 0
    while offset < len(content):
        piece = handle.read(min(_PIECE, len(content) - offset))
        if not piece or not content.startswith(piece, offset):
            return False
        offset += len(piece)
    return True
