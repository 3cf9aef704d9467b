"""Which notifications a finished batch sends, and sending them.

When ``forge supervise`` ends it sends, in this order: ``escalate`` once for
every loop that needs a person, ``alert`` once for every alert raised during
the batch, then ``finish`` once — leaving out what it already sent while the
batch ran (see ``_live``). Each goes to its ``[notify]`` command (when set)
and to the webhook (when set), with the run's summary as JSON plus the
event's own part (``loop`` or ``alert``) and where the report is. Every
delivery is logged to ``.forge/runs/<id>/notify.log``; none fails the batch
(``_deliver`` sends and logs, for this module and ``_live`` alike).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._deliver import ALERT, BATCH_WIDE, ESCALATE, FINISH, LOG_NAME, deliver, log_deliveries
from ._send import Delivery

if TYPE_CHECKING:
    from .._policy import NotifyPolicy
    from .._report import BatchReport
    from ._live import LiveNotices


def batch_notices(
    summary: Mapping[str, Any], report: BatchReport, *, live: LiveNotices | None = None
) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """Every notification a batch sends: its event, its JSON and its ``FORGE_*`` variables.

    With ``live``, the notices sent while the batch ran: its escalations are
    not sent again, nor any alert (each was sent as it was raised).
    """
    notices: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    entries = {
        (str(e.get("dir")), e.get("change")): e
        for e in summary.get("loops") or []
        if isinstance(e, dict)
    }
    for loop in report.escalations:
        if live is not None and (ESCALATE, loop.root, loop.change) in live.sent:
            continue
        entry = entries.get((loop.root, loop.change)) or {"change": loop.change, "dir": loop.root}
        part = {
            **entry,
            "ending": loop.ending,
            "gate": loop.gate,
            "trip": loop.trips[-1].reason if loop.trips else None,
            "resume": list(loop.resume),
        }
        notices.append(
            (ESCALATE, {**summary, "event": ESCALATE, "loop": part}, {"FORGE_CHANGE": loop.change})
        )
    # Told at the end (nobody was told while it ran): each alert once per loop,
    # a batch-wide one once per batch, each with its last raise.
    told: set[tuple[str, ...]] = set()
    for loop in report.loops if live is None else ():
        last = {
            a.alert or a.text: a
            for a in loop.alerts
            if not a.name.endswith(("cleared", "resolved"))
        }
        for key, alert in last.items():
            once = (key,) if key in BATCH_WIDE else (loop.root, loop.change, key)
            if once in told:
                continue
            told.add(once)
            part = {"change": loop.change, "name": alert.name, "text": alert.text, "ts": alert.at}
            notices.append(
                (ALERT, {**summary, "event": ALERT, "alert": part}, {"FORGE_CHANGE": loop.change})
            )
    notices.append((FINISH, {**summary, "event": FINISH}, {}))
    return notices


def notify_batch(
    policy: NotifyPolicy,
    summary: Mapping[str, Any],
    report: BatchReport,
    *,
    root: Path,
    run_folder: Path,
    files: Mapping[str, str],
    say: Callable[[str], None],
    live: LiveNotices | None = None,
) -> list[Delivery]:
    """Send the batch's notifications (see the module's docstring); returns how each went.

    Args:
        policy: The ``[notify]`` table.
        summary: The run's summary, as written to ``summary.json``.
        report: The run's report (which loops escalated, which alerts were raised).
        root: Where the commands run.
        run_folder: ``.forge/runs/<id>/``, for the log.
        files: ``html``, ``markdown`` and ``summary``: the files' paths, for the payload.
        say: Where a failed delivery is reported (the terminal).
        live: What was sent while the batch ran, not to be sent again.
    """
    if not (policy.on_escalate or policy.on_alert or policy.on_finish or policy.webhook):
        return []
    deliveries: list[Delivery] = []
    base_env = {
        "FORGE_RUN_ID": str(summary.get("run_id", report.run_id)),
        "FORGE_REPORT": files.get("html", ""),
        "FORGE_REPORT_MARKDOWN": files.get("markdown", ""),
        "FORGE_SUMMARY": files.get("summary", ""),
        "FORGE_EXIT_CODE": str(summary.get("exit_code", "")),
        "FORGE_ROOT": str(root),
    }
    for event, payload, own_env in batch_notices(summary, report, live=live):
        payload = {**payload, "report": dict(files)}
        env = {**base_env, "FORGE_EVENT": event, "FORGE_CHANGE": "", **own_env}
        deliveries += deliver(policy, event, payload, env, root=root)
    log_deliveries(run_folder / LOG_NAME, deliveries)
    for delivery in deliveries:
        if not delivery.ok:
            say(delivery.line())
    return deliveries
