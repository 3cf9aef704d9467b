"""Requests through the inbox: ``forge checkpoint``, ``forge event`` and ``forge verify``.

Inside its loop's executor (sandboxed or not) the agent writes none of
Forge's state: these commands leave their command line in the inbox's
``requests/`` folder, and the loop runs each one, in its own session, once
the iteration has ended and its check is done, in the order they were left.
Only those three, only for the loop's own change, never with another policy
file (``--config``), and a verify with nothing but ``--change``: a request
can do no more than a person's command for that change. (An agent's
``forge verify --change`` runs the checks at once, for the agent to read,
and leaves the recorded verify it stands for here.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

REQUESTS = "requests"
# A person's control an agent tried and Forge refused, for the loop to record.
REFUSED = "refused"
REQUEST_COMMANDS = ("checkpoint", "event", "verify")
_MAX_REQUESTS = 100
_MAX_REQUEST_BYTES = 64 * 1024
_APPLY_SECONDS = 120.0


@attrs.frozen
class Request:
    """One command line left in the inbox (the words after ``forge``)."""

    name: str
    argv: tuple[str, ...]


def queue_request(inbox: Path, argv: Sequence[str]) -> Path:
    """Leave ``argv`` in the inbox for the loop to run after the iteration; returns its file."""
    return _leave(inbox / REQUESTS, {"argv": list(argv)})


def queue_refusal(inbox: Path, fields: Mapping[str, object]) -> Path:
    """Leave a refused control's record in the inbox (the sandbox keeps the timeline read-only)."""
    return _leave(inbox / REFUSED, dict(fields))


def _leave(folder: Path, data: object) -> Path:
    """One JSON file in ``folder``, named to sort in the order they were left."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}.json"
    temporary = folder / f".{name}.tmp"
    temporary.write_text(json.dumps(data), encoding="utf-8")
    temporary.rename(folder / name)  # whole or not at all: the loop never reads half of one
    return folder / name


def _left(folder: Path) -> list[str] | None:
    """The names of the files left in ``folder``, oldest first (None: no folder to read)."""
    try:
        return sorted(
            entry.name
            for entry in os.scandir(folder)
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False)
        )
    except OSError:
        return None


def read_refusals(inbox: Path) -> list[dict[str, object]]:
    """The refusals left in the inbox, oldest first (unreadable ones skipped)."""
    folder = inbox / REFUSED
    names = _left(folder) or []
    found: list[dict[str, object]] = []
    for name in names[:_MAX_REQUESTS]:
        try:
            data = json.loads((folder / name).read_bytes()[:_MAX_REQUEST_BYTES])
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            # The agent can write here too: only the fields a refusal has, as plain values.
            kept = {k: data.get(k) for k in ("command", "pid", "loop_pid", "found_by")}
            found.append({k: v for k, v in kept.items() if isinstance(v, str | int)})
    return found


def _change_of(argv: Sequence[str]) -> str | None:
    for index, word in enumerate(argv):
        if word == "--change" and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--change="):
            return word.partition("=")[2]
    return None


def refusal(argv: Sequence[str], change: str) -> str | None:
    """Why the loop will not run this request, or None when it will."""
    if not argv or argv[0] not in REQUEST_COMMANDS:
        return "only forge checkpoint, forge event and forge verify are run from the inbox"
    if argv[0] == "verify" and list(argv) != ["verify", "--change", change]:
        # The recorded verify the agent's own stands for: nothing but the change.
        return f"a verify request is exactly: verify --change {change}"
    if any(word == "--config" or word.startswith("--config=") for word in argv):
        return "a request may not name another policy file (--config)"
    if _change_of(argv) != change:
        return f"a request must name the loop's own change (--change {change})"
    return None


def read_requests(inbox: Path) -> tuple[list[Request], list[str]]:
    """The requests in the inbox, oldest first, and a line for each one that is unreadable."""
    folder = inbox / REQUESTS
    names = _left(folder)
    if names is None:
        return [], []
    found: list[Request] = []
    problems: list[str] = []
    for name in names[:_MAX_REQUESTS]:
        try:
            raw = (folder / name).read_bytes()[: _MAX_REQUEST_BYTES + 1]
            data = json.loads(raw) if len(raw) <= _MAX_REQUEST_BYTES else None
        except (OSError, ValueError):
            data = None
        argv = data.get("argv") if isinstance(data, dict) else None
        if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
            problems.append(f"{name}: not a request; ignored")
            continue
        found.append(Request(name, tuple(argv)))
    if len(names) > _MAX_REQUESTS:
        problems.append(f"{len(names) - _MAX_REQUESTS} request(s) past {_MAX_REQUESTS}; ignored")
    return found, problems


def apply_requests(
    inbox: Path,
    *,
    change: str,
    workdir: Path,
    env: Mapping[str, str],
    redact: Callable[[str], str] | None = None,
    verified: bool = False,
    verify_seconds: float = 0.0,
) -> list[str]:
    """Run every request in the inbox, outside the sandbox; one line per request on how it went.

    With ``redact``, each word of a request is redacted before it is run: the
    agent wrote them, and what they say goes to the timeline, the checkpoint
    and the iteration's log. ``verified``: the loop already recorded its own
    verify of the tree, so a verify request is not run (one attempt for one
    tree); otherwise it has ``verify_seconds`` (the policy's verify timeout)
    on top of a request's own time.
    """
    requests, lines = read_requests(inbox)
    for request in requests:
        if redact is not None:
            request = attrs.evolve(request, argv=tuple(redact(word) for word in request.argv))
        shown = "forge " + " ".join(request.argv)
        why = refusal(request.argv, change)
        if why is not None:
            lines.append(f"{shown}: refused: {why}")
            continue
        verify = request.argv[0] == "verify"
        if verify and verified:
            lines.append(f"{shown}: not run: the loop recorded its own verify of this tree")
            continue
        try:
            done = subprocess.run(
                [sys.executable, "-m", "orchestra", *request.argv],
                cwd=workdir,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_APPLY_SECONDS + (verify_seconds if verify else 0.0),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines.append(f"{shown}: could not run: {exc}")
            continue
        said = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
        lines.append(f"{shown}: exit {done.returncode}" + (f"\n{said}" if said else ""))
    return lines
