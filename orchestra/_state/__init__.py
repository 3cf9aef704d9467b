"""Durable state under ``.forge/``: change folders, atomic files, the timeline."""

from .._names import check_change_name as check_change_name
from ._change import STATE_DIR as STATE_DIR
from ._change import ChangePaths as ChangePaths
from ._change import list_changes as list_changes
from ._files import FORGE_WRITES as FORGE_WRITES
from ._files import atomic_write as atomic_write
from ._files import exclusive_lock as exclusive_lock
from ._files import move_aside as move_aside
from ._files import read_state_bytes as read_state_bytes
from ._files import utc_now_iso as utc_now_iso
from ._guarded import load_or_block as load_or_block
from ._timeline import TimelineRead as TimelineRead
from ._timeline import append_event as append_event
from ._timeline import parse_timeline as parse_timeline
from ._timeline import read_timeline as read_timeline
from ._yamlstate import STATE_CONVERTER as STATE_CONVERTER
from ._yamlstate import load_state as load_state
from ._yamlstate import save_state as save_state
