"""Measuring an iteration's signals in the workspace: git, the tasks files, the JUnit report.

A snapshot is taken before each iteration and compared after it. In a git
repository a snapshot is one ``git status`` (kept in the snapshot as its
:class:`TreeStatus`) and only what differs from HEAD is hashed; elsewhere every
file is hashed. The snapshot taken after an iteration can serve as the next
iteration's "before" (:meth:`WorkspaceProbe.mark_seen`), so a quiet loop costs
one ``git status`` an iteration. More git runs only when HEAD moved (what the
commits changed) or when a file that matched HEAD changed (its HEAD content).
"""

from __future__ import annotations

import hashlib
import os
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from .._executor import IterationOutcome
from .._git import git_output
from .._policy import StagnationPolicy
from .._state import STATE_DIR
from .._treestatus import TreeStatus, committed_changes, read_status, work_tree_prefix
from .._verify import VerifyReport
from ._signals import Signals, error_fingerprint, error_lines_of

_DELETED = "<deleted>"
_CHECKED = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[[xX]\]\s", re.MULTILINE)
_UNCHECKED = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[ \]\s", re.MULTILINE)
_SKIPPED = {".git", STATE_DIR, "node_modules", ".venv", "__pycache__", ".mypy_cache"}
_MAX_FILES = 50_000
_MAX_HASHED_BYTES = 64 * 1024 * 1024
_MAX_LISTED = 50  # modified files named in an iteration's signals


@attrs.frozen
class FileState:
    """A file's content as two hashes: exact, and with whitespace ignored."""

    exact: str
    loose: str


@attrs.frozen
class Snapshot:
    """The workspace at one moment.

    Attributes:
        head: The HEAD commit (None outside git or on an unborn branch).
        files: The states of the files that differ from HEAD (every file outside git).
        tasks_checked: Checked boxes in the tasks files.
        git: Whether the workspace is a git work tree.
        status: The ``git status`` the snapshot was made from (None outside
            git, or when git did not answer): what the verify fingerprint and
            the secret scan reuse instead of asking git again.
    """

    head: str | None
    files: Mapping[str, FileState]
    tasks_checked: int
    git: bool
    status: TreeStatus | None = None


