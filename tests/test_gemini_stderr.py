"""Gemini CLI's stderr, as release 0.61.0 writes it, read by the ``gemini-json`` parser.

The CLI logs each failed attempt it retries (``_ApiError: {"error": …}``)
and dumps its errors as JavaScript objects (``cause: { code: 429, … }``, not
JSON) before the JSON error it exits with. The shapes below are trimmed from
what the real CLI printed against the scripted server
(``tests/test_real_gemini_e2e.py`` runs the real thing).
"""

from __future__ import annotations

import json

from orchestra._executor._parsers import GeminiParser
from orchestra._executor._parsers._common import last_json_object

RETRIED_503 = """\
Attempt 1 failed with status 503. Retrying with backoff... _ApiError: \
{"error":{"code":503,"message":"The model is overloaded. Please try again later.",\
"status":"UNAVAILABLE"}}
    at throwErrorIfNotOK (file:///bundle/chunk-JDPZ4CE3.js:267833:24) {
  status: 503
}
"""

DAILY_QUOTA = """\
Error when talking to Gemini API Full report available at: /tmp/gemini-client-error.json \
TerminalQuotaError: You have exhausted your daily quota on this model.
    at classifyGoogleError (file:///bundle/chunk-JDPZ4CE3.js:307333:14) {
  cause: {
    code: 429,
    message: 'Quota exceeded for metric: generate_content_requests_per_day',
    details: [ [Object] ]
  },
  retryDelayMs: undefined,
  status: 429
}
{
  "session_id": "f7db7736-c606-4890-bad2-211ad3d7814e",
  "error": {
    "type": "Error",
    "message": "You have exhausted your daily quota on this model.",
    "code": 429
  }
}
"""

RESPONSE = {
    "session_id": "4e81e138-a31e-4ad1-aef2-c54f21fd0613",
    "response": "ok\nFORGE_DONE",
    "stats": {"models": {"gemini-3.8-flash": {"tokens": {"prompt": 100, "total": 110}}}},
}


def parse(stdout: str, stderr: str) -> GeminiParser:
    parser = GeminiParser("FORGE_DONE")
    parser.feed(stdout.encode())
    parser.feed_stderr(stderr.encode())
    return parser


def test_a_retried_failure_of_a_completed_run_is_no_error() -> None:
    seen = parse(json.dumps(RESPONSE), RETRIED_503).finish()
    assert seen.error is None
    assert seen.rate_limit is None
    assert seen.done is True
    assert seen.tokens == 110


def test_the_json_error_after_a_javascript_dump_is_the_runs_error() -> None:
    seen = parse("", DAILY_QUOTA).finish()
    assert seen.error == "You have exhausted your daily quota on this model."
    assert seen.is_error is True
    assert seen.session_id == "f7db7736-c606-4890-bad2-211ad3d7814e"
    assert seen.rate_limit is not None
    assert seen.rate_limit.status == "rejected"
    # The kind comes from the error's message, not from the "session_id" field.
    assert seen.rate_limit.kind == "daily"


def test_the_last_error_on_stderr_wins() -> None:
    final = '{"error": {"type": "Error", "message": "The model is overloaded.", "code": 503}}'
    seen = parse("", RETRIED_503 + final).finish()
    assert seen.error == "The model is overloaded."
    assert seen.rate_limit is not None
    assert seen.rate_limit.status == "overloaded"


def test_the_last_wanted_object_is_found_looking_back() -> None:
    text = 'x {not: json} {"a": {"b": 1}} { status: 503 } {"c": 2} {"d"'
    assert last_json_object(text, lambda found: "a" in found) == {"a": {"b": 1}}
    assert last_json_object(text, lambda found: "c" in found) == {"c": 2}
    assert last_json_object(text, lambda found: "z" in found) is None
    # Bounded: only so many braces are tried, from the end.
    assert last_json_object('{"n": 1}' + " {x" * 10, lambda found: True, attempts=5) is None


def test_the_last_error_wins_however_long_the_stderr_before_it() -> None:
    from orchestra._executor._parsers import make_parser

    dump = "cause: { code: 503, status: 'UNAVAILABLE', config: { headers: {} } }\n" * 150
    retried = '_ApiError: {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}\n'
    final = '{"error": {"type": "Error", "message": "quota", "code": 429}}\n'
    parser = make_parser("gemini-json", "FORGE_DONE")
    parser.feed_stderr((dump + retried * 70 + dump + final).encode())
    observation = parser.finish()
    assert observation.error == "quota"
    assert observation.rate_limit is not None
    assert observation.rate_limit.status == "rejected"
