"""A fleet batch's ``[notify]``: its end told once, and every lost host told once.

Every host sees the batch end (each works until every loop has ended), and
any surviving host may see another one lost. Which host tells is decided on
the server: the first to set the notice's key (``SET NX``) sends it, the others
say nothing — so one batch sends one set of end-of-batch notices and one
``alert`` per lost host, however many hosts are working. The notices go to the
``[notify]`` of the sending host's ``forge.toml`` (a command runs there), with
the batch's report written on that host first (unless ``[report] write = false``).

A host that dies between setting the key and sending loses that notice: a
notice is sent at most once, never twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import ForgeError
from .._fleet import Connection, FleetUnavailable, batch_record
from .._report import build_fleet_report, run_folder, write_report
from .._state import atomic_write

if TYPE_CHECKING:
    from .._policy import NotifyPolicy, Policy

HOST_LOST = "host-lost"
"""The alert sent when a host of the fleet is lost (its heartbeat older than a lease)."""


def listens(notify: NotifyPolicy) -> bool:
    """Whether ``[notify]`` names anybody at all."""
    return bool(notify.on_escalate or notify.on_finish or notify.on_alert or notify.webhook)


def claim_notice(connection: Connection, what: str) -> bool:
    """Whether this host is the one to send notice ``what`` (the first to ask)."""
    key = connection.config.keys.notified(what)
    # It lasts as long as the ended batch's keys ([fleet] keep): it only has to
    # stop a second sender, and the batch is gone with it.
    keep_ms = max(1, int(connection.config.keep * 1000))

    def claim(client: Any) -> bool:
        return bool(client.set(key, "1", nx=True, px=keep_ms))

    return connection.once(claim)


def notify_batch_end(
    connection: Connection,
    root: Path,
    policy: Policy,
    say: Callable[[str], None],
) -> bool:
    """Write the batch's report and send its end-of-batch notices, if this host is first.

    Never raises: the batch's result stands whatever happens here. Returns
    whether this host sent them.
    """
    try:
        return _notify_batch_end(connection, root, policy, say)
    except Exception as exc:  # a report's or a notice's failure must not become the batch's
        say(f"report: failed ({type(exc).__name__}: {exc}); the batch's result stands")
        return False


def _notify_batch_end(
    connection: Connection, root: Path, policy: Policy, say: Callable[[str], None]
) -> bool:
    if not (policy.report.write or listens(policy.notify)):
        return False
    try:
        if not claim_notice(connection, "batch"):
            return False
        record = batch_record(connection)
    except (FleetUnavailable, ForgeError) as exc:
        say(f"notify: the batch's end could not be told ({exc.message})")
        return False
    if record is None:
        return False
    summary = record.summary()
    report = build_fleet_report(summary, record.timelines, root=str(root), dirs=record.dirs)
    folder = run_folder(root, record.run_id)
    # The batch's summary beside its report: what the notices name, and what
    # tells forge report here that this run is the fleet's (read from the server).
    summary_path = folder / "summary.json"
    try:
        atomic_write(summary_path, (json.dumps(summary, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        say(f"summary: cannot be written: {exc}")
    files: dict[str, str] = {"summary": str(summary_path)}
    if policy.report.write:
        try:
            written = write_report(report, root, markdown_max=policy.report.markdown_max)
        except (ForgeError, OSError) as exc:
            say(f"report: cannot be written: {getattr(exc, 'message', exc)}")
        else:
            files.update(html=str(written.html), markdown=str(written.markdown))
            say(f"report: {written.html}")
    from .._notify import notify_batch

    notify_batch(
        policy.notify,
        summary,
        report,
        root=root,
        run_folder=folder,
        files=files,
        say=say,
    )
    return True


def notify_host_lost(
    connection: Connection,
    root: Path,
    policy: Policy,
    run_id: str,
    host: str,
    detail: str,
    say: Callable[[str], None],
) -> bool:
    """Send the ``host-lost`` alert for ``host``, if this host is the first to see it lost.

    Every delivery is logged to ``.forge/runs/<batch id>/notify.log``; a failed
    one is said too, and never stops the host.
    """
    if not (policy.notify.on_alert or policy.notify.webhook):
        return False
    if not claim_notice(connection, f"lost:{host}"):
        return False
    from .._notify import LiveNotices

    notices = LiveNotices(
        policy.notify, root=root, run_folder=run_folder(root, run_id), run_id=run_id
    )
    for delivery in notices.alert("", "", HOST_LOST, detail):
        if not delivery.ok:
            say(delivery.line())
    return True


async def watch_lost_hosts(
    connection: Connection,
    root: Path,
    policy: Policy,
    run_id: str,
    me: str,
    say: Callable[[str], None],
) -> None:
    """Every heartbeat, look for hosts lost since; say so, and send the alert once."""
    import trio

    from .._fleet import LOST, read_hosts

    told: set[str] = set()
    while True:
        await trio.sleep(connection.config.heartbeat)
        try:
            hosts = await trio.to_thread.run_sync(read_hosts, connection)
        except FleetUnavailable:
            continue  # the worker says so; a host is not lost for an outage of ours
        for host, info in sorted(hosts.items()):
            if host == me or host in told or info["state"] != LOST:
                continue
            told.add(host)
            running = ", ".join(info["running"]) or "no loop"
            detail = (
                f"host {host} is lost: no heartbeat for {info['last_heartbeat_ago']:.1f}s "
                f"(longer than the lease); it was running {running}"
            )
            say(f"fleet: {detail}")
            failed: list[str] = []  # said here, on the event loop, not from the thread
            try:
                await trio.to_thread.run_sync(
                    notify_host_lost, connection, root, policy, run_id, host, detail, failed.append
                )
            except (FleetUnavailable, ForgeError) as exc:
                failed.append(f"notify: host-lost for {host} could not be sent ({exc.message})")
            except Exception as exc:  # a notice's failure must not stop this host's loops
                failed.append(f"notify: host-lost for {host} failed ({type(exc).__name__}: {exc})")
            for line in failed:
                say(line)
