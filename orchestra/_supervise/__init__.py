"""forge supervise: many bounded loops, their circuits, one shared rate limiter."""

from ._circuit_store import load_circuit as load_circuit
from ._circuit_store import reset_circuit as reset_circuit
from ._dashboard import Dashboard as Dashboard
from ._dashboard import limiter_line as limiter_line
from ._engine import EventSink as EventSink
from ._engine import Supervision as Supervision
from ._engine import run_supervised as run_supervised
from ._loop_tables import LoopSetup as LoopSetup
from ._loop_tables import resolve_loops as resolve_loops
from ._progress import LoopProgress as LoopProgress
from ._supervisor import LoopRun as LoopRun
from ._supervisor import interrupted_results as interrupted_results
from ._supervisor import prepare as prepare
from ._supervisor import supervise as supervise
from ._trips import Trip as Trip
from ._trips import TripContext as TripContext
from ._trips import judge as judge
from ._trips import registered as registered
from ._trips import trip_condition as trip_condition
