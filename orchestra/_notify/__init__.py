"""Notifications: a command run and a URL posted to when a batch escalates, alerts or ends."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._deliver import LOG_NAME as LOG_NAME
    from ._dispatch import batch_notices as batch_notices
    from ._dispatch import notify_batch as notify_batch
    from ._live import LiveNotices as LiveNotices
    from ._send import Delivery as Delivery
    from ._send import post_webhook as post_webhook
    from ._send import run_command as run_command

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._deliver": ("LOG_NAME",),
            "._dispatch": ("batch_notices", "notify_batch"),
            "._live": ("LiveNotices",),
            "._send": ("Delivery", "post_webhook", "run_command"),
        },
    )
