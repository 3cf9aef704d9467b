"""The report's charts as inline SVG, drawn by a few functions (no library, no script).

Each chart is an ``<svg role="img">`` named by a ``<title>`` and described by a
``<desc>`` that says in words what it shows, and each shape carries a
``<title>`` of its own (a tooltip, and what a screen reader reads). Colour is
never the only signal: what went wrong is also drawn hatched or as a
different shape, and the legend names every shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .._durations import brief_seconds
from ._model import (
    ALERT,
    BAD,
    CIRCUIT,
    COOLDOWN,
    GOOD,
    INTEGRITY,
    ITERATION,
    LIMITER_WAIT,
    PROVIDER_PAUSE,
    RECOVERY,
    VERIFY,
    WARN,
    IterationRow,
    Mark,
)

COLOURS = {GOOD: "#1a7f37", BAD: "#cf222e", WARN: "#9a6700", "neutral": "#57606a"}
STRIP_WIDTH = 600
_LANE_BAR = (4, 18)  # iterations: y, height
_LANE_WAIT = (26, 10)  # cooldowns, limiter waits, provider pauses
# Moments, each kind on its own row (centre y), so marks of one instant never
# cover each other: a circuit's opening, the integrity restoration and the alert
# it raised are often written in the same second.
_LANE_EVENT = {CIRCUIT: 46, INTEGRITY: 60, ALERT: 74, RECOVERY: 88}
_LANE_OTHER = 102  # verify run by a hook or a person, and other events
STRIP_HEIGHT = 112  # the lanes; the time axis is drawn under them
_STRIP_TOTAL = STRIP_HEIGHT + 26
_MARGIN = 8

# The patterns every chart refers to, defined once per page (see ``defs_svg``).
PATTERNS = """<pattern id="p-bad" width="6" height="6" patternUnits="userSpaceOnUse" \
patternTransform="rotate(45)"><rect width="6" height="6" fill="#cf222e"/>\
<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/></pattern>\
<pattern id="p-cool" width="6" height="6" patternUnits="userSpaceOnUse" \
patternTransform="rotate(-45)"><rect width="6" height="6" fill="#f6e7b0"/>\
<line x1="0" y1="0" x2="0" y2="6" stroke="#9a6700" stroke-width="1.5"/></pattern>\
<pattern id="p-pause" width="6" height="6" patternUnits="userSpaceOnUse">\
<rect width="6" height="6" fill="#e8e0f5"/><path d="M0 3H6M3 0V6" stroke="#6639ba" \
stroke-width="1"/></pattern>"""


_SCORE_PLOT = 110  # the score chart's plot height; its axis, then its legend, under it
_SCORE_LEFT = 22
_GOOD = COLOURS[GOOD]
# The score chart's legend, drawn once and shown under every score chart.
SCORE_LEGEND = (
    f'<g id="score-legend" class="s-legend" font-size="8" fill="#57606a" '
    f'transform="translate({_SCORE_LEFT} {_SCORE_PLOT + 22})">'
    '<line x1="0" y1="0" x2="16" y2="0" stroke="#0969da" stroke-width="2"/>'
    '<text x="20" y="3">iteration score</text>'
    '<line x1="92" y1="0" x2="108" y2="0" stroke="#6639ba" stroke-width="1.5" '
    'stroke-dasharray="5 3"/>'
    '<text x="112" y="3">rolling window</text>'
    f'<circle cx="186" cy="0" r="3.5" fill="#fff" stroke="{_GOOD}" stroke-width="1.5"/>'
    '<text x="193" y="3">said done</text></g>'
)


_SCORE_WIDTH = 300
# The score chart's axes by name, drawn once and shown in every score chart.
SCORE_AXES = (
    '<g id="score-axes" class="axis" font-size="8" fill="#57606a" text-anchor="middle">'
    f'<text x="{(_SCORE_LEFT + _SCORE_WIDTH - 14) / 2:g}" y="{_SCORE_PLOT + 10}">iteration</text>'
    f'<text x="6" y="{_SCORE_PLOT / 2:g}" transform="rotate(-90 6 {_SCORE_PLOT / 2:g})">score'
    "</text></g>"
)


def defs_svg(span: float = 1.0) -> str:
    """A hidden SVG holding the patterns and the strips' time axis, placed once in the page.

    Every strip spans the batch's ``span`` seconds, so one axis serves them all.
    """
    return (
        '<svg class="defs" aria-hidden="true" focusable="false" width="0" height="0">'
        f"<defs>{PATTERNS}{SCORE_LEGEND}{SCORE_AXES}{_time_axis(span)}</defs></svg>"
    )


def _title(text: str) -> str:
    return f"<title>{escape(text)}</title>"


def strip_svg(marks: Sequence[Mark], span: float, ident: str, summary: str) -> str:
    """One loop's timeline strip over the batch's ``span`` seconds.

    Args:
        marks: What happened, from the start of the batch.
        span: The batch's length in seconds (the strip's full width).
        ident: A prefix for the chart's ids (unique in the page).
        summary: The strip in words, for its ``<desc>``.
    """
    scale = STRIP_WIDTH / max(span, 1e-9)
    shapes: list[str] = []
    for mark in marks:
        x = min(round(mark.start * scale, 1), STRIP_WIDTH)
        # Nothing is drawn past the batch's end (a span the strip does not cover).
        width = max(2.0, min(round(mark.duration * scale, 1), STRIP_WIDTH - x))
        shapes.append(_shape(mark, x, width))
    axis = '<use href="#time-axis"/>'
    return (
        # A margin each side: a moment at the batch's very start or end is drawn whole.
        f'<svg class="strip" viewBox="-{_MARGIN} 0 {STRIP_WIDTH + 2 * _MARGIN} {_STRIP_TOTAL}" '
        'role="img" '
        f'aria-labelledby="{ident}-t {ident}-d">'
        f'<title id="{ident}-t">Timeline strip</title><desc id="{ident}-d">{escape(summary)}</desc>'
        f"{axis}{''.join(shapes)}</svg>"
    )


def _time_axis(span: float) -> str:
    """The strip's time axis: its line, five ticks with the time since the start, a title."""
    y = STRIP_HEIGHT - 1
    parts = [
        f'<g id="time-axis" class="axis"><line x1="0" y1="{y}" x2="{STRIP_WIDTH}" y2="{y}" '
        'stroke="#8c959f"/>'
    ]
    for quarter in range(5):
        x = STRIP_WIDTH * quarter / 4
        anchor = "start" if quarter == 0 else ("end" if quarter == 4 else "middle")
        parts.append(
            f'<line x1="{x:g}" y1="{y}" x2="{x:g}" y2="{y + 4}" stroke="#8c959f"/>'
            f'<text x="{x:g}" y="{y + 13}" font-size="9" fill="#57606a" '
            f'text-anchor="{anchor}">{brief_seconds(span * quarter / 4)}</text>'
        )
    parts.append(
        f'<text x="{STRIP_WIDTH / 2:g}" y="{_STRIP_TOTAL - 2}" font-size="9" fill="#57606a" '
        'text-anchor="middle">time since the batch started</text></g>'
    )
    return "".join(parts)


