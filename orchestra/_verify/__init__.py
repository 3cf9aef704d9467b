"""forge verify: checks, scenario coverage, and the verify circuit-breaker."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._breaker import FAIL as FAIL
    from ._breaker import NEW as NEW
    from ._breaker import PASS as PASS
    from ._breaker import VerifyAttempts as VerifyAttempts
    from ._breaker import breaker_line as breaker_line
    from ._breaker import gate_detail as gate_detail
    from ._breaker import holds as holds
    from ._breaker import record_verdict as record_verdict
    from ._breaker import reset as reset
    from ._breaker import reset_line as reset_line
    from ._checks import CheckResult as CheckResult
    from ._report import VerifyReport as VerifyReport
    from ._report import run_verify as run_verify
    from ._scenarios import Scenario as Scenario
    from ._scenarios import ScenarioCoverage as ScenarioCoverage
    from ._scenarios import measure_coverage as measure_coverage
    from ._scenarios import slugify as slugify
    from ._store import BreakerUpdate as BreakerUpdate
    from ._store import load_verify_locked as load_verify_locked
    from ._store import read_breaker as read_breaker
    from ._store import record_attempt as record_attempt
    from ._store import reset_breaker as reset_breaker
    from ._store import verify_event as verify_event

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._breaker": (
                "FAIL",
                "NEW",
                "PASS",
                "VerifyAttempts",
                "breaker_line",
                "gate_detail",
                "holds",
                "record_verdict",
                "reset",
                "reset_line",
            ),
            "._checks": ("CheckResult",),
            "._report": (
                "VerifyReport",
                "run_verify",
            ),
            "._scenarios": (
                "Scenario",
                "ScenarioCoverage",
                "measure_coverage",
                "slugify",
            ),
            "._store": (
                "BreakerUpdate",
                "load_verify_locked",
                "read_breaker",
                "record_attempt",
                "reset_breaker",
                "verify_event",
            ),
        },
    )
