"""A verify run: its checks, its scenario coverage, its verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from .._policy import VerifyPolicy
from .._redact import Redact
from .._sourcepath import with_sources
from ._breaker import FAIL, PASS
from ._checks import CheckResult, run_check
from ._scenarios import ScenarioCoverage, measure_coverage


@attrs.frozen
class VerifyReport:
    """Everything one ``forge verify`` found."""

    checks: tuple[CheckResult, ...]
    coverage: ScenarioCoverage
    spec_paths: tuple[str, ...]
    duration: float

    @property
    def nothing_checked(self) -> bool:
        """No command configured and no scenario to cover: a verify that proves nothing."""
        return not self.checks and not self.coverage.counts

    @property
    def passed(self) -> bool:
        if self.nothing_checked:
            return False
        return all(check.passed for check in self.checks) and self.coverage.passed

    @property
    def verdict(self) -> str:
        return PASS if self.passed else FAIL

    def failing(self) -> list[str]:
        """Names of what failed, for a one-line summary (``tests``, ``scenarios`` ...)."""
        names = [check.name for check in self.checks if not check.passed]
        if not self.coverage.passed:
            names.append("scenarios")
        if self.nothing_checked:
            names.append("nothing to verify")
        return names

    def as_json(self) -> dict[str, Any]:
        coverage = self.coverage
        return {
            "verdict": self.verdict,
            "duration": round(self.duration, 3),
            "checks": [attrs.asdict(check) for check in self.checks],
            "scenarios": {
                "counted": coverage.counts,
                "spec_files": coverage.spec_files,
                "total": len(coverage.scenarios),
                "covered": coverage.covered_count,
                "uncovered": [attrs.asdict(s) for s in coverage.uncovered],
                "unreadable": [{"path": p, "reason": r} for p, r in coverage.skipped_specs],
                "unmatched_patterns": list(coverage.unmatched_patterns),
            },
            "nothing_checked": self.nothing_checked,
        }


async def run_verify(
    root: Path, policy: VerifyPolicy, grace: float, redact: Redact | None = None
) -> VerifyReport:
    """Run the test command, then the lint command, then measure scenario coverage.

    Every configured check runs even when an earlier one failed, so the report
    shows all that is wrong at once. ``redact`` hides secrets in their output.
    """
    started = trio.current_time()
    checks = []
    # In a linked worktree the checks import the worktree's sources, not an
    # editable install of the main checkout's.
    env = with_sources(root)
    for name, command in (("tests", policy.command), ("lint", policy.lint)):
        if command.strip():
            checks.append(
                await run_check(
                    name,
                    command,
                    cwd=root,
                    env=env,
                    time_limit=policy.timeout.seconds,
                    grace=grace,
                    redact=redact,
                )
            )
    if policy.specs:
        coverage = await trio.to_thread.run_sync(measure_coverage, root, policy.specs, policy.tests)
    else:
        # No spec to read: no file is touched (tests are read only for a spec's
        # scenarios), so no worker thread is needed either.
        coverage = measure_coverage(root, policy.specs, policy.tests)
    return VerifyReport(
        checks=tuple(checks),
        coverage=coverage,
        spec_paths=policy.specs,
        duration=trio.current_time() - started,
    )
