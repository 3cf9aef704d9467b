"""Which paths a ``[protect]`` entry covers: the hand matcher against the glob regex."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestra._protect._spec import FROZEN, Entry, ProtectSpec, _glob_regex, normalize


@pytest.mark.parametrize(
    ("entry", "path", "covered"),
    [
        ("specs/", "specs", True),
        ("specs/", "specs/a/b.md", True),
        ("specs", "specs/a.md", True),
        ("specs/", "specsx/a.md", False),
        ("forge.toml", "forge.toml", True),
        ("forge.toml", "sub/forge.toml", False),
        ("policies/*.toml", "policies/a.toml", True),
        ("policies/*.toml", "policies/sub/a.toml", False),
        ("**/secrets.yaml", "secrets.yaml", True),
        ("**/secrets.yaml", "a/b/secrets.yaml", True),
        ("docs/**/*.md", "docs/x.md", True),
        ("docs/**/*.md", "docs/a/b/x.md", True),
        ("docs/**/*.md", "docs/a/b/x.txt", False),
        (".forge/changes/*/breaker.yaml", ".forge/changes/c/breaker.yaml", True),
        (".forge/changes/*/breaker.yaml", ".forge/changes/c/spend.yaml", False),
        ("notes-?.md", "notes-1.md", True),
        ("notes-?.md", "notes-12.md", False),
        ("notes-[0-9].md", "notes-7.md", True),
        ("notes-[!0-9].md", "notes-7.md", False),
    ],
)
def test_entry_covers(entry: str, path: str, covered: bool) -> None:
    assert Entry(entry, FROZEN).covers(path) is covered


def test_normalize_never_climbs_out() -> None:
    assert normalize("./a//b/../c") == "a/c"
    assert normalize("a/../..") is None
    assert normalize(".") == ""


def test_frozen_wins_and_folding_ignores_case() -> None:
    spec = ProtectSpec(exist=("specs/",), frozen=("specs/locked.md",), fold=True)
    assert spec.mode_of("SPECS/Locked.md") == "frozen"
    assert spec.mode_of("Specs/other.md") == "exist"
    assert spec.mode_of("../specs/a.md") is None


_SEGMENT = st.text(alphabet="ab*?", min_size=1, max_size=4)
_NAME = st.text(alphabet="ab", min_size=1, max_size=4)


@settings(max_examples=500)
@given(
    pattern=st.lists(st.one_of(_SEGMENT, st.just("**")), min_size=1, max_size=4),
    path=st.lists(_NAME, min_size=1, max_size=5),
)
def test_the_hand_matcher_agrees_with_the_glob_regex(pattern: list[str], path: list[str]) -> None:
    body = "/".join(pattern)
    expected = re.fullmatch(f"{_glob_regex(body)}(?:/.*)?", "/".join(path), re.DOTALL)
    assert Entry(body, FROZEN).covers("/".join(path)) is (expected is not None)


def test_a_double_star_inside_a_segment_is_a_single_star() -> None:
    assert not Entry("a**b", FROZEN).covers("a/b")
    assert Entry("a**b", FROZEN).covers("axxb")
