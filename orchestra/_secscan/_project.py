"""The secret scan of one project's working tree, as its policy sets it up.

What ``forge secscan`` and the secscan gate share: the rules named by
``[secscan]``, the project's cache and waivers, and the verdict (unwaived
findings at or above ``fail_on``).
"""

from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path

import attrs

from .._policy import SecscanPolicy
from .._redact import Redact
from .._state import STATE_DIR
from ._findings import Finding, ScanResult
from ._match import redact
from ._rules import Ruleset, load_rules
from ._scan import scan_tree
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

    def scan(self) -> SecscanReport:
        """Scan now; the waivers are read afresh each time.

        Raises:
            CorruptStateError: the waivers file is corrupt (it was moved aside).
            StateError: the waivers file cannot be read.
        """
        result = scan_tree(
            self.workdir,
            self.ruleset,
            cache_path=self.cache_path,
            max_bytes=self.policy.max_file_bytes,
            trusted_markers=self.trusted_markers,
        )
        outcome = apply_waivers(result.findings, load_waivers(self.waivers_path))
        return SecscanReport(result, outcome.kept, outcome.waived, self.policy.fail_on)

    def redact(self, text: str) -> str:
        return redact(text, self.ruleset)


def project_scanner(policy: SecscanPolicy, *, root: Path, workdir: Path) -> ProjectScanner | None:
    """The scanner a loop uses, or None when ``[secscan] enabled = false``."""
    if not policy.enabled:
        return None
    return ProjectScanner.for_project(policy, root=root, workdir=workdir)


def output_redactor(policy: SecscanPolicy, *, root: Path) -> Redact | None:
    """What hides secrets in command output (verify's checks), or None when the scan is off.

    Raises:
        ConfigError: the rules file cannot be loaded.
    """
    if not policy.enabled:
        return None
    return partial(redact, ruleset=load_rules(policy.rules, root=root))
