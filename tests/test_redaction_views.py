"""Redaction reads a text as a reader would decode it: escapes, base64, lines joined."""

from __future__ import annotations

import base64
import json
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest

from orchestra._redact import StreamRedactor
from orchestra._secscan import Ruleset, load_rules, redact
from orchestra._secscan._redactor import SecretRedactor

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
