"""Reading a run's state from disk for the report: its summary, timelines, logs and git.

A run's id names ``.forge/runs/<id>/`` (where ``forge supervise`` writes
``summary.json`` when it ends) and ``.forge/changes/<c>/runs/<id>/`` (each
loop's iteration logs). A run killed before it could write its summary still
has the latter and its timelines, which is all the report needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from .._errors import UsageError
from .._git import git_output
from .._redact import Redact
from .._state import STATE_DIR, ChangePaths, IterationFinished, list_changes, parse_timeline
from ._build import LoopFacts, build_report, is_forge_file
from ._fleet import EXPORTED_KEY, FLEET_KEY, fleet_resume, is_fleet_batch
from ._gitdiff import work_diff
from ._model import BatchReport

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]+$")
_TAIL_BYTES = 64 * 1024
# Terminal control sequences and other control characters a log may hold.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|[\x00-\x08\x0b-\x1f\x7f]")


def run_folder(root: Path, run_id: str) -> Path:
    """Where a run's summary and report live: ``.forge/runs/<id>/``."""
    return root / STATE_DIR / "runs" / run_id


def known_runs(roots: Iterable[Path]) -> list[str]:
    """Every run id with a summary or a loop's logs under ``roots``, oldest first."""
    found: set[str] = set()
    for root in roots:
        state = root / STATE_DIR
        folders = [state / "runs"]
        folders += [ChangePaths(root, name).runs for name in list_changes(root)]
        for folder in folders:
            if folder.is_dir():
                found.update(p.name for p in folder.iterdir() if RUN_ID.match(p.name))
    return sorted(found)


def resolve_run(roots: list[Path], wanted: str | None) -> str:
    """The run id asked for (``latest`` or None: the newest).

    Raises:
        UsageError: no run at all, or none of that id.
    """
    runs = known_runs(roots)
    if not runs:
        raise UsageError(
            "no runs yet: nothing under .forge/runs/ or .forge/changes/*/runs/",
            hint="run forge supervise (or forge run --yes) first",
        )
    # A fleet host's summary is not a run this host can report: its loops'
    # events are on the fleet's server, spread over every host's runs.
    fleet = {run_id for run_id in runs if is_fleet_host_run(roots, run_id)}
    if wanted in (None, "latest"):
        runs = [run_id for run_id in runs if run_id not in fleet]
        if not runs:
            raise UsageError(
                "no run to report: the runs here are fleet hosts' summaries",
                hint=_FLEET_HINT,
            )
        # The latest batch: a person's forge run this morning is not last night's batch.
        batches = (run_id for run_id in reversed(runs) if _is_batch(roots, run_id))
        return next(batches, runs[-1])
    if wanted not in runs:
        recent = ", ".join(runs[-5:])
        raise UsageError(f"--run {wanted}: no such run", hint=f"the most recent: {recent}")
    if wanted in fleet:
        raise UsageError(
            f"--run {wanted}: a fleet host's summary, not a batch this host ran alone",
            hint=_FLEET_HINT,
        )
    return wanted


_FLEET_HINT = (
    "a fleet batch's events are on its Redis server: forge report --fleet reports it "
    "from there (forge fleet status shows it), forge fleet export --to DIR writes it "
    "out for forge report --from DIR"
)


