"""Test support for the morning report: synthetic runs, strict HTML checks, headless chromium.

A synthetic run is written as Forge writes a real one: each loop's timeline
through the event classes' own encoding, its iteration logs, and (unless the
run was "killed") a ``summary.json``. Loops cycle through every ending, every
trip kind, alerts, recovery steps and provider pauses, so a run of a few
dozen loops shows each of them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs

from orchestra._state import (
    AlertCleared,
    AlertRaised,
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    Event,
    IterationFinished,
    IterationStarted,
    ProtectViolation,
    RateLimitEvent,
    RecoveryStep,
    RunStarted,
    RunStopped,
    VerifyRecorded,
    event_record,
)

ENDINGS = (
    "done",
    "circuit-open",
    "gate-open",
    "iterations-exhausted",
    "executor-failed",
    "interrupted",
    "provider-limit",
    "worktree-failed",
    "gate-error",
    "output-unreadable",
)
TRIPS = ("verify", "stagnation", "integrity", "budget")
GATES = ("verify circuit-breaker", "spend budget", "secscan", "loop circuit")
BASE = datetime(2026, 11, 30, 22, 0, 0, tzinfo=UTC).timestamp()
ARTEFACTS = Path(__file__).resolve().parent.parent / "build" / "test-artefacts"


def iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(BASE + seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@attrs.define
class _Writer:
    change: str
    run_id: str
    clock: float = 0.0
    events: list[Event] = attrs.field(factory=list)

    def add(self, event: Event, after: float = 0.5) -> None:
        self.clock += after
        self.events.append(attrs.evolve(event, ts=iso(self.clock)))

    def iteration(self, number: int, **fields: Any) -> None:
        self.add(IterationStarted(run_id=self.run_id, iteration=number), 1.0)
        verdict = fields.pop("verify", None)
        # What the loop's change detection records: the files this iteration changed.
        fields.setdefault("signals", {"files_modified": 1, "files": [f"src/{self.change}.py"]})
        if verdict is not None:
            failures = 0 if verdict == "PASS" else number
            self.add(
                VerifyRecorded(
                    verdict=verdict,
                    consecutive_failures=failures,
                    max_failures=3,
                    open=failures >= 3,
                    run_id=self.run_id,
                    iteration=number,
                ),
                20.0,
            )
        self.add(
            IterationFinished(
                run_id=self.run_id,
                iteration=number,
                duration=20.0,
                exit=fields.pop("exit", 0),
                tokens=fields.pop("tokens", 1000 * number),
                tool_calls=3,
                cost_usd=0.01 * number,
                log=f"runs/{self.run_id}/iteration-{number}.log",
                verify=verdict,
                score=fields.pop("score", 2 - number),
                window_score=fields.pop("window_score", 3 - number),
                risk="low",
                **fields,
            ),
            0.0 if verdict is not None else 20.0,
        )


def _loop_events(
    index: int, change: str, run_id: str, *, recovered: bool = False, batch_alert: bool = False
) -> tuple[list[Event], dict[str, Any]]:
    """One loop's events and its summary entry; the index picks its ending and its trip.

    With ``recovered``, a loop that ends done first trips its circuit (a failing
    verify), waits out the cooldown and passes its probe.
    """
    ending = ENDINGS[index % len(ENDINGS)]
    trip = TRIPS[index % len(TRIPS)]
    w = _Writer(change, run_id, clock=index * 3.0)
    w.add(RunStarted(run_id=run_id, plan={"max_iterations": 5}, supervised=True, circuit="closed"))
    detail: str | None = None
    gate: str | None = None
    trips = 0
    iterations = 0
    if ending == "worktree-failed":
        return [], _entry(change, ending, 0, "cannot create the worktree", 0)
    w.iteration(1, verify="PASS", cost_estimated=index % 3 == 0)
    iterations = 1
    if batch_alert:  # the shared rate window ran low while this loop ran
        w.add(
            AlertRaised(
                run_id=run_id,
                iteration=1,
                alert="calls-remaining",
                detail=f"{10 - index} of 100 calls left in the rate window",
                value=0.1,
                threshold=0.2,
            )
        )
    if index % 5 == 1:  # a provider refused for a while
        w.iteration(
            2,
            rate_limit=RateLimitEvent("rejected", BASE + 900, "five_hour"),
            judged=False,
            score=None,
            window_score=None,
            pause=60.0,
        )
        w.clock += 60.0  # every loop waited for the reset
        iterations = 2
    if index % 4 == 2:  # an alert raised and cleared, a recovery step tried
        w.add(
            AlertRaised(
                run_id=run_id,
                iteration=1,
                alert="no-files",
                detail="no file modified for 3 iterations",
                value=3.0,
                threshold=3.0,
            )
        )
        w.add(
            RecoveryStep(
                run_id=run_id,
                iteration=1,
                trip_kind="no-progress",
                step=1,
                steps=4,
                strategy="Re-plan from scratch.",
            )
        )
        w.add(AlertCleared(run_id=run_id, iteration=1, alert="no-files"))
    if ending == "done" and recovered:
        w.iteration(iterations + 1, verify="FAIL", trip="verify: 1 consecutive failures")
        reason = "verify: 1 consecutive failures"
        evidence = {"condition": "verify"}
        w.add(
            BreakerOpened(run_id=run_id, reason=reason, cooldown=30.0, opens=1, evidence=evidence)
        )
        w.add(BreakerHalfOpen(run_id=run_id, reason="the cooldown has elapsed", opens=1), 30.0)
        iterations += 1
        trips = 1
    if ending == "done":
        w.iteration(iterations + 1, verify="PASS", done=True, score=3)
        iterations += 1
        if recovered:
            w.add(BreakerClosed(run_id=run_id, reason="the probe passed", opens=1))
    elif ending in ("circuit-open", "gate-open", "gate-error"):
        if trip == "integrity":
            harmed = [
                {
                    "path": "forge.toml",
                    "protection": "frozen",
                    "harm": "deleted",
                    "action": "restored",
                }
            ]
            w.add(ProtectViolation(run_id=run_id, iteration=iterations, harmed=harmed))
        reason = f"{trip}: tripped in loop {change}"
        w.add(
            BreakerOpened(
                run_id=run_id, reason=reason, cooldown=30.0, opens=1, evidence={"condition": trip}
            )
        )
        w.add(
            BreakerHalfOpen(
                run_id=run_id, reason="the cooldown has elapsed", cooldown=30.0, opens=1
            ),
            30.0,
        )
        w.iteration(iterations + 1, verify="FAIL", trip=f"{trip}: again")
        iterations += 1
        w.add(
            BreakerOpened(
                run_id=run_id,
                reason=f"probe failed: {trip}",
                cooldown=60.0,
                opens=2,
                escalated=True,
                evidence={"condition": trip},
            )
        )
        trips = 2
        detail = f"probe failed: {trip} (opened 2 times; max_opens is exhausted)"
        if ending != "circuit-open":
            gate = GATES[index % len(GATES)]
            detail = f"{gate} is open"
    elif ending == "iterations-exhausted":
        for number in range(iterations + 1, 6):
            w.iteration(number, verify="FAIL")
        iterations = 5
        detail = "5 of 5 iterations used"
    elif ending == "executor-failed":
        w.iteration(iterations + 1, exit=127, start_error="agent: command not found")
        iterations += 1
        detail = "the executor failed: exit 127"
    elif ending == "output-unreadable":
        log = f"runs/{run_id}/iteration-{iterations + 1}.log"
        w.iteration(iterations + 1, parse_note="no JSON object in the output", judged=False)
        iterations += 1
        detail = f"the agent's output could not be read; see {log}"
    if ending != "interrupted":
        w.add(
            RunStopped(
                run_id=run_id, reason=ending, iterations=iterations, gate=gate, detail=detail
            )
        )
    return w.events, _entry(change, ending, iterations, detail, trips)


def _entry(
    change: str, ending: str, iterations: int, detail: str | None, trips: int
) -> dict[str, Any]:
    return {
        "change": change,
        "reason": ending,
        "iterations": iterations,
        "max_iterations": 5,
        "detail": detail,
        "circuit_trips": trips,
        "circuit": "open" if trips else "closed",
        "verify": None,
        "spend": {"tokens": 0, "cost_usd": 0.0},
    }


def write_run(
    root: Path,
    run_id: str,
    loops: int,
    *,
    summary: bool = True,
    secret_line: str = "",
    recovered: bool = False,
    batch_alert: bool = False,
) -> list[str]:
    """A synthetic batch of ``loops`` loops under ``root``; returns the changes' names.

    ``recovered``: every loop that ends done trips its circuit first.
    ``batch_alert``: every loop raises the batch-wide ``calls-remaining`` alert.
    """
    changes = [f"loop-{index:03d}" for index in range(loops)]
    entries = []
    end = 0.0
    for index, change in enumerate(changes):
        events, entry = _loop_events(
            index, change, run_id, recovered=recovered, batch_alert=batch_alert
        )
        entry["dir"] = str(root)
        entries.append(entry)
        folder = root / ".forge" / "changes" / change
        logs = folder / "runs" / run_id
        logs.mkdir(parents=True, exist_ok=True)
        with (folder / "timeline.jsonl").open("a", encoding="utf-8") as handle:
            for seq, event in enumerate(events, start=1):
                stamped = attrs.evolve(event, seq=seq, change=change)
                handle.write(json.dumps(event_record(stamped), ensure_ascii=False) + "\n")
        for event in events:
            if isinstance(event, IterationFinished):
                (logs / f"iteration-{event.iteration}.log").write_text(
                    f"\x1b[1mworking on {change}\x1b[0m\n<script>alert(1)</script> & done\n"
                    f"{secret_line}\nlast line of iteration {event.iteration}\n",
                    encoding="utf-8",
                )
        if events:
            end = max(end, datetime.fromisoformat(events[-1].ts or "").timestamp() - BASE)
    if summary:
        folder = root / ".forge" / "runs" / run_id
        folder.mkdir(parents=True, exist_ok=True)
        data = {
            "run_id": run_id,
            "root": str(root),
            "started_at": BASE,
            "finished_at": BASE + end + 1,
            "interrupted": False,
            "exit_code": 1,
            "loops": entries,
            "limiter": {"calls": 100, "window": 3600.0, "waits": 7},
        }
        (folder / "summary.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return changes


# --- strict HTML checks -------------------------------------------------------

_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }
)
# Elements an SVG may close itself (<rect/>); in HTML proper only void elements may.
_SVG = frozenset(
    {
        "svg",
        "rect",
        "line",
        "polyline",
        "polygon",
        "circle",
        "path",
        "text",
        "title",
        "desc",
        "defs",
        "pattern",
        "g",
        "use",
    }
)


class PageCheck(HTMLParser):
    """Parses a page and collects what a strict check needs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.ids: dict[str, int] = {}
        self.svgs: list[dict[str, str | None]] = []
        self.svg_titles: list[bool] = []
        self.links: list[str] = []
        self.html_lang: str | None = None
        self.title = ""
        self.in_title = False
        self.section_order: list[str] = []
        self.rows: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        found = dict(attrs_)
        self._open(tag, found)
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID and tag not in _SVG:
            self.problems.append(f"<{tag}/> self-closed outside SVG")
        self._open(tag, dict(attrs_))

    def _open(self, tag: str, found: dict[str, str | None]) -> None:
        ident = found.get("id")
        if ident:
            self.ids[ident] = self.ids.get(ident, 0) + 1
        if tag == "html":
            self.html_lang = found.get("lang")
        if tag == "title" and "svg" not in self.stack:
            self.in_title = True
        if tag == "svg":
            self.svgs.append(found)
        if tag == "title" and self.stack and self.stack[-1] == "svg":
            self.svg_titles[-1] = True
        if tag == "svg":
            self.svg_titles.append(False)
        if tag == "img" and not found.get("alt"):
            self.problems.append("an <img> without alt")
        for key in ("src", "href", "action", "srcset", "poster", "data"):
            if found.get(key) is not None:
                self.links.append(str(found[key]))
        if found.get("style") and "url(" in str(found["style"]):
            self.links.append(str(found["style"]))
        if tag == "section" and ident:
            self.section_order.append(ident)
        if tag == "tr" and found.get("data-change"):
            self.rows.append(str(found["data-change"]))

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if tag == "title":
            self.in_title = False
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else '-'}>")
            if tag in self.stack:
                while self.stack and self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        self.text.append(data)

    def handle_decl(self, decl: str) -> None:
        if decl.lower() != "doctype html":
            self.problems.append(f"doctype {decl!r}")


