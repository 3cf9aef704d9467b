"""Durable state under ``.forge/``: change folders, atomic files, the timeline."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .._names import check_change_name as check_change_name
    from ._change import STATE_DIR as STATE_DIR
    from ._change import ChangePaths as ChangePaths
    from ._change import list_changes as list_changes
    from ._controls import CONTROL_PAUSED as CONTROL_PAUSED
    from ._controls import CONTROL_RESUMED as CONTROL_RESUMED
    from ._controls import CONTROL_STOP as CONTROL_STOP
    from ._controls import LOOP_PAUSED as LOOP_PAUSED
    from ._controls import LOOP_RESUMED as LOOP_RESUMED
    from ._controls import NO_CONTROLS as NO_CONTROLS
    from ._controls import LoopControls as LoopControls
    from ._controls import Request as Request
    from ._controls import ask_stop as ask_stop
    from ._controls import live_loop as live_loop
    from ._controls import loop_running as loop_running
    from ._controls import pause_loop as pause_loop
    from ._controls import read_controls as read_controls
    from ._controls import resume_loop as resume_loop
    from ._controls import take_stop as take_stop
    from ._converter import STATE_CONVERTER as STATE_CONVERTER
    from ._events import BLOCKED as BLOCKED
    from ._events import CHECKPOINT as CHECKPOINT
    from ._events import CONTRACT_PREFIX as CONTRACT_PREFIX
    from ._events import ITERATION_BEGUN as ITERATION_BEGUN
    from ._events import LOOP_CIRCUIT as LOOP_CIRCUIT
    from ._events import LOOP_STARTED as LOOP_STARTED
    from ._events import SHIP_READY as SHIP_READY
    from ._events import STRATEGY_CHANGED as STRATEGY_CHANGED
    from ._events import VERIFY_BREAKER as VERIFY_BREAKER
    from ._events import AlertCleared as AlertCleared
    from ._events import AlertRaised as AlertRaised
    from ._events import BreakerClosed as BreakerClosed
    from ._events import BreakerHalfOpen as BreakerHalfOpen
    from ._events import BreakerOpened as BreakerOpened
    from ._events import BreakerReset as BreakerReset
    from ._events import ContractEvent as ContractEvent
    from ._events import Event as Event
    from ._events import IterationFinished as IterationFinished
    from ._events import IterationStarted as IterationStarted
    from ._events import OtherEvent as OtherEvent
    from ._events import ProtectViolation as ProtectViolation
    from ._events import RecoveryStep as RecoveryStep
    from ._events import RunStarted as RunStarted
    from ._events import RunStopped as RunStopped
    from ._events import SpendReset as SpendReset
    from ._events import StateCorrupt as StateCorrupt
    from ._events import StateRebuilt as StateRebuilt
    from ._events import VerifyRecorded as VerifyRecorded
    from ._events import decode_event as decode_event
    from ._events import encode_event as encode_event
    from ._events import event_name as event_name
    from ._events import event_record as event_record
    from ._files import FORGE_LINES as FORGE_LINES
    from ._files import FORGE_WRITES as FORGE_WRITES
    from ._files import atomic_write as atomic_write
    from ._files import exclusive_lock as exclusive_lock
    from ._files import iso_epoch as iso_epoch
    from ._files import move_aside as move_aside
    from ._files import read_state_bytes as read_state_bytes
    from ._files import run_by_a_person as run_by_a_person
    from ._files import utc_iso as utc_iso
    from ._files import utc_now_iso as utc_now_iso
    from ._guarded import load_or_block as load_or_block
    from ._guidance import GUIDANCE_CLEARED as GUIDANCE_CLEARED
    from ._guidance import GUIDANCE_DELIVERED as GUIDANCE_DELIVERED
    from ._guidance import GUIDANCE_GIVEN as GUIDANCE_GIVEN
    from ._guidance import ONCE as ONCE
    from ._guidance import QUESTION_WAITED as QUESTION_WAITED
    from ._guidance import UNTIL_CLEARED as UNTIL_CLEARED
    from ._guidance import Guidance as Guidance
    from ._guidance import GuidanceState as GuidanceState
    from ._guidance import clear_guidance as clear_guidance
    from ._guidance import give_guidance as give_guidance
    from ._guidance import read_guidance as read_guidance
    from ._guidance import take_guidance as take_guidance
    from ._ignore import GITIGNORE as GITIGNORE
    from ._ignore import IGNORE_RULES as IGNORE_RULES
    from ._ignore import keep_out_of_git as keep_out_of_git
    from ._iteration import IterationDecision as IterationDecision
    from ._iteration import IterationFacts as IterationFacts
    from ._iteration import RateLimitEvent as RateLimitEvent
    from ._iteration import decision_of as decision_of
    from ._iteration import facts_of as facts_of
    from ._journal import JOURNAL as JOURNAL
    from ._journal import checkpoint as checkpoint
    from ._journal import recover as recover
    from ._journal import write_journaled as write_journaled
    from ._known import has_state as has_state
    from ._known import require_change as require_change
    from ._land import LAND_ABANDONED as LAND_ABANDONED
    from ._land import LAND_CLEANED as LAND_CLEANED
    from ._land import LAND_CONFLICT as LAND_CONFLICT
    from ._land import LAND_DONE as LAND_DONE
    from ._land import LAND_FAILED as LAND_FAILED
    from ._land import LandState as LandState
    from ._land import interrupted_landing as interrupted_landing
    from ._land import land_state as land_state
    from ._land import pending_landing_path as pending_landing_path
    from ._statusfile import STATUS_FILE as STATUS_FILE
    from ._statusfile import last_alert_details as last_alert_details
    from ._statusfile import read_sections as read_sections
    from ._strict import Misfit as Misfit
    from ._strict import strict_structure as strict_structure
    from ._timeline import TimelineRead as TimelineRead
    from ._timeline import append_event as append_event
    from ._timeline import append_events as append_events
    from ._timeline import parse_timeline as parse_timeline
    from ._timeline import read_timeline as read_timeline
    from ._yamlstate import load_state as load_state
    from ._yamlstate import render_state as render_state
    from ._yamlstate import save_state as save_state
    from ._yamlstate import save_states as save_states

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            ".._names": ("check_change_name",),
            "._change": (
                "ChangePaths",
                "STATE_DIR",
                "list_changes",
            ),
            "._events": (
                "BLOCKED",
                "BreakerClosed",
                "BreakerHalfOpen",
                "BreakerOpened",
                "AlertCleared",
                "AlertRaised",
                "BreakerReset",
                "RecoveryStep",
                "CHECKPOINT",
                "CONTRACT_PREFIX",
                "ContractEvent",
                "Event",
                "ITERATION_BEGUN",
                "IterationFinished",
                "IterationStarted",
                "LOOP_CIRCUIT",
                "LOOP_STARTED",
                "OtherEvent",
                "ProtectViolation",
                "RunStarted",
                "RunStopped",
                "SHIP_READY",
                "STRATEGY_CHANGED",
                "SpendReset",
                "StateCorrupt",
                "StateRebuilt",
                "VERIFY_BREAKER",
                "VerifyRecorded",
                "decode_event",
                "encode_event",
                "event_name",
                "event_record",
            ),
            "._files": (
                "FORGE_LINES",
                "FORGE_WRITES",
                "atomic_write",
                "exclusive_lock",
                "move_aside",
                "read_state_bytes",
                "run_by_a_person",
                "utc_iso",
                "iso_epoch",
                "utc_now_iso",
            ),
            "._guarded": ("load_or_block",),
            "._guidance": (
                "GUIDANCE_CLEARED",
                "GUIDANCE_DELIVERED",
                "GUIDANCE_GIVEN",
                "ONCE",
                "QUESTION_WAITED",
                "UNTIL_CLEARED",
                "Guidance",
                "GuidanceState",
                "clear_guidance",
                "give_guidance",
                "read_guidance",
                "take_guidance",
            ),
            "._land": (
                "LAND_ABANDONED",
                "LAND_CLEANED",
                "LAND_CONFLICT",
                "LAND_DONE",
                "LAND_FAILED",
                "LandState",
                "interrupted_landing",
                "land_state",
                "pending_landing_path",
            ),
            "._journal": ("JOURNAL", "checkpoint", "recover", "write_journaled"),
            "._ignore": ("GITIGNORE", "IGNORE_RULES", "keep_out_of_git"),
            "._iteration": (
                "IterationDecision",
                "IterationFacts",
                "RateLimitEvent",
                "decision_of",
                "facts_of",
            ),
            "._strict": ("Misfit", "strict_structure"),
            "._statusfile": ("STATUS_FILE", "last_alert_details", "read_sections"),
            "._known": ("has_state", "require_change"),
            "._timeline": (
                "TimelineRead",
                "append_event",
                "append_events",
                "parse_timeline",
                "read_timeline",
            ),
            "._converter": ("STATE_CONVERTER",),
            "._controls": (
                "CONTROL_PAUSED",
                "CONTROL_RESUMED",
                "CONTROL_STOP",
                "LOOP_PAUSED",
                "LOOP_RESUMED",
                "NO_CONTROLS",
                "LoopControls",
                "Request",
                "ask_stop",
                "live_loop",
                "loop_running",
                "pause_loop",
                "read_controls",
                "resume_loop",
                "take_stop",
            ),
            "._yamlstate": (
                "load_state",
                "render_state",
                "save_state",
                "save_states",
            ),
        },
    )
