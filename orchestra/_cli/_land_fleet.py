"""``forge land`` on a fleet batch: its loops' pushed branches fetched, then landed as local ones.

The batch is the one submitted on the fleet's server (``--fleet``, or
``FORGE_REDIS_URL`` set), its loops in submission order. Each ``repo`` loop
that ended ``done``, pushed its branch, and whose repository is a remote of
this project has ``forge/<change>`` fetched from that remote into the local
branch of that name (created, or fast-forwarded: a local branch with commits
the fetched one lacks is never moved, and the change is skipped). The land
run then takes them like a local batch's changes, each verified with its
loop's own verify as the batch recorded it. Its land events, recorded in the
local timelines, are also appended to the changes' timelines on the server,
so the fleet's report shows what landed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from .._errors import ConfigError, UsageError
from .._land import fetch_change, has_landed, head_of, remote_for
from .._state import ChangePaths, read_timeline
from .._workspace import Project
from ._common import policy_from
from ._console import Output

if TYPE_CHECKING:
    from .._fleet import Connection, FleetConfig, LandBatch, LandLoop
    from .._policy import VerifyPolicy

_LAND_PREFIX = "land."


@attrs.define
class FleetLand:
    """A fleet batch made ready to land.

    Attributes:
        name: The fleet's batch name.
        batch: ``(change, reason)`` for the land plan, in submission order:
            the fetched changes, and the ended loops that did not end done.
        skipped: ``(change, why)`` of the loops left out here (another
            repository, a ``dir`` loop, still running, landed, not fetched).
        fetchable: With ``--dry-run``, the changes that would be fetched.
        landed: The changes the server's timelines say have landed.
        verify: Each loop's verify, from its effective policy as submitted.
    """

    config: FleetConfig
    name: str
    loops: dict[str, LandLoop]
    batch: list[tuple[str, str | None]] = attrs.field(factory=list)
    skipped: list[tuple[str, str]] = attrs.field(factory=list)
    fetchable: set[str] = attrs.field(factory=set)
    landed: set[str] = attrs.field(factory=set)
    verify: dict[str, VerifyPolicy] = attrs.field(factory=dict)

    def all_skipped(self, planned: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        """These skipped loops and those the plan ``planned`` skipped, in submission order."""
        position = {change: n for n, change in enumerate(self.loops)}
        both = [*self.skipped, *planned]
        return tuple(sorted(both, key=lambda item: position.get(item[0], len(position))))

    def journal(self, project: Project, out: Output) -> None:
        """Append the local land events of the batch's changes the server lacks to its timelines.

        A server that cannot be reached, or a loop that runs again, only
        costs the report its land section for now: the next ``forge land``
        on the batch sends what is missing.
        """
        from .._fleet import FleetUnavailable, append_land_events

        connection = _connect(self.config)
        try:
            for change, loop in self.loops.items():
                events = read_timeline(ChangePaths(project.root, change).timeline).events
                local = [e for e in events if str(e.get("event", "")).startswith(_LAND_PREFIX)]
                if not local:
                    continue
                try:
                    append_land_events(connection, change, local, loop.events)
                except UsageError as exc:  # its loop runs again, or is gone from the batch
                    out.note(_not_sent(change, exc.message))
                except FleetUnavailable as exc:
                    out.note(_not_sent("the batch's changes", exc.message))
                    return  # every other change would wait out the same timeout
        finally:
            connection.close()


def _not_sent(what: str, why: str) -> str:
    return (
        f"note: the land events of {what} were not sent to the fleet's server ({why}); "
        "the next forge land --fleet sends them"
    )


def fleet_land(
    project: Project, args: argparse.Namespace, out: Output, named: Sequence[str]
) -> FleetLand:
    """Read the fleet batch and fetch its done loops' branches (none with ``--dry-run``).

    Raises:
        UsageError: nothing is submitted on the server, or it cannot be reached.
    """
    from .._fleet import FleetConfig, FleetUnavailable, land_batch

    policy = policy_from(project, args=args).policy
    if args.rework:
        raise UsageError(
            "--rework does not take a fleet batch: its loops run on the fleet's hosts",
            hint="forge fleet requeue C runs a loop again there",
        )
    if policy.land.rework:
        out.note("note: [land] rework does not apply to a fleet batch: nothing is handed back")
    try:
        config = FleetConfig.from_policy(policy.fleet)
    except ConfigError as exc:
        raise UsageError(exc.message, context=exc.context, hint=exc.hint) from exc
    connection = _connect(config)
    try:
        batch = land_batch(connection)
    except FleetUnavailable as exc:
        # The fleet's own words, as a usage error: nothing was tried, nothing changed.
        raise UsageError(exc.message, context=exc.context, hint=exc.hint) from exc
    finally:
        connection.close()
    if batch is None:
        raise UsageError(
            f'no fleet batch to land: nothing is submitted under the fleet name "{config.name}"',
            hint="forge fleet submit --batch FILE and forge fleet work first; "
            "without --fleet (and FORGE_REDIS_URL unset) forge land takes the local batch",
        )
    return _prepare(project, args, out, config, batch, named)


def refuse_pull_requests() -> None:
    """``--pr`` on a fleet batch: its branches are on the remote already.

    Raises:
        UsageError: always.
    """
    raise UsageError(
        "forge land --pr does not take a fleet batch: its branches are on the remote already",
        hint="open the pull requests there (gh pr create --head forge/C), "
        "or forge land --fleet to land them here",
    )


def _prepare(
    project: Project,
    args: argparse.Namespace,
    out: Output,
    config: FleetConfig,
    batch: LandBatch,
    named: Sequence[str],
) -> FleetLand:
    from .._policy import structure_policy

    root = project.root
    loops = {loop.change: loop for loop in batch.loops}
    land = FleetLand(config=config, name=batch.name, loops=loops)
    for loop in batch.loops:
        if loop.spec is not None:
            where = f"fleet loop {loop.change}"
            land.verify[loop.change] = structure_policy(loop.spec.policy, where).verify
        local = read_timeline(ChangePaths(root, loop.change).timeline).events
        if has_landed(loop.events) or has_landed(local):
            land.landed.add(loop.change)
    wanted = [loops[c] for c in named if c in loops] if named else list(batch.loops)
    taken: list[tuple[str, str]] = []
    for loop in wanted:
        change = loop.change
        if change in land.landed:
            if not named:
                land.skipped.append((change, "already landed"))
            continue  # a named one: the plan says so
        if not named and loop.state in ("queued", "running"):
            land.skipped.append((change, f"its loop is still {loop.state} on the fleet"))
        elif not named and loop.reason != "done":
            land.batch.append((change, loop.reason))  # the plan says how it ended
        else:
            why, remote = _source(root, loop)
            if remote is None:
                _left_out(land, change, why, named)
            else:
                taken.append((change, remote))
    # Every named change was found fetchable before anything is fetched.
    for change, remote in taken:
        if args.dry_run:
            land.fetchable.add(change)
            said = f"land: {change} — would fetch forge/{change} from {remote}"
            if head_of(root, f"forge/{change}") is not None:
                said += f" (taken only if it fast-forwards the local forge/{change})"
            out.line(said, style="dim")
            land.batch.append((change, "done"))
            continue
        fetched = fetch_change(root, remote, change)
        if fetched.why:
            _left_out(land, change, fetched.why, named)
            continue
        out.line(
            f"land: {change} — fetched forge/{change} from {remote} "
            f"({fetched.commit[:7]}, {fetched.moved})",
            style="dim",
        )
        land.batch.append((change, "done"))
    position = {change: n for n, change in enumerate(loops)}
    land.batch.sort(key=lambda item: position[item[0]])  # the plan lands them in this order
    return land


def _left_out(land: FleetLand, change: str, why: str, named: Sequence[str]) -> None:
    """A loop not fetched: skipped from the batch; a named one is refused, not landed from here.

    Raises:
        UsageError: ``change`` was named.
    """
    if named:
        raise UsageError(
            f"change {change!r} is not landed from the fleet: {why}",
            hint="forge land --fleet --dry-run shows what the batch lands",
        )
    land.skipped.append((change, why))


def _source(root: Path, loop: LandLoop) -> tuple[str, str | None]:
    """``(why not, None)``, or ``("", remote)``: the project's remote the loop pushed to."""
    spec = loop.spec
    if spec is None:
        return "the fleet's server keeps no spec of its loop", None
    if not spec.repo:
        return f"a dir loop (in {spec.dir}): its branch is not on a remote", None
    if not spec.push:
        return "its loop does not push its branch (push = false)", None
    remote = remote_for(root, spec.repo)
    if remote is None:
        return f"its repository {spec.repo} is not a remote of this project", None
    return "", remote


def _connect(config: FleetConfig) -> Connection:
    from .._fleet import Connection

    return Connection(config)