def _shape(mark: Mark, x: float, width: float) -> str:
    colour = COLOURS.get(mark.tone, COLOURS["neutral"])
    tip = _title(mark.label)
    if mark.kind == ITERATION:
        y, height = _LANE_BAR
        if mark.tone == BAD:
            fill, stroke = "url(#p-bad)", colour
        elif mark.tone == GOOD:
            fill, stroke = colour, colour
        else:
            fill, stroke = "#fff", colour
        return (
            f'<rect class="m-iteration" x="{x}" y="{y}" width="{width}" height="{height}" '
            f'fill="{fill}" stroke="{stroke}">{tip}</rect>'
        )
    if mark.kind in (COOLDOWN, LIMITER_WAIT, PROVIDER_PAUSE):
        y, height = _LANE_WAIT
        if mark.kind == COOLDOWN:
            attrs = 'fill="url(#p-cool)" stroke="#9a6700"'
        elif mark.kind == PROVIDER_PAUSE:
            attrs = 'fill="url(#p-pause)" stroke="#6639ba"'
        else:
            attrs = 'fill="#eaeef2" stroke="#57606a" stroke-dasharray="2 2"'
        return (
            f'<rect class="m-{mark.kind}" x="{x}" y="{y}" width="{width}" height="{height}" '
            f"{attrs}>{tip}</rect>"
        )
    cy = _LANE_EVENT.get(mark.kind, _LANE_OTHER)
    if mark.kind == CIRCUIT:
        # Open: a triangle pointing down (the circuit breaks); otherwise one pointing up.
        if mark.tone == BAD:
            points = f"{x - 5},{cy - 5} {x + 5},{cy - 5} {x},{cy + 5}"
        else:
            points = f"{x - 5},{cy + 5} {x + 5},{cy + 5} {x},{cy - 5}"
        return f'<polygon class="m-circuit" points="{points}" fill="{colour}">{tip}</polygon>'
    if mark.kind == INTEGRITY:
        points = f"{x},{cy - 6} {x + 6},{cy} {x},{cy + 6} {x - 6},{cy}"
        return f'<polygon class="m-integrity" points="{points}" fill="{colour}">{tip}</polygon>'
    if mark.kind == ALERT:
        return (
            f'<circle class="m-alert" cx="{x}" cy="{cy}" r="5" fill="none" stroke="{colour}" '
            f'stroke-width="2.5">{tip}</circle>'
        )
    if mark.kind == RECOVERY:
        return (
            f'<rect class="m-recovery" x="{x - 4}" y="{cy - 4}" width="8" height="8" '
            f'fill="{colour}">{tip}</rect>'
        )
    if mark.kind == VERIFY:
        return f'<circle class="m-verify" cx="{x}" cy="{cy}" r="4" fill="{colour}">{tip}</circle>'
    return (
        f'<line class="m-other" x1="{x}" y1="{cy - 6}" x2="{x}" y2="{cy + 6}" '
        f'stroke="{colour}" stroke-width="2">{tip}</line>'
    )


