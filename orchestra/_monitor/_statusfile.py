"""Keeping ``status.md``: each section appended, the file rewritten only when it passes a bound.

Rewriting the whole log for every iteration costs a loop the size of the log
each time. So a section is appended (one ``write`` of the section alone), and
only when the file holds ``2 × [alerts] status_log`` sections is it replaced,
atomically, by its heading and the newest ``status_log`` sections. The file
therefore always holds the newest ``status_log`` sections at least, and fewer
than twice as many: appending costs a section, the rewrite comes once every
``status_log`` iterations. A missing file is written whole (heading first).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._state import atomic_write, read_sections
from ._statuslog import render_log


class StatusLog:
    """The status log of one change, as a loop adds to it.

    Args:
        path: The file (``.forge/changes/<c>/status.md``).
        change: The change's name, for the heading.
        keep: ``[alerts] status_log``: the newest sections always kept.
    """

    def __init__(self, path: Path, change: str, keep: int) -> None:
        self._path = path
        self._change = change
        self._keep = keep
        # The sections the file holds (read from it once, on the first add).
        self._sections: list[str] | None = None

    def add(self, section: str) -> None:
        """Add one iteration's section.

        Raises:
            orchestra._errors.StateError: when the file cannot be rewritten.
        """
        keep = self._keep
        if keep <= 0:
            return
        if self._sections is None:
            self._sections = read_sections(self._path)
        sections = self._sections
        sections.append(section)
        if len(sections) >= 2 * keep or not self._append(section):
            del sections[:-keep]
            text = render_log(self._change, sections, keep)
            atomic_write(self._path, text.encode("utf-8"), ordinary=True)

    def _append(self, section: str) -> bool:
        """Append ``section`` to the file as it stands; false when there is no file to append to."""
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return False  # gone (or never written): written whole instead
        data = memoryview(f"\n{section}".encode())
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            return False
        finally:
            os.close(fd)
        return True
