"""Unit tests for orchestra._capture: bounded head/tail capture with exact totals."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestra._capture import CapturedOutput, OutputCapture

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None)


def capture(chunks: list[bytes], head_limit: int, tail_limit: int) -> CapturedOutput:
    out = OutputCapture(head_limit=head_limit, tail_limit=tail_limit)
    for chunk in chunks:
        out.feed(chunk)
    return out.snapshot()


def expected_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# --- OutputCapture -------------------------------------------------------------------


def test_nothing_fed_is_empty() -> None:
    snap = OutputCapture().snapshot()
    assert snap == CapturedOutput()
    assert snap.total_lines == 0
    assert snap.omitted_bytes == 0
    assert snap.text() == ""
    assert snap.lines() == []
    assert snap.last_lines(5) == []


def test_empty_chunks_change_nothing() -> None:
    out = OutputCapture(head_limit=4, tail_limit=4)
    out.feed(b"ab\n")
    out.feed(b"")
    out.feed(bytearray())
    assert out.snapshot() == CapturedOutput(head=b"ab\n", tail=b"", total_bytes=3, total_lines=1)


def test_short_output_is_all_in_head() -> None:
    snap = capture([b"hello\n", b"world\n"], head_limit=100, tail_limit=100)
    assert snap.head == b"hello\nworld\n"
    assert snap.tail == b""
    assert snap.total_bytes == 12
    assert snap.total_lines == 2
    assert snap.omitted_bytes == 0
    assert snap.text() == "hello\nworld\n"


def test_head_and_tail_kept_and_middle_omitted() -> None:
    data = b"".join(b"line %03d\n" % n for n in range(100))
    snap = capture([data[i : i + 7] for i in range(0, len(data), 7)], head_limit=18, tail_limit=9)
    assert snap.head == b"line 000\nline 001\n"
    assert snap.tail == b"line 099\n"
    assert snap.total_bytes == len(data) == 900
    assert snap.total_lines == 100
    assert snap.omitted_bytes == 900 - 18 - 9


def test_text_marks_omitted_bytes() -> None:
    snap = capture([b"a" * 10, b"b" * 10, b"c" * 10], head_limit=10, tail_limit=10)
    assert snap.omitted_bytes == 10
    assert snap.text() == "a" * 10 + "\n[… 10 bytes omitted …]\n" + "c" * 10


def test_text_has_no_marker_when_head_and_tail_meet() -> None:
    snap = capture([b"a" * 10, b"c" * 10], head_limit=10, tail_limit=10)
    assert snap.omitted_bytes == 0
    assert snap.text() == "a" * 10 + "c" * 10
    assert "omitted" not in snap.text()


def test_text_decodes_invalid_utf8_with_replacement() -> None:
    snap = capture([b"ok \xff\n"], head_limit=100, tail_limit=100)
    assert snap.text() == "ok \ufffd\n"


def test_text_with_nothing_omitted_is_the_whole_output_even_across_the_cut() -> None:
    # "é" is two bytes; the head keeps the first and the tail the second. Nothing was
    # dropped, so the kept output is the whole output and must decode as such.
    snap = capture(["é".encode()], head_limit=1, tail_limit=4)
    assert snap.omitted_bytes == 0
    assert snap.text() == "é"


def test_last_line_without_newline_is_counted() -> None:
    assert capture([b"one\ntwo"], 100, 100).total_lines == 2
    assert capture([b"one\ntwo\n"], 100, 100).total_lines == 2
    assert capture([b"one\n", b"two"], 100, 100).total_lines == 2
    assert capture([b"no newline at all"], 100, 100).total_lines == 1
    assert capture([b"\n"], 100, 100).total_lines == 1


def test_line_count_follows_the_last_non_empty_chunk() -> None:
    assert capture([b"one", b"\n", b""], 100, 100).total_lines == 1
    assert capture([b"one\n", b"two", b""], 100, 100).total_lines == 2


def test_line_count_is_exact_when_lines_are_dropped() -> None:
    data = b"x\n" * 1000 + b"end"
    snap = capture([data[i : i + 13] for i in range(0, len(data), 13)], 8, 8)
    assert snap.total_lines == 1001
    assert snap.total_bytes == len(data)


def test_zero_limits_keep_nothing_but_count_everything() -> None:
    snap = capture([b"abc\n", b"def"], head_limit=0, tail_limit=0)
    assert snap.head == b""
    assert snap.tail == b""
    assert snap.total_bytes == 7
    assert snap.total_lines == 2
    assert snap.omitted_bytes == 7


def test_snapshot_is_a_point_in_time() -> None:
    out = OutputCapture(head_limit=2, tail_limit=2)
    out.feed(b"abcd")
    first = out.snapshot()
    out.feed(b"efgh")
    assert first == CapturedOutput(head=b"ab", tail=b"cd", total_bytes=4, total_lines=1)
    assert out.snapshot() == CapturedOutput(head=b"ab", tail=b"gh", total_bytes=8, total_lines=1)


def test_bytearray_chunks_are_accepted() -> None:
    out = OutputCapture(head_limit=2, tail_limit=2)
    out.feed(bytearray(b"abc\n"))
    snap = out.snapshot()
    assert snap.head == b"ab"
    assert snap.tail == b"c\n"
    assert isinstance(snap.head, bytes)
    assert isinstance(snap.tail, bytes)


# --- CapturedOutput.lines / last_lines ---------------------------------------------


def test_lines_include_partial_lines_at_the_cut() -> None:
    snap = CapturedOutput(head=b"first\nsec", tail=b"ond-to-last\nlast", total_bytes=40)
    assert snap.lines() == ["first", "sec", "[… 15 bytes omitted …]", "ond-to-last", "last"]


def test_last_lines_skip_blank_lines_and_strip_trailing_space() -> None:
    data = b"alpha\n\n   \nbeta  \n\t\ngamma\r\n\n\n"
    snap = CapturedOutput(head=data, total_bytes=len(data))
    assert snap.last_lines(2) == ["beta", "gamma"]
    assert snap.last_lines(10) == ["alpha", "beta", "gamma"]
    assert snap.last_lines(1) == ["gamma"]


@pytest.mark.parametrize("count", [0, -1, -5])
def test_last_lines_with_no_count_is_empty(count: int) -> None:
    snap = CapturedOutput(head=b"a\nb\n", total_bytes=4)
    assert snap.last_lines(count) == []


def test_last_lines_keeps_leading_indentation() -> None:
    snap = CapturedOutput(head=b"Traceback:\n    raise X\n", total_bytes=23)
    assert snap.last_lines(1) == ["    raise X"]


# --- invariants ----------------------------------------------------------------------


@DETERMINISTIC
@given(
    chunks=st.lists(st.binary(max_size=40), max_size=30),
    head_limit=st.integers(min_value=0, max_value=64),
    tail_limit=st.integers(min_value=0, max_value=64),
)
def test_capture_matches_the_concatenation(
    chunks: list[bytes], head_limit: int, tail_limit: int
) -> None:
    out = OutputCapture(head_limit=head_limit, tail_limit=tail_limit)
    for chunk in chunks:
        out.feed(chunk)
        # The working buffers never exceed their bounds, whatever the chunking.
        assert len(out._head) <= head_limit
        assert len(out._tail) <= 2 * tail_limit
    snap = out.snapshot()
    data = b"".join(chunks)

    assert snap.total_bytes == len(data)
    assert snap.total_lines == expected_lines(data)
    assert snap.head == data[:head_limit]
    tail_start = max(len(snap.head), len(data) - tail_limit)
    assert snap.tail == data[tail_start:]
    assert snap.omitted_bytes == len(data) - len(snap.head) - len(snap.tail)
    assert snap.omitted_bytes >= 0
    if snap.omitted_bytes == 0:
        assert snap.head + snap.tail == data


@DETERMINISTIC
@given(
    data=st.binary(max_size=200),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=10),
    head_limit=st.integers(min_value=0, max_value=64),
    tail_limit=st.integers(min_value=0, max_value=64),
)
def test_chunking_does_not_change_the_result(
    data: bytes, cuts: list[int], head_limit: int, tail_limit: int
) -> None:
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert capture(chunks, head_limit, tail_limit) == capture([data], head_limit, tail_limit)


def test_memory_stays_bounded_over_200_megabytes() -> None:
    head_limit, tail_limit = 1000, 3000
    chunk_size = 64 * 1024
    line = b"x" * 63 + b"\n"
    chunk = line * (chunk_size // len(line))
    assert len(chunk) == chunk_size
    chunks = 200 * 1024 * 1024 // chunk_size  # 3200 chunks of 64 KiB: 200 MiB in all

    out = OutputCapture(head_limit=head_limit, tail_limit=tail_limit)
    largest_buffers = 0
    for _ in range(chunks):
        out.feed(chunk)
        largest_buffers = max(largest_buffers, len(out._head) + len(out._tail))
    snap = out.snapshot()

    assert largest_buffers <= head_limit + 2 * tail_limit
    assert len(snap.head) + len(snap.tail) == head_limit + tail_limit
    assert snap.head == chunk[:head_limit]
    assert snap.tail == chunk[-tail_limit:]
    assert snap.total_bytes == 200 * 1024 * 1024
    assert snap.total_lines == 200 * 1024 * 1024 // 64
    assert snap.omitted_bytes == 200 * 1024 * 1024 - head_limit - tail_limit