def check_page(html: str) -> PageCheck:
    """Parse ``html`` and assert the strict rules the report keeps."""
    page = PageCheck()
    page.feed(html)
    page.close()
    assert html.startswith("<!DOCTYPE html>"), html[:40]
    assert not page.problems, page.problems[:10]
    assert not page.stack, f"unclosed: {page.stack}"
    assert page.html_lang, "no lang on <html>"
    assert page.title.strip(), "no <title>"
    duplicated = sorted(ident for ident, count in page.ids.items() if count > 1)
    assert not duplicated, duplicated[:10]
    for svg, titled in zip(page.svgs, page.svg_titles, strict=True):
        if svg.get("aria-hidden") == "true":
            continue
        assert svg.get("role") == "img", svg
        named = svg.get("aria-label") or titled
        assert named, f"an svg without a text alternative: {svg}"
        for ident in (svg.get("aria-labelledby") or "").split():
            assert ident in page.ids, f"aria-labelledby names a missing id {ident}"
    outside = [link for link in page.links if not link.startswith("#")]
    assert not outside, f"links outside the page: {outside[:5]}"
    assert "Content-Security-Policy" in html
    assert "default-src 'none'" in html
    assert "<script" not in html.lower()
    return page


# --- headless chromium --------------------------------------------------------

