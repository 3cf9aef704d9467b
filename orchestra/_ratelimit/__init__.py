"""The shared rolling-window rate limiter: at most N executor starts in any window.

Pure arithmetic in :mod:`._window`, the log as an array in :mod:`._log`, its
stores in :mod:`._backends` (the interface, memory) and :mod:`._sqlite`, the
async limiter the loops call in :mod:`._limiter`.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._backends import OLDEST_REPORTED as OLDEST_REPORTED
    from ._backends import BackendReading as BackendReading
    from ._backends import MemoryBackend as MemoryBackend
    from ._backends import RateLimitBackend as RateLimitBackend
    from ._limiter import EventHandler as EventHandler
    from ._limiter import LimiterStatistics as LimiterStatistics
    from ._limiter import RateLimiter as RateLimiter
    from ._limiter import open_limiter as open_limiter
    from ._sqlite import SCHEMA_VERSION as SCHEMA_VERSION
    from ._sqlite import RateLimitStoreError as RateLimitStoreError
    from ._sqlite import SqliteBackend as SqliteBackend
    from ._window import Decision as Decision
    from ._window import LimitTooLarge as LimitTooLarge
    from ._window import SlidingWindow as SlidingWindow
    from ._window import warn_threshold as warn_threshold

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._backends": (
                "BackendReading",
                "MemoryBackend",
                "RateLimitBackend",
                "OLDEST_REPORTED",
            ),
            "._limiter": ("EventHandler", "LimiterStatistics", "RateLimiter", "open_limiter"),
            "._sqlite": ("SCHEMA_VERSION", "RateLimitStoreError", "SqliteBackend"),
            "._window": ("Decision", "LimitTooLarge", "SlidingWindow", "warn_threshold"),
        },
    )
