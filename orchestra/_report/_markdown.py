"""The report in Markdown, for a pull request comment or a chat message.

The same content as the HTML page, in the same order (escalations first),
with the charts replaced by the words they stand for: each loop's strip as its
list of events and its progress score as a line of figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._durations import brief_seconds
from ._diff import cut_words
from ._fold import (
    alert_lines,
    batch_alert_lines,
    in_time_order,
    stop_words,
    trip_words,
    unsaid_evidence,
)
from ._html import (
    land_stat,
    land_words,
    landing_groups,
    money,
    not_finished,
    source_note,
    verify_failed,
    when,
)
from ._model import BatchReport, LoopReport, WorkDiff

_GLYPH = {"done": "✅", "interrupted": "⏸️", "stopped": "⏹️", "unfinished": "…"}


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


def _ending(ending: str) -> str:
    return f"{_GLYPH.get(ending, '❌')} {ending}"


def render_markdown(
    report: BatchReport,
    *,
    max_events: int = 30,
    max_chars: int = 0,
    full_report: str | None = None,
) -> str:
    """The report as Markdown.

    With ``max_chars`` (a pull request comment holds 65,536), a report that
    would be longer is made compact: it keeps the header, the escalations and
    the loops table, and leaves out first the per-loop timelines and the spend
    table, then the escalations' output, then the loops table's last rows,
    saying what it left out and where the full report (``full_report``) is.
    """
    head = _head(report)
    escalations = [line for loop in report.escalations for line in _escalation(loop)]
    table = _loop_rows(report)
    timelines = [line for loop in report.loops for line in _timeline(loop, max_events)]
    tail = _spend_and_notes(report)
    resume = [*_not_finished(report), *_ready_to_land(report), *_landed(report)]
    full = _join(head, _escalations_head(report), escalations, resume, _table_head(), table)
    full = _join(full, ["", "## Timelines", ""], timelines, tail)
    if not max_chars or len(full) <= max_chars:
        return full
    where = f" The full report: {_code(full_report)}." if full_report else ""
    left = ["the per-loop timelines", "the spend table"]
    short = [line for loop in report.escalations for line in _escalation(loop, output=False)]
    brief = [_escalation_line(loop) for loop in report.escalations]
    if brief:
        brief.append("")
    steps = (
        (escalations, None),
        (short, "the escalations' output"),
        (brief, "the escalations' details (one line each)"),
    )
    for cards, also in steps:
        if also:
            left.append(also)
        body = _join(head, _escalations_head(report), cards, resume, _table_head(), table)
        text = _join(body, _left_out(left, max_chars, where))
        if len(text) <= max_chars:
            return text
    # Still too long (thousands of loops): as many of the table's rows as fit.
    body = _join(head, _escalations_head(report), brief, resume, _table_head())
    kept: list[str] = []
    budget = max_chars - len(body) - 400 - len(where)
    for row in table:
        if budget - len(row) - 1 < 0:
            break
        kept.append(row)
        budget -= len(row) + 1
    left.append(f"{len(table) - len(kept)} of the loops table's {len(table)} rows")
    return _join(body, kept, _left_out(left, max_chars, where))[:max_chars]


def _join(*parts: Sequence[str] | str) -> str:
    text = ""
    for part in parts:
        if isinstance(part, str):
            text += part
        elif part:
            text += "\n".join(part) + "\n"
    return text


def _left_out(left: list[str], max_chars: int, where: str) -> list[str]:
    return [
        "",
        f"_Compact report (kept under {max_chars:,} characters): left out "
        f"{', '.join(left)}.{where}_",
    ]


def _head(report: BatchReport) -> list[str]:
    lines = [f"# Forge morning report — run `{report.run_id}`", "", f"**{report.outcome}**", ""]
    if not report.from_summary:
        lines += [f"_{source_note(report)}_", ""]
    spend = report.spend
    wall = report.wall_time
    counts = ", ".join(_count(report, e, n) for e, n in report.counts().items())
    waits = (
        f"{report.limiter_waits} time(s) a loop waited for a permit"
        if report.limiter_waits is not None
        else "not recorded (no summary)"
    )
    waited = sum(loop.limiter_wait for loop in report.loops)
    lines += [
        f"- Started: {when(report.started_at)}; wall time "
        f"{brief_seconds(wall) if wall is not None else 'unknown'}",
        f"- Exit code: {report.exit_code if report.exit_code is not None else 'none'}",
        f"- Loops: {len(report.loops)} — {counts}",
        f"- Spend: {spend.tokens:,} tokens, {spend.tool_calls:,} tool calls, {money(spend)}",
        f"- Limiter waits: {waits}; about {brief_seconds(waited)} spent waiting",
    ]
    lines += [f"- Batch alert: {line}" for line in batch_alert_lines(report.batch_alerts)]
    lines.append("")
    if report.warnings:
        lines += [f"## The policy's warnings ({len(report.warnings)})", ""]
        lines += [f"- {_cell(warning)}" for warning in report.warnings]
        lines.append("")
    return lines


def _count(report: BatchReport, ending: str, count: int) -> str:
    recovered = report.recovered if ending == "done" else 0
    also = f" ({recovered} recovered after a trip)" if recovered else ""
    return f"{_ending(ending)}: {count}{also}"


def _loop_ending(loop: LoopReport) -> str:
    return f"{_ending(loop.ending)} (recovered)" if loop.recovered else _ending(loop.ending)


def _escalations_head(report: BatchReport) -> list[str]:
    lines = [f"## Escalations ({len(report.escalations)})", ""]
    if not report.escalations:
        lines += ["No escalations: no loop needs a person.", ""]
    return lines


def _not_finished(report: BatchReport) -> list[str]:
    loops = not_finished(report)
    if not loops:
        return []
    lines = [
        f"## Not finished ({len(loops)})",
        "",
        "These loops stopped before they ended (a person stopped them, or the batch was "
        "interrupted or killed); their state is kept, and each goes on where it stopped with:",
        "",
    ]
    lines += [f"- {loop.change} — {_ending(loop.ending)}: `{loop.resume[-1]}`" for loop in loops]
    return [*lines, ""]


def _ready_to_land(report: BatchReport) -> list[str]:
    loops = report.ready_to_land
    if not loops:
        return []
    lines = [
        f"## Ready to land ({len(loops)})",
        "",
        "These loops ended done; `forge land` puts their work on the base.",
    ]
    for loop in loops:
        lines += [
            "",
            f"- {loop.change} — verify {loop.verify or 'never run'}, "
            f"{loop.spend.tokens:,} tokens, {money(loop.spend)}",
        ]
        words = land_stat(loop.diff)
        if isinstance(words, str):
            lines += ["", f"  _{words}._"]
        else:
            lines += ["", f"  {words[0]}", "", *(f"  {line}" for line in _fenced(words[1]))]
    return [*lines, ""]


def _landed(report: BatchReport) -> list[str]:
    groups = landing_groups(report)
    if not groups:
        return []
    lines = ["## Landed / Conflicts / Failed", ""]
    for title, loops in groups:
        lines += [f"### {title} ({len(loops)})", ""]
        lines += [f"- {loop.change} — {land_words(loop)}" for loop in loops]
        lines.append("")
    return lines


def _table_head() -> list[str]:
    return [
        "## Loops",
        "",
        "| Loop | Ending | Iterations | Trips | Tokens | Cost | Detail |",
        "|---|---|---:|---:|---:|---:|---|",
    ]


def _loop_rows(report: BatchReport) -> list[str]:
    return [
        f"| {_cell(loop.change)} | {_loop_ending(loop)} | {_iterations(loop)} | "
        f"{len(loop.trips)} | {loop.spend.tokens:,} | {money(loop.spend)} | "
        f"{_cell(loop.detail or '')} |"
        for loop in report.loops
    ]


def _spend_and_notes(report: BatchReport) -> list[str]:
    spend = report.spend
    lines = [
        "## Spend",
        "",
        "| Loop | Tokens | Tool calls | Cost |",
        "|---|---:|---:|---:|",
    ]
    for loop in report.loops:
        lines.append(
            f"| {_cell(loop.change)} | {loop.spend.tokens:,} | {loop.spend.tool_calls:,} | "
            f"{money(loop.spend)} |"
        )
    lines.append(f"| **Total** | {spend.tokens:,} | {spend.tool_calls:,} | {money(spend)} |")
    if spend.estimated:
        lines += ["", "_A cost marked ~ (estimated) was estimated from token counts._"]
    if report.notes:
        lines += ["", "## What could not be read", ""]
        lines += [f"- {note}" for note in report.notes]
    return lines


def _iterations(loop: LoopReport) -> str:
    cap = f"/{loop.max_iterations}" if loop.max_iterations is not None else ""
    return f"{loop.iterations}{cap}"


def _escalation_line(loop: LoopReport) -> str:
    """An escalation in one line: the loop, its ending, what stopped it, what clears it."""
    why = trip_words(loop.trips[-1]) if loop.trips else (loop.gate or loop.detail or "")
    clear = loop.resume[-2] if len(loop.resume) > 1 else (loop.resume or ("",))[0]
    resume = f"; clear: `{clear}`" if clear else ""
    return f"- **{_cell(loop.change)}** — {_ending(loop.ending)}: {why}{resume}"


def _escalation(loop: LoopReport, *, output: bool = True) -> list[str]:
    lines = [f"### {loop.change} — {_ending(loop.ending)}", ""]
    if loop.gate:
        lines.append(f"- Gate: {loop.gate}")
    if loop.trips:
        trip = loop.trips[-1]
        said = stop_words(trip, loop.detail)
        lines.append(f"- Trip: {said}")
        evidence = unsaid_evidence(trip.evidence, said)
        if evidence:
            lines.append("- Evidence: " + "; ".join(evidence))
    elif loop.detail:
        lines.append(f"- Detail: {loop.detail}")
    lines.append(f"- Iterations: {_iterations(loop)}")
    checks, failing = verify_failed(loop)
    if checks:
        lines.append(f"- Last verify: {checks}")
    if loop.recovery:
        lines.append("- Recovery tried: " + "; ".join(n.text for n in loop.recovery))
    if loop.not_tried:
        not_tried = "; ".join(n.text for n in loop.not_tried)
        lines.append(f"- Not tried (the loop escalated first): {not_tried}")
    if loop.alerts:
        lines.append("- Alerts: " + "; ".join(alert_lines(loop.alerts)))
    if loop.where:
        lines.append(f"- Work in: {_code(loop.where)}")
    if failing and output:
        lines += ["", "What the failing verify check(s) printed:", "", "```text"]
        lines += [line.replace("```", "`\u200b``") for line in failing]
        lines.append("```")
    if loop.diff is not None:
        lines += _diff(loop.diff, output=output)
    if loop.output_tail and output:
        lines += ["", f"Last {len(loop.output_tail)} line(s) of output:", "", "```text"]
        lines += [line.replace("```", "`\u200b``") for line in loop.output_tail]
        lines.append("```")
    if loop.resume:
        lines += ["", "To look, clear and resume:", "", "```sh", *loop.resume, "```"]
    lines.append("")
    return lines


def _fenced(lines: Sequence[str], language: str = "text") -> list[str]:
    """Lines in a fenced block that no line of theirs can close."""
    return [f"```{language}", *(line.replace("```", "`\u200b``") for line in lines), "```"]


def _diff(diff: WorkDiff, *, output: bool) -> list[str]:
    """What the agent changed: the diffstat, then (with ``output``) the diff's first lines."""
    if diff.base is None:
        return ["", f"_{diff.missing or 'no diff'}._"]
    against = f"against {diff.base}"
    if not (diff.stat or diff.total_lines):
        return ["", f"_No change {against}._"]
    lines = ["", f"What the agent changed, {against}:"]
    if diff.stat:
        lines += ["", *_fenced(diff.stat)]
    if diff.missing:
        lines += ["", f"_The diff: {diff.missing}._"]
    elif diff.lines and output:
        cut = cut_words(diff)
        lines += [
            "",
            f"The diff, redacted{f' ({cut})' if cut else ''}:",
            "",
            *_fenced(diff.lines, "diff"),
        ]
    return lines


def _timeline(loop: LoopReport, max_events: int) -> list[str]:
    lines = [f"### {loop.change} — {_loop_ending(loop)}", ""]
    scores = [f"{r.number}: {r.score:+d}" for r in loop.rows if r.score is not None]
    if scores:
        lines += [f"Progress score by iteration: {', '.join(scores)}", ""]
    if loop.where:
        lines += [f"Work in {_code(loop.where)}", ""]
    for title, files, more, partial in (
        ("Files the loop changed", loop.files_loop, loop.files_loop_more, loop.files_loop_partial),
        ("Files now in the worktree", loop.files_changed, loop.files_more, False),
    ):
        if files:
            tail = f" and {more} more" if more else ""
            tail += " and more (an iteration changed more than it recorded)" if partial else ""
            lines += [f"{title}: {', '.join(_code(f) for f in files)}{tail}", ""]
    shown = in_time_order(loop.marks)[:max_events]
    for mark in shown:
        took = f" ({brief_seconds(mark.duration)})" if mark.duration else ""
        lines.append(f"- {brief_seconds(mark.start)}: {mark.label}{took}")
    if len(loop.marks) > len(shown):
        lines.append(f"- … and {len(loop.marks) - len(shown)} more event(s)")
    lines.append("")
    return lines