class WorkspaceProbe:
    """Takes snapshots of one loop's working tree and turns two of them into Signals."""

    def __init__(
        self, workdir: Path, policy: StagnationPolicy, *, forge_files: Iterable[str] = ()
    ) -> None:
        self._workdir = workdir
        self._policy = policy
        # Files Forge itself writes in the tree (the lessons file): never the agent's work.
        self._forge_files = frozenset(forge_files)
        # git reports paths from the repository's top; the loop may work in a
        # subfolder. Where that is does not change while the loop runs: asked once.
        prefix = work_tree_prefix(workdir)
        self._git = prefix is not None
        self._prefix = prefix or ""
        self._seen: dict[str, set[str]] = {}  # path -> exact hashes at earlier boundaries
        self._tests = _read_junit(workdir / policy.junit_xml)
        self._junit_stamp = _stamp(workdir / policy.junit_xml)
        self._lint_errors: int | None = None
        self._test_globs = [_glob_regex(glob) for glob in policy.test_globs]

    @property
    def workdir(self) -> Path:
        """The folder the probe watches."""
        return self._workdir

    def snapshot(self) -> Snapshot:
        """The workspace now (call before the iteration); its states count as seen."""
        return self.mark_seen(self._take())

    def take(self) -> Snapshot:
        """The workspace now, without counting it as seen (the end of an iteration)."""
        return self._take()

    def mark_seen(self, snapshot: Snapshot) -> Snapshot:
        """Count ``snapshot``'s states as seen and return it, to serve as the next "before".

        The snapshot :meth:`take` returned after an iteration, passed here once
        it has been measured, stands for a fresh :meth:`snapshot` before the
        next iteration without asking git again.
        """
        for path, state in snapshot.files.items():
            self._seen.setdefault(path, set()).add(state.exact)
        return snapshot

    def _take(self) -> Snapshot:
        if not self._git:
            files = {
                path: self._state(path)
                for path in _all_files(self._workdir)
                if path not in self._forge_files
            }
            return Snapshot(None, files, self._tasks_checked(), False)
        status = read_status(self._workdir, self._prefix)
        if status is None:  # git did not answer: nothing to compare, as if nothing changed
            return Snapshot(None, {}, self._tasks_checked(), True)
        files = {
            entry.path: self._state(entry.path)
            for entry in status
            if not _ignored(entry.path) and entry.path not in self._forge_files
        }
        return Snapshot(status.head, files, self._tasks_checked(), True, status)

    def measure(
        self,
        before: Snapshot,
        outcome: IterationOutcome,
        verify: VerifyReport | None,
        *,
        after: Snapshot | None = None,
    ) -> Signals:
        """The iteration's signals: what changed from ``before`` to ``after`` (default: now)."""
        after = after if after is not None else self._take()
        changed = self._changed(before, after)
        reverts = 0
        for path, (old, new) in changed.items():
            seen = self._seen.setdefault(path, set())
            if new.exact != _DELETED and new.exact in seen - {old.exact}:
                reverts += 1
            seen.update((old.exact, new.exact))
        meaningful = {path for path, (old, new) in changed.items() if old.loose != new.loose}
        tests = {path for path in changed if any(rx.fullmatch(path) for rx in self._test_globs)}
        passing, failing = self._tests_changed()
        lint_errors, lint_resolved = self._lint(verify)
        diff = None
        if changed:
            summary = "\n".join(f"{p}:{new.exact}" for p, (_, new) in sorted(changed.items()))
            diff = hashlib.sha256(summary.encode()).hexdigest()[:16]
        process = outcome.process
        error_text = outcome.observation.error
        if error_text is None and outcome.failed:
            lines = error_lines_of(list(process.output.last_lines(15)))
            error_text = "\n".join(lines) or outcome.failure
        return Signals(
            files_modified=len(changed),
            meaningful_files=len(meaningful),
            tasks_completed=max(0, after.tasks_checked - before.tasks_checked),
            tests_newly_passing=passing,
            tests_newly_failing=failing,
            lint_errors=lint_errors,
            lint_resolved=lint_resolved,
            error_fingerprint=error_fingerprint(error_text),
            output_bytes=process.output.total_bytes,
            output_lines=process.output.total_lines,
            permission_denials=outcome.observation.permission_denials,
            guard_refusals=outcome.observation.guard_refusals,
            test_files_modified=len(tests),
            meaningful_tests=len(tests & meaningful),
            failing_tests=self._failing_tests(),
            reverts=reverts,
            diff_fingerprint=diff,
            done=outcome.done,
            tests_passed=sum(1 for s in self._tests.values() if s == "pass"),
            tests_failed=sum(1 for s in self._tests.values() if s == "fail"),
            tests_skipped=sum(1 for s in self._tests.values() if s == "skip"),
            files=tuple(sorted(changed)[:_MAX_LISTED]),
            tasks_measured=any(
                (self._workdir / name).is_file() for name in self._policy.tasks_files
            ),
        )

    def _changed(self, before: Snapshot, after: Snapshot) -> dict[str, tuple[FileState, FileState]]:
        candidates = set(before.files) | set(after.files)
        committed: Mapping[str, str] | None = {}
        if self._git and before.head != after.head and before.head and after.head:
            committed = committed_changes(self._workdir, before.head, after.head)  # --relative
            candidates |= {
                p for p in committed or () if not _ignored(p) and p not in self._forge_files
            }
        changed = {}
        # A path that matched HEAD before: its earlier state is HEAD's content,
        # read from git only when HEAD holds it at all.
        clean_before = [
            p for p in candidates if p not in before.files and _in_head(p, after, committed)
        ]
        at_head = (
            _blob_states(self._workdir, before.head, clean_before, self._prefix)
            if self._git
            else {}
        )
        for path in candidates:
            old = before.files.get(path) or at_head.get(path) or FileState(_DELETED, _DELETED)
            new = after.files.get(path) or self._state(path)
            if old.exact != new.exact:
                changed[path] = (old, new)
        return changed

    def _state(self, path: str) -> FileState:
        full = self._workdir / path
        try:
            info = full.stat()
            if info.st_size > _MAX_HASHED_BYTES:
                # Too big to read each iteration: its size and mtime stand for it.
                marker = f"large:{info.st_size}:{info.st_mtime_ns}"
                return FileState(marker, marker)
            data = full.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return FileState(_DELETED, _DELETED)
        except OSError:
            return FileState("<unreadable>", "<unreadable>")
        return _hash_content(data)

    def _tasks_checked(self) -> int:
        total = 0
        for name in self._policy.tasks_files:
            try:
                text = (self._workdir / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            total += count_checked(text)
        return total

    def _failing_tests(self) -> str | None:
        """The failing tests of the last report, as one fingerprint (None: none failing)."""
        failing = sorted(name for name, state in self._tests.items() if state == "fail")
        if not failing:
            return None
        return hashlib.sha256("\n".join(failing).encode()).hexdigest()[:16]

    def _tests_changed(self) -> tuple[int, int]:
        path = self._workdir / self._policy.junit_xml
        stamp = _stamp(path)
        if stamp == self._junit_stamp:
            return 0, 0  # no new report: nothing newly passing or failing
        self._junit_stamp = stamp
        current = _read_junit(path)
        previous, self._tests = self._tests, current
        passing = sum(1 for t, s in current.items() if s == "pass" and previous.get(t) == "fail")
        failing = sum(1 for t, s in current.items() if s == "fail" and previous.get(t) == "pass")
        return passing, failing

    def _lint(self, verify: VerifyReport | None) -> tuple[int | None, int]:
        check = next((c for c in verify.checks if c.name == "lint"), None) if verify else None
        if check is None:
            return None, 0
        errors = 0 if check.passed else max(1, check.diagnostics)
        previous, self._lint_errors = self._lint_errors, errors
        return errors, max(0, previous - errors) if previous is not None else 0


def tasks_all_ticked(workdir: Path, tasks_files: Iterable[str]) -> bool:
    """Whether the tasks files that exist list tasks and every one is ticked: a done signal."""
    checked = 0
    for name in tasks_files:
        try:
            text = (workdir / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _UNCHECKED.search(text):
            return False
        checked += count_checked(text)
    return checked > 0


def count_checked(text: str) -> int:
    """Checkboxes checked in a Markdown text: ``- [x]`` / ``* [X]`` / ``1. [x]``, nothing else."""
    return len(_CHECKED.findall(text))


def _hash_content(data: bytes) -> FileState:
    exact = hashlib.sha256(data).hexdigest()[:16]
    loose = hashlib.sha256(b"".join(data.split())).hexdigest()[:16]
    return FileState(exact, loose)


def _in_head(path: str, after: Snapshot, committed: Mapping[str, str] | None) -> bool:
    """Whether the HEAD before the iteration may hold ``path`` (when unsure: yes)."""
    if committed is None or after.status is None:
        return True
    if path in committed:
        return committed[path] != "A"  # added by the iteration's commits
    entry = after.status.get(path)
    # Unchanged by the commits: the HEAD before holds it iff the HEAD after does.
    return entry is None or entry.in_head


def _blob_states(
    root: Path, head: str | None, paths: Iterable[str], prefix: str
) -> dict[str, FileState]:
    """The states of ``paths`` as committed in ``head`` (absent: not in that commit)."""
    wanted = list(paths)
    if head is None or not wanted:
        return {}
    request = "".join(f"{head}:{prefix}{path}\n" for path in wanted).encode()
    out = git_output(root, "cat-file", "--batch", input=request)
    states: dict[str, FileState] = {}
    position = 0
    data = out or b""
    for path in wanted:
        newline = data.find(b"\n", position)
        if newline == -1:
            break
        header = data[position:newline].split()
        position = newline + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            states[path] = _hash_content(data[position : position + size])
            position += size + 1
    return states


def _all_files(root: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIPPED]
        for name in files:
            path = Path(folder, name)
            if path.is_symlink():
                continue
            try:
                if path.stat().st_size > _MAX_HASHED_BYTES:
                    continue
            except OSError:
                continue
            found.append(path.relative_to(root).as_posix())
            if len(found) >= _MAX_FILES:
                return found
    return found


def _ignored(path: str) -> bool:
    return path.split("/", 1)[0] in _SKIPPED


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def _read_junit(path: Path) -> dict[str, str]:
    """Each test case's outcome (``pass``, ``fail``, ``skip``) from a JUnit XML report."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return {}
    outcomes = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            outcomes[name] = "fail"
        elif "skipped" in kinds:
            outcomes[name] = "skip"
        else:
            outcomes[name] = "pass"
    return outcomes


def _glob_regex(glob: str) -> re.Pattern[str]:
    """A path glob with ``**`` (any folders), ``*`` and ``?`` (within one folder)."""
    parts = []
    index = 0
    while index < len(glob):
        if glob.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif glob.startswith("**", index):
            parts.append(".*")
            index += 2
        elif glob[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif glob[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(glob[index]))
            index += 1
    return re.compile("".join(parts))
