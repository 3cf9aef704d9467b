"""The compiled walk finds exactly the protected paths, and skips the folders nothing covers.

The oracle is the walk the integrity check used before it was compiled: every
entry's folder walked whole, each path matched by ``ProtectSpec`` (the hooks'
hand matcher). The compiled walk must find the same paths with the same
protection, on generated trees and specs; and it must not enter a change's
``runs/``, which grows every iteration.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestra._protect._spec import TIMELINES, ProtectSpec, forge_state_entries, normalize
from orchestra._protect._walk import CompiledSpec, _climbs_a_link


def _old_walk(path: str, relative: str) -> Iterator[tuple[str, str]]:
    try:
        info = os.lstat(path)
    except OSError:
        return
    yield path, relative
    if not stat.S_ISDIR(info.st_mode):
        return
    stack = [(path, relative)]
    while stack:
        folder, folder_relative = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for item in sorted(entries, key=lambda e: e.name):
            if item.name == ".git" and not folder_relative:
                continue
            child = f"{folder_relative}/{item.name}" if folder_relative else item.name
            yield item.path, child
            if item.is_dir(follow_symlinks=False):
                stack.append((item.path, child))


def oracle(base: Path, spec: ProtectSpec) -> dict[str, tuple[str, str]]:
    """path -> (relative, protection), as the per-entry walk found them."""
    found: dict[str, tuple[str, str]] = {}
    for entry in spec.entries:
        start = normalize(entry.origin) or ""
        if _climbs_a_link(str(base), start):
            continue
        start_path = os.path.join(str(base), start) if start else str(base)
        for path, relative in _old_walk(start_path, start):
            key = relative.casefold() if spec.fold else relative
            if relative and relative not in found and entry.covers(key):
                mode = spec.mode_of(relative)
                assert mode is not None
                found[path] = (relative, mode)
    return found


def compiled(base: Path, spec: ProtectSpec) -> dict[str, tuple[str, str]]:
    return {path: (relative, mode) for path, relative, mode in CompiledSpec(spec).walk(str(base))}


NAMES = ["a", "b", "A", "x.md", "specs", "runs", ".forge", "changes", "c1", "timeline.jsonl"]
PATTERNS = [
    "a",
    "a/",
    "specs/",
    "*.md",
    "**/*.md",
    "a/**",
    "a/**/b",
    "**",
    "*/b",
    "[ab]",
    "x.m?",
    ".forge/changes/*/timeline.jsonl",
    ".forge/changes/*/b",
    "A/b/",
    ".",
]

paths = st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4), max_size=25)
specs = st.tuples(
    st.lists(st.sampled_from(PATTERNS), max_size=4),
    st.lists(st.sampled_from(PATTERNS), max_size=4),
    st.lists(st.sampled_from(PATTERNS), max_size=2),
    st.booleans(),
)


def build(base: Path, trees: list[list[str]]) -> None:
    for parts in trees:
        target = base.joinpath(*parts)
        try:
            if len(parts) % 2:
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    target.write_text("x")
            else:
                target.mkdir(parents=True, exist_ok=True)
        except OSError:  # a file where a folder was asked for: a tree as it comes
            continue


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trees=paths, lists=specs)
def test_the_compiled_walk_finds_what_the_per_entry_walk_found(
    tmp_path_factory: pytest.TempPathFactory,
    trees: list[list[str]],
    lists: tuple[list[str], list[str], list[str], bool],
) -> None:
    base = tmp_path_factory.mktemp("tree")
    build(base, trees)
    exist, frozen, grows, fold = lists
    spec = ProtectSpec(tuple(exist), tuple(frozen), grows=tuple(grows), fold=fold)
    found, expected = compiled(base, spec), oracle(base, spec)
    if not fold:
        assert found == expected
        return
    # Folding is for a filesystem that ignores case; on this one the per-entry
    # walk could not open ``a`` for ``A``, which the single walk finds by name.
    assert expected.items() <= found.items()
    assert all(spec.mode_of(relative) == mode for relative, mode in found.values())


def test_symlinked_folders_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "specs").mkdir(parents=True)
    (outside / "specs" / "x.md").write_text("x")
    base = tmp_path / "repo"
    base.mkdir()
    (base / "a").symlink_to(outside)
    spec = ProtectSpec(("a/specs/", "**/*.md"), ("a",))
    assert compiled(base, spec) == oracle(base, spec)
    assert set(compiled(base, spec)) == {str(base / "a")}


def test_a_changes_run_logs_are_never_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    change = tmp_path / ".forge" / "changes" / "c"
    runs = change / "runs" / "r1"
    runs.mkdir(parents=True)
    for n in range(5):
        (runs / f"iteration-{n}.log").write_text("")
    (change / "timeline.jsonl").write_text("")
    (change / "breaker.yaml").write_text("")
    spec = ProtectSpec(("specs/",), forge_state_entries("*"), grows=(TIMELINES,))
    listed: list[str] = []
    real = os.scandir

    def scandir(path: str) -> object:
        listed.append(os.path.relpath(path, tmp_path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = compiled(tmp_path, spec)
    assert sorted(relative for relative, _ in found.values()) == [
        ".forge/changes/c/breaker.yaml",
        ".forge/changes/c/timeline.jsonl",
    ]
    assert not any("runs" in folder for folder in listed), listed
