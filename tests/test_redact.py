"""Streamed output redaction: whole lines, however the chunks are cut."""

from __future__ import annotations

import re

import pytest

from orchestra._redact import StreamRedactor

TOKEN = re.compile(r"tok_[a-z0-9]{12}")


def hide(text: str) -> str:
    return TOKEN.sub("[redacted:test]", text)


def stream(data: bytes, size: int, long_line: int = 64 * 1024) -> bytes:
    redactor = StreamRedactor(hide, long_line=long_line)
    out = b"".join(redactor.feed(data[i : i + size]) for i in range(0, len(data), size))
    return out + redactor.flush()


@pytest.mark.parametrize("size", [1, 3, 7, 64, 4096])
def test_a_secret_cut_across_chunks_is_still_redacted(size: int) -> None:
    data = b"start\nkey tok_abcdef123456 end\nno newline tok_zzzzzzzzzzzz"
    out = stream(data, size)
    assert b"tok_" not in out
    assert out == (b"start\nkey [redacted:test] end\nno newline [redacted:test]")


def test_a_long_line_is_cut_at_whitespace_not_inside_a_token() -> None:
    data = b"x " * 40 + b"tok_abcdef123456 " + b"y " * 40 + b"\n"
    out = stream(data, 5, long_line=32)
    assert b"tok_" not in out
    assert out.count(b"[redacted:test]") == 1


def test_invalid_utf8_passes_through_byte_for_byte() -> None:
    data = b"\xff\xfe bytes tok_abcdef123456 \xc3\x28\n"
    assert stream(data, 4) == b"\xff\xfe bytes [redacted:test] \xc3\x28\n"


def test_an_endless_line_cut_anywhere_keeps_the_token_whole() -> None:
    data = b"x" * 70_000 + b"tok_abcdef123456" + b"y" * 70_000
    for size in (7, 4096):
        out = stream(data, size)
        assert b"tok_" not in out
        assert out.count(b"[redacted:test]") == 1


def test_a_key_block_is_held_until_its_end_line() -> None:
    block = b"-----BEGIN PRIVATE KEY-----\nAAAA\nBBBB\n-----END PRIVATE KEY-----\n"
    seen: list[str] = []

    def record(text: str) -> str:
        seen.append(text)
        return text

    redactor = StreamRedactor(record)
    for line in (b"before\n", *block.splitlines(keepends=True), b"after\n"):
        redactor.feed(line)
    redactor.flush()
    assert any(text.count("\n") >= 4 and "BEGIN" in text and "END" in text for text in seen)


def test_code_that_mentions_a_key_header_is_not_held() -> None:
    redactor = StreamRedactor(hide)
    line = b"if line.startswith('-----BEGIN RSA PRIVATE KEY-----'):\n"
    assert redactor.feed(line) == line


def test_an_unended_key_block_is_held_no_more_than_the_limit() -> None:
    redactor = StreamRedactor(hide)
    assert redactor.feed(b"-----BEGIN PRIVATE KEY-----\n") == b""
    released = b"".join(redactor.feed(b"y" * 1000 + b"\n") for _ in range(20))
    assert released.startswith(b"-----BEGIN PRIVATE KEY-----\n")
