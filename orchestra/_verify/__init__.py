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
    from ._breaker import record_verdict as record_verdict
    from ._checks import CheckResult as CheckResult
    from ._gate import BreakerUpdate as BreakerUpdate
    from ._gate import read_breaker as read_breaker
    from ._gate import record_attempt as record_attempt
    from ._gate import reset_breaker as reset_breaker
    from ._report import VerifyReport as VerifyReport
    from ._report import run_verify as run_verify
    from ._scenarios import Scenario as Scenario
    from ._scenarios import ScenarioCoverage as ScenarioCoverage
    from ._scenarios import measure_coverage as measure_coverage
    from ._scenarios import slugify as slugify

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
                "record_verdict",
            ),
            "._checks": ("CheckResult",),
            "._gate": ("BreakerUpdate", "read_breaker", "record_attempt", "reset_breaker"),
            "._report": ("VerifyReport", "run_verify"),
            "._scenarios": ("Scenario", "ScenarioCoverage", "measure_coverage", "slugify"),
        },
    )
