"""Unit tests for orchestra._durations: parsing, canonical spelling and report spelling."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestra._durations import Duration, format_duration, human_seconds, parse_duration

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None)

# Integers up to 2**53 are exactly representable as floats, so a span in whole
# seconds survives being kept as ``Duration.seconds: float``.
EXACT_INTS = st.integers(min_value=0, max_value=2**53)


# --- parse_duration: strings ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("30m", 1800.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1d2h3m4s", 86400.0 + 7200.0 + 180.0 + 4.0),
        ("0s", 0.0),
        ("1.5h", 5400.0),
        ("0.25s", 0.25),
        ("90", 90.0),
        ("2.5", 2.5),
        ("0", 0.0),
    ],
)
def test_parse_duration_reads_unit_strings(text: str, seconds: float) -> None:
    assert parse_duration(text) == Duration(seconds)
    assert parse_duration(text).seconds == seconds


@pytest.mark.parametrize("text", ["90S", " 90s ", "1H30M", "\t2D\n"])
def test_parse_duration_ignores_case_and_surrounding_space(text: str) -> None:
    assert parse_duration(text).seconds == parse_duration(text.strip().lower()).seconds


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "m",
        "s",
        "5x",
        "x5",
        "5 m",
        "1h 30m",
        "h1",
        "-5s",
        "-5",
        "-1h30m",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "infinity",
        "1h30",
        "ninety seconds",
        "5ms",
        "1_000",
        "30m1h",
        "1h1h",
        ".5s",
    ],
)
def test_parse_duration_rejects_malformed_strings(text: str) -> None:
    with pytest.raises(ValueError, match="a duration like"):
        parse_duration(text)


# --- parse_duration: numbers and other types -----------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [(0, 0.0), (90, 90.0), (1.5, 1.5), (0.0, 0.0)])
def test_parse_duration_reads_numbers_as_seconds(value: float, seconds: float) -> None:
    result = parse_duration(value)
    assert result.seconds == seconds
    assert isinstance(result.seconds, float)


@pytest.mark.parametrize("value", [True, False])
def test_parse_duration_rejects_bools(value: bool) -> None:
    with pytest.raises(ValueError, match="a duration like"):
        parse_duration(value)


@pytest.mark.parametrize("value", [-1, -0.5, math.nan, math.inf, -math.inf])
def test_parse_duration_rejects_negative_and_non_finite_numbers(value: float) -> None:
    with pytest.raises(ValueError, match="a duration like"):
        parse_duration(value)


@pytest.mark.parametrize("value", [None, [90], {"s": 90}, b"90s", object()])
def test_parse_duration_rejects_other_types(value: object) -> None:
    with pytest.raises(ValueError, match="a duration like"):
        parse_duration(value)


def test_parse_duration_rejects_an_int_too_large_for_a_float_with_value_error() -> None:
    # The docstring promises ValueError for anything that is not a duration; a huge
    # integer (YAML and TOML both produce arbitrary-precision ints) must not escape
    # as OverflowError from math.isfinite().
    with pytest.raises(ValueError, match="a duration like"):
        parse_duration(10**400)


def test_parse_duration_error_names_the_value() -> None:
    with pytest.raises(ValueError, match="'5x'"):
        parse_duration("5x")


# --- Duration ------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [-1.0, math.nan, math.inf])
def test_duration_rejects_negative_and_non_finite(seconds: float) -> None:
    with pytest.raises(ValueError, match="finite and not negative"):
        Duration(seconds)


def test_duration_orders_and_prints_canonically() -> None:
    assert Duration(60.0) < Duration(90.0)
    assert str(Duration(5400.0)) == "1h30m"
    assert sorted([Duration(3.0), Duration(1.0), Duration(2.0)]) == [
        Duration(1.0),
        Duration(2.0),
        Duration(3.0),
    ]


# --- format_duration -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.0, "0s"),
        (45, "45s"),
        (60, "1m"),
        (90, "1m30s"),
        (3600, "1h"),
        (5400, "1h30m"),
        (5400.0, "1h30m"),
        (86400, "1d"),
        (172800, "2d"),
        (90061, "1d1h1m1s"),
        (86401, "1d1s"),
        (0.25, "0.25s"),
        (1.5, "1.5s"),
    ],
)
def test_format_duration_canonical_spellings(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@DETERMINISTIC
@given(EXACT_INTS)
def test_format_then_parse_round_trips_whole_seconds(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)).seconds == seconds


@DETERMINISTIC
@given(EXACT_INTS)
def test_str_of_duration_round_trips_whole_seconds(seconds: int) -> None:
    duration = Duration(float(seconds))
    assert parse_duration(str(duration)) == duration


@pytest.mark.parametrize("seconds", [100000.5, 0.1 + 0.2, 1234567.5, 0.1234567, 1e-7])
def test_format_then_parse_round_trips_these_fractional_spans(seconds: float) -> None:
    # Duration's docstring: str() "gives the canonical spelling ... which
    # parse_duration reads back to the same value".
    assert parse_duration(format_duration(seconds)).seconds == seconds


@DETERMINISTIC
@given(st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False))
@example(0.25)
@example(5400.0)
def test_format_then_parse_round_trips_floats(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)).seconds == seconds


# --- human_seconds -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0.00s"),
        (0.42, "0.42s"),
        (9.5, "9.50s"),
        (10, "10.0s"),
        (12.34, "12.3s"),
        (59.5, "59.5s"),
        (60, "1m"),
        (90, "1m30s"),
        (125, "2m05s"),
        (125.4, "2m05s"),
        (3600, "1h"),
        (3600 * 2 + 300, "2h05m"),
    ],
)
def test_human_seconds_spellings(seconds: float, text: str) -> None:
    assert human_seconds(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # Rounding must not carry a value across its band into a spelling that the
        # next band owns: 59.96 s is shown with one decimal as "60.0s", but 60 s is
        # spelled "1m"; likewise 9.999 s becomes "10.00s" with two decimals.
        (59.96, "1m"),
        (9.999, "10.0s"),
    ],
)
def test_human_seconds_at_band_edges(seconds: float, text: str) -> None:
    assert human_seconds(seconds) == text


def test_brief_seconds_reads_a_night_at_a_glance() -> None:
    from orchestra._durations import brief_seconds

    spans = (-1, 0, 4.24, 9.97, 12.4, 45, 59.6, 60, 90, 125, 3600, 3600 * 2 + 300, 3600 * 3 + 600)
    assert [brief_seconds(s) for s in spans] == [
        "0s",
        "0s",
        "4.2s",
        "10s",
        "12s",
        "45s",
        "1m",
        "1m",
        "1m30s",
        "2m05s",
        "1h",
        "2h05m",
        "3h10m",
    ]
