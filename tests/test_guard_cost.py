"""The guard's analysis costs at most a constant times a command's length.

Its work is counted, not timed: every character read (nesting included) and
expanded, and each path judged, counts against a fixed limit. Here the count
grows no faster than the command, whatever its shape, and a command past the
limits is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestra._guard._shell._analyse import analyse_command
from orchestra._guard._shell._evaluate import MAX_COMMAND, analyse_text
from orchestra._guard._shell._state import WORK_LIMIT, Analysis, State
from orchestra._protect._spec import ProtectSpec

SPEC = ProtectSpec(exist=("specs/",), frozen=("forge.toml",))

# Each shape, made about n characters long.
SHAPES: dict[str, Callable[[int], str]] = {
    "words": lambda n: "echo " + "a " * (n // 2),
    "one word": lambda n: "echo " + "a" * n,
    "functions": lambda n: "echo " + "x() " * (n // 4),
    "here-document": lambda n: "cat > out.txt <<'EOF'\n" + "some text\n" * (n // 10) + "EOF\n",
    "commands": lambda n: "true;" * (n // 5),
    "braces": lambda n: "echo " + "{a,b}" * (n // 5),
    "one brace group": lambda n: "echo {" + "a," * (n // 2) + "b}",
    "substitutions": lambda n: "echo " + "$(true) " * (n // 8),
    "sh -c": lambda n: "sh -c '" + "echo a; " * (n // 8) + "'",
    "a program": lambda n: "python -c '" + 'open("x"); ' * (n // 12) + "'",
    "quotes": lambda n: "echo " + "'a' \"b\" " * (n // 8),
    "calls on unknown paths": lambda n: "python -c '" + "os.remove(x); " * (n // 14) + "'",
}


def work(tree: Path, command: str) -> int:
    analysis = Analysis(str(tree), SPEC, {"HOME": str(tree)})
    analyse_text(analysis, command, State(str(tree)))
    return analysis.work


@pytest.mark.parametrize("shape", SHAPES)
def test_the_work_grows_with_the_length_no_faster(tmp_path: Path, shape: str) -> None:
    (tmp_path / "specs").mkdir()
    make = SHAPES[shape]
    small, large = make(4_000), make(16_000)
    small_work, large_work = work(tmp_path, small), work(tmp_path, large)
    assert small_work <= 4 * len(small) + 64
    # Four times the command, about four times the work (not sixteen).
    assert large_work <= 4.5 * small_work


@pytest.mark.parametrize(
    "command",
    [
        "eval " * 11 + "echo " + "a " * 30_000,  # read again at each level
        "for f in " + "a " * 250 + "; do echo " + "$f" * 2_000 + "; done",  # a word per value
        "rm -f " + " ".join(f"f{index}" for index in range(10_000)),  # paths judged
        "python -c '" + "".join(f'os.remove("f{i}"); ' for i in range(10_000)) + "'",
        "python -c '" + "".join(f'os.remove("f{i}" + x); ' for i in range(10_000)) + "'",
    ],
    ids=[
        "nested eval",
        "a loop multiplying a word",
        "thousands of paths",
        "thousands of calls on paths",
        "thousands of calls on unknown paths",
    ],
)
def test_work_that_multiplies_stops_at_the_limit(tmp_path: Path, command: str) -> None:
    analysis = Analysis(str(tmp_path), SPEC, {})
    analyse_text(analysis, command, State(str(tmp_path)))
    assert analysis.work > WORK_LIMIT
    assert analysis.refusals[0].path == "."
    assert "too much to analyse" in analysis.refusals[0].reason


def test_a_command_past_the_longest_is_refused_unread(tmp_path: Path) -> None:
    command = "echo " + "a" * MAX_COMMAND
    (refusal,) = analyse_command(command, cwd=str(tmp_path), root=str(tmp_path), spec=SPEC)
    assert refusal.path == "."
    assert f"more than the {MAX_COMMAND} the guard analyses" in refusal.reason
    just = "echo " + "a" * (MAX_COMMAND - 5)
    assert analyse_command(just, cwd=str(tmp_path), root=str(tmp_path), spec=SPEC) == []
