"""Crash-safe files: atomic replacement, per-change locks, and moving corrupt files aside.

A state file is only ever replaced whole: the new content goes to a temporary
file in the same folder, is flushed to disk, and is renamed over the old one,
so a crash at any instant leaves either the old file or the new one. Updates
are serialized with an advisory ``flock`` on a lock file in the change's
folder, so that concurrent ``forge`` processes never lose one another's update.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from .._errors import StateError
from ._ignore import STATE_DIR as STATE_DIR
from ._ignore import keep_out_of_git


def atomic_write(path: Path, data: bytes, *, journal: bool = False, ordinary: bool = False) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never half.

    ``journal`` lists the write in the folder's forge-writes journal first (a
    loop's own state update, not a human's reset: see :func:`note_forge_write`).
    ``ordinary`` gives the file the mode a newly created file gets under the
    process's umask (a file a person or an agent reads), not the temporary
    file's private 0600.

    Raises:
        StateError: when the folder cannot be written (read-only, disk full ...).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        keep_out_of_git(path.parent)
        fd, tmp_name = _temporary_beside(path)
    except OSError as exc:
        raise StateError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
            if ordinary:
                os.fchmod(tmp.fileno(), 0o666 & ~current_umask())
        if journal:
            # Before the rename: a check landing in between must already know it.
            note_forge_write(path, data)
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise StateError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    fsync_dir(path.parent)


def atomic_write_many(
    files: list[tuple[Path, bytes]], *, journal: bool = False, sync: bool = True
) -> None:
    """:func:`atomic_write` for several files of one folder, with one folder fsync.

    Each file is written and flushed to a temporary file first; only then are
    they renamed into place, so a crash leaves each file old or new, whole.
    ``sync=False`` leaves the flushing to the kernel (no fsync at all): for a
    caller whose own fsynced record can write the files again after a power
    loss (the store's commit journal, ``_journal.py``). A killed process
    loses nothing either way: the page cache outlives it.

    Raises:
        StateError: when the folder cannot be written (read-only, disk full ...).
    """
    if not files:
        return
    written: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                keep_out_of_git(path.parent)
                fd, tmp_name = _temporary_beside(path)
            except OSError as exc:
                raise StateError(f"cannot write {path}: {exc.strerror or exc}") from exc
            written.append((tmp_name, path))
            with os.fdopen(fd, "wb") as tmp:
                tmp.write(data)
                tmp.flush()
                if sync:
                    os.fsync(tmp.fileno())
            if journal:
                note_forge_write(path, data)
        for tmp_name, path in written:
            os.replace(tmp_name, path)
    except BaseException as exc:
        for tmp_name, _ in written:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise StateError(f"cannot write {files[0][0].parent}: {exc.strerror or exc}") from exc
        raise
    if sync:
        for folder in {path.parent for path, _ in files}:
            fsync_dir(folder)


_TEMPORARY_NUMBERS = itertools.count()


def _temporary_beside(path: Path) -> tuple[int, str]:
    """A new private file (0600) next to ``path``, to be renamed over it: its fd and name.

    Named after the process and a counter, not at random (``tempfile`` costs
    more than the write it serves on a loop's every iteration); a name a
    killed process left behind is skipped.
    """
    while True:
        name = f"{path.parent}/.{path.name}.{os.getpid()}-{next(_TEMPORARY_NUMBERS)}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue


def fsync_path(path: Path) -> None:
    """Flush a file written without fsync to disk (nothing when it does not exist).

    Raises:
        StateError: when the file exists but cannot be flushed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StateError(f"cannot flush {path}: {exc.strerror or exc}") from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise StateError(f"cannot flush {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


# A loop's own updates of protected state files are listed here by content
# hash, so that the integrity check can tell them (a verify recorded by the
# agent's stop hook, a second run's spend, a human's waiver) from an agent's
# edit. Human resets (--reset-breaker, spend --reset, circuit --reset) are not
# listed: run by an agent mid-iteration, they are undone like any edit.
FORGE_WRITES = ".forge-writes"
# Likewise each line forge appends to a timeline, by hash, in a journal of its
# own: a loop appends many more lines than it writes state files, and in the
# writes journal they would push a state write still in flight (noted, not
# yet renamed) out of the few last entries the check counts as Forge's.
FORGE_LINES = ".forge-lines"


def run_by_a_person() -> bool:
    """Whether this forge command was started by a person, not from inside an agent's iteration.

    Every executor runs with ``FORGE_ITERATION`` set, and the commands an agent
    starts inherit it. A reset a person makes from another terminal is then
    journalled like forge's own writes, so no running loop undoes it; one an
    agent makes mid-iteration is not, and the integrity check undoes it. A
    seatbelt, like the guard: an agent that clears its environment on purpose
    is caught only by the reviews that follow an escalation.
    """
    return "FORGE_ITERATION" not in os.environ


def current_umask() -> int:
    """The process's umask, read without changing it where the platform allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting it, and set it back at once
    os.umask(mask)
    return mask


def note_forge_write(path: Path, data: bytes) -> None:
    """Append the hash of what forge just wrote at ``path`` to its folder's journal."""
    _note(path.parent / FORGE_WRITES, [data])


def note_forge_lines(path: Path, data: bytes) -> None:
    """Journal the hash of each line forge is about to append to ``path`` (a timeline).

    The integrity check then takes only lines in ``.forge-lines`` as a
    timeline's growth: an agent that appends an event of its own to any change's
    timeline is found, whichever loop appends beside it meanwhile.
    """
    _note(path.parent / FORGE_LINES, [line for line in data.split(b"\n") if line])


def _note(journal: Path, pieces: list[bytes]) -> None:
    # Imported here: commands that only read state (forge status) do not need it.
    import hashlib

    if not pieces:
        return
    digests = "".join(f"{hashlib.blake2b(piece, digest_size=20).hexdigest()}\n" for piece in pieces)
    try:
        fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return  # only a convenience: without it, forge's own update counts as a change
    try:
        os.write(fd, digests.encode())
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort where the platform refuses)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path`` (created if missing).

    The lock is released by the kernel when the process dies, so a crash never
    leaves a change locked.

    Raises:
        StateError: when the lock file cannot be created.
    """
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        keep_out_of_git(lock_path.parent)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StateError(f"cannot lock {lock_path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_state_bytes(path: Path) -> bytes | None:
    """A state file's bytes, or None when it does not exist (yet).

    Raises:
        StateError: when it exists but cannot be read.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def move_aside(path: Path) -> Path:
    """Rename a corrupt file to ``<name>.corrupt-<UTC timestamp>`` and return the new path.

    The timestamp makes every moved-aside file unique, so evidence is never
    overwritten by a later corruption.
    """
    target = corrupt_name(path)
    os.replace(path, target)
    fsync_dir(path.parent)
    return target


def corrupt_name(path: Path) -> Path:
    """A free ``<name>.corrupt-<UTC timestamp>`` beside ``path``, for evidence kept whole."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
        counter += 1
    return target


def utc_now_iso() -> str:
    """The wall-clock time as ISO-8601 UTC with milliseconds, as persisted everywhere."""
    return utc_iso(datetime.now(UTC).timestamp())


def utc_iso(epoch: float) -> str:
    """An epoch as ISO-8601 UTC with milliseconds, as persisted everywhere."""
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def iso_epoch(stamp: object) -> float | None:
    """A persisted time (``utc_iso``'s form) as epoch seconds; None when it is not one."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None
