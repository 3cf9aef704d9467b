"""A fleet batch's report: its summary and its loops' timelines, wherever they were read.

A fleet batch is one batch run by several hosts: each host that claims a loop
starts a run of its own, so a loop's whole timeline (every host's events) is
the batch's, not one run's segment. Its id is made from the batch's name and
the time it was submitted, so every host that asks names the same
``.forge/runs/<id>/`` folder. The summary here is the one the report reads: a
list of loops with their endings and hosts, the limiter's rule, the batch's
times — made from the server's status (``forge report --fleet``) or written
by ``forge fleet export`` next to the exported timelines.

Nothing here reads a file or the server: the callers gather, this folds.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._state import iso_epoch, parse_timeline
from ._build import LoopFacts, build_report
from ._model import LIMITER_WAIT, BatchReport

FLEET_KEY = "fleet"
"""The summary's key naming the fleet batch (a host's summary has it too)."""

EXPORTED_KEY = "exported_at"
"""The summary's key that marks a batch's summary written by ``forge fleet export``."""

_ENDED = ("done", "escalated")


def fleet_run_id(name: str, submitted_at: float) -> str:
    """The batch's run id: the time it was submitted and a digest of its name.

    The same on every host (the server's clock stamped ``submitted_at``), and of
    the form every run id has, so the report's folder is found like any run's.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(submitted_at))
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{stamp}-{digest}"


def is_fleet_batch(summary: Mapping[str, Any] | None) -> bool:
    """Whether ``summary`` is a whole fleet batch's (an export's), not one host's."""
    return bool(summary) and FLEET_KEY in summary and EXPORTED_KEY in summary  # type: ignore[operator]


def fleet_summary(
    status: Mapping[str, Any], *, run_id: str, exported_at: float | None = None
) -> dict[str, Any]:
    """The batch's summary as the report reads it, from the fleet's status (``as_json``).

    ``loops`` becomes a list (each loop's change, state, ending, iterations,
    detail and host); the exit code is the one ``forge fleet work`` gives once
    every loop has ended (0 when all are done, 1 otherwise), absent before.
    """
    batch = status.get("batch") or {}
    loops = status.get("loops") or {}
    entries: list[dict[str, Any]] = []
    ends: list[float] = []
    for change in sorted(loops):
        loop = loops[change]
        entry: dict[str, Any] = {"change": change, "state": loop.get("state")}
        for key in ("reason", "iterations", "detail", "host"):
            if loop.get(key) is not None:
                entry[key] = loop[key]
        ended = iso_epoch(loop.get("ended"))
        if ended is not None:
            ends.append(ended)
        entries.append(entry)
    all_ended = bool(entries) and all(e["state"] in _ENDED for e in entries)
    summary: dict[str, Any] = {
        "run_id": run_id,
        FLEET_KEY: status.get("name"),
        "started_at": batch.get("submitted_at"),
        "finished_at": max(ends) if all_ended and ends else status.get("server_time"),
        "loops": entries,
        "hosts": status.get("hosts") or {},
        "counts": status.get("counts") or {},
    }
    if batch:
        summary["limiter"] = {"calls": batch.get("calls"), "window": batch.get("window")}
    if all_ended:
        summary["exit_code"] = 0 if all(e.get("reason") == "done" for e in entries) else 1
    if exported_at is not None:
        summary[EXPORTED_KEY] = exported_at
    return summary


def build_fleet_report(
    summary: Mapping[str, Any],
    timelines: Mapping[str, bytes],
    *,
    root: str,
    dirs: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
) -> BatchReport:
    """The report of a fleet batch: its summary and each change's whole timeline (JSON lines).

    ``dirs`` names each change's folder: a ``dir`` loop's, on every host
    (shared storage), or "" for a ``repo`` loop, whose work is its branch. A
    loop in neither is reported under ``root``, its work where the host left it.
    """
    said = list(notes)
    hosts = {
        str(e.get("change")): e.get("host")
        for e in summary.get("loops") or []
        if isinstance(e, dict) and e.get("host")
    }
    facts: list[LoopFacts] = []
    for change in sorted(timelines):
        read = parse_timeline(timelines[change])
        said.extend(read.problems(Path(f"timeline of {change}")))
        folder = (dirs or {}).get(change)
        # A dir loop's work is in its shared folder; a repo loop's on its branch.
        work = f"branch forge/{change}" if folder == "" else folder
        host = f"last on host {hosts[change]}" if change in hosts else None
        where = f"{work} ({host})" if work and host else (work or host)
        facts.append(
            LoopFacts(change=change, root=folder or root, events=read.typed(), where=where)
        )
    run_id = str(summary.get("run_id"))
    # The summary's loops carry no folder: each matches its change wherever it ran.
    plain = {**summary, "loops": [{**e, "dir": ""} for e in summary.get("loops") or []]}
    report = build_report(run_id, plain, facts, root=root, notes=said, whole=True)
    # No host counted the fleet's waits for a permit: the timelines tell them.
    waits = sum(1 for loop in report.loops for mark in loop.marks if mark.kind == LIMITER_WAIT)
    loops = tuple(
        attrs.evolve(loop, resume=fleet_resume(loop.change, loop.ending)) for loop in report.loops
    )
    return attrs.evolve(report, limiter_waits=waits, loops=loops)


def fleet_resume(change: str, ending: str) -> tuple[str, ...]:
    """The commands to look at a fleet loop that did not end done, and to run it again.

    A fleet loop's state is on the server: the local commands (``forge
    supervise --only``, a circuit's reset in a folder) would act on files no
    host reads, so the fleet's own views and controls are named. A cancelled
    loop is put back as it was; any other ending is a gate a person reviews,
    whose reset also puts the loop back in the queue.
    """
    if ending == "done":
        return ()
    look = (f"forge timeline --fleet {change}", "forge status --fleet")
    if ending == "unfinished":  # still queued or running: nothing to run again
        return look
    if ending == "cancelled":
        return (*look, f"forge fleet requeue {change} --reason WHY")
    return (*look, f"forge circuit {change} --reset --reason WHY --fleet")