def is_fleet_host_run(roots: list[Path], run_id: str) -> bool:
    """Whether ``run_id``'s summary was written by ``forge fleet work``."""
    for root in roots:
        try:
            summary = json.loads((run_folder(root, run_id) / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        # An export's summary is the whole batch's, with its timelines beside it.
        if isinstance(summary, dict) and FLEET_KEY in summary and EXPORTED_KEY not in summary:
            return True
    return False


def _is_batch(roots: list[Path], run_id: str) -> bool:
    """Whether ``run_id`` was a ``forge supervise`` run (it has a summary, or says so)."""
    if any((run_folder(root, run_id) / "summary.json").exists() for root in roots):
        return True
    needle = run_id.encode()
    for root in roots:
        for name in list_changes(root):
            try:
                data = ChangePaths(root, name).timeline.read_bytes()
            except OSError:
                continue
            if needle not in data:
                continue
            for line in data.splitlines():
                if needle in line and b'"run.started"' in line and _supervised_start(line):
                    return True
    return False


def _supervised_start(line: bytes) -> bool:
    try:
        event = json.loads(line)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("supervised") is True


def read_summary(root: Path, run_id: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The run's ``summary.json``, or None (with a note when it exists but cannot be read)."""
    path = run_folder(root, run_id) / "summary.json"
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None, []
    except (OSError, ValueError) as exc:
        return None, [f"{path}: unreadable ({exc}); built from the timelines alone"]
    if not isinstance(data, dict):
        return None, [f"{path}: not a JSON object; built from the timelines alone"]
    return data, []


def gather_report(
    root: Path,
    run_id: str,
    *,
    other_roots: Iterable[Path] = (),
    output_lines: int = 20,
    forge_files: Iterable[str] = ("memory/forge-lessons.md",),
    redact: Redact | None = None,
) -> BatchReport:
    """The report of ``run_id``, read from ``root`` (and the loops' other repositories).

    ``forge_files`` are paths Forge writes in a working tree itself (the
    recovery's lessons file): the view of the worktree leaves them out.
    ``redact`` is the project's redaction: each escalated loop's diff goes
    through it (without one, only the diffstat is shown).
    """
    own = tuple(f for f in forge_files if f)
    summary, notes = read_summary(root, run_id)
    # An exported fleet batch: each change's whole timeline is the batch's (every
    # host that claimed the loop started a run of its own, under another id).
    whole = is_fleet_batch(summary)
    if summary is None and not notes and _is_batch([root, *other_roots], run_id):
        # A batch without its summary was cut short; a forge run never has one.
        notes.append("no summary.json (the supervisor did not finish): built from the timelines")
    roots = {root.resolve(), *(Path(r).resolve() for r in other_roots)}
    for entry in (summary or {}).get("loops") or []:
        if isinstance(entry, dict) and isinstance(entry.get("dir"), str):
            roots.add(Path(entry["dir"]))
    facts: list[LoopFacts] = []
    needle = run_id.encode()
    shared: dict[Path, tuple[str, list[str]]] = {}
    for where in sorted(roots):
        for name in list_changes(where):
            paths = ChangePaths(where, name)
            try:
                data = paths.timeline.read_bytes()
            except FileNotFoundError:
                data = b""
            except OSError as exc:
                notes.append(f"{paths.timeline}: unreadable ({exc.strerror or exc})")
                continue
            if needle not in data and not whole:
                facts.append(LoopFacts(change=name, root=str(where), events=()))
                continue
            read = parse_timeline(data)
            notes.extend(read.problems(paths.timeline))
            events = read.typed()
            facts.append(_facts(paths, events, run_id, output_lines, shared, own))
    report = build_report(
        run_id, summary, facts, root=str(root.resolve()), notes=notes, whole=whole
    )
    if whole:
        loops = tuple(
            attrs.evolve(loop, resume=fleet_resume(loop.change, loop.ending))
            for loop in report.loops
        )
        report = attrs.evolve(report, loops=loops)
    return with_diffs(report, redact=redact, own=own)


def with_diffs(
    report: BatchReport, *, redact: Redact | None, own: Iterable[str] = ()
) -> BatchReport:
    """The report with each escalated or ready-to-land loop's diff, read with git."""
    own = tuple(own)
    # Only an escalation's card shows a diff, and a ready loop its diffstat:
    # git is asked for those loops alone.
    loops = tuple(
        attrs.evolve(loop, diff=work_diff(loop, redact=redact, own=own))
        if loop.escalated or loop.ready_to_land
        else loop
        for loop in report.loops
    )
    return attrs.evolve(report, loops=loops)


def _facts(
    paths: ChangePaths,
    events: list[Any],
    run_id: str,
    output_lines: int,
    shared: dict[Path, tuple[str, list[str]]],
    own: tuple[str, ...],
) -> LoopFacts:
    last_log = None
    for event in events:
        if isinstance(event, IterationFinished) and event.run_id == run_id and event.log:
            last_log = paths.folder / event.log
    tail = _tail(last_log, output_lines) if last_log is not None else []
    where, files = _work(paths, shared)
    return LoopFacts(
        change=paths.name,
        root=str(paths.root),
        events=events,
        where=where,
        files_changed=[f for f in files if not is_forge_file(f, own)],
        forge_files=own,
        output_tail=tail,
        output_source=str(last_log) if last_log is not None else None,
    )


def _tail(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a log, without terminal control sequences."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - _TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    text = _CONTROL.sub("", data.decode("utf-8", errors="replace"))
    kept = [line.rstrip() for line in text.splitlines()]
    while kept and not kept[-1]:
        kept.pop()
    return kept[-lines:] if lines > 0 else []


def _work(
    paths: ChangePaths, shared: dict[Path, tuple[str, list[str]]]
) -> tuple[str | None, list[str]]:
    """Where the loop's work is (its worktree and branch, or the repository) and what changed.

    Loops that share a repository's working tree share its answer (``shared``):
    a batch of many such loops asks git once.
    """
    worktree = paths.root / STATE_DIR / "worktrees" / paths.name
    if (worktree / ".git").exists():
        branch = f"forge/{paths.name}"
        where = f"branch {branch}, worktree {worktree}"
        committed = git_output(paths.root, "diff", "--name-only", f"HEAD...{branch}") or b""
        return where, sorted(set(_lines(committed)) | set(_uncommitted(worktree)))
    if paths.root not in shared:
        head = git_output(paths.root, "rev-parse", "--abbrev-ref", "HEAD")
        name = head.decode(errors="replace").strip() if head else None
        where = f"branch {name} in {paths.root}" if name else str(paths.root)
        shared[paths.root] = (where, sorted(_uncommitted(paths.root)))
    return shared[paths.root]


def _uncommitted(workdir: Path) -> list[str]:
    raw = git_output(workdir, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if raw is None:
        return []
    found = []
    entries = raw.split(b"\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:].decode(errors="replace")
        if status[:1] in (b"R", b"C"):
            index += 1  # the rename's source follows
        if not path.startswith(f"{STATE_DIR}/"):
            found.append(path)
    return found


def _lines(raw: bytes) -> list[str]:
    return [line for line in raw.decode(errors="replace").splitlines() if line]
