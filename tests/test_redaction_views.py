"""Redaction reads a text as a reader would decode it: escapes, base64, lines joined."""

from __future__ import annotations

import base64
import json
import textwrap
from pathlib import Path
from urllib.parse import quote

import hypothesis
import pytest

from orchestra._redact import StreamRedactor
from orchestra._secscan import Ruleset, load_rules, redact
from orchestra._secscan._engine import compile_pattern, match_spans
from orchestra._secscan._redactor import SecretRedactor
from orchestra._secscan._views import (
    _JSON_ESCAPE,
    View,
    _json_unescaped,
    _json_view,
    _rewritten,
)

from .test_secscan_e2e import github_token

TOKEN = github_token()
MARK = "[redacted:github-pat]"


@pytest.fixture(scope="module")
def ruleset() -> Ruleset:
    return load_rules("secscan", root=Path.cwd())


def test_a_json_escaped_token_is_redacted_and_the_line_stays_json(ruleset: Ruleset) -> None:
    escaped = TOKEN.replace("p_", "\\u0070_")
    line = '{"type":"assistant","text":"use ' + escaped + '\\" now"}'
    out = redact(line, ruleset)
    assert json.loads(out)["text"] == f'use {MARK}" now'


def test_a_token_after_an_escaped_line_end_is_redacted(ruleset: Ruleset) -> None:
    out = redact(json.dumps({"text": f"first line\n{TOKEN}"}), ruleset)
    assert TOKEN not in json.loads(out)["text"]


def test_a_url_escaped_token_is_redacted(ruleset: Ruleset) -> None:
    assert redact(f"GET /?t={quote(TOKEN, safe='')}".replace("_", "%5F"), ruleset) == (
        f"GET /?t={MARK}"
    )


def test_base64_of_a_secret_is_redacted_on_one_line_or_wrapped(ruleset: Ruleset) -> None:
    encoded = base64.b64encode(f"export GH_TOKEN={TOKEN}\n".encode() * 3).decode()
    assert redact(f"blob {encoded} end", ruleset) == f"blob {MARK} end"
    wrapped = "\n".join(textwrap.wrap(encoded, 40)) + "\n"
    out = redact(f"begin\n{wrapped}end\n", ruleset)
    assert out.startswith("begin\n[redacted:")
    assert out.endswith("\nend\n")
    assert all(line not in out for line in wrapped.splitlines())


def test_a_token_cut_by_a_line_end_is_redacted(ruleset: Ruleset) -> None:
    out = redact(f"token {TOKEN[:15]}\n{TOKEN[15:]} and more\n", ruleset)
    assert out == f"token {MARK} and more\n"


@pytest.mark.parametrize(
    "text",
    [
        "plain words, a path /usr/lib/python3 and a \\u00e9 escape, 100% sure\n",
        base64.b64encode(b"harmless text that is long enough to decode").decode(),
        "a_long_identifier_name_that_looks_base64ish = 1\nsecond line\n",
    ],
)
def test_text_without_a_secret_is_returned_untouched(ruleset: Ruleset, text: str) -> None:
    assert redact(text, ruleset) == text


def stream(redactor: StreamRedactor, *chunks: bytes) -> list[bytes]:
    return [redactor.feed(chunk) for chunk in chunks] + [redactor.flush()]


def test_a_line_that_may_go_on_is_held_for_the_next(ruleset: Ruleset) -> None:
    redactor = StreamRedactor(SecretRedactor(ruleset))
    first = f"the token is {TOKEN[:2]}\n".encode()
    out = stream(redactor, first, f"{TOKEN[2:]} done\n".encode(), b"after\n")
    assert out[0] == b""  # "gh" may begin a token: held
    assert out[1] == f"the token is {MARK} done\n".encode()
    assert out[2] == b"after\n"  # not held: "after" begins nothing


def test_a_held_line_is_let_out_at_the_end(ruleset: Ruleset) -> None:
    redactor = StreamRedactor(SecretRedactor(ruleset))
    assert stream(redactor, b"last word gh\n") == [b"", b"last word gh\n"]


