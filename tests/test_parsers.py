"""Output parsers on recorded agent outputs (written by hand from the CLIs' formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestra._executor import Observation, RateLimitEvent, make_parser
from orchestra._executor._parsers._claude import ClaudeParser

DATA = Path(__file__).parent / "data" / "agents"
MARKER = "FORGE_DONE"


def parse(name: str, output_format: str, chunk: int = 65536) -> Observation:
    raw = (DATA / name).read_bytes()
    parser = make_parser(output_format, MARKER)
    for start in range(0, len(raw), chunk):
        parser.feed(raw[start : start + chunk])
    return parser.finish()


def test_claude_json_success() -> None:
    seen = parse("claude-json-success.json", "claude-json")
    assert seen.done
    assert not seen.is_error
    assert seen.tokens_in == 1200 + 3000 + 45000
    assert seen.tokens_out == 2100
    assert seen.cost_usd == pytest.approx(0.1842)
    assert seen.turns == 7
    assert seen.permission_denials == 0
    assert seen.error is None
    assert seen.note is None


def test_claude_marker_must_be_a_whole_line_of_the_final_message() -> None:
    seen = parse("claude-json-not-done.json", "claude-json")
    assert not seen.done
    assert seen.permission_denials == 2


def test_claude_error_subtype_is_never_done() -> None:
    seen = parse("claude-json-error.json", "claude-json")
    assert seen.is_error
    assert not seen.done  # even though the result text is exactly the marker
    assert seen.error == "FORGE_DONE"
    assert seen.tokens == 12000
    assert seen.cost_usd == pytest.approx(1.25)


def test_claude_usage_limit_message_is_a_rate_limit() -> None:
    seen = parse("claude-json-usage-limit.json", "claude-json")
    assert seen.is_error
    assert seen.rate_limit == RateLimitEvent(status="rejected", resets_at=1767225600.0)


def test_claude_stream_counts_tool_uses_once_per_message() -> None:
    seen = parse("claude-stream.jsonl", "claude-stream-json")
    assert seen.tool_calls == 3  # toolu_a (sent twice under msg_01), toolu_b, toolu_c
    assert seen.done
    assert seen.tokens_in == 1000
    assert seen.tokens_out == 300
    assert seen.rate_limit is None  # allowed_warning is not a refusal


def test_claude_stream_rejected_rate_limit_event() -> None:
    seen = parse("claude-stream-rejected.jsonl", "claude-stream-json")
    assert seen.rate_limit == RateLimitEvent(
        status="rejected", resets_at=1767229200.0, kind="five_hour"
    )
    assert not seen.done


@pytest.mark.parametrize("name", ["claude-json-truncated.json", "claude-json-invalid.json"])
def test_claude_broken_output_falls_back_to_text(name: str) -> None:
    seen = parse(name, "claude-json")
    assert seen.note is not None
    assert "plain text" in seen.note
    # The invalid file has a marker line of its own; the truncated one does not.
    assert seen.done is (name == "claude-json-invalid.json")


def test_codex_events() -> None:
    seen = parse("codex.jsonl", "codex-json")
    assert seen.tokens_in == 24763 + 1000
    assert seen.tokens_out == 122 + 50
    assert seen.tool_calls == 3  # two command executions (either field name) and a file change
    assert seen.turns == 2
    assert seen.done
    assert seen.summary == "Fixed the total.\nFORGE_DONE"


def test_codex_failed_turn_is_an_error_and_never_done() -> None:
    seen = parse("codex-failed.jsonl", "codex-json")
    assert seen.is_error
    assert not seen.done
    assert seen.error == "You've hit your usage limit. Try again later."
    assert seen.rate_limit == RateLimitEvent(status="rejected")


def test_gemini_stats() -> None:
    seen = parse("gemini.json", "gemini-json")
    assert seen.tokens_in == 24939 + 1000
    # Each model's whole bill: candidates, thoughts (154) and tool tokens.
    assert seen.tokens_out == (25505 - 24939) + 88
    assert seen.tokens_cached == 21263
    assert seen.tool_calls == 4
    assert seen.done


def test_gemini_error() -> None:
    seen = parse("gemini-error.json", "gemini-json")
    assert seen.is_error
    assert not seen.done
    assert seen.error is not None
    assert "Quota exceeded" in seen.error
    assert seen.rate_limit == RateLimitEvent(status="rejected")


def test_text_marker_is_a_trimmed_whole_line() -> None:
    assert parse("text-done.txt", "text").done
    assert not parse("text-not-done.txt", "text").done


@pytest.mark.parametrize(
    ("name", "output_format"),
    [
        ("claude-json-success.json", "claude-json"),
        ("claude-stream.jsonl", "claude-stream-json"),
        ("codex.jsonl", "codex-json"),
        ("gemini.json", "gemini-json"),
        ("text-done.txt", "text"),
        ("text-not-done.txt", "text"),
    ],
)
@settings(max_examples=25, deadline=None)
@given(chunk=st.integers(min_value=1, max_value=200))
def test_chunking_never_changes_the_observation(name: str, output_format: str, chunk: int) -> None:
    assert parse(name, output_format, chunk) == parse(name, output_format)


@settings(max_examples=200, deadline=None)
@given(
    output_format=st.sampled_from(
        ["text", "claude-json", "claude-stream-json", "codex-json", "gemini-json"]
    ),
    chunks=st.lists(st.binary(max_size=64), max_size=8),
)
def test_parsers_never_crash_on_garbage(output_format: str, chunks: list[bytes]) -> None:
    parser = make_parser(output_format, MARKER)
    for chunk in chunks:
        parser.feed(chunk)
    seen = parser.finish()
    assert seen.tokens >= 0
    assert seen.tool_calls >= 0


@settings(max_examples=100, deadline=None)
@given(
    before=st.text(alphabet="ab \n", max_size=30),
    after=st.text(alphabet="ab \n", max_size=30),
    pad=st.sampled_from(["", " ", "\t", "  "]),
    cut=st.integers(min_value=1, max_value=12),
)
def test_text_marker_found_wherever_the_chunks_split_it(
    before: str, after: str, pad: str, cut: int
) -> None:
    raw = f"{before}\n{pad}{MARKER}{pad}\n{after}".encode()
    parser = make_parser("text", MARKER)
    for start in range(0, len(raw), cut):
        parser.feed(raw[start : start + cut])
    assert parser.finish().done


def test_json_lines_are_bounded(tmp_path: Path) -> None:
    parser = make_parser("claude-stream-json", MARKER)
    parser.feed(b'{"type":"assistant","message":{"content":"' + b"x" * (9 * 1024 * 1024))
    parser.feed(b'"}}\n')
    result = (DATA / "claude-stream.jsonl").read_bytes().splitlines()[-1] + b"\n"
    parser.feed(result)
    seen = parser.finish()
    assert seen.done


def _parse_bytes(output_format: str, stdout: bytes, stderr: bytes = b"") -> Observation:
    parser = make_parser(output_format, MARKER)
    parser.feed(stdout)
    parser.feed_stderr(stderr)
    return parser.finish()


def test_claude_api_error_status_is_read_as_a_structured_limit() -> None:
    result = (
        b'{"type":"result","subtype":"success","is_error":true,"api_error_status":%d,'
        b'"result":"API Error: Repeated server errors","session_id":"s"}'
    )
    overloaded = _parse_bytes("claude-json", result % 529)
    assert overloaded.rate_limit == RateLimitEvent(status="overloaded", kind="overloaded")
    limited = _parse_bytes("claude-json", result % 429)
    assert limited.rate_limit is not None
    assert limited.rate_limit.status == "rejected"
    failed = _parse_bytes("claude-json", result % 500)
    assert failed.rate_limit is None


def test_gemini_resource_exhausted_error_object_is_a_limit() -> None:
    error = b'{"error":{"type":"Error","message":"Resource has been exhausted","code":429}}'
    assert _parse_bytes("gemini-json", b"", error).rate_limit == RateLimitEvent(status="rejected")
    other = b'{"error":{"type":"Error","message":"Resource has been exhausted","code":500}}'
    assert _parse_bytes("gemini-json", b"", other).rate_limit is None


def test_a_success_result_stands_over_a_limit_on_stderr() -> None:
    warning = b"WARN: exceeded retry limit, last status: 429 Too Many Requests; retrying\n"
    claude = _parse_bytes(
        "claude-json",
        b'{"type":"result","subtype":"success","is_error":false,"result":"ok\\nFORGE_DONE"}',
        warning,
    )
    assert claude.rate_limit is None
    assert claude.done
    codex = _parse_bytes(
        "codex-json",
        (DATA / "recorded" / "codex" / "reconnect-then-done.jsonl").read_bytes(),
        warning,
    )
    assert codex.rate_limit is None
    assert codex.done


def _claude_stream(*events: dict[str, object]) -> bytes:
    return b"".join(json.dumps(event).encode() + b"\n" for event in events)


def _retry(delay_ms: float, status: int = 429) -> dict[str, object]:
    return {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 1,
        "max_retries": 2,
        "retry_delay_ms": delay_ms,
        "error_status": status,
        "error": "rate_limit",
        "session_id": "s",
    }


def _refused(status: int, text: str) -> dict[str, object]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": status,
        "result": text,
        "session_id": "s",
        "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def test_claude_429_resets_after_the_retry_delay_the_cli_announced() -> None:
    # As Claude Code 2.1.197 ends a call the server kept refusing with a 429.
    parser = ClaudeParser("claude-stream-json", MARKER, clock=lambda: 1001.5)
    parser.feed(_claude_stream(_retry(1000), _retry(30_000)))
    parser.feed(_claude_stream(_refused(429, "API Error: Request rejected (429) · Rate limited")))
    seen = parser.finish()
    assert seen.is_error
    assert seen.rate_limit == RateLimitEvent(status="rejected", resets_at=1031.5, kind=None)


def test_claude_retry_delays_of_other_errors_are_no_reset() -> None:
    parser = ClaudeParser("claude-stream-json", MARKER, clock=lambda: 1000.0)
    parser.feed(
        _claude_stream(_retry(2000, status=529), _refused(529, "API Error: 529 Overloaded"))
    )
    assert parser.finish().rate_limit == RateLimitEvent(status="overloaded", kind="overloaded")
    parser = ClaudeParser("claude-stream-json", MARKER, clock=lambda: 1000.0)
    parser.feed(_claude_stream(_retry(2000, status=500), _refused(500, "API Error: 500 boom")))
    seen = parser.finish()
    assert seen.is_error
    assert seen.rate_limit is None
