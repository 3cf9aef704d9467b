"""The fleet: one batch worked by several hosts through one Redis server.

- ``_config``: the ``[fleet]`` table made concrete, and the batch's key names.
- ``_env``: whether a command is meant for the fleet (imports nothing).
- ``_deployment``: a server URL made a client: one server, a cluster, a sentinel.
- ``_connection``: the host's client, the server's clock, the outage errors.
- ``_limiter``: the fleet's one sliding-log rate limiter (a limiter backend).
- ``_store``: a change's state on the server (the engine's store, fenced).
- ``_queue``: loops handed out through a stream: claim, renew, finish.
- ``_source``: a loop's code: a shared folder, or a repository each host clones.
- ``_worker``: one host claiming and running loops.
- ``_deadline``: how long a host may trust its leases (its watchdog's deadline).
- ``_watchdog``: the process that kills a host's executors when it dies or freezes.
- ``_status``: the fleet's status, and a batch exported as ``.forge/`` files.
- ``_control``: a person's controls of one loop: reset, requeue, cancel, spend.
- ``_steering``: a person's pause, resume, stop and guidance of one loop, for its host to read.
- ``_retention``: what the server keeps: an ended batch's expiry, pruned hosts.
- ``_landing``: what ``forge land`` reads of a batch, and the land events it writes back.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._config import FleetConfig as FleetConfig
    from ._config import Keys as Keys
    from ._connection import CLOCK_SKEW_ENV as CLOCK_SKEW_ENV
    from ._connection import Connection as Connection
    from ._connection import FleetUnavailable as FleetUnavailable
    from ._connection import LeaseLost as LeaseLost
    from ._connection import ServerClock as ServerClock
    from ._connection import host_clock as host_clock
    from ._control import cancel as cancel
    from ._control import loop_state as loop_state
    from ._control import read_spec as read_spec
    from ._control import read_spend as read_spend
    from ._control import requeue as requeue
    from ._control import reset_circuit as reset_circuit
    from ._control import reset_spend as reset_spend
    from ._control import server_iso as server_iso
    from ._env import REDIS_URL_ENV as REDIS_URL_ENV
    from ._env import fleet_meant as fleet_meant
    from ._landing import LandBatch as LandBatch
    from ._landing import LandLoop as LandLoop
    from ._landing import append_land_events as append_land_events
    from ._landing import land_batch as land_batch
    from ._limiter import RedisBackend as RedisBackend
    from ._queue import BatchInfo as BatchInfo
    from ._queue import LoopSpec as LoopSpec
    from ._queue import drop_all as drop_all
    from ._queue import read_batch as read_batch
    from ._queue import submit as submit
    from ._source import SourceError as SourceError
    from ._status import LOST as LOST
    from ._status import WAITING as WAITING
    from ._status import FleetStatus as FleetStatus
    from ._status import batch_record as batch_record
    from ._status import expires_in as expires_in
    from ._status import export_state as export_state
    from ._status import export_summary as export_summary
    from ._status import fleet_status as fleet_status
    from ._status import read_hosts as read_hosts
    from ._steering import ANY as ANY
    from ._steering import RUNNING as RUNNING
    from ._steering import ControlSet as ControlSet
    from ._steering import clear_fleet_guidance as clear_fleet_guidance
    from ._steering import give_fleet_guidance as give_fleet_guidance
    from ._steering import read_fleet_guidance as read_fleet_guidance
    from ._steering import set_control as set_control
    from ._store import RedisChangeStore as RedisChangeStore
    from ._store import read_controls as read_controls
    from ._store import read_state as read_state
    from ._store import timeline_lines as timeline_lines
    from ._worker import Worker as Worker
    from ._worker import WorkerResult as WorkerResult
    from ._worker import default_host as default_host
    from ._worker import open_worker_batch as open_worker_batch

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._config": ("FleetConfig", "Keys"),
            "._env": ("REDIS_URL_ENV", "fleet_meant"),
            "._connection": (
                "CLOCK_SKEW_ENV",
                "Connection",
                "FleetUnavailable",
                "LeaseLost",
                "ServerClock",
                "host_clock",
            ),
            "._landing": ("LandBatch", "LandLoop", "append_land_events", "land_batch"),
            "._limiter": ("RedisBackend",),
            "._queue": ("BatchInfo", "LoopSpec", "drop_all", "read_batch", "submit"),
            "._source": ("SourceError",),
            "._status": (
                "expires_in",
                "FleetStatus",
                "export_state",
                "fleet_status",
                "LOST",
                "WAITING",
                "batch_record",
                "export_summary",
                "read_hosts",
            ),
            "._store": ("RedisChangeStore", "timeline_lines", "read_state", "read_controls"),
            "._steering": (
                "ControlSet",
                "ANY",
                "RUNNING",
                "clear_fleet_guidance",
                "give_fleet_guidance",
                "read_fleet_guidance",
                "set_control",
            ),
            "._worker": ("Worker", "WorkerResult", "default_host", "open_worker_batch"),
            "._control": (
                "cancel",
                "loop_state",
                "read_spec",
                "read_spend",
                "requeue",
                "reset_circuit",
                "reset_spend",
                "server_iso",
            ),
        },
    )
