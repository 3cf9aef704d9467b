"""``forge report`` of a fleet batch: read from its Redis server, on any host.

Every change's whole timeline (every host's events) and the batch's status
become the same report a local batch has. It is written on the host that asks,
under ``.forge/runs/<batch id>/`` — the batch's id is the same on every host —
or where ``--html`` and ``--markdown`` say.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._errors import EXIT_OK, ForgeError, UsageError
from .._fleet import Connection, FleetConfig, batch_record
from .._report import build_fleet_report, with_diffs, write_report
from .._workspace import Project
from ._common import policy_from
from ._console import Output
from ._report_show import json_document, report_redactor, show_report


def fleet_report(
    args: argparse.Namespace,
    out: Output,
    project: Project,
    paths: tuple[Path | None, Path | None],
) -> int:
    """Write the fleet batch's report (see the module's docstring).

    Raises:
        UsageError: nothing is submitted under the fleet's name, or ``--run``
            names another batch.
    """
    policy = policy_from(project, args=args).policy
    config = FleetConfig.from_policy(policy.fleet)
    connection = Connection(config)
    try:
        record = batch_record(connection)
    finally:
        connection.close()
    if record is None:
        raise UsageError(
            f'no fleet batch to report: nothing is submitted under the fleet name "{config.name}"',
            hint="forge fleet submit --batch FILE first, or forge report --from DIR "
            "for a batch exported with forge fleet export --to DIR",
        )
    if args.run not in (None, "latest", record.run_id):
        raise UsageError(
            f"--run {args.run}: not the fleet's batch",
            hint=f'the batch submitted under "{config.name}" is {record.run_id}',
        )
    report = build_fleet_report(
        record.summary(), record.timelines, root=str(project.root), dirs=record.dirs
    )
    try:
        redact = report_redactor(policy.secscan, project.root, out)
    except ForgeError:
        redact = None
    own = (policy.recovery.lessons,)
    report = with_diffs(report, redact=redact, own=own)
    html, markdown = paths
    files = write_report(
        report, project.root, html=html, markdown=markdown, markdown_max=policy.report.markdown_max
    )
    show_report(report, files, args, out)
    if out.json_mode:
        out.document({**json_document(report, files), "fleet": config.name})
    return EXIT_OK
