"""Pull-request mode of forge land: push each change's branch, open a pull request with gh.

Nothing is verified locally and the local base never moves: the remote's
checks decide. The ``gh`` CLI is optional — without it (or unauthenticated)
the branch is pushed and the person opens the pull request on the remote.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._git import run_git
from .._state import ChangePaths, read_timeline
from ._events import record
from ._queue import commit_message, worktree_of
from ._repo import all_changes, commit_all

# gh talks to the network: give it longer than a local git command.
_GH_TIMEOUT = 120.0
_PASSED = {"SUCCESS", "NEUTRAL", "SKIPPED"}
_FAILED = {"FAILURE", "ERROR", "CANCELLED", "TIMED_OUT", "ACTION_REQUIRED", "STARTUP_FAILURE"}


@attrs.frozen
class PrOutcome:
    """What became of one change in pull-request mode.

    Attributes:
        change: Its name.
        result: ``opened`` (pushed and a pull request opened), ``pushed`` (no gh),
            ``failed`` (the push or ``gh pr create`` failed).
        url: The pull request's URL when opened.
        message: Why it failed, or gh's absence.
        committed: The commit made of work left uncommitted in its worktree.
    """

    change: str
    result: str
    url: str = ""
    message: str = ""
    committed: str = ""

    def line(self, remote: str) -> str:
        """Its line of the land run's output."""
        branch = f"forge/{self.change}"
        if self.result == "opened":
            return f"land: {self.change} — pushed {branch} to {remote}, pull request {self.url}"
        if self.result == "pushed":
            return (
                f"land: {self.change} — {self.message} — pushed {branch} to {remote}; "
                "open the pull request there"
            )
        return f"land: {self.change} — FAILED: {self.message}; nothing opened"

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def has_pull_request(events: Iterable[Mapping[str, Any]]) -> str:
    """The URL of the change's latest ``land.pr`` event, or ``""``."""
    url = ""
    for event in events:
        if event.get("event") == "land.pr" and isinstance(event.get("url"), str):
            url = event["url"]
    return url


def pr_body(change: str, events: Sequence[Mapping[str, Any]], spend: Mapping[str, Any]) -> str:
    """The pull request's Markdown: what the loop did, its last verify, its spend."""
    iterations = sum(1 for event in events if event.get("event") == "iteration.finished")
    verifies = [event for event in events if event.get("event") == "verify"]
    lines = [f"## {change}", "", f"- Iterations: {iterations}"]
    if verifies:
        last = verifies[-1]
        raw = last.get("checks")
        checks: list[Any] = raw if isinstance(raw, list) else []
        named = ", ".join(
            f"{c.get('name')} {'ok' if c.get('passed') else 'FAIL'}"
            for c in checks
            if isinstance(c, dict) and c.get("name")
        )
        lines.append(
            f"- Last verify: {last.get('verdict', '?')}" + (f" ({named})" if named else "")
        )
        lines.append(f"- Verify runs: {len(verifies)}")
    else:
        lines.append("- Last verify: not run")
    cost = float(spend.get("cost_usd", 0.0) or 0.0)
    lines.append(
        f"- Spend: {int(spend.get('tokens', 0) or 0)} tokens, "
        f"{int(spend.get('tool_calls', 0) or 0)} tool calls, ${cost:.2f}"
        + (" (estimated)" if spend.get("cost_estimated") else "")
    )
    lines += ["", "Opened by `forge land --pr`: it was not verified on the base locally."]
    return "\n".join(lines) + "\n"


def gh_ready() -> str:
    """``""`` when ``gh`` is on PATH and authenticated, else why not (for the message)."""
    if shutil.which("gh") is None:
        return "gh not found"
    done = _gh("auth", "status")
    return "" if done.returncode == 0 else "gh not authenticated"


