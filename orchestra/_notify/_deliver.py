"""One notice sent to its ``[notify]`` command and webhook, and the log of what was sent.

Shared by the notices a batch sends at its end (``_dispatch``) and those it
sends while it runs (``_live``), so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._state import utc_now_iso
from ._send import Delivery, post_webhook, run_command

if TYPE_CHECKING:
    from .._policy import NotifyPolicy

ESCALATE = "escalate"
ALERT = "alert"
FINISH = "finish"
QUESTION = "question"
LOG_NAME = "notify.log"
# Alerts about the whole batch, not one loop (the shared rate window): told once.
BATCH_WIDE = frozenset({"calls-remaining"})


def deliver(
    policy: NotifyPolicy,
    event: str,
    payload: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    root: Path,
) -> list[Delivery]:
    """Send one notice to its ``[notify]`` command and to the webhook (each when set)."""
    command = {
        ESCALATE: policy.on_escalate,
        ALERT: policy.on_alert,
        FINISH: policy.on_finish,
        QUESTION: policy.on_question,
    }
    timeout = policy.timeout.seconds
    deliveries: list[Delivery] = []
    if command[event]:
        deliveries.append(
            run_command(command[event], event, payload, env, timeout=timeout, cwd=root)
        )
    if policy.webhook:
        deliveries.append(post_webhook(policy.webhook, event, payload, timeout=timeout))
    return deliveries


def log_deliveries(path: Path, deliveries: list[Delivery]) -> None:
    """Append each delivery to the log; a log that cannot be written is not the batch's failure."""
    if not deliveries:
        return
    stamp = utc_now_iso()
    text = "".join(f"{stamp} {delivery.line()}\n" for delivery in deliveries)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        pass
