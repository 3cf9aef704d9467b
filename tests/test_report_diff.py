"""The diff an escalation shows: redacted whole, then cut to a count of lines and a size."""

from __future__ import annotations

from orchestra._report._diff import bounded_diff, cut_words, diffstat


def _redact(text: str) -> str:
    # A stand-in for the scanner's rules: a key block is one secret over many lines.
    start, end = "-----BEGIN KEY-----", "-----END KEY-----"
    while start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + "[redacted:key]" + rest.split(end, 1)[1]
    return text


def test_a_secret_over_the_cut_is_redacted_whole() -> None:
    lines = [f"+line {n}" for n in range(5)] + ["+-----BEGIN KEY-----"]
    lines += [f"+secret part {n}" for n in range(10)] + ["+-----END KEY-----", "+after"]
    diff = bounded_diff("HEAD", "", "\n".join(lines), redact=_redact, max_lines=7)
    assert diff.lines[-3:] == ("+line 4", "+[redacted:key]", "+after")
    assert not any("secret part" in line for line in diff.lines)
    # Redacted first, then counted: the twelve lines of the key are one.
    assert diff.total_lines == 7
    assert diff.cut_lines == 0


def test_the_cut_holds_to_the_size_and_says_how_much_it_left() -> None:
    text = "\n".join("+" + "x" * 999 for _ in range(100))  # 100 KB in 100 lines
    diff = bounded_diff("HEAD", "", text, redact=str, max_bytes=20_000)
    assert sum(len(line) + 1 for line in diff.lines) <= 20_000
    assert len(diff.lines) == 19  # a 20th would pass 20,000 bytes
    assert cut_words(diff) == "the first 19 of 100 lines; 81 cut, of 100.1 KB in all"
    one_line = bounded_diff("HEAD", "", "+" + "y" * 50_000, redact=str, max_bytes=20_000)
    [cut] = one_line.lines
    assert cut.endswith(" …")
    assert len(cut.encode()) <= 20_000 + len(" …".encode())


def test_without_the_rules_only_the_diffstat_is_shown() -> None:
    diff = bounded_diff("HEAD", "a.py | +1 -0", "+token=abc", redact=None)
    assert diff.lines == ()
    assert diff.stat == ("a.py | +1 -0",)
    assert diff.missing is not None
    assert "secret-scan rules" in diff.missing


def test_the_diffstat_counts_binary_files_and_those_left_out() -> None:
    text = diffstat([("a.py", 3, 1), ("logo.png", None, None)], more=2)
    assert text.splitlines() == [
        "a.py     | +3 -1",
        "logo.png | binary",
        "… and 2 more new file(s), not read",
        "4 file(s) changed, +3 -1",
    ]
