"""The secret scan of one project's working tree, as its policy sets it up.

What ``forge secscan`` and the secscan gate share: the rules named by
``[secscan]``, the project's cache and waivers, and the verdict (unwaived
findings at or above ``fail_on``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import attrs

from .._policy import SecscanPolicy
from .._state import STATE_DIR
from .._treestatus import TreeStatus, tree_delta
from ._findings import Finding, ScanResult
from ._redactor import SecretRedactor
from ._rules import Ruleset, load_rules
from ._scan import TreeScan, full_scan, rescan
from ._waivers import apply_waivers, load_waivers

_SHOWN = 3


@attrs.frozen
class SecscanReport:
    """One scan with the waivers applied."""

    result: ScanResult
    kept: tuple[Finding, ...]
    waived: tuple[Finding, ...]
    fail_on: str

    @property
    def blocking(self) -> tuple[Finding, ...]:
        """Unwaived findings at or above ``fail_on``: what opens the gate."""
        return tuple(f for f in self.kept if f.at_least(self.fail_on))

    def detail(self) -> str:
        """One line for a gate reading or a stop summary (never the secret itself)."""
        result = self.result
        scanned = f"{result.files_considered} file(s) scanned, {result.files_read} read"
        blocking = self.blocking
        if not blocking:
            return f"no unwaived findings at or above {self.fail_on} ({scanned})"
        shown = ", ".join(
            f"{f.rule_id} in {f.path}:{f.line} ({f.preview})" for f in blocking[:_SHOWN]
        )
        more = f" and {len(blocking) - _SHOWN} more" if len(blocking) > _SHOWN else ""
        return (
            f"{len(blocking)} unwaived finding(s) at or above {self.fail_on}: {shown}{more} "
            "— see forge secscan"
        )


@attrs.define
class ProjectScanner:
    """Scans a working tree with a project's rules, cache and waivers.

    ``trusted_markers`` None honours every inline allow marker; a loop sets it
    to the markers of its first scan, so a marker an agent adds later is a
    finding of its own.
    """

    workdir: Path
    policy: SecscanPolicy
    ruleset: Ruleset
    cache_path: Path
    waivers_path: Path
    trusted_markers: frozenset[str] | None = None
    # The previous scan and the work tree's status it was given, for the next
    # scan to look at only what changed since.
    _last: TreeScan | None = attrs.field(default=None, init=False, repr=False)
    _last_status: TreeStatus | None = attrs.field(default=None, init=False, repr=False)
    _redactor: SecretRedactor | None = attrs.field(default=None, init=False, repr=False)

    @classmethod
    def for_project(cls, policy: SecscanPolicy, *, root: Path, workdir: Path) -> ProjectScanner:
        """The scanner of ``workdir`` (the project root or a loop's worktree).

        Raises:
            ConfigError: the rules file cannot be loaded.
        """
        ruleset = load_rules(policy.rules, root=root)
        cache = root / STATE_DIR / "cache"
        if workdir.resolve() == root.resolve():
            cache_path = cache / "secscan.sqlite3"
        else:
            tag = hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:12]
            cache_path = cache / f"secscan-{tag}.sqlite3"
        return cls(workdir, policy, ruleset, cache_path, root / policy.waivers)

    def scan(self, status: TreeStatus | None = None) -> SecscanReport:
        """Scan now; the waivers are read afresh each time.

        Args:
            status: The status of :attr:`workdir` taken just before (a loop's
                workspace snapshot carries one). When the previous scan was
                given one too, only the paths that may have changed between
                the two statuses are looked at again (plus any file with
                findings or markers), and the tree is not listed; the findings
                are those a full scan would report. Without it, or when the
                change cannot be told (HEAD was born, not a work tree, another
                folder), every file is listed and checked.

        Raises:
            CorruptStateError: the waivers file is corrupt (it was moved aside).
            StateError: the waivers file cannot be read.
        """
        if status is not None and not self._describes_workdir(status):
            status = None
        delta = None
        if status is not None and self._last_status is not None:
            delta = tree_delta(self._last_status, status)
        max_bytes, trusted = self.policy.max_file_bytes, self.trusted_markers
        if self._last is not None and delta is not None:
            tree = rescan(
                self._last,
                delta,
                self.workdir,
                self.ruleset,
                cache_path=self.cache_path,
                max_bytes=max_bytes,
                trusted_markers=trusted,
                relist_state=status is not None
                and self._last_status is not None
                and status.head != self._last_status.head,
            )
        else:
            tree = full_scan(
                self.workdir,
                self.ruleset,
                cache_path=self.cache_path,
                max_bytes=max_bytes,
                trusted_markers=trusted,
            )
        # A walked folder has no git statuses to compare: the next scan lists again.
        status = status if tree.from_git else None
        self._last, self._last_status = tree, status
        result = tree.result
        outcome = apply_waivers(result.findings, load_waivers(self.waivers_path))
        return SecscanReport(result, outcome.kept, outcome.waived, self.policy.fail_on)

    def _describes_workdir(self, status: TreeStatus) -> bool:
        if not status.work_tree:
            return False
        return status.workdir == self.workdir or status.workdir.resolve() == self.workdir.resolve()

    @property
    def redact(self) -> SecretRedactor:
        """What redacts the loop's executor output with this scanner's rules."""
        if self._redactor is None or self._redactor.ruleset is not self.ruleset:
            self._redactor = SecretRedactor(self.ruleset)
        return self._redactor


def project_scanner(policy: SecscanPolicy, *, root: Path, workdir: Path) -> ProjectScanner | None:
    """The scanner a loop uses, or None when ``[secscan] enabled = false``."""
    if not policy.enabled:
        return None
    return ProjectScanner.for_project(policy, root=root, workdir=workdir)
