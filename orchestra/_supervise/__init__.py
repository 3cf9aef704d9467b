"""forge supervise: many bounded loops at once, sharing one rate limiter and a dashboard."""

from .._engine import LoopProgress as LoopProgress
from ._dashboard import Dashboard as Dashboard
from ._dashboard import limiter_line as limiter_line
from ._loop_tables import LoopSetup as LoopSetup
from ._loop_tables import resolve_loops as resolve_loops
from ._supervisor import LoopRun as LoopRun
from ._supervisor import interrupted_results as interrupted_results
from ._supervisor import prepare as prepare
from ._supervisor import supervise as supervise
