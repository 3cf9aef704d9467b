"""The one loop engine under ``forge run`` and ``forge supervise``.

- ``_record``: :class:`IterationRecord`, one iteration's facts as judged and recorded.
- ``_decide``: :func:`admit` and :func:`decide`, every trip and stop rule, pure.
- ``_course``: what the rules make of a run beyond its verdicts (where it
  starts counting, what an interrupted run counts), pure.
- ``_decision``: :class:`Decision`, one iteration's decision and the events
  that record it, the value a store commits (pure).
- ``_outside``: what a reset, a hook's verdict or a moved file does to a loop's
  state between its iterations (the one reset rule, live and replayed), pure.
- ``_store``: :class:`ChangeStore`, a change's state loaded once and committed once
  per iteration; :class:`Store`, what any other keeper of that state implements.
- ``_loop``: :func:`run_loop`, the loop itself (I/O at the edges).
- ``_gates``, ``_endings``, ``_progress``: gate readings, ending names, live progress.
- ``_recovery``: the strategy handed out after an opening, and the watch after a close (pure).
- ``_watch``: recovery steps, the status log and the lessons file, rendered from each
  committed iteration (what they are made of lives in ``orchestra._monitor``, below the
  engine, as do the alerts :func:`decide` raises and clears).
- ``_replay``, ``_whatif``, ``_sweep``: a timeline replayed under another policy; a
  batch compared with its record; one key's values compared change by change (pure).
"""

from ._course import Start as Start
from ._course import counted_label as counted_label
from ._decide import TRIP_CONDITIONS as TRIP_CONDITIONS
from ._decide import Admission as Admission
from ._decide import LoopRules as LoopRules
from ._decide import LoopState as LoopState
from ._decide import Pause as Pause
from ._decide import Trip as Trip
from ._decide import Verdict as Verdict
from ._decide import admit as admit
from ._decide import cooled_down as cooled_down
from ._decide import decide as decide
from ._decide import first_trip_rules as first_trip_rules
from ._decide import supervised_rules as supervised_rules
from ._decision import Decision as Decision
from ._decision import decided as decided
from ._endings import CIRCUIT_OPEN as CIRCUIT_OPEN
from ._endings import DONE as DONE
from ._endings import DONE_UNVERIFIED as DONE_UNVERIFIED
from ._endings import EXECUTOR_FAILED as EXECUTOR_FAILED
from ._endings import EXHAUSTED as EXHAUSTED
from ._endings import GATE_ERROR as GATE_ERROR
from ._endings import GATE_OPEN as GATE_OPEN
from ._endings import INTERRUPTED as INTERRUPTED
from ._endings import OUTPUT_UNREADABLE as OUTPUT_UNREADABLE
from ._endings import PROVIDER_LIMIT as PROVIDER_LIMIT
from ._endings import STOPPED as STOPPED
from ._endings import WORKTREE_FAILED as WORKTREE_FAILED
from ._endings import Ending as Ending
from ._endings import RunSummary as RunSummary
from ._endings import new_run_id as new_run_id
from ._gates import BUDGET_GATE as BUDGET_GATE
from ._gates import CIRCUIT_GATE as CIRCUIT_GATE
from ._gates import INTEGRITY_GATE as INTEGRITY_GATE
from ._gates import SECSCAN_GATE as SECSCAN_GATE
from ._gates import VERIFY_GATE as VERIFY_GATE
from ._gates import GateReading as GateReading
from ._gates import SecscanGate as SecscanGate
from ._loop import EventSink as EventSink
from ._loop import LoopPlan as LoopPlan
from ._loop import LoopSettings as LoopSettings
from ._loop import guarded as guarded
from ._loop import iteration_time_limit as iteration_time_limit
from ._loop import run_loop as run_loop
from ._outside import Resumed as Resumed
from ._outside import Resuming as Resuming
from ._outside import afresh as afresh
from ._outside import apply_outside_event as apply_outside_event
from ._outside import circuit_read as circuit_read
from ._outside import fold_history as fold_history
from ._outside import refused_calls as refused_calls
from ._outside import resume as resume
from ._outside import started_iterations as started_iterations
from ._progress import LoopProgress as LoopProgress
from ._record import IterationRecord as IterationRecord
from ._record import record_from_event as record_from_event
from ._recovery import escalation_text as escalation_text
from ._recovery import openings_before_escalation as openings_before_escalation
from ._recovery import recovery_text as recovery_text
from ._replay import Replay as Replay
from ._replay import ReplayStep as ReplayStep
from ._replay import replay as replay
from ._store import ChangeStore as ChangeStore
from ._store import Store as Store
from ._sweep import Sweep as Sweep
from ._sweep import SweepCell as SweepCell
from ._sweep import sweep as sweep
from ._whatif import WhatIf as WhatIf
from ._whatif import what_if as what_if
