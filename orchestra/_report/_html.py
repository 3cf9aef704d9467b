"""The report as one self-contained HTML page: no script, no network, readable offline.

The page's Content-Security-Policy forbids every load (``default-src 'none'``)
but its own inline style, so nothing it shows can reach the network even if a
log line tried. The escalations come first, then every loop's row, the
timelines and the spend. It reads on a phone: one column, tables that scroll
sideways, charts that scale.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from .._durations import brief_seconds
from ._build import DONE, INTERRUPTED, STOPPED, UNFINISHED
from ._diff import cut_words
from ._fold import (
    alert_lines,
    batch_alert_lines,
    in_time_order,
    stop_words,
    unsaid_evidence,
    verify_evidence,
)
from ._model import BAD, GOOD, WARN, BatchReport, LoopReport, Spend, WorkDiff
from ._svg import defs_svg, endings_svg, legend, score_svg, strip_svg

CSP = "default-src 'none'; style-src 'unsafe-inline'"
# Glyphs every common font has (DejaVu included): ⏸ is often an empty box.
_GLYPH = {DONE: "✔", INTERRUPTED: "‖", STOPPED: "■", UNFINISHED: "…"}

_STYLE = """
:root{--fg:#1f2328;--muted:#57606a;--line:#d0d7de;--bad:#cf222e;--good:#1a7f37;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:#fff}
main{max-width:1100px;margin:0 auto;padding:12px}
h1{font-size:1.5em;margin:.2em 0}h2{border-bottom:1px solid var(--line);padding-bottom:.2em;
margin-top:1.6em}h3{margin:.2em 0;font-size:1.1em}
code,pre{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f6f8fa;border:1px solid var(--line);padding:8px;overflow-x:auto;
white-space:pre-wrap;word-break:break-word}
.outcome{font-size:1.15em;font-weight:600;padding:8px 10px;border-left:6px solid var(--muted);
background:#f6f8fa}
.outcome.bad{border-color:var(--bad)}.outcome.good{border-color:var(--good)}
.outcome.warn{border-color:var(--warn)}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px;margin:.8em 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;min-width:0;overflow-wrap:anywhere}
@media (max-width:600px){dl.facts{grid-template-columns:minmax(0,1fr)}
dl.facts dt{font-weight:600;margin-top:4px}main{padding:8px}}
code{overflow-wrap:anywhere}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.end-bad{color:var(--bad);font-weight:600}.end-good{color:var(--good);font-weight:600}
.end-warn{color:var(--warn);font-weight:600}
article{border:1px solid var(--line);border-radius:6px;padding:10px;margin:10px 0}
article.escalation{border-left:6px solid var(--bad)}
svg.strip{width:100%;height:auto;display:block;background:#fbfcfd}
svg.score{width:100%;max-width:420px;height:auto;display:block}
svg.endings{width:100%;height:16px;display:block;margin:.4em 0}
svg.defs{position:absolute;width:0;height:0}
svg.icon{width:24px;height:16px;vertical-align:middle}
ul.legend{display:flex;flex-wrap:wrap;gap:4px 20px;padding:0;list-style:none;font-size:13px}
ul.legend b{font-weight:600;margin-right:4px}.recovered{color:var(--good);font-weight:600}
pre.diffstat{background:#fff}
.charts{display:grid;grid-template-columns:1fr;gap:8px}
@media (min-width:800px){.charts{grid-template-columns:2fr 1fr}}
.muted{color:var(--muted)}
details summary{cursor:pointer;color:#0969da}
ol.commands{padding-left:1.4em}
"""


def render_html(report: BatchReport) -> str:
    """The whole page for ``report``."""
    body = [
        defs_svg(report.span),
        _header(report),
        _warnings(report),
        _escalations(report),
        _not_finished(report),
        _ready_to_land(report),
        _landed(report),
        _loop_table(report),
        _timelines(report),
        _spend(report),
        _notes(report),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>Forge report — run {escape(report.run_id)}</title>\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(part for part in body if part)
        + "\n</main>\n</body>\n</html>\n"
    )


def source_note(report: BatchReport) -> str:
    """Why a report without a summary was built from the timelines."""
    if not report.supervised:
        return "Built from the timeline: a forge run keeps no summary."
    return "Built from the timelines alone: the run left no summary."


def ending_tone(ending: str) -> str:
    if ending == DONE:
        return GOOD
    if ending in (INTERRUPTED, STOPPED, UNFINISHED):
        return WARN
    return BAD


def _ending(ending: str) -> str:
    tone = ending_tone(ending)
    glyph = _GLYPH.get(ending, "✖")
    return f'<span class="end-{tone}">{glyph} {escape(ending)}</span>'


def when(epoch: float | None) -> str:
    if epoch is None:
        return "unknown"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def money(spend: Spend) -> str:
    """A cost, ``~`` in front and ``(estimated)`` after when any part of it was estimated.

    "not reported" when nothing reported a cost (the agent tells none): not $0.
    """
    if not spend.reported:
        return "not reported"
    text = f"${spend.cost_usd:,.4f}"
    return f"~{text} (estimated)" if spend.estimated else text


def _header(report: BatchReport) -> str:
    counts = report.counts()
    tone = (
        GOOD
        if report.loops and all(loop.ending == DONE for loop in report.loops)
        else (WARN if report.interrupted or not report.from_summary else BAD)
    )
    spend = report.spend
    wall = report.wall_time
    waits = (
        f"{report.limiter_waits} time(s) a loop waited for a permit"
        if report.limiter_waits is not None
        else "not recorded (no summary)"
    )
    waited = sum(loop.limiter_wait for loop in report.loops)
    paused = sum(loop.paused for loop in report.loops)
    limiter = report.limiter or {}
    window = (
        f" · limit {limiter.get('calls')} call(s) per {brief_seconds(float(limiter['window']))}"
        if isinstance(limiter.get("window"), int | float) and limiter.get("calls")
        else ""
    )
    facts = [
        ("Run", f"<code>{escape(report.run_id)}</code>"),
        ("Repository", f"<code>{escape(report.root)}</code>"),
        ("Started", when(report.started_at)),
        ("Wall time", brief_seconds(wall) if wall is not None else "unknown"),
        (
            "Exit code",
            str(report.exit_code) if report.exit_code is not None else "none (no summary)",
        ),
        (
            "Loops",
            f"{len(report.loops)}: " + ", ".join(_count(report, e, n) for e, n in counts.items()),
        ),
        (
            "Spend",
            f"{spend.tokens:,} tokens · {spend.tool_calls:,} tool calls · {money(spend)}",
        ),
        (
            "Limiter waits",
            f"{waits}; about {brief_seconds(waited)} spent waiting across loops{window}",
        ),
        ("Provider pauses", brief_seconds(paused) if paused else "none"),
    ]
    alerts = batch_alert_lines(report.batch_alerts)
    if alerts:
        facts.append(("Batch alerts", "<br>".join(escape(line) for line in alerts)))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    tones = {ending: ending_tone(ending) for ending in counts}
    source = "" if report.from_summary else f'<p class="muted">{escape(source_note(report))}</p>'
    return (
        '<header id="summary">\n<h1>Forge morning report</h1>\n'
        f'<p class="outcome {tone}" id="outcome">{escape(report.outcome)}</p>\n'
        f"{source}{endings_svg(counts, tones) if counts else ''}"
        f'<dl class="facts">{rows}</dl>\n</header>'
    )


def _count(report: BatchReport, ending: str, count: int) -> str:
    """One ending's count in the header; done says how many recovered after a trip."""
    recovered = report.recovered if ending == DONE else 0
    also = (
        f' <span class="recovered">({recovered} recovered after a trip)</span>' if recovered else ""
    )
    return f"{_ending(ending)} {count}{also}"


def loop_ending(loop: LoopReport) -> str:
    """A loop's ending, marked recovered when it finished after a trip."""
    if loop.recovered:
        return f'{_ending(loop.ending)} <span class="recovered">(recovered)</span>'
    return _ending(loop.ending)


def _warnings(report: BatchReport) -> str:
    """What the policy warned of as the batch started: the night ran under it."""
    if not report.warnings:
        return ""
    items = "".join(f"<li>{escape(warning)}</li>" for warning in report.warnings)
    return (
        '<section id="warnings" aria-labelledby="warnings-h"><h2 id="warnings-h">'
        f"The policy's warnings ({len(report.warnings)})</h2>"
        '<p class="muted">Said as the batch started; the loops ran under them.</p>'
        f'<ul class="end-warn">{items}</ul></section>'
    )


def _escalations(report: BatchReport) -> str:
    loops = report.escalations
    head = f'<h2 id="escalations-h">Escalations ({len(loops)})</h2>'
    if not loops:
        body = "<p>No escalations: no loop needs a person.</p>"
    else:
        body = "\n".join(_escalation(report, loop) for loop in loops)
    return f'<section id="escalations" aria-labelledby="escalations-h">\n{head}\n{body}\n</section>'


def _not_finished(report: BatchReport) -> str:
    """Loops that did not end and need no person: the command that runs them on."""
    loops = not_finished(report)
    if not loops:
        return ""
    items = "".join(
        f'<li><a href="#loop-{_ident(report, loop)}">{escape(loop.change)}</a> — '
        f"{_ending(loop.ending)}: <code>{escape(loop.resume[-1])}</code></li>"
        for loop in loops
    )
    return (
        '<section id="not-finished" aria-labelledby="not-finished-h">\n'
        f'<h2 id="not-finished-h">Not finished ({len(loops)})</h2>\n'
        "<p>These loops stopped before they ended (a person stopped them, or the batch was "
        "interrupted or killed); "
        "their state is kept, and each goes on where it stopped with:</p>"
        f"<ul>{items}</ul>\n</section>"
    )


def _ready_to_land(report: BatchReport) -> str:
    """Loops that ended done and have not landed: each one's diffstat, last verify, spend."""
    loops = report.ready_to_land
    if not loops:
        return ""
    items = "".join(
        f'<li><a href="#loop-{_ident(report, loop)}">{escape(loop.change)}</a> — '
        f"verify {escape(loop.verify or 'never run')}, {loop.spend.tokens:,} tokens, "
        f"{escape(money(loop.spend))}"
        f"{_land_stat(loop.diff)}</li>"
        for loop in loops
    )
    return (
        '<section id="ready-to-land" aria-labelledby="ready-to-land-h">\n'
        f'<h2 id="ready-to-land-h">Ready to land ({len(loops)})</h2>\n'
        "<p>These loops ended done; <code>forge land</code> puts their work on the base.</p>"
        f"<ul>{items}</ul>\n</section>"
    )


def _land_stat(diff: WorkDiff | None) -> str:
    """A ready loop's diffstat against its base (its diff is for a reviewer, not here)."""
    words = land_stat(diff)
    if isinstance(words, str):
        return f'<p class="muted">{escape(words)}</p>'
    head, stat = words
    return f"<p>{escape(head)}</p>" + '<pre class="diffstat">' + escape("\n".join(stat)) + "</pre>"


def land_stat(diff: WorkDiff | None) -> str | tuple[str, tuple[str, ...]]:
    """What a ready loop changed: a line saying why there is no diffstat, or its head and lines."""
    if diff is None or diff.base is None:
        return (diff.missing if diff else None) or "no diffstat"
    if not diff.stat:
        return f"no change against {diff.base}"
    return f"Against {diff.base}:", diff.stat


def _landed(report: BatchReport) -> str:
    """What ``forge land`` did: the loops landed (with the commit), in conflict, failed."""
    groups = landing_groups(report)
    if not groups:
        return ""
    parts = []
    for title, loops in groups:
        items = "".join(
            f'<li><a href="#loop-{_ident(report, loop)}">{escape(loop.change)}</a> — '
            f"{escape(land_words(loop))}</li>"
            for loop in loops
        )
        parts.append(f"<h3>{title} ({len(loops)})</h3><ul>{items}</ul>")
    return (
        '<section id="landed" aria-labelledby="landed-h">\n'
        '<h2 id="landed-h">Landed / Conflicts / Failed</h2>\n' + "\n".join(parts) + "\n</section>"
    )


_LAND_GROUPS = (
    ("Landed", "landed"),
    ("Conflicts", "conflict"),
    ("Failed", "failed"),
    ("Handed back to their loops", "reworked"),
)


def landing_groups(report: BatchReport) -> list[tuple[str, tuple[LoopReport, ...]]]:
    """The land outcomes' groups that hold a loop, each with its title."""
    groups = [(title, report.landing(state)) for title, state in _LAND_GROUPS]
    return [(title, loops) for title, loops in groups if loops]


def land_words(loop: LoopReport) -> str:
    """One loop's land outcome: ``on main at abc1234 (merge)``, the files, the checks."""
    land = loop.land
    if land.state == "landed":
        mode = f" ({land.mode})" if land.mode else ""
        return f"on {land.base or '?'} at {land.commit[:7] or '?'}{mode}"
    if land.state == "conflict":
        return f"conflicts with {land.base or 'the base'} in " + (", ".join(land.files) or "?")
    if land.state == "reworked":
        why = f"conflicts in {', '.join(land.files)}" if land.files else "; ".join(land.checks)
        return f"{land.base or 'the base'} ({land.commit[:7] or '?'}) merged in, {why or 'verify'}"
    return f"verify failed on {land.base or 'the base'}: " + ("; ".join(land.checks) or "?")


def not_finished(report: BatchReport) -> list[LoopReport]:
    """The loops that stopped without an ending of their own and go on when run again."""
    return [
        loop for loop in report.loops if not loop.escalated and loop.ending != DONE and loop.resume
    ]


def _ident(report: BatchReport, loop: LoopReport) -> str:
    del report  # the position is the loop's own: ids stay unique when two repos share a name
    return f"l{loop.position}-{loop.change}"


def _escalation(report: BatchReport, loop: LoopReport) -> str:
    ident = _ident(report, loop)
    parts = [
        f'<article class="escalation" id="esc-{ident}">',
        f'<h3><a href="#loop-{ident}">{escape(loop.change)}</a> — {_ending(loop.ending)}</h3>',
    ]
    facts = []
    said = ""
    if loop.gate:
        facts.append(("Gate", escape(loop.gate)))
    last_trip = loop.trips[-1] if loop.trips else None
    if last_trip is not None:
        said = stop_words(last_trip, loop.detail)
        facts.append(("Trip", escape(said)))
    elif loop.detail:
        facts.append(("Detail", escape(loop.detail)))
    facts.append(("Iterations", _iterations(loop)))
    evidence = unsaid_evidence(last_trip.evidence, said) if last_trip is not None else []
    if evidence:
        facts.append(("Evidence", "<br>".join(escape(_short(line)) for line in evidence)))
    checks, failing = verify_failed(loop)
    if checks:
        facts.append(("Last verify", escape(checks)))
    if loop.recovery:
        facts.append(("Recovery tried", "<br>".join(escape(n.text) for n in loop.recovery)))
    if loop.not_tried:
        words = "<br>".join(escape(n.text) for n in loop.not_tried)
        facts.append(
            ("Not tried", f'<span class="muted">{words} (the loop escalated first)</span>')
        )
    if loop.alerts:
        facts.append(("Alerts", "<br>".join(escape(t) for t in alert_lines(loop.alerts))))
    if loop.where:
        facts.append(("Work in", f"<code>{escape(loop.where)}</code>"))
    parts.append(
        '<dl class="facts">' + "".join(f"<dt>{a}</dt><dd>{b}</dd>" for a, b in facts) + "</dl>"
    )
    if failing:
        parts.append("<p>What the failing verify check(s) printed:</p>")
        parts.append("<pre>" + escape("\n".join(failing)) + "</pre>")
    if loop.diff is not None:
        parts.append(_diff(loop.diff))
    if loop.output_tail:
        source = f" of <code>{escape(loop.output_source)}</code>" if loop.output_source else ""
        parts.append(f"<p>Last {len(loop.output_tail)} line(s) of output{source}:</p>")
        parts.append("<pre>" + escape("\n".join(loop.output_tail)) + "</pre>")
    if loop.resume:
        commands = "".join(f"<li><code>{escape(c)}</code></li>" for c in loop.resume)
        parts.append(f'<p>To look, clear and resume:</p><ol class="commands">{commands}</ol>')
    parts.append("</article>")
    return "\n".join(parts)


def _diff(diff: WorkDiff) -> str:
    """What the agent changed: the diffstat, then the diff's first lines (folded)."""
    if diff.base is None:
        return f'<p class="diff-missing">{escape(diff.missing or "no diff")}.</p>'
    against = f"against {escape(diff.base)}"
    if not (diff.stat or diff.total_lines):
        return f'<p class="diff-missing">No change {against}.</p>'
    parts = [f"<p>What the agent changed, {against}:</p>"]
    if diff.stat:
        parts.append('<pre class="diffstat">' + escape("\n".join(diff.stat)) + "</pre>")
    if diff.missing:
        parts.append(f'<p class="muted">The diff: {escape(diff.missing)}.</p>')
    elif diff.lines:
        cut = cut_words(diff)
        summary = f"The diff, redacted ({cut})" if cut else "The diff, redacted"
        parts.append(
            f'<details class="diff"><summary>{escape(summary)}</summary>'
            f"<pre>{escape(chr(10).join(diff.lines))}</pre></details>"
        )
    return "\n".join(parts)


def verify_failed(loop: LoopReport) -> tuple[str, list[str]]:
    """The last verify's checks and failing lines, when a failing verify stopped the loop."""
    verify_trip = bool(loop.trips) and loop.trips[-1].condition == "verify"
    if not loop.verify_checks or not (verify_trip or loop.verify == "FAIL"):
        return "", []
    return verify_evidence(loop.verify_checks)


def _iterations(loop: LoopReport) -> str:
    cap = f"/{loop.max_iterations}" if loop.max_iterations is not None else ""
    return f"{loop.iterations}{cap}"


def _short(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _loop_table(report: BatchReport) -> str:
    rows = []
    for loop in report.loops:
        ident = _ident(report, loop)
        trips = len(loop.trips)
        rows.append(
            f'<tr id="row-{ident}" data-change="{escape(loop.change, quote=True)}">'
            f'<th scope="row"><a href="#loop-{ident}">{escape(loop.change)}</a></th>'
            f"<td>{loop_ending(loop)}</td>"
            f'<td class="num">{_iterations(loop)}</td>'
            f'<td class="num">{trips}</td>'
            f'<td class="num">{loop.spend.tokens:,}</td>'
            f'<td class="num">{money(loop.spend)}</td>'
            f"<td>{escape(loop.detail or '')}</td></tr>"
        )
    return (
        '<section id="loops" aria-labelledby="loops-h">\n<h2 id="loops-h">Loops</h2>\n'
        '<div class="scroll"><table id="loop-table"><caption class="muted">Every loop of the '
        'batch, in the order declared</caption><thead><tr><th scope="col">Loop</th>'
        '<th scope="col">Ending</th><th scope="col" class="num">Iterations</th>'
        '<th scope="col" class="num">Trips</th><th scope="col" class="num">Tokens</th>'
        '<th scope="col" class="num">Cost</th><th scope="col">Detail</th></tr></thead><tbody>\n'
        + "\n".join(rows)
        + "\n</tbody></table></div>\n</section>"
    )


def _timelines(report: BatchReport) -> str:
    shown = legend([mark for loop in report.loops for mark in loop.marks])
    articles = [_timeline(report, loop) for loop in report.loops]
    return (
        '<section id="timelines" aria-labelledby="timelines-h">\n'
        '<h2 id="timelines-h">Timelines</h2>\n'
        f'<p class="muted">Each strip spans the whole batch ({brief_seconds(report.span)}), '
        "so the loops line up. Hover a shape for its detail; under each strip, the events "
        "in words (in time order) say the same.</p>\n"
        + shown
        + "\n".join(articles)
        + "\n</section>"
    )


def _strip_words(loop: LoopReport) -> str:
    trips = len(loop.trips)
    words = [
        f"{loop.change}: {len(loop.rows)} iteration(s), ended {loop.ending}",
        f"{trips} circuit opening(s)",
    ]
    if loop.cooldown:
        words.append(f"{brief_seconds(loop.cooldown)} in cooldown")
    if loop.limiter_wait:
        words.append(f"{brief_seconds(loop.limiter_wait)} waiting for permits")
    if loop.paused:
        words.append(f"{brief_seconds(loop.paused)} paused for the provider")
    restored = sum(1 for m in loop.marks if m.kind == "integrity")
    if restored:
        words.append(f"{restored} integrity restoration(s)")
    if loop.alerts:
        words.append(f"{len(loop.alerts)} alert event(s)")
    return ", ".join(words) + "."


def _timeline(report: BatchReport, loop: LoopReport) -> str:
    ident = _ident(report, loop)
    strip = strip_svg(loop.marks, report.span, f"s-{ident}", _strip_words(loop))
    score = score_svg(loop.rows, f"g-{ident}")
    score_block = score or '<p class="muted">No progress score recorded.</p>'
    where = f"<p>Work in <code>{escape(loop.where)}</code></p>" if loop.where else ""
    files = _files(
        "Files the loop changed", loop.files_loop, loop.files_loop_more, loop.files_loop_partial
    )
    files += _files("Files now in the worktree", loop.files_changed, loop.files_more, False)
    events = "".join(
        f"<li>{brief_seconds(m.start)}: {escape(m.label)}"
        + (f" ({brief_seconds(m.duration)})" if m.duration else "")
        + "</li>"
        for m in in_time_order(loop.marks)
    )
    return (
        f'<article id="loop-{ident}" aria-labelledby="h-{ident}">'
        f'<h3 id="h-{ident}">{escape(loop.change)} — {loop_ending(loop)}</h3>'
        f'<div class="charts"><div>{strip}</div><div>{score_block}</div></div>'
        f"{where}{files}"
        f"<details><summary>Events in words ({len(loop.marks)})</summary><ol>{events}</ol>"
        f"</details>{_rows(loop)}</article>"
    )


def _files(title: str, listed: tuple[str, ...], more: int, partial: bool) -> str:
    """A folded list of paths (the first of them, and how many more)."""
    if not listed:
        return ""
    items = "".join(f"<li><code>{escape(f)}</code></li>" for f in listed)
    if more:
        items += f"<li>and {more} more</li>"
    if partial:
        items += "<li>and more: an iteration changed more files than it recorded</li>"
    return f"<details><summary>{title} ({len(listed) + more})</summary><ul>{items}</ul></details>"


def _rows(loop: LoopReport) -> str:
    if not loop.rows:
        return ""
    rows = "".join(
        f'<tr><td class="num">{r.number}</td><td class="num">{brief_seconds(r.start)}</td>'
        f'<td class="num">{brief_seconds(r.duration)}</td>'
        f"<td>{'' if r.exit is None else r.exit}</td><td>{escape(r.verify or '')}</td>"
        f'<td class="num">{"" if r.score is None else f"{r.score:+d}"}</td>'
        f"<td>{escape(r.trip or '')}</td>"
        f'<td class="num">{r.spend.tokens:,}</td><td class="num">{money(r.spend)}</td>'
        f"<td>{escape(_short(r.note or '', 120))}</td></tr>"
        for r in loop.rows
    )
    return (
        f'<details><summary>Iterations ({len(loop.rows)})</summary><div class="scroll">'
        '<table><thead><tr><th scope="col" class="num">#</th><th scope="col" class="num">At'
        '</th><th scope="col" class="num">Took</th><th scope="col">Exit</th>'
        '<th scope="col">Verify</th><th scope="col" class="num">Score</th>'
        '<th scope="col">Trip</th><th scope="col" class="num">Tokens</th>'
        '<th scope="col" class="num">Cost</th><th scope="col">Note</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div></details>"
    )


def _spend(report: BatchReport) -> str:
    rows = "".join(
        f'<tr><th scope="row">{escape(loop.change)}</th><td class="num">{loop.spend.tokens:,}'
        f'</td><td class="num">{loop.spend.tool_calls:,}</td><td class="num">'
        f"{money(loop.spend)}</td></tr>"
        for loop in report.loops
    )
    total = report.spend
    note = (
        '<p class="muted">A cost marked ~ (estimated) was estimated from token counts, '
        "not reported by the agent.</p>"
        if total.estimated
        else ""
    )
    return (
        '<section id="spend" aria-labelledby="spend-h">\n<h2 id="spend-h">Spend</h2>\n'
        '<div class="scroll"><table><thead><tr><th scope="col">Loop</th>'
        '<th scope="col" class="num">Tokens</th><th scope="col" class="num">Tool calls</th>'
        f'<th scope="col" class="num">Cost</th></tr></thead><tbody>{rows}</tbody>'
        f'<tfoot><tr><th scope="row">Total</th><td class="num">{total.tokens:,}</td>'
        f'<td class="num">{total.tool_calls:,}</td><td class="num">{money(total)}</td></tr>'
        f"</tfoot></table></div>{note}\n</section>"
    )


def _notes(report: BatchReport) -> str:
    if not report.notes:
        return ""
    items = "".join(f"<li>{escape(note)}</li>" for note in report.notes)
    return (
        '<section id="notes" aria-labelledby="notes-h"><h2 id="notes-h">What could not be '
        f"read</h2><ul>{items}</ul></section>"
    )
