"""The loop circuit: CLOSED -> OPEN -> (cooldown) -> HALF_OPEN -> one probe.

``_core`` holds the pure state machine, ``_store`` its file,
``.forge/changes/<c>/breaker.yaml``.
"""

from ._core import CLOSED as CLOSED
from ._core import CLOSED_CIRCUIT as CLOSED_CIRCUIT
from ._core import HALF_OPEN as HALF_OPEN
from ._core import OPEN as OPEN
from ._core import CircuitState as CircuitState
from ._core import close as close
from ._core import cooldown_remaining as cooldown_remaining
from ._core import half_open as half_open
from ._core import trip as trip
from ._store import load_circuit as load_circuit
from ._store import load_circuit_locked as load_circuit_locked
from ._store import reset_circuit as reset_circuit
from ._store import save_circuit as save_circuit