# The legend's symbols in a few kinds, each named short; the page shows only
# the symbols its strips use.
LEGEND_GROUPS = (
    (
        "Iterations",
        (("it-good", "went well"), ("it-bad", "failed or tripped"), ("it-none", "no verdict")),
    ),
    (
        "Waits",
        (("cool", "cooldown"), ("wait", "rate-limit permit"), ("pause", "provider pause")),
    ),
    (
        "Circuit",
        (("open", "opened"), ("close", "half-open or closed"), ("integrity", "path restored")),
    ),
    (
        "Events",
        (
            ("alert", "alert"),
            ("recovery", "recovery step"),
            ("verify", "verify by a hook or a person"),
            ("other", "other"),
        ),
    ),
)


def legend_key(mark: Mark) -> str:
    """Which legend entry draws ``mark``."""
    if mark.kind == ITERATION:
        return {GOOD: "it-good", BAD: "it-bad"}.get(mark.tone, "it-none")
    if mark.kind == CIRCUIT:
        return "open" if mark.tone == BAD else "close"
    simple = {
        COOLDOWN: "cool",
        LIMITER_WAIT: "wait",
        PROVIDER_PAUSE: "pause",
        INTEGRITY: "integrity",
        ALERT: "alert",
        RECOVERY: "recovery",
        VERIFY: "verify",
    }
    return simple.get(mark.kind, "other")


def legend(marks: Sequence[Mark]) -> str:
    """The strips' legend: the symbols among ``marks`` only, by kind ("" when none)."""
    used = {legend_key(mark) for mark in marks}
    groups = []
    for title, entries in LEGEND_GROUPS:
        shown = [f"{legend_icon(key)} {escape(text)}" for key, text in entries if key in used]
        if shown:
            groups.append(f"<li><b>{title}:</b> {' · '.join(shown)}</li>")
    if not groups:
        return ""
    return f'<ul class="legend" aria-label="Legend">{"".join(groups)}</ul>\n'


