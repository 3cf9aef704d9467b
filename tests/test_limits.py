"""Provider limits: the providers' phrasings are limits with their reset; near misses are not."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from orchestra._executor import backoff_pause, detect_limit

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp()

LIMITS = [
    ("Claude AI usage limit reached|1753441200", 1753441200.0),
    ("You've hit your session limit · resets 12:50am (UTC)", NOW + 14 * 3600 + 50 * 60),
    ("Claude usage limit reached. Your limit will reset at 5pm (UTC).", NOW + 7 * 3600),
    (
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
        "or try again in 2 days 3 hours 4 minutes.",
        NOW + 51 * 3600 + 4 * 60,
    ),
    ("You've hit your usage limit. Try again at 12:16 PM UTC.", NOW + 2 * 3600 + 16 * 60),
    (
        "You have exhausted your capacity on this model. Your quota will reset after 18h1m4s.",
        NOW + 18 * 3600 + 64,
    ),
    (
        '{"type":"usage_limit_reached","resets_at":1777936568,"resets_in_seconds":13872}',
        1777936568.0,
    ),
    (
        '{"code": 429, "status": "RESOURCE_EXHAUSTED", "retryDelay": "3.957525076s"}',
        NOW + 3.957525076,
    ),
    ("You have exhausted your daily quota on this model.", None),
    ("TerminalQuotaError: You have exhausted your daily quota on this model.", None),
    ("exceeded retry limit, last status: 429 Too Many Requests", None),
    ('Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}', None),
]

# An agent's own words: none of these is a provider's limit.
NEAR_MISSES = [
    "retry limit reached",
    "Reached the maximum number of turns (10)",
    "Error: the tool call limit reached its maximum for this task",
    "recursion limit reached while resolving imports",
    "I hit the time limit on the test run; rerunning",
    "Rate limiter test failed: expected 3 calls per window",
    "usage: forge run [-h] (the usage text was printed, no limit reached)",
    "quota.py: exceeded the expected size",
    "HTTP 500 from the staging server",
    "request timed out after 300s (timeout limit reached)",
    # Words of a provider's message, in an agent's answer or a tool's output:
    "TypeError: operator + is Overloaded",
    "The test server was overloaded",
    "tests/test_client.py: expected unexpected status 503 Service Unavailable to be retried",
    "You've reached your limit of 5 retries for this tool",
    "tests/test_api.py::test_fetch FAILED - 429 Too Many Requests",
    "grpc stub: expected RESOURCE_EXHAUSTED, got OK",
    "added a handler for rate_limit_error to the client's retry loop",
]


@pytest.mark.parametrize(("text", "resets_at"), LIMITS)
def test_a_provider_limit_is_read_with_its_reset(text: str, resets_at: float | None) -> None:
    limit = detect_limit(text, NOW)
    assert limit is not None
    assert limit.status == "rejected"
    if resets_at is None:
        assert limit.resets_at is None
    else:
        assert limit.resets_at == pytest.approx(resets_at)


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_an_agents_own_limit_words_are_no_provider_limit(text: str) -> None:
    assert detect_limit(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        "API Error: 529 Overloaded",
        "unexpected status 503 Service Unavailable: upstream unavailable, url: http://x/v1",
        "We’re currently experiencing high demand, which may cause temporary errors.",
    ],
)
def test_an_overloaded_provider_is_transient(text: str) -> None:
    limit = detect_limit(text, NOW)
    assert limit is not None
    assert limit.status == "overloaded"


def test_backoff_doubles_from_a_minute_to_the_cap() -> None:
    assert [backoff_pause(n, 600) for n in range(1, 7)] == [60, 120, 240, 480, 600, 600]


def test_a_successful_answer_that_mentions_a_limit_is_no_limit() -> None:
    from orchestra._executor import make_parser

    def answer(text: str) -> object:
        parser = make_parser("claude-json", "FORGE_DONE")
        event = {"type": "result", "subtype": "success", "is_error": False, "result": text}
        parser.feed(json.dumps(event).encode())
        return parser.finish().rate_limit

    assert answer("Handled 429 Too Many Requests in the client; tests pass.\nFORGE_DONE") is None
    assert answer("The retry limit reached its maximum, so I stopped.") is None
    limit = answer("Claude AI usage limit reached|1753441200")
    assert limit is not None


def test_a_clock_time_in_the_current_minute_is_due_by_its_end_not_tomorrow() -> None:
    # Codex names the reset's minute: "try again at 10:00 AM" read at 10:00:05.
    seconds_in = NOW + 5
    limit = detect_limit("You've hit your usage limit. Try again at 10:00 AM UTC.", seconds_in)
    assert limit is not None
    assert limit.resets_at == pytest.approx(NOW + 60)


def test_a_clock_time_a_few_minutes_past_has_reset_and_one_long_past_is_tomorrow() -> None:
    text = "You've hit your usage limit. Try again at 9:58 AM UTC."
    limit = detect_limit(text, NOW)
    assert limit is not None
    # Two minutes ago: the clocks are apart, not a day away; no reset time (the
    # wait backs off from a minute rather than retrying at once).
    assert limit.resets_at is None
    limit = detect_limit("You've hit your usage limit. Try again at 9:00 AM UTC.", NOW)
    assert limit is not None
    assert limit.resets_at == pytest.approx(NOW + 23 * 3600)


def test_a_suggested_retry_after_n_seconds_is_the_reset() -> None:
    text = "You have exhausted your capacity on this model. Suggested retry after 400s."
    limit = detect_limit(text, NOW)
    assert limit is not None
    assert limit.resets_at == pytest.approx(NOW + 400)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"session_id": "S-1", "error": {"message": "exhausted your capacity"}}', None),
        ("You've hit your session limit · resets 12:50am (UTC)", "session"),
        ("You have exhausted your daily quota on this model.", "daily"),
        ('{"rateLimitType": "five_hour"} Claude AI usage limit reached|1753441200', "five_hour"),
        ("You've hit your 5-hour limit", "five_hour"),
    ],
)
def test_the_kind_of_limit_is_read_from_its_words_not_a_field_name(
    text: str, kind: str | None
) -> None:
    limit = detect_limit(text, NOW)
    assert limit is not None
    assert limit.kind == kind