def _gh(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["gh", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GH_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(["gh", *args], 127, "", str(error))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def open_pull_requests(
    root: Path,
    changes: Sequence[str],
    *,
    base: str,
    remote: str,
    spend_of: Callable[[str], Mapping[str, Any]],
    said: Callable[[str], None],
) -> list[PrOutcome]:
    """Push each change's branch to ``remote`` and, with gh, open its pull request."""
    missing = gh_ready()
    outcomes = []
    for change in changes:
        outcome = _open_one(root, change, base, remote, missing, spend_of(change), said)
        outcomes.append(outcome)
        said(outcome.line(remote))
    return outcomes


def _open_one(
    root: Path,
    change: str,
    base: str,
    remote: str,
    missing: str,
    spend: Mapping[str, Any],
    said: Callable[[str], None],
) -> PrOutcome:
    paths = ChangePaths(root, change)
    events = read_timeline(paths.timeline).events
    branch = f"forge/{change}"
    worktree = worktree_of(root, change)
    committed = ""
    if (worktree / ".git").exists() and all_changes(worktree):
        committed = commit_all(
            worktree, commit_message(change, events, f"forge: uncommitted work of {change}")
        )
        said(f"land: {change} — committed its uncommitted work on {branch} ({committed[:7]})")
    fields = {"branch": branch, "remote": remote, "base": base}
    pushed = run_git(root, "push", "-q", remote, f"{branch}:refs/heads/{branch}", timeout=300)
    if not pushed.ok:
        message = f"git push {remote} {branch} failed: " + _last_line(pushed.message())
        record(paths, "land.pr.failed", {**fields, "step": "push", "message": message})
        return PrOutcome(change, "failed", message=message, committed=committed)
    if missing:
        return PrOutcome(change, "pushed", message=missing, committed=committed)
    subject = run_git(root, "log", "-1", "--format=%s", branch).stdout.decode(errors="replace")
    subject = subject.strip().removeprefix(f"{change}:").strip() or "forge land"
    with tempfile.TemporaryDirectory(prefix="forge-pr-") as folder:
        body = Path(folder) / "body.md"
        body.write_text(pr_body(change, events, spend), encoding="utf-8")
        created = _gh(
            "pr", "create", "--base", base, "--head", branch,
            "--title", f"{change}: {subject}", "--body-file", str(body),
            cwd=root,
        )  # fmt: skip
    url = _last_line(created.stdout)
    if created.returncode != 0 or not url:
        message = "gh pr create failed: " + (
            _last_line(created.stderr) or f"exit {created.returncode}"
        )
        record(paths, "land.pr.failed", {**fields, "step": "gh pr create", "message": message})
        return PrOutcome(change, "failed", message=message, committed=committed)
    record(paths, "land.pr", {"url": url, **fields})
    return PrOutcome(change, "opened", url=url, committed=committed)


@attrs.frozen
class PrStatus:
    """A pull request's state as gh reports it."""

    change: str
    url: str
    number: int | None = None
    state: str = ""
    mergeable: str = ""
    passed: int = 0
    failed: int = 0
    pending: int = 0
    error: str = ""

    def line(self) -> str:
        """``land: C — PR #12 open, checks: 2 passed, 1 pending``."""
        if self.error:
            return f"land: {self.change} — {self.url}: {self.error}"
        counts = [
            f"{n} {word}"
            for n, word in (
                (self.passed, "passed"),
                (self.failed, "failed"),
                (self.pending, "pending"),
            )
            if n
        ]
        number = f"PR #{self.number}" if self.number is not None else f"PR {self.url}"
        return f"land: {self.change} — {number} {self.state.lower()}, checks: " + (
            ", ".join(counts) or "none"
        )

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def parse_status(change: str, url: str, data: Mapping[str, Any]) -> PrStatus:
    """A :class:`PrStatus` from ``gh pr view --json number,state,mergeable,statusCheckRollup``."""
    counts = {"passed": 0, "failed": 0, "pending": 0}
    rollup = data.get("statusCheckRollup")
    for check in rollup if isinstance(rollup, list) else []:
        if not isinstance(check, dict):
            continue
        # A check run has a conclusion once completed; a status context has a state.
        verdict = str(check.get("conclusion") or check.get("state") or "").upper()
        key = "passed" if verdict in _PASSED else "failed" if verdict in _FAILED else "pending"
        counts[key] += 1
    number = data.get("number")
    return PrStatus(
        change=change,
        url=url,
        number=number if isinstance(number, int) else None,
        state=str(data.get("state") or ""),
        mergeable=str(data.get("mergeable") or ""),
        passed=counts["passed"],
        failed=counts["failed"],
        pending=counts["pending"],
    )


def pull_request_status(root: Path, change: str, url: str) -> PrStatus:
    """Ask gh for the pull request's state and checks."""
    done = _gh("pr", "view", url, "--json", "number,state,mergeable,statusCheckRollup", cwd=root)
    if done.returncode != 0:
        why = _last_line(done.stderr) or f"exit {done.returncode}"
        return PrStatus(change, url, error=f"gh pr view failed: {why}")
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return PrStatus(change, url, error="gh pr view printed no JSON")
    if not isinstance(data, dict):
        return PrStatus(change, url, error="gh pr view printed no JSON object")
    return parse_status(change, url, data)
