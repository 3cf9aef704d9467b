"""Durable state under ``.forge/``: change folders, atomic files, the timeline."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .._names import check_change_name as check_change_name
    from ._change import STATE_DIR as STATE_DIR
    from ._change import ChangePaths as ChangePaths
    from ._change import list_changes as list_changes
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

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            ".._names": ("check_change_name",),
            "._change": ("STATE_DIR", "ChangePaths", "list_changes"),
            "._files": (
                "atomic_write",
                "exclusive_lock",
                "move_aside",
                "read_state_bytes",
                "utc_now_iso",
            ),
            "._guarded": ("load_or_block",),
            "._timeline": ("TimelineRead", "append_event", "parse_timeline", "read_timeline"),
            "._yamlstate": ("STATE_CONVERTER", "load_state", "save_state"),
        },
    )
