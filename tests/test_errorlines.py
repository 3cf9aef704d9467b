"""The errors the status log lists: failing tests by name, error lines, bounded and redacted."""

from __future__ import annotations

from pathlib import Path

from orchestra._monitor._errorlines import MAX_CHARS, error_lines


def test_failing_tests_are_named_with_the_first_line_of_their_message(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    cases = "".join(
        f'<testcase classname="t" name="case{n}"><failure message="assert {n} == 0&#10;more"/>'
        "</testcase>"
        for n in range(7)
    )
    report.write_text(f'<testsuite><testcase classname="t" name="ok"/>{cases}</testsuite>')
    found = error_lines(reported=None, log=None, failed=False, report=report, redact=None)
    assert found == [
        "t::case0: assert 0 == 0",
        "t::case1: assert 1 == 0",
        "t::case2: assert 2 == 0",
        "t::case3: assert 3 == 0",
        "and 3 more",
    ]


def test_a_failed_process_shows_its_last_error_lines_redacted_and_bounded(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    long = "x" * 500
    log.write_text(
        "working\nTraceback (most recent call last):\n  File 'a.py'\n"
        f"RuntimeError: token SECRET123 {long}\n"
    )
    found = error_lines(
        reported=None,
        log=log,
        failed=True,
        report=None,
        redact=lambda text: text.replace("SECRET123", "[REDACTED]"),
    )
    assert len(found) == 2
    assert found[0] == "Traceback (most recent call last):"
    assert found[1].startswith("RuntimeError: token [REDACTED] xxx")
    assert len(found[1]) == MAX_CHARS
    # The error the agent reported comes first, in place of the output's.
    told = error_lines(reported="rate limited\n", log=log, failed=True, report=None, redact=None)
    assert told == ["rate limited"]


def test_the_error_fingerprint_does_not_depend_on_how_stdout_and_stderr_interleave() -> None:
    from orchestra._stagnation import error_fingerprint, error_lines_of

    error = "ModuleNotFoundError: No module named 'requests'"
    first = error_lines_of(["thinking", error])
    second = error_lines_of([error, "thinking"])
    assert first == second == [error]
    assert error_fingerprint("\n".join(first)) == error_fingerprint("\n".join(second))
    assert error_lines_of(["", "just output"]) == ["just output"]