_LEGEND_SHAPES = {
    "it-good": Mark(ITERATION, 0, 1, "", GOOD),
    "it-bad": Mark(ITERATION, 0, 1, "", BAD),
    "it-none": Mark(ITERATION, 0, 1, "", "neutral"),
    "cool": Mark(COOLDOWN, 0, 1, "", WARN),
    "wait": Mark(LIMITER_WAIT, 0, 1, "", "neutral"),
    "pause": Mark(PROVIDER_PAUSE, 0, 1, "", WARN),
    "open": Mark(CIRCUIT, 0, 0, "", BAD),
    "close": Mark(CIRCUIT, 0, 0, "", GOOD),
    "integrity": Mark(INTEGRITY, 0, 0, "", BAD),
    "alert": Mark(ALERT, 0, 0, "", BAD),
    "recovery": Mark(RECOVERY, 0, 0, "", WARN),
    "verify": Mark(VERIFY, 0, 0, "", GOOD),
    "other": Mark("other", 0, 0, "", "neutral"),
}


def legend_icon(key: str) -> str:
    """A small picture of one legend entry (decorative: its text says what it is)."""
    mark = _LEGEND_SHAPES[key]
    if mark.kind in (ITERATION, COOLDOWN, LIMITER_WAIT, PROVIDER_PAUSE):
        top = _LANE_BAR[0] if mark.kind == ITERATION else _LANE_WAIT[0]
        shape = _shape(mark, 2, 20)
        box = f"0 {top - 2} 24 {(_LANE_BAR if mark.kind == ITERATION else _LANE_WAIT)[1] + 4}"
    else:
        shape = _shape(mark, 12, 0)
        box = f"0 {_LANE_EVENT.get(mark.kind, _LANE_OTHER) - 8} 24 16"
    return f'<svg class="icon" viewBox="{box}" aria-hidden="true" focusable="false">{shape}</svg>'


def score_svg(rows: Sequence[IterationRow], ident: str) -> str | None:
    """The progress score by iteration (and its rolling window, dashed); None without scores.

    A round dot is an iteration that made progress, a square one that did not,
    and a ringed check the iteration that said the change is done (whatever its
    score: the last step often changes little). A legend under the chart says
    which line is which.
    """
    scored = [r for r in rows if r.score is not None]
    if not scored:
        return None
    width, plot, pad, left = _SCORE_WIDTH, _SCORE_PLOT, 14, _SCORE_LEFT
    height = plot + 30  # the iteration axis and the legend's row under the plot
    values = [r.score or 0 for r in scored] + [
        r.window_score for r in scored if r.window_score is not None
    ]
    low, high = min([0, *values]), max([0, *values])
    if high == low:
        high = low + 1
    count = len(scored)
    step = (width - left - pad) / max(count - 1, 1)

    def point(index: int, value: int) -> tuple[float, float]:
        x = left + index * step if count > 1 else (left + width - pad) / 2
        y = pad + (high - value) * (plot - 2 * pad) / (high - low)
        return round(x, 1), round(y, 1)

    zero_y = point(0, 0)[1]
    score_points = [point(i, r.score or 0) for i, r in enumerate(scored)]
    window = [point(i, r.window_score) for i, r in enumerate(scored) if r.window_score is not None]
    dots = [_score_dot(x, y, row) for (x, y), row in zip(score_points, scored, strict=True)]
    words = ", ".join(
        f"iteration {r.number}: {r.score:+d}{' (said done)' if r.done else ''}" for r in scored
    )
    lines = _score_axis(left, width - pad, zero_y, ((pad, high), (plot - pad, low)))
    lines += _iteration_axis(
        [(x, r.number) for (x, _), r in zip(score_points, scored, strict=True)]
    )
    if len(window) > 1:
        lines += (
            f'<polyline points="{_points(window)}" fill="none" stroke="#6639ba" '
            'stroke-width="1.5" stroke-dasharray="5 3"/>'
        )
    if len(score_points) > 1:
        lines += (
            f'<polyline points="{_points(score_points)}" fill="none" stroke="#0969da" '
            'stroke-width="2"/>'
        )
    return (
        f'<svg class="score" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{ident}-t {ident}-d">'
        f'<title id="{ident}-t">Progress score by iteration</title>'
        f'<desc id="{ident}-d">{escape(words)}; the solid line is the iteration\'s score, the '
        "dashed line the rolling window's. Above zero the loop made progress (round dots), at "
        "or below it did not (squares); a ringed check marks the iteration that said done.</desc>"
        f'{lines}{"".join(dots)}<use href="#score-axes"/><use href="#score-legend"/></svg>'
    )