_LOCK = Path("/tmp/forge-tests-chromium.lock")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium() -> str:
    """The path of Debian's chromium, installed with apt when missing (as root); else fails."""
    with _LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time across test workers
        found = shutil.which("chromium")
        if found:
            return found
        if os.geteuid() != 0:
            raise RuntimeError(
                "chromium is not installed and the tests are not running as root: "
                "install it with `sudo apt-get install -y chromium`"
            )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "chromium"],
        ):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
        found = shutil.which("chromium")
        if not found:
            raise RuntimeError("apt-get installed chromium but it is not on PATH")
        return found


@attrs.frozen
class Browsed:
    """What headless chromium made of a page."""

    dom: str
    console: list[str]
    stderr: str


_CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)")


def browse(
    path: Path, profile: Path, *, screenshot: Path | None = None, size: str = "1280,2000"
) -> Browsed:
    """Load a local page in a fresh profile: its DOM, its console messages (errors, CSP
    refusals of any load) and, optionally, a screenshot."""
    binary = chromium()
    url = path.resolve().as_uri()
    base = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    done = subprocess.run(
        [*base, "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [m.group(1) for m in _CONSOLE.finditer(done.stderr)]
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        shot = subprocess.run(
            [*base, f"--window-size={size}", f"--screenshot={screenshot}", url],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert shot.returncode == 0, shot.stderr[-2000:]
        console += [m.group(1) for m in _CONSOLE.finditer(shot.stderr)]
        assert screenshot.stat().st_size > 1000
    return Browsed(done.stdout, console, done.stderr)


def artefact(name: str) -> Path:
    """Where a test keeps a file for a person to look at after the run."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    return ARTEFACTS / name


def iter_json_lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)