def test_a_plain_redaction_holds_no_line() -> None:
    redactor = StreamRedactor(lambda text: text)
    assert redactor.feed(b"ends with gh\n") == b"ends with gh\n"


def test_a_whole_token_at_a_line_end_leaves_the_next_line_alone(ruleset: Ruleset) -> None:
    out = redact(f"token={TOKEN}\n1 failed, 2 passed\n", ruleset)
    assert out == f"token={MARK}\n1 failed, 2 passed\n"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16"])
def test_utf16_output_is_redacted(ruleset: Ruleset, encoding: str) -> None:
    # A `cat` of a UTF-16 file: a NUL byte beside every ASCII one ("utf-16"
    # writes a byte order mark first).
    printed = f"export GH_TOKEN={TOKEN}\nnext line\n".encode(encoding)
    out = b"".join(stream(StreamRedactor(SecretRedactor(ruleset)), printed))
    wide = TOKEN.encode("utf-16-be")[1:-1]  # the token's bytes, whichever the order
    assert wide not in out
    assert MARK.encode() in out
    assert out.endswith("next line\n".encode(encoding)[-10:])


def test_utf16_inside_stream_json_is_redacted(ruleset: Ruleset) -> None:
    # The same file read by the agent's tool: its NUL bytes JSON-escaped.
    content = f"export GH_TOKEN={TOKEN}\n".encode("utf-16-le").decode("latin-1")
    line = json.dumps({"type": "tool_result", "content": content})
    out = redact(line, ruleset)
    assert TOKEN not in json.loads(out)["content"].replace("\0", "")
    assert MARK in out


@pytest.mark.parametrize(
    "shown",
    [
        # A program's repr of UTF-16 bytes, with its byte order mark.
        repr(f"token: {TOKEN}".encode("utf-16")),
        # Every byte as a \x escape (printf, a C string).
        "printf '" + "".join(f"\\x{byte:02x}" for byte in TOKEN.encode()) + "'",
        # The repr inside stream-json: its backslashes JSON-escaped too.
        json.dumps({"text": repr(f"token: {TOKEN}".encode("utf-16-le"))}),
    ],
)
def test_hex_escaped_bytes_are_redacted(ruleset: Ruleset, shown: str) -> None:
    out = redact(shown, ruleset)
    assert MARK in out
    assert TOKEN[4:12] not in out.replace("\\x00", "").replace("\\\\", "\\")
    assert "".join(f"\\x{byte:02x}" for byte in TOKEN[4:12].encode()) not in out


@hypothesis.given(
    hypothesis.strategies.lists(
        hypothesis.strategies.sampled_from(
            ["\\", "\\", "u", "0", "5", "c", "C", "n", "r", "b", "f", "/", '"', "a", "é", "\0"]
        ),
        max_size=24,
    )
)
def test_the_fast_json_decoding_is_the_exact_one(characters: list[str]) -> None:
    # The JSON view is made with a few replacements and mapped back only when
    # a secret is found: its bytes and its map must be the escape-by-escape
    # rewrite's, or a secret would be found (or redacted) in the wrong place.
    text = View.of("".join(characters).encode())
    fast = _json_view(text)
    exact = _rewritten(text, _JSON_ESCAPE, _json_unescaped)
    assert (fast.data, fast.pieces) == (exact.data, exact.pieces)


def test_match_spans_are_finditer_spans(ruleset: Ruleset) -> None:
    # Redaction asks RE2's expression for spans without its wrapper's Match
    # objects: the spans must be the wrapper's, for every rule and for
    # patterns that match the empty string.
    text = (
        f"token {TOKEN} and {quote(TOKEN)}\n"
        + base64.b64encode(f"password = hunter2-{TOKEN}".encode()).decode()
        + "\naaa\n\n"
    ).encode() * 3
    patterns = [(rule.pattern, rule.secret_group) for rule in ruleset.rules]
    patterns += [(compile_pattern(regex)[0], 0) for regex in ("a*", "", "(?m)^", "x(y)?|a")]
    for pattern, group in patterns:
        expected = [match.span(group) for match in pattern.finditer(text)]
        assert list(match_spans(pattern, text, group)) == expected, pattern.pattern