def _score_dot(x: float, y: float, row: IterationRow) -> str:
    """One iteration's dot: a ringed check when it said done, round for progress, else square."""
    window_text = f" (window {row.window_score:+d})" if row.window_score is not None else ""
    done_text = ", said done" if row.done else ""
    tip = _title(f"iteration {row.number}: score {row.score:+d}{window_text}{done_text}")
    if row.done:
        return (
            f'<g class="s-done"><circle cx="{x}" cy="{y}" r="5.5" fill="#fff" '
            f'stroke="{COLOURS[GOOD]}" stroke-width="2"/><path d="M{x - 3} {y} l2 2.5 l4 -5" '
            f'fill="none" stroke="{COLOURS[GOOD]}" stroke-width="1.8"/>{tip}</g>'
        )
    if (row.score or 0) > 0:
        return f'<circle cx="{x}" cy="{y}" r="3.5" fill="{COLOURS[GOOD]}">{tip}</circle>'
    return (
        f'<rect x="{x - 3.5}" y="{y - 3.5}" width="7" height="7" fill="{COLOURS[BAD]}">{tip}</rect>'
    )


def _score_axis(
    left: float, right: float, zero_y: float, extremes: Sequence[tuple[float, int]]
) -> str:
    """The zero line and its figures: 0, and the top and bottom ones (each at its height)."""
    labels = [(zero_y, "0")]
    # The top and bottom figures, unless they are zero or would overlap another.
    for y, value in extremes:
        if value != 0 and all(abs(y - other) >= 9 for other, _ in labels):
            labels.append((y, f"{value:+d}"))
    return (
        f'<line x1="{left}" y1="{zero_y}" x2="{right}" y2="{zero_y}" stroke="#8c959f" '
        'stroke-dasharray="1 3"/>'
        + "".join(
            f'<text x="{left - 4}" y="{y + 3}" font-size="8" fill="#57606a" '
            f'text-anchor="end">{text}</text>'
            for y, text in labels
        )
    )


def _iteration_axis(ticks: Sequence[tuple[float, int]]) -> str:
    """The iteration numbers along the score chart's bottom (about ten at most, the last always).

    The axes' names are drawn once in the page's definitions (``SCORE_AXES``).
    """
    step = max(1, len(ticks) // 10)
    shown = [tick for index, tick in enumerate(ticks) if index % step == 0 or tick == ticks[-1]]
    return "".join(
        f'<text x="{x}" y="{_SCORE_PLOT + 1}" font-size="8" fill="#57606a" '
        f'text-anchor="middle">{n}</text>'
        for x, n in shown
    )


def _points(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x},{y}" for x, y in points)


def endings_svg(counts: dict[str, int], tones: dict[str, str]) -> str:
    """The loops by ending as one stacked bar, each part labelled in its title."""
    total = sum(counts.values()) or 1
    x = 0.0
    parts = []
    for ending, count in counts.items():
        width = 600 * count / total
        tone = tones.get(ending, "neutral")
        fill = "url(#p-bad)" if tone == BAD else COLOURS.get(tone, COLOURS["neutral"])
        parts.append(
            f'<rect x="{round(x, 1)}" y="0" width="{round(width, 1)}" height="16" fill="{fill}" '
            f'stroke="#fff">{_title(f"{ending}: {count}")}</rect>'
        )
        x += width
    words = ", ".join(f"{ending}: {count}" for ending, count in counts.items())
    return (
        '<svg class="endings" viewBox="0 0 600 16" preserveAspectRatio="none" role="img" '
        'aria-label="Loops by ending: '
        f'{escape(words, quote=True)}">{"".join(parts)}</svg>'
    )
